//! Autobahn sections 1–5: framing, pings and pongs, reserved bits, opcodes, fragmentation.

use super::{
    BINARY, CLOSE, CONTINUATION, End, PING, PONG, TEXT, case, close_payload, echoed, fin, frame,
    part, suite,
};

const LENGTHS: [usize; 7] = [0, 125, 126, 127, 128, 65_535, 65_536];

/// 1. Framing: text and binary messages of every length encoding, whole and in 997-byte chops.
#[tokio::test]
async fn autobahn_1_framing() {
    let mut cases = Vec::new();
    for (opcode, section, byte) in [(TEXT, 1, b'*'), (BINARY, 2, 0xFE)] {
        for (i, len) in LENGTHS.iter().enumerate() {
            let payload = vec![byte; *len];
            cases.push(case(
                format!("1.{section}.{}", i + 1),
                vec![fin(opcode, &payload)],
                vec![echoed(opcode, &payload)],
                End::Clean,
            ));
        }
        let payload = vec![byte; 65_536];
        cases.push(
            case(
                format!("1.{section}.8"),
                vec![fin(opcode, &payload)],
                vec![echoed(opcode, &payload)],
                End::Clean,
            )
            .chopped(997),
        );
    }
    suite(cases).await;
}

/// 2. Pings and pongs.
#[tokio::test]
async fn autobahn_2_pings_and_pongs() {
    let binary: Vec<u8> = vec![0x00, 0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0x00, 0xFF];
    let hello = b"Hello, world!".to_vec();
    let max = vec![0xFE; 125];
    let ten_pings: Vec<Vec<u8>> = (0..10).map(|_| fin(PING, b"payload")).collect();
    let ten_pongs: Vec<(u8, Vec<u8>)> = (0..10).map(|_| (PONG, b"payload".to_vec())).collect();
    let cases = vec![
        case(
            "2.1",
            vec![fin(PING, b"")],
            vec![(PONG, vec![])],
            End::Clean,
        ),
        case(
            "2.2",
            vec![fin(PING, &hello)],
            vec![(PONG, hello.clone())],
            End::Clean,
        ),
        case(
            "2.3",
            vec![fin(PING, &binary)],
            vec![(PONG, binary.clone())],
            End::Clean,
        ),
        case(
            "2.4",
            vec![fin(PING, &max)],
            vec![(PONG, max.clone())],
            End::Clean,
        ),
        case(
            "2.5",
            vec![fin(PING, &[0xFE; 126])],
            vec![],
            End::Fails(1002),
        ),
        case(
            "2.6",
            vec![fin(PING, &max)],
            vec![(PONG, max.clone())],
            End::Clean,
        )
        .chopped(1),
        case("2.7", vec![fin(PONG, b"")], vec![], End::Clean),
        case(
            "2.8",
            vec![fin(PONG, b"unsolicited pong payload")],
            vec![],
            End::Clean,
        ),
        case(
            "2.9",
            vec![
                fin(PONG, b"unsolicited pong payload"),
                fin(PING, b"ping payload"),
            ],
            vec![(PONG, b"ping payload".to_vec())],
            End::Clean,
        ),
        case("2.10", ten_pings.clone(), ten_pongs.clone(), End::Clean),
        case("2.11", ten_pings, ten_pongs, End::Clean).chopped(1),
    ];
    suite(cases).await;
}

/// 3. Reserved bits: any set fails the connection (no extension is negotiated), after the
/// answers to what came before.
#[tokio::test]
async fn autobahn_3_reserved_bits() {
    let hello = b"Hello, world!";
    let rsv = |bits: u8| bits << 4;
    let cases = vec![
        case(
            "3.1",
            vec![frame(0x80 | rsv(1) | TEXT, hello)],
            vec![],
            End::Fails(1002),
        ),
        case(
            "3.2",
            vec![
                fin(TEXT, hello),
                frame(0x80 | rsv(2) | TEXT, hello),
                fin(PING, b""),
            ],
            vec![echoed(TEXT, hello)],
            End::Fails(1002),
        ),
        case(
            "3.3",
            vec![
                fin(TEXT, hello),
                frame(0x80 | rsv(3) | TEXT, hello),
                fin(PING, b""),
            ],
            vec![echoed(TEXT, hello)],
            End::Fails(1002),
        )
        .chopped(5),
        case(
            "3.4",
            vec![
                fin(TEXT, hello),
                frame(0x80 | rsv(4) | TEXT, hello),
                fin(PING, b""),
            ],
            vec![echoed(TEXT, hello)],
            End::Fails(1002),
        )
        .chopped(1),
        case(
            "3.5",
            vec![frame(0x80 | rsv(5) | BINARY, &[0xFF; 8])],
            vec![],
            End::Fails(1002),
        ),
        case(
            "3.6",
            vec![frame(0x80 | rsv(6) | PING, hello)],
            vec![],
            End::Fails(1002),
        ),
        case(
            "3.7",
            vec![frame(0x80 | rsv(7) | CLOSE, &close_payload(1000, b""))],
            vec![],
            End::Fails(1002),
        ),
    ];
    suite(cases).await;
}

/// 4. Reserved opcodes, data (3–7) and control (11–15): they fail the connection.
#[tokio::test]
async fn autobahn_4_opcodes() {
    let hello = b"Hello, world!";
    let mut cases = Vec::new();
    for (section, opcodes) in [(1, 3u8..=7), (2, 11u8..=15)] {
        for (i, opcode) in opcodes.enumerate() {
            let id = format!("4.{section}.{}", i + 1);
            cases.push(if i == 0 {
                case(id, vec![fin(opcode, b"")], vec![], End::Fails(1002))
            } else {
                case(
                    id,
                    vec![fin(TEXT, hello), fin(opcode, hello), fin(PING, b"")],
                    vec![echoed(TEXT, hello)],
                    End::Fails(1002),
                )
            });
        }
    }
    suite(cases).await;
}

/// 5. Fragmentation.
#[tokio::test]
async fn autobahn_5_fragmentation() {
    let whole = b"fragment1fragment2";
    let two = || vec![part(TEXT, b"fragment1"), fin(CONTINUATION, b"fragment2")];
    let with_ping = || {
        vec![
            part(TEXT, b"fragment1"),
            fin(PING, b"ping payload"),
            fin(CONTINUATION, b"fragment2"),
        ]
    };
    let pong = (PONG, b"ping payload".to_vec());
    let five_with_pings = || {
        vec![
            part(TEXT, b"fragment1"),
            part(CONTINUATION, b"fragment2"),
            fin(PING, b"pongme 1!"),
            part(CONTINUATION, b"fragment3"),
            part(CONTINUATION, b"fragment4"),
            fin(PING, b"pongme 2!"),
            fin(CONTINUATION, b"fragment5"),
        ]
    };
    let five_answers = vec![
        (PONG, b"pongme 1!".to_vec()),
        (PONG, b"pongme 2!".to_vec()),
        echoed(TEXT, b"fragment1fragment2fragment3fragment4fragment5"),
    ];
    let orphan = || {
        vec![
            fin(CONTINUATION, b"non-continuation payload"),
            fin(TEXT, b"Hello, world!"),
        ]
    };
    let orphan_part = || {
        vec![
            part(CONTINUATION, b"non-continuation payload"),
            fin(TEXT, b"Hello, world!"),
        ]
    };
    let cases = vec![
        case(
            "5.1",
            vec![part(PING, b"fragment1"), fin(CONTINUATION, b"fragment2")],
            vec![],
            End::Fails(1002),
        ),
        case(
            "5.2",
            vec![part(PONG, b"fragment1"), fin(CONTINUATION, b"fragment2")],
            vec![],
            End::Fails(1002),
        ),
        case("5.3", two(), vec![echoed(TEXT, whole)], End::Clean),
        case("5.4", two(), vec![echoed(TEXT, whole)], End::Clean).chopped(5),
        case("5.5", two(), vec![echoed(TEXT, whole)], End::Clean).chopped(1),
        case(
            "5.6",
            with_ping(),
            vec![pong.clone(), echoed(TEXT, whole)],
            End::Clean,
        ),
        case(
            "5.7",
            with_ping(),
            vec![pong.clone(), echoed(TEXT, whole)],
            End::Clean,
        )
        .chopped(5),
        case(
            "5.8",
            with_ping(),
            vec![pong.clone(), echoed(TEXT, whole)],
            End::Clean,
        )
        .chopped(1),
        case("5.9", orphan(), vec![], End::Fails(1002)),
        case("5.10", orphan(), vec![], End::Fails(1002)).chopped(5),
        case("5.11", orphan(), vec![], End::Fails(1002)).chopped(1),
        case("5.12", orphan_part(), vec![], End::Fails(1002)),
        case("5.13", orphan_part(), vec![], End::Fails(1002)).chopped(5),
        case("5.14", orphan_part(), vec![], End::Fails(1002)).chopped(1),
        case(
            "5.15",
            vec![
                part(TEXT, b"fragment1"),
                fin(CONTINUATION, b"fragment2"),
                part(CONTINUATION, b"fragment3"),
                fin(TEXT, b"fragment4"),
            ],
            vec![echoed(TEXT, whole)],
            End::Fails(1002),
        ),
        case(
            "5.16",
            vec![
                part(CONTINUATION, b"fragment1"),
                part(TEXT, b"fragment2"),
                fin(CONTINUATION, b"fragment3"),
            ],
            vec![],
            End::Fails(1002),
        ),
        case(
            "5.17",
            vec![
                fin(CONTINUATION, b"fragment1"),
                part(TEXT, b"fragment2"),
                fin(CONTINUATION, b"fragment3"),
            ],
            vec![],
            End::Fails(1002),
        ),
        case(
            "5.18",
            vec![part(TEXT, b"fragment1"), fin(TEXT, b"fragment2")],
            vec![],
            End::Fails(1002),
        ),
        case("5.19", five_with_pings(), five_answers.clone(), End::Clean),
        case("5.20", five_with_pings(), five_answers, End::Clean).chopped(1),
    ];
    suite(cases).await;
}
