//! RFC 6455 framing, server side: client frames in (masked, possibly fragmented, control frames
//! interleaved), unmasked frames out. Pure functions over byte slices: the socket
//! ([`super::socket`]) does the I/O, so every rule here is tested without a network.
//!
//! No extension is ever negotiated (no `permessage-deflate`), so a frame with a reserved bit set
//! is a protocol error, as is an unmasked client frame, a fragmented or oversized control frame,
//! a continuation without a message, or a new message inside a fragmented one (§5.4).

/// The longest payload of a control frame (§5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// Frame opcodes (§5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpCode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl OpCode {
    fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0x0 => OpCode::Continuation,
            0x1 => OpCode::Text,
            0x2 => OpCode::Binary,
            0x8 => OpCode::Close,
            0x9 => OpCode::Ping,
            0xA => OpCode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            OpCode::Continuation => 0x0,
            OpCode::Text => 0x1,
            OpCode::Binary => 0x2,
            OpCode::Close => 0x8,
            OpCode::Ping => 0x9,
            OpCode::Pong => 0xA,
        }
    }

    fn is_control(self) -> bool {
        matches!(self, OpCode::Close | OpCode::Ping | OpCode::Pong)
    }
}

/// Close codes this side sends (§7.4.1).
pub mod code {
    pub const NORMAL: u16 = 1000;
    pub const GOING_AWAY: u16 = 1001;
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// A kind of data the endpoint does not accept (binary frames where JSON text is spoken).
    pub const UNSUPPORTED: u16 = 1003;
    pub const INVALID_PAYLOAD: u16 = 1007;
    pub const POLICY: u16 = 1008;
    pub const TOO_BIG: u16 = 1009;
}

/// Why a client's bytes are not an acceptable WebSocket stream. Each maps to the close code the
/// connection ends with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a reserved bit is set but no extension was negotiated")]
    ReservedBits,
    #[error("unknown opcode {0:#x}")]
    UnknownOpcode(u8),
    #[error("client frames must be masked")]
    Unmasked,
    #[error("a control frame must be unfragmented and at most 125 bytes")]
    BadControlFrame,
    #[error("a message of {len} bytes is larger than the limit of {limit} bytes")]
    TooBig { len: u64, limit: usize },
    #[error("a continuation frame without a message in progress")]
    UnexpectedContinuation,
    #[error("a new message started before the fragmented one ended")]
    UnfinishedMessage,
    #[error("invalid UTF-8 in a text message")]
    InvalidUtf8,
    #[error("a malformed close frame")]
    BadClose,
}

impl FrameError {
    /// The close code the server ends the connection with.
    pub fn close_code(&self) -> u16 {
        match self {
            FrameError::TooBig { .. } => code::TOO_BIG,
            FrameError::InvalidUtf8 => code::INVALID_PAYLOAD,
            _ => code::PROTOCOL_ERROR,
        }
    }
}

/// One frame from the client, unmasked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub fin: bool,
    pub opcode: OpCode,
    pub payload: Vec<u8>,
}

/// What [`parse`] found at the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole frame and how many bytes it took.
    Frame(Frame, usize),
    /// A valid beginning: the frame needs `total` bytes in all (`None` while even the header is
    /// incomplete).
    Incomplete { total: Option<usize> },
}

/// Parses the frame at the front of `buf`. A frame whose payload would exceed `limit` is refused
/// as soon as its header is readable, before the payload arrives.
pub fn parse(buf: &[u8], limit: usize) -> Result<Parsed, FrameError> {
    let incomplete = Ok(Parsed::Incomplete { total: None });
    let [b0, b1, ..] = *buf else {
        return incomplete;
    };
    if b0 & 0x70 != 0 {
        return Err(FrameError::ReservedBits);
    }
    let fin = b0 & 0x80 != 0;
    let opcode = OpCode::from_bits(b0 & 0x0F).ok_or(FrameError::UnknownOpcode(b0 & 0x0F))?;
    if b1 & 0x80 == 0 {
        return Err(FrameError::Unmasked);
    }
    let (len, mut at) = match b1 & 0x7F {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return incomplete,
        },
        127 => match buf.get(2..10) {
            Some(b) => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(b);
                (u64::from_be_bytes(bytes), 10)
            }
            None => return incomplete,
        },
        n => (u64::from(n), 2),
    };
    if opcode.is_control() && (!fin || len > MAX_CONTROL_PAYLOAD as u64) {
        return Err(FrameError::BadControlFrame);
    }
    if len > limit as u64 {
        return Err(FrameError::TooBig { len, limit });
    }
    // Fits in usize: at most `limit`.
    let len = len as usize;
    let Some(mask) = buf.get(at..at + 4) else {
        return incomplete;
    };
    let mask = [mask[0], mask[1], mask[2], mask[3]];
    at += 4;
    let total = at + len;
    let Some(masked) = buf.get(at..total) else {
        return Ok(Parsed::Incomplete { total: Some(total) });
    };
    let mut payload = masked.to_vec();
    unmask(&mut payload, mask);
    Ok(Parsed::Frame(
        Frame {
            fin,
            opcode,
            payload,
        },
        total,
    ))
}

/// XORs `payload` with the frame's masking key (§5.3), eight bytes at a time: a client that
/// sends its whole conversation sends frames of about a megabyte, and a byte at a time that
/// took most of a millisecond (issue #35).
fn unmask(payload: &mut [u8], mask: [u8; 4]) {
    let key = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut words = payload.chunks_exact_mut(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        word.copy_from_slice(&(u64::from_ne_bytes(bytes) ^ key).to_ne_bytes());
    }
    // What is left starts at a multiple of 8, so of 4: the key starts over.
    for (byte, key) in words.into_remainder().iter_mut().zip(mask.iter().cycle()) {
        *byte ^= key;
    }
}

/// A whole message from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Text(String),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    /// The client's close, with its code and reason if it gave one.
    Close(Option<(u16, String)>),
}

/// Joins fragmented messages (§5.4). Control frames pass through between fragments.
#[derive(Debug, Default)]
pub struct Assembler {
    /// The message being received in fragments: its opcode and the payload so far.
    partial: Option<(OpCode, Vec<u8>)>,
}

impl Assembler {
    /// Takes the next frame; a message once it is whole. `limit` bounds a whole message.
    pub fn push(&mut self, frame: Frame, limit: usize) -> Result<Option<Message>, FrameError> {
        let Frame {
            fin,
            opcode,
            payload,
        } = frame;
        match opcode {
            OpCode::Ping => Ok(Some(Message::Ping(payload))),
            OpCode::Pong => Ok(Some(Message::Pong(payload))),
            OpCode::Close => close_payload(&payload).map(|close| Some(Message::Close(close))),
            OpCode::Text | OpCode::Binary => {
                if self.partial.is_some() {
                    return Err(FrameError::UnfinishedMessage);
                }
                if fin {
                    return whole(opcode, payload).map(Some);
                }
                self.partial = Some((opcode, payload));
                Ok(None)
            }
            OpCode::Continuation => {
                let Some((first, mut data)) = self.partial.take() else {
                    return Err(FrameError::UnexpectedContinuation);
                };
                let len = data.len() + payload.len();
                if len > limit {
                    return Err(FrameError::TooBig {
                        len: len as u64,
                        limit,
                    });
                }
                data.extend_from_slice(&payload);
                if fin {
                    whole(first, data).map(Some)
                } else {
                    self.partial = Some((first, data));
                    Ok(None)
                }
            }
        }
    }
}

fn whole(opcode: OpCode, payload: Vec<u8>) -> Result<Message, FrameError> {
    if opcode == OpCode::Text {
        String::from_utf8(payload)
            .map(Message::Text)
            .map_err(|_| FrameError::InvalidUtf8)
    } else {
        Ok(Message::Binary(payload))
    }
}

/// The code and reason of a close frame (§5.5.1): empty, or a valid code and a UTF-8 reason.
fn close_payload(payload: &[u8]) -> Result<Option<(u16, String)>, FrameError> {
    match payload {
        [] => Ok(None),
        [_] => Err(FrameError::BadClose),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            // 1004-1006 and 1015 are reserved for reporting, never sent (§7.4.1, IANA registry).
            let valid = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
            if !valid {
                return Err(FrameError::BadClose);
            }
            let reason = std::str::from_utf8(reason).map_err(|_| FrameError::InvalidUtf8)?;
            Ok(Some((code, reason.to_owned())))
        }
    }
}

/// A whole, unmasked server frame.
pub fn encode(opcode: OpCode, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut out = Vec::with_capacity(len + 10);
    out.push(0x80 | opcode.bits());
    if len < 126 {
        out.push(len as u8);
    } else if let Ok(len) = u16::try_from(len) {
        out.push(126);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// A close frame with `code` and as much of `reason` as fits (whole characters only).
pub fn encode_close(code: u16, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut payload = Vec::with_capacity(2 + end);
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(&reason.as_bytes()[..end]);
    encode(OpCode::Close, &payload)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A client frame as a browser sends it: masked with `mask`.
    fn client_frame(fin: bool, opcode: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
        let len = payload.len();
        if len < 126 {
            out.push(0x80 | len as u8);
        } else if len <= 0xFFFF {
            out.push(0x80 | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            out.push(0x80 | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, k)| b ^ k));
        out
    }

    fn text(s: &str) -> Vec<u8> {
        client_frame(true, 0x1, s.as_bytes(), [1, 2, 3, 4])
    }

    fn frame_of(bytes: &[u8], limit: usize) -> Result<(Frame, usize), FrameError> {
        match parse(bytes, limit)? {
            Parsed::Frame(frame, used) => Ok((frame, used)),
            other => panic!("expected a whole frame, got {other:?}"),
        }
    }

    #[test]
    fn a_masked_text_frame_is_unmasked() {
        let bytes = text(r#"{"type":"ping"}"#);
        let (frame, used) = frame_of(&bytes, 1024).unwrap();
        assert_eq!(used, bytes.len());
        assert!(frame.fin);
        assert_eq!(frame.opcode, OpCode::Text);
        assert_eq!(frame.payload, br#"{"type":"ping"}"#);
    }

    #[test]
    fn the_three_length_encodings_are_read() {
        for len in [0, 125, 126, 65_535, 65_536, 200_000] {
            let payload = vec![b'x'; len];
            let bytes = client_frame(true, 0x2, &payload, [9, 8, 7, 6]);
            let (frame, used) = frame_of(&bytes, 1 << 20).unwrap();
            assert_eq!((frame.payload.len(), used), (len, bytes.len()), "{len}");
        }
    }

    #[test]
    fn every_prefix_of_a_frame_is_incomplete_and_says_how_much_is_needed_once_it_can() {
        let bytes = client_frame(true, 0x1, &[b'a'; 300], [5, 6, 7, 8]);
        for cut in 0..bytes.len() {
            match parse(&bytes[..cut], 1024).unwrap() {
                Parsed::Incomplete { total } => {
                    // The header is 2 + 2 (length) + 4 (mask) bytes.
                    assert_eq!(total, (cut >= 8).then_some(bytes.len()), "cut {cut}");
                }
                other => panic!("cut {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn broken_frames_are_protocol_errors() {
        let mut reserved = text("x");
        reserved[0] |= 0x40;
        assert_eq!(parse(&reserved, 99), Err(FrameError::ReservedBits));
        let mut unknown = text("x");
        unknown[0] = 0x83;
        assert_eq!(parse(&unknown, 99), Err(FrameError::UnknownOpcode(3)));
        let mut unmasked = text("x");
        unmasked[1] &= 0x7F;
        assert_eq!(parse(&unmasked, 99), Err(FrameError::Unmasked));
        let fragmented_ping = client_frame(false, 0x9, b"", [0; 4]);
        assert_eq!(
            parse(&fragmented_ping, 99),
            Err(FrameError::BadControlFrame)
        );
        let long_ping = client_frame(true, 0x9, &[0; 126], [0; 4]);
        assert_eq!(parse(&long_ping, 999), Err(FrameError::BadControlFrame));
        for error in [FrameError::ReservedBits, FrameError::Unmasked] {
            assert_eq!(error.close_code(), code::PROTOCOL_ERROR);
        }
    }

    #[test]
    fn an_oversized_frame_is_refused_from_its_header_alone() {
        let bytes = client_frame(true, 0x1, &[b'a'; 5000], [1, 1, 1, 1]);
        let error = parse(&bytes[..4], 4096).unwrap_err();
        assert_eq!(
            error,
            FrameError::TooBig {
                len: 5000,
                limit: 4096
            }
        );
        assert_eq!(error.close_code(), code::TOO_BIG);
        // A 64-bit length too large for any buffer is refused too, not allocated.
        let mut huge = vec![0x81, 0x80 | 127];
        huge.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(matches!(parse(&huge, 4096), Err(FrameError::TooBig { .. })));
    }

    fn assemble(frames: &[Vec<u8>], limit: usize) -> Result<Vec<Message>, FrameError> {
        let mut assembler = Assembler::default();
        let mut out = Vec::new();
        for bytes in frames {
            let (frame, _) = frame_of(bytes, limit)?;
            if let Some(message) = assembler.push(frame, limit)? {
                out.push(message);
            }
        }
        Ok(out)
    }

    #[test]
    fn fragments_are_joined_and_control_frames_pass_between_them() {
        let frames = [
            client_frame(false, 0x1, "héllo ".as_bytes(), [1, 2, 3, 4]),
            client_frame(true, 0x9, b"are you there", [4, 3, 2, 1]),
            // A character split across two fragments.
            client_frame(false, 0x0, &"wörld".as_bytes()[..2], [7, 7, 7, 7]),
            client_frame(true, 0x0, &"wörld".as_bytes()[2..], [0, 0, 0, 1]),
        ];
        assert_eq!(
            assemble(&frames, 1024).unwrap(),
            [
                Message::Ping(b"are you there".to_vec()),
                Message::Text("héllo wörld".into())
            ]
        );
    }

    #[test]
    fn fragmentation_errors() {
        let cont = client_frame(true, 0x0, b"x", [0; 4]);
        assert_eq!(
            assemble(std::slice::from_ref(&cont), 99),
            Err(FrameError::UnexpectedContinuation)
        );
        let first = client_frame(false, 0x1, b"x", [0; 4]);
        assert_eq!(
            assemble(&[first.clone(), text("y")], 99),
            Err(FrameError::UnfinishedMessage)
        );
        // Each fragment fits, the whole does not.
        let half = client_frame(false, 0x1, &[b'a'; 60], [0; 4]);
        let rest = client_frame(true, 0x0, &[b'a'; 60], [0; 4]);
        assert_eq!(
            assemble(&[half, rest], 100),
            Err(FrameError::TooBig {
                len: 120,
                limit: 100
            })
        );
    }

    #[test]
    fn invalid_utf8_is_found_in_whole_messages() {
        let bad = client_frame(true, 0x1, &[0xC3, 0x28], [3, 3, 3, 3]);
        let error = assemble(&[bad], 99).unwrap_err();
        assert_eq!(error, FrameError::InvalidUtf8);
        assert_eq!(error.close_code(), code::INVALID_PAYLOAD);
    }

    #[test]
    fn close_frames() {
        let close = |payload: &[u8]| assemble(&[client_frame(true, 0x8, payload, [2; 4])], 999);
        assert_eq!(close(b""), Ok(vec![Message::Close(None)]));
        let mut normal = 1000u16.to_be_bytes().to_vec();
        normal.extend_from_slice(b"bye");
        assert_eq!(
            close(&normal),
            Ok(vec![Message::Close(Some((1000, "bye".into())))])
        );
        assert_eq!(close(&[3]), Err(FrameError::BadClose));
        assert_eq!(close(&1005u16.to_be_bytes()), Err(FrameError::BadClose));
        assert_eq!(close(&999u16.to_be_bytes()), Err(FrameError::BadClose));
        let mut bad_reason = 4000u16.to_be_bytes().to_vec();
        bad_reason.push(0xFF);
        assert_eq!(close(&bad_reason), Err(FrameError::InvalidUtf8));
    }

    #[test]
    fn server_frames_are_unmasked_with_the_shortest_length() {
        assert_eq!(encode(OpCode::Text, b"hi"), [0x81, 2, b'h', b'i']);
        let mid = encode(OpCode::Binary, &[0; 300]);
        assert_eq!(&mid[..4], &[0x82, 126, 1, 44]);
        let big = encode(OpCode::Text, &[0; 70_000]);
        assert_eq!(&big[..2], &[0x81, 127]);
        assert_eq!(big.len(), 70_000 + 10);
        assert_eq!(encode(OpCode::Pong, b"")[..], [0x8A, 0]);
    }

    #[test]
    fn a_close_reason_is_cut_to_fit_on_a_character_boundary() {
        let reason = "é".repeat(100);
        let frame = encode_close(1001, &reason);
        let payload_len = usize::from(frame[1]);
        assert!(payload_len <= MAX_CONTROL_PAYLOAD);
        assert_eq!(&frame[2..4], &1001u16.to_be_bytes());
        assert!(std::str::from_utf8(&frame[4..]).is_ok());
        assert_eq!(payload_len, 2 + 122);
    }

    proptest! {
        /// Whatever the bytes, parsing neither panics nor claims more bytes than it was given.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(Parsed::Frame(frame, used)) = parse(&bytes, 256) {
                prop_assert!(used <= bytes.len());
                prop_assert!(frame.payload.len() <= 256);
            }
        }

        /// Unmasking eight bytes at a time gives what a byte at a time gives, at any length
        /// and with any key.
        #[test]
        fn unmasking_is_the_bytewise_xor(
            payload in proptest::collection::vec(any::<u8>(), 0..100),
            mask in any::<[u8; 4]>(),
        ) {
            let expected: Vec<u8> =
                payload.iter().zip(mask.iter().cycle()).map(|(b, k)| b ^ k).collect();
            let mut unmasked = payload.clone();
            unmask(&mut unmasked, mask);
            prop_assert_eq!(unmasked, expected);
        }

        /// A message cut into fragments of any sizes, each masked with any key, comes back whole.
        #[test]
        fn fragmented_messages_round_trip(
            text in "\\PC{0,200}",
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
            mask in any::<[u8; 4]>(),
        ) {
            let bytes = text.as_bytes();
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.push(0);
            points.push(bytes.len());
            points.sort_unstable();
            points.dedup();
            let pieces: Vec<&[u8]> = if points.len() < 2 {
                vec![bytes]
            } else {
                points.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
            };
            let last = pieces.len() - 1;
            let frames: Vec<Vec<u8>> = pieces
                .iter()
                .enumerate()
                .map(|(i, piece)| {
                    client_frame(i == last, if i == 0 { 0x1 } else { 0x0 }, piece, mask)
                })
                .collect();
            let stream: Vec<u8> = frames.concat();
            let mut assembler = Assembler::default();
            let mut at = 0;
            let mut messages = Vec::new();
            while at < stream.len() {
                match parse(&stream[at..], 1024).unwrap() {
                    Parsed::Frame(frame, used) => {
                        at += used;
                        messages.extend(assembler.push(frame, 1024).unwrap());
                    }
                    Parsed::Incomplete { .. } => panic!("a whole stream parsed as incomplete"),
                }
            }
            prop_assert_eq!(messages, vec![Message::Text(text)]);
        }
    }
}
