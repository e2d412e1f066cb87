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

mod frames;
mod payloads;

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
