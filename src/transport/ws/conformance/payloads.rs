//! Autobahn sections 6, 7 and 9: UTF-8, closing, limits.

use super::{
    BINARY, CLOSE, CONTINUATION, End, LIMIT, PING, TEXT, case, close_payload, echoed, fin, part,
    suite,
};

/// Valid UTF-8 that must come back as it was: empty, multilingual, each sequence length at
/// its boundaries, noncharacters (valid in UTF-8).
const VALID_UTF8: [&str; 14] = [
    "",
    "Hello-\u{b5}@\u{df}\u{f6}\u{e4}\u{fc}\u{e0}\u{e1}-UTF-8!!",
    "\u{3ba}\u{1f79}\u{3c3}\u{3bc}\u{3b5}",
    "\u{0}",
    "\u{80}",
    "\u{800}",
    "\u{10000}",
    "\u{7f}",
    "\u{7ff}",
    "\u{ffff}",
    "\u{10ffff}",
    "\u{d7ff}\u{e000}\u{fffd}",
    "\u{fffe}\u{ffff}\u{1fffe}\u{10fffe}",
    "\u{1f600} \u{1f44d}\u{1f3fd}",
];

/// Invalid UTF-8 (Autobahn 6.3, 6.8–6.21): too-long sequences, code points past U+10FFFF,
/// lone continuation and start bytes, truncated sequences, overlong forms, surrogates.
const INVALID_UTF8: [&[u8]; 22] = [
    b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited",
    b"\xf8\x88\x80\x80\x80",
    b"\xfc\x84\x80\x80\x80\x80",
    b"\xf4\x90\x80\x80",
    b"\xf7\xbf\xbf\xbf",
    b"\x80",
    b"\xbf",
    b"\x80\xbf\x80\xbf",
    b"\xc0\x20",
    b"\xe0\x20",
    b"\xc0",
    b"\xe0\x80",
    b"\xf0\x80\x80",
    b"\xdf",
    b"\xef\xbf",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xf0\x80\x80\xaf",
    b"\xc1\xbf",
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xed\xa0\x80\xed\xb0\x80",
];

/// 6. UTF-8 in text messages: valid text comes back whole, fragmented at every byte too;
/// invalid text fails the connection with 1007 (NON-STRICT where it is fragmented: when the
/// message is whole, not at the first bad fragment).
#[tokio::test]
async fn autobahn_6_utf8() {
    let mut cases = Vec::new();
    for (i, text) in VALID_UTF8.iter().enumerate() {
        let bytes = text.as_bytes();
        cases.push(case(
            format!("6.valid.{i}"),
            vec![fin(TEXT, bytes)],
            vec![echoed(TEXT, bytes)],
            End::Clean,
        ));
        // One frame per byte (6.2.3/6.2.4, 6.6.x).
        if bytes.len() > 1 {
            let last = bytes.len() - 1;
            let frames = bytes
                .iter()
                .enumerate()
                .map(|(at, b)| {
                    let opcode = if at == 0 { TEXT } else { CONTINUATION };
                    if at == last {
                        fin(opcode, &[*b])
                    } else {
                        part(opcode, &[*b])
                    }
                })
                .collect();
            cases.push(case(
                format!("6.valid.{i}.fragmented"),
                frames,
                vec![echoed(TEXT, bytes)],
                End::Clean,
            ));
        }
    }
    // 6.1.2: empty fragments.
    cases.push(case(
        "6.1.2",
        vec![
            part(TEXT, b""),
            part(CONTINUATION, b""),
            fin(CONTINUATION, b""),
        ],
        vec![echoed(TEXT, b"")],
        End::Clean,
    ));
    for (i, bytes) in INVALID_UTF8.iter().enumerate() {
        cases.push(case(
            format!("6.invalid.{i}"),
            vec![fin(TEXT, bytes)],
            vec![],
            End::Fails(1007),
        ));
        cases.push(
            case(
                format!("6.invalid.{i}.octets"),
                vec![fin(TEXT, bytes)],
                vec![],
                End::Fails(1007),
            )
            .chopped(1),
        );
    }
    // 6.4.x (NON-STRICT): valid text, then an invalid fragment, then the rest.
    for (i, bad) in [&b"\xf4\x90\x80\x80"[..], b"\xed\xa0\x80"]
        .iter()
        .enumerate()
    {
        cases.push(case(
            format!("6.4.{}", i + 1),
            vec![
                part(TEXT, "\u{3ba}\u{1f79}\u{3c3}\u{3bc}\u{3b5}".as_bytes()),
                part(CONTINUATION, bad),
                fin(CONTINUATION, b"edited"),
            ],
            vec![],
            End::Fails(1007),
        ));
    }
    suite(cases).await;
}

/// 7. Closing: what follows a close is ignored, close payloads are checked (length, code,
/// UTF-8 reason), valid codes are answered with themselves.
#[tokio::test]
async fn autobahn_7_close() {
    let hello = b"Hello, world!";
    let normal = close_payload(1000, b"");
    let mut cases = vec![
        case(
            "7.1.1",
            vec![fin(TEXT, hello)],
            vec![echoed(TEXT, hello)],
            End::Clean,
        ),
        case(
            "7.1.2",
            vec![fin(CLOSE, &normal), fin(CLOSE, &normal)],
            vec![],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.1.3",
            vec![fin(CLOSE, &normal), fin(PING, hello)],
            vec![],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.1.4",
            vec![fin(CLOSE, &normal), fin(TEXT, hello)],
            vec![],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.1.5",
            vec![
                part(TEXT, b"fragment1"),
                fin(CLOSE, &normal),
                fin(CONTINUATION, b"fragment2"),
            ],
            vec![],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.1.6",
            vec![
                fin(TEXT, &[b'B'; 262_144]),
                fin(TEXT, hello),
                fin(CLOSE, &normal),
                fin(PING, hello),
            ],
            vec![echoed(TEXT, &[b'B'; 262_144]), echoed(TEXT, hello)],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.3.1",
            vec![fin(CLOSE, b"")],
            vec![],
            End::AnswersClose(None),
        ),
        case("7.3.2", vec![fin(CLOSE, b"a")], vec![], End::Fails(1002)),
        case(
            "7.3.3",
            vec![fin(CLOSE, &normal)],
            vec![],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.3.4",
            vec![fin(CLOSE, &close_payload(1000, b"Hello World!"))],
            vec![],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.3.5",
            vec![fin(CLOSE, &close_payload(1000, &[b'*'; 123]))],
            vec![],
            End::AnswersClose(Some(1000)),
        ),
        case(
            "7.3.6",
            vec![fin(CLOSE, &close_payload(1000, &[b'*'; 124]))],
            vec![],
            End::Fails(1002),
        ),
        case(
            "7.5.1",
            vec![fin(
                CLOSE,
                &close_payload(
                    1000,
                    b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited",
                ),
            )],
            vec![],
            End::Fails(1007),
        ),
    ];
    // 7.7.x, and 1012–1014 (IANA-registered since the suite was written).
    for code in [
        1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000,
        4999,
    ] {
        cases.push(case(
            format!("7.7.{code}"),
            vec![fin(CLOSE, &close_payload(code, b""))],
            vec![],
            End::AnswersClose(Some(code)),
        ));
    }
    // 7.9.x and 7.13.x.
    for code in [
        0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65_535,
    ] {
        cases.push(case(
            format!("7.9.{code}"),
            vec![fin(CLOSE, &close_payload(code, b""))],
            vec![],
            End::Fails(1002),
        ));
    }
    suite(cases).await;
}

/// 9. Limits: messages up to the endpoint's cap in one frame, in fragments of every size and
/// chopped into small writes; one byte past the cap fails with 1009.
#[tokio::test]
async fn autobahn_9_limits() {
    let mut cases = Vec::new();
    for (i, size) in [65_536, 262_144, 1 << 20, LIMIT].into_iter().enumerate() {
        let text = vec![b'*'; size];
        cases.push(case(
            format!("9.1.{}", i + 1),
            vec![fin(TEXT, &text)],
            vec![echoed(TEXT, &text)],
            End::Clean,
        ));
        let binary = vec![0xFE; size];
        cases.push(case(
            format!("9.2.{}", i + 1),
            vec![fin(BINARY, &binary)],
            vec![echoed(BINARY, &binary)],
            End::Clean,
        ));
    }
    let message = vec![b'*'; 1 << 20];
    for (i, fragment) in [64, 256, 1024, 4096, 16_384, 65_536, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let pieces: Vec<&[u8]> = message.chunks(fragment).collect();
        let last = pieces.len() - 1;
        let frames = pieces
            .iter()
            .enumerate()
            .map(|(at, piece)| {
                let opcode = if at == 0 { TEXT } else { CONTINUATION };
                if at == last {
                    fin(opcode, piece)
                } else {
                    part(opcode, piece)
                }
            })
            .collect();
        cases.push(case(
            format!("9.3.{}", i + 1),
            frames,
            vec![echoed(TEXT, &message)],
            End::Clean,
        ));
    }
    for (i, chop) in [64, 256, 1024, 4096].into_iter().enumerate() {
        cases.push(
            case(
                format!("9.5.{}", i + 1),
                vec![fin(TEXT, &message)],
                vec![echoed(TEXT, &message)],
                End::Clean,
            )
            .chopped(chop),
        );
    }
    cases.push(case(
        "cap.frame",
        vec![fin(BINARY, &vec![0; LIMIT + 1])],
        vec![],
        End::Fails(1009),
    ));
    cases.push(case(
        "cap.message",
        vec![part(BINARY, &vec![0; LIMIT]), fin(CONTINUATION, &[0])],
        vec![],
        End::Fails(1009),
    ));
    suite(cases).await;
}
