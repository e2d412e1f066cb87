//! Arbitrary client bytes into the server's WebSocket framing (`transport::ws::frame`): the
//! frame parser and the message assembler, fed the way the socket feeds them (a buffer that
//! grows by whatever a read returned, parsed from the front).
//!
//! The first 8 bytes choose how the rest is cut into reads (`split_points`).
//!
//! Invariants:
//! * nothing panics;
//! * `parse` never claims more bytes than it was given, and no payload or message is larger
//!   than the limit;
//! * an incomplete frame that says how many bytes it needs is whole once it has them;
//! * the input cut into any reads gives the same messages, and the same error, as the input
//!   read at once;
//! * a message that came out, masked again and fed back, comes out the same.

use crate::{
    split_points,
    ws_frame::{Assembler, FrameError, Message, OpCode, Parsed, encode, parse},
};

const LIMIT: usize = 512;

/// Messages until the first error (and that error), feeding `reads` one after another.
fn run(reads: &[&[u8]]) -> (Vec<Message>, Option<FrameError>) {
    let mut inbox: Vec<u8> = Vec::new();
    let mut assembler = Assembler::default();
    let mut messages = Vec::new();
    for read in reads {
        inbox.extend_from_slice(read);
        let mut at = 0;
        loop {
            match parse(&inbox[at..], LIMIT) {
                Ok(Parsed::Frame(frame, used)) => {
                    assert!(used <= inbox.len() - at, "claimed {used} bytes");
                    assert!(frame.payload.len() <= LIMIT);
                    at += used;
                    match assembler.push(frame, LIMIT) {
                        Ok(Some(message)) => {
                            if let Message::Text(t) = &message {
                                assert!(t.len() <= LIMIT);
                            }
                            if let Message::Binary(b) = &message {
                                assert!(b.len() <= LIMIT);
                            }
                            messages.push(message);
                        }
                        Ok(None) => {}
                        Err(e) => return (messages, Some(e)),
                    }
                }
                Ok(Parsed::Incomplete { total }) => {
                    if let Some(total) = total {
                        assert!(total > inbox.len() - at, "incomplete with enough bytes");
                    }
                    break;
                }
                Err(e) => return (messages, Some(e)),
            }
        }
        inbox.drain(..at);
    }
    (messages, None)
}

/// `message` as one masked client frame (control messages and data alike).
fn masked(message: &Message) -> Vec<u8> {
    let (opcode, payload): (OpCode, Vec<u8>) = match message {
        Message::Text(t) => (OpCode::Text, t.as_bytes().to_vec()),
        Message::Binary(b) => (OpCode::Binary, b.clone()),
        Message::Ping(p) => (OpCode::Ping, p.clone()),
        Message::Pong(p) => (OpCode::Pong, p.clone()),
        Message::Close(None) => (OpCode::Close, Vec::new()),
        Message::Close(Some((code, reason))) => {
            let mut p = code.to_be_bytes().to_vec();
            p.extend_from_slice(reason.as_bytes());
            (OpCode::Close, p)
        }
    };
    let mut frame = encode(opcode, &payload);
    // A server frame is unmasked: set the mask bit and insert a key after the length.
    let header = match frame[1] {
        126 => 4,
        127 => 10,
        _ => 2,
    };
    frame[1] |= 0x80;
    let key = [0x5a, 0x17, 0xc3, 0x08];
    let body: Vec<u8> = frame[header..]
        .iter()
        .zip(key.iter().cycle())
        .map(|(b, k)| b ^ k)
        .collect();
    frame.truncate(header);
    frame.extend_from_slice(&key);
    frame.extend(body);
    frame
}

/// One fuzz input: panics when an invariant above does not hold.
pub fn check(input: &[u8]) {
    let (seed, bytes) = if input.len() >= 8 {
        let mut s = [0u8; 8];
        s.copy_from_slice(&input[..8]);
        (u64::from_le_bytes(s), &input[8..])
    } else {
        (0, input)
    };
    let whole = run(&[bytes]);
    let pieces = split_points(bytes, seed);
    let split = run(&pieces);
    assert_eq!(whole, split, "the reads changed what was parsed");

    for message in &whole.0 {
        let frame = masked(message);
        let (again, error) = run(&[&frame]);
        assert_eq!(error, None, "{message:?} did not come back");
        assert_eq!(again.as_slice(), std::slice::from_ref(message));
    }
}
