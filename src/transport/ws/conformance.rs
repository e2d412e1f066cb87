//! Our WebSocket framing against the cases of the Autobahn test suite (fuzzingclient, server
//! side, sections 1–7 and 9; no extension is negotiated, so 12 and 13 do not apply), run as a
//! test: `cargo test` runs it in CI. The suite itself (Python 2) cannot run here, so each case
//! is written out as Autobahn specifies it: the bytes a client sends (whole, in chunks or octet by
//! octet) and what the server must answer, against an echo endpoint on [`Socket`] that handles
//! messages as `Connection` does (pings answered with their payload, the client's close
//! answered, a protocol error closed with its code).
//!
//! Where a case may pass as Autobahn's NON-STRICT, it is marked: invalid UTF-8 in a fragmented
//! text message fails when the message is whole, not at the first bad fragment (6.3.2, 6.4.x).
//! One deliberate difference: close codes 1012–1014 are accepted, as the IANA registry has them
//! (Autobahn's 7.9.x, older than the registrations, calls them invalid).

use std::time::Duration;

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{
    frame::{Message, OpCode},
    socket::{Socket, SocketError},
};

/// The largest message the endpoint accepts: section 9 goes up to it.
const LIMIT: usize = 4 << 20;

/// Echoes what a client sends, as Autobahn's cases expect of a server.
async fn echo(mut socket: Socket) {
    loop {
        let result = match socket.next_message() {
            Ok(None) => match socket.readable().await {
                Ok(()) => continue,
                Err(_) => return,
            },
            Ok(Some(Message::Text(text))) => socket.send_text(&text).await,
            Ok(Some(Message::Binary(data))) => socket.send(OpCode::Binary, &data).await,
            Ok(Some(Message::Ping(payload))) => socket.send(OpCode::Pong, &payload).await,
            Ok(Some(Message::Pong(_))) => Ok(()),
            Ok(Some(Message::Close(close))) => return socket.answer_close(close).await,
            Err(SocketError::Frame(e)) => return socket.close(e.close_code(), "").await,
            Err(SocketError::Eof | SocketError::Io(_)) => return,
        };
        if result.is_err() {
            return;
        }
    }
}

/// A frame as a client sends it: masked, with any header bits.
fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0xA1, 0x05, 0x3C, 0xF7];
    let mut out = vec![first];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, k)| b ^ k));
    out
}

const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CONTINUATION: u8 = 0x0;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// A final frame.
fn fin(opcode: u8, payload: &[u8]) -> Vec<u8> {
    frame(0x80 | opcode, payload)
}

/// A frame that is not the last of its message.
fn part(opcode: u8, payload: &[u8]) -> Vec<u8> {
    frame(opcode, payload)
}

/// A close frame's payload: the code and a reason.
fn close_payload(code: u16, reason: &[u8]) -> Vec<u8> {
    let mut out = code.to_be_bytes().to_vec();
    out.extend_from_slice(reason);
    out
}

/// How the client writes a case's bytes.
#[derive(Debug, Clone, Copy)]
enum Writes {
    /// Each frame in one write.
    Frames,
    /// The whole case cut into writes of this many bytes.
    Chops(usize),
}

/// How the server must end the case.
#[derive(Debug)]
enum End {
    /// It answers everything; the client then closes with 1000, which the server answers.
    Clean,
    /// It answers the client's close (sent within the case) with this code, or with no code.
    AnswersClose(Option<u16>),
    /// It fails the connection with this close code (after the expected answers).
    Fails(u16),
}

struct Case {
    id: String,
    frames: Vec<Vec<u8>>,
    writes: Writes,
    /// What the server sends back before it closes: (opcode, payload).
    answers: Vec<(u8, Vec<u8>)>,
    end: End,
}

fn case(
    id: impl Into<String>,
    frames: Vec<Vec<u8>>,
    answers: Vec<(u8, Vec<u8>)>,
    end: End,
) -> Case {
    Case {
        id: id.into(),
        frames,
        writes: Writes::Frames,
        answers,
        end,
    }
}

impl Case {
    fn chopped(mut self, size: usize) -> Case {
        self.writes = Writes::Chops(size);
        self
    }
}

/// Reads one server frame: (first byte, payload); `None` at the end of the stream.
async fn server_frame(client: &mut (impl AsyncRead + Unpin)) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 2];
    client.read_exact(&mut head).await.ok()?;
    assert_eq!(head[1] & 0x80, 0, "server frames are not masked");
    let len = match head[1] & 0x7F {
        126 => {
            let mut b = [0u8; 2];
            client.read_exact(&mut b).await.ok()?;
            usize::from(u16::from_be_bytes(b))
        }
        127 => {
            let mut b = [0u8; 8];
            client.read_exact(&mut b).await.ok()?;
            usize::try_from(u64::from_be_bytes(b)).ok()?
        }
        n => usize::from(n),
    };
    let mut payload = vec![0u8; len];
    client.read_exact(&mut payload).await.ok()?;
    Some((head[0], payload))
}

/// Runs a case against a fresh endpoint; `Err` says how the server deviated.
async fn run(case: &Case) -> Result<(), String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let endpoint = tokio::spawn(echo(Socket::new(server, &[], LIMIT)));
    let (mut reader, mut writer) = client.into_split();

    let mut bytes: Vec<Vec<u8>> = case.frames.clone();
    if matches!(case.end, End::Clean) {
        bytes.push(fin(CLOSE, &close_payload(1000, b"")));
    }
    let writes = match case.writes {
        Writes::Frames => bytes,
        Writes::Chops(size) => bytes.concat().chunks(size).map(<[u8]>::to_vec).collect(),
    };
    // Written while the answers are read: a server that fails early stops reading, so a
    // write may then fail, which is fine.
    let writing = tokio::spawn(async move {
        for bytes in writes {
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
        }
        writer
    });

    let reading = tokio::time::timeout(Duration::from_secs(20), async {
        let mut answers = Vec::new();
        let close = loop {
            match server_frame(&mut reader).await {
                None => break None,
                Some((first, payload)) if first & 0x0F == CLOSE => break Some(payload),
                Some((first, payload)) => {
                    if first & 0x80 == 0 || first & 0x70 != 0 {
                        return Err(format!("a fragmented or reserved-bit frame: {first:#x}"));
                    }
                    answers.push((first & 0x0F, payload));
                }
            }
        };
        Ok((answers, close))
    })
    .await;
    // The client's end of the stream lets a closing server go at once.
    drop(writing.await);
    drop(reader);
    let _ = endpoint.await;
    let (answers, close) = match reading {
        Ok(outcome) => outcome?,
        Err(_) => return Err("the server neither answered nor closed".into()),
    };
    let brief = |a: &[(u8, Vec<u8>)]| {
        a.iter()
            .map(|(op, p)| format!("{op:#x}:{}B", p.len()))
            .collect::<Vec<_>>()
    };
    if answers != case.answers {
        return Err(format!(
            "answers {:?}, expected {:?}",
            brief(&answers),
            brief(&case.answers)
        ));
    }
    let code =
        |payload: &[u8]| (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
    match (&case.end, close) {
        (End::Clean, Some(payload)) if code(&payload) == Some(1000) => Ok(()),
        (End::AnswersClose(expected), Some(payload)) if code(&payload) == *expected => Ok(()),
        (End::Fails(expected), Some(payload)) if code(&payload) == Some(*expected) => Ok(()),
        (end, close) => Err(format!(
            "ended with {:?}, expected {end:?}",
            close.map(|p| code(&p))
        )),
    }
}

/// Runs every case and fails with the list of those that did not pass.
async fn suite(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in &cases {
        if let Err(why) = run(case).await {
            failures.push(format!("{}: {why}", case.id));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// An echoed text or binary message.
fn echoed(opcode: u8, payload: &[u8]) -> (u8, Vec<u8>) {
    (opcode, payload.to_vec())
}

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
