//! Server-Sent Events framing of the UI message stream (protocols.md §A.1).
//!
//! Encoding is one event per chunk, `data: {json}\n\n`, ending with
//! [`DONE_FRAME`]. The BIDI mode sends the very same strings as WebSocket text
//! frames, so both transports share this module.
//!
//! Decoding follows the WHATWG event-stream rules that `eventsource-parser`
//! (what the AI SDK uses) implements: LF, CRLF and lone CR line endings;
//! `:` comment lines (keep-alives); `event:`/`id:`/`retry:` fields, ignored
//! here; several `data:` lines joined with `\n`; one optional space after the
//! colon; a leading byte-order mark skipped. Bytes may arrive split anywhere,
//! even inside a UTF-8 character: lines are only decoded once complete, and
//! line terminators are ASCII, so a split can never land inside a decoded
//! line.
//!
//! The decoder is built for hostile input: an event larger than the configured
//! cap, or a `data` line that is not UTF-8, yields one typed error and the rest
//! of that event is skipped up to its blank line, after which decoding
//! resumes. Memory stays bounded by the cap, and nothing panics.

use super::chunk::{Chunk, ChunkDecodeError, Dialect};

/// Header with which a client asks for chunk keys newer than `ai@6.0.0` (value `full`).
pub const DIALECT_HEADER: &str = "x-countersign-dialect";
/// Header with which a client asks for progressive text (value `progressive`) or held text
/// (`hold`) for this turn (ADR 0004). Without it the client's profile decides: `/api/chat`
/// streams text progressively and the seed's `/stream` follows `COUNTERSIGN_TEXT_TIMING`
/// (default `hold`).
pub const TEXT_TIMING_HEADER: &str = "x-countersign-text";

/// The stream terminator. The AI SDK client ignores its payload; the stream
/// really ends when the body ends, but servers send it and so do we.
pub const DONE_FRAME: &str = "data: [DONE]\n\n";

/// A keep-alive comment frame; every SSE parser drops comments.
pub const KEEP_ALIVE_FRAME: &str = ": ping\n\n";

/// Response headers of a UI message stream (`UI_MESSAGE_STREAM_HEADERS`,
/// identical in `ai@6.0.0` and `ai@6.0.264`). `x-accel-buffering: no` stops
/// nginx from buffering the stream.
pub const UI_MESSAGE_STREAM_HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// Default cap on one event's size (its data plus any unterminated line).
pub const DEFAULT_MAX_EVENT_SIZE: usize = 16 * 1024 * 1024;

/// The payload that marks the end of the stream.
const DONE_PAYLOAD: &str = "[DONE]";

/// Frames one chunk as an SSE event, or `None` when `dialect` forbids sending
/// it at all (an unknown chunk in [`Dialect::V6Strict`]). The JSON never
/// contains a raw newline (serde_json escapes them), so one `data:` line is
/// always enough.
pub fn encode_chunk(chunk: &Chunk, dialect: Dialect) -> Option<String> {
    let json = chunk.to_json(dialect)?;
    let mut frame = String::with_capacity(json.len() + 8);
    frame.push_str("data: ");
    frame.push_str(&json);
    frame.push_str("\n\n");
    Some(frame)
}

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    /// The event's data (its `data:` lines joined by `\n`).
    Data(String),
    /// `data: [DONE]`.
    Done,
}

/// A framing error; the offending event is skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A `data` line is not valid UTF-8.
    #[error("SSE data line is not valid UTF-8 (invalid byte at offset {valid_up_to} of the line)")]
    InvalidUtf8 { valid_up_to: usize },
    /// The event grew past the cap without ending.
    #[error("SSE event exceeds the {limit}-byte limit")]
    EventTooLarge { limit: usize },
}

/// Incremental SSE decoder. Feed it bytes as they arrive with
/// [`SseDecoder::push`]; call [`SseDecoder::finish`] when the body ends.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    /// The current, unterminated line.
    line: Vec<u8>,
    /// The data buffer of the current event (each `data` value plus `\n`).
    data: String,
    /// Whether the current event has any `data` field (even an empty one).
    has_data: bool,
    /// The previous byte was a CR: a following LF belongs to the same line
    /// ending, even if it arrives in the next push.
    after_cr: bool,
    /// Skipping the rest of a rejected event, up to its blank line.
    skipping: bool,
    /// While skipping: whether the current line has any bytes (a blank line
    /// ends the skip).
    skipped_line_has_bytes: bool,
    /// No line has been completed yet (for the byte-order mark).
    at_stream_start: bool,
    max_event_size: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the [`DEFAULT_MAX_EVENT_SIZE`] cap.
    pub fn new() -> Self {
        Self::with_max_event_size(DEFAULT_MAX_EVENT_SIZE)
    }

    /// A decoder that rejects events larger than `max_event_size` bytes.
    pub fn with_max_event_size(max_event_size: usize) -> Self {
        Self {
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            after_cr: false,
            skipping: false,
            skipped_line_has_bytes: false,
            at_stream_start: true,
            max_event_size,
        }
    }

    /// Feeds bytes; returns the events (and errors) they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<SseEvent, SseError>> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.append_to_line(rest, &mut out);
                    break;
                }
                Some(end) => {
                    self.append_to_line(&rest[..end], &mut out);
                    self.after_cr = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    self.end_line(&mut out);
                }
            }
        }
        out
    }

    /// Ends the stream: a final line without its terminator is processed and
    /// a final event without its blank line is dispatched (strict WHATWG
    /// parsing would drop it; surfacing it helps diagnose cut-off streams).
    /// The decoder is reset afterwards.
    pub fn finish(&mut self) -> Vec<Result<SseEvent, SseError>> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        if !self.skipping {
            self.dispatch(&mut out);
        }
        *self = Self::with_max_event_size(self.max_event_size);
        out
    }

    fn append_to_line(&mut self, bytes: &[u8], out: &mut Vec<Result<SseEvent, SseError>>) {
        if bytes.is_empty() {
            return;
        }
        if self.skipping {
            self.skipped_line_has_bytes = true;
            return;
        }
        if self.line.len() + self.data.len() + bytes.len() > self.max_event_size {
            out.push(Err(SseError::EventTooLarge {
                limit: self.max_event_size,
            }));
            self.start_skipping(true);
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    /// Drops the current event and skips to its end. `mid_line` says whether
    /// the current line already has bytes (so it cannot be the blank line).
    fn start_skipping(&mut self, mid_line: bool) {
        self.line = Vec::new();
        self.data = String::new();
        self.has_data = false;
        self.skipping = true;
        self.skipped_line_has_bytes = mid_line;
    }

    fn end_line(&mut self, out: &mut Vec<Result<SseEvent, SseError>>) {
        let first_line = std::mem::replace(&mut self.at_stream_start, false);
        if self.skipping {
            if !self.skipped_line_has_bytes {
                self.skipping = false; // the blank line that ends the event
            }
            self.skipped_line_has_bytes = false;
            return;
        }
        let line = std::mem::take(&mut self.line);
        let mut line = line.as_slice();
        if first_line {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return; // comment
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field != b"data" {
            return; // event, id, retry and unknown fields do not matter here
        }
        match std::str::from_utf8(value) {
            Ok(text) => {
                self.data.push_str(text);
                self.data.push('\n');
                self.has_data = true;
            }
            Err(error) => {
                out.push(Err(SseError::InvalidUtf8 {
                    valid_up_to: error.valid_up_to(),
                }));
                self.start_skipping(false);
            }
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Result<SseEvent, SseError>>) {
        if !self.has_data {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        self.has_data = false;
        if data.ends_with('\n') {
            data.pop();
        }
        out.push(Ok(if data == DONE_PAYLOAD {
            SseEvent::Done
        } else {
            SseEvent::Data(data)
        }));
    }
}

/// One decoded frame of a UI message stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    Chunk(Chunk),
    /// `data: [DONE]`.
    Done,
}

/// Why a frame could not be decoded: broken framing or a broken chunk.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error(transparent)]
    Sse(#[from] SseError),
    #[error(transparent)]
    Chunk(#[from] ChunkDecodeError),
}

/// Bytes → [`StreamItem`]s: an [`SseDecoder`] whose events are parsed as chunks.
/// Each item is independent, so one bad chunk does not end the stream; the
/// caller decides (the AI SDK client fails the stream on the first one).
#[derive(Debug, Clone, Default)]
pub struct ChunkStreamDecoder {
    sse: SseDecoder,
}

impl ChunkStreamDecoder {
    /// A decoder with the default event size cap.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with a custom event size cap.
    pub fn with_max_event_size(max_event_size: usize) -> Self {
        Self {
            sse: SseDecoder::with_max_event_size(max_event_size),
        }
    }

    /// Feeds bytes; returns the frames they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Result<StreamItem, DecodeError>> {
        convert(self.sse.push(bytes))
    }

    /// Ends the stream (see [`SseDecoder::finish`]).
    pub fn finish(&mut self) -> Vec<Result<StreamItem, DecodeError>> {
        convert(self.sse.finish())
    }
}

fn convert(events: Vec<Result<SseEvent, SseError>>) -> Vec<Result<StreamItem, DecodeError>> {
    events
        .into_iter()
        .map(|event| match event? {
            SseEvent::Done => Ok(StreamItem::Done),
            SseEvent::Data(data) => Ok(StreamItem::Chunk(Chunk::from_json(&data)?)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn events(decoder: &mut SseDecoder, bytes: &[u8]) -> Vec<Result<SseEvent, SseError>> {
        let mut out = decoder.push(bytes);
        out.extend(decoder.finish());
        out
    }

    fn data(text: &str) -> Result<SseEvent, SseError> {
        Ok(SseEvent::Data(text.to_owned()))
    }

    #[test]
    fn encode_produces_one_data_line_per_chunk() {
        assert_eq!(
            encode_chunk(&Chunk::text_delta("t", "a\nb"), Dialect::V6Strict).unwrap(),
            "data: {\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"a\\nb\"}\n\n"
        );
        assert_eq!(
            encode_chunk(
                &Chunk::Unknown(json!({"type": "custom"})),
                Dialect::V6Strict
            ),
            None
        );
        assert_eq!(DONE_FRAME, "data: [DONE]\n\n");
    }

    #[test]
    fn encoded_frames_decode_back() {
        let chunks = [
            Chunk::start("m"),
            Chunk::text_start("t"),
            Chunk::text_delta("t", "héllo 🌍"),
            Chunk::finish(crate::protocol::FinishReason::Stop),
        ];
        let mut wire: String = chunks
            .iter()
            .map(|c| encode_chunk(c, Dialect::Full).unwrap())
            .collect();
        wire.push_str(DONE_FRAME);
        let mut decoder = ChunkStreamDecoder::new();
        let frames: Vec<StreamItem> = decoder
            .push(wire.as_bytes())
            .into_iter()
            .map(|f| f.unwrap())
            .collect();
        let mut expected: Vec<StreamItem> = chunks.into_iter().map(StreamItem::Chunk).collect();
        expected.push(StreamItem::Done);
        assert_eq!(frames, expected);
        assert!(decoder.finish().is_empty());
    }

    #[test]
    fn all_three_line_endings_work() {
        for wire in [
            "data: a\n\ndata: b\n\n",
            "data: a\r\n\r\ndata: b\r\n\r\n",
            "data: a\r\rdata: b\r\r",
        ] {
            assert_eq!(
                events(&mut SseDecoder::new(), wire.as_bytes()),
                vec![data("a"), data("b")],
                "{wire:?}"
            );
        }
    }

    #[test]
    fn crlf_split_across_pushes_is_one_line_ending() {
        let mut decoder = SseDecoder::new();
        assert!(decoder.push(b"data: a\r").is_empty());
        assert!(decoder.push(b"\n").is_empty());
        assert_eq!(decoder.push(b"\r"), vec![data("a")]);
        // The LF completing that CRLF arrives late and is not a second line.
        assert!(decoder.push(b"\ndata: b\r").is_empty());
        assert_eq!(decoder.push(b"\n\n"), vec![data("b")]);
    }

    #[test]
    fn comments_and_other_fields_are_ignored() {
        let wire = b": ping\n\nevent: message\nid: 7\nretry: 1000\ndata: x\nfoo: bar\n\n:\n\n";
        assert_eq!(events(&mut SseDecoder::new(), wire), vec![data("x")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let wire = b"data: {\"a\":\ndata:1}\ndata\n\n";
        assert_eq!(
            events(&mut SseDecoder::new(), wire),
            vec![data("{\"a\":\n1}\n")]
        );
    }

    #[test]
    fn only_one_space_after_the_colon_is_stripped() {
        assert_eq!(
            events(&mut SseDecoder::new(), b"data:  two\n\ndata:none\n\n"),
            vec![data(" two"), data("none")]
        );
    }

    #[test]
    fn an_empty_data_field_still_dispatches_and_no_data_does_not() {
        assert_eq!(
            events(&mut SseDecoder::new(), b"data:\n\nevent: x\n\n\n\n"),
            vec![data("")]
        );
    }

    #[test]
    fn done_is_recognised() {
        assert_eq!(
            events(&mut SseDecoder::new(), DONE_FRAME.as_bytes()),
            vec![Ok(SseEvent::Done)]
        );
        // `[DONE]` with trailing space is just data.
        assert_eq!(
            events(&mut SseDecoder::new(), b"data: [DONE] \n\n"),
            vec![data("[DONE] ")]
        );
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        assert_eq!(
            events(&mut SseDecoder::new(), b"\xEF\xBB\xBFdata: x\n\n"),
            vec![data("x")]
        );
    }

    #[test]
    fn a_split_inside_a_multibyte_character_is_invisible() {
        let wire = "data: {\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"日本\"}\n\n".as_bytes();
        let split = wire.iter().position(|&b| b >= 0x80).unwrap() + 1; // inside 日
        let mut decoder = SseDecoder::new();
        let mut out = decoder.push(&wire[..split]);
        assert!(out.is_empty());
        out.extend(decoder.push(&wire[split..]));
        assert_eq!(
            out,
            vec![data(
                "{\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"日本\"}"
            )]
        );
    }

    #[test]
    fn finish_flushes_a_trailing_event_without_its_blank_line() {
        let mut decoder = SseDecoder::new();
        assert!(decoder.push(b"data: tail").is_empty());
        assert_eq!(decoder.finish(), vec![data("tail")]);
        assert!(decoder.finish().is_empty(), "reset after finish");
        assert!(decoder.push(b"data: a\n").is_empty());
        assert_eq!(decoder.finish(), vec![data("a")]);
    }

    #[test]
    fn invalid_utf8_is_a_typed_error_and_decoding_resumes() {
        let mut decoder = SseDecoder::new();
        let out = events(
            &mut decoder,
            b"data: ok\n\ndata: \xff\xfe\ndata: more\n\ndata: after\n\n",
        );
        assert_eq!(
            out,
            vec![
                data("ok"),
                Err(SseError::InvalidUtf8 { valid_up_to: 0 }),
                data("after")
            ]
        );
        // Invalid bytes in a comment or an ignored field are harmless.
        assert_eq!(
            events(&mut SseDecoder::new(), b": \xff\nid: \xfe\ndata: x\n\n"),
            vec![data("x")]
        );
    }

    #[test]
    fn an_oversize_event_is_rejected_once_and_the_stream_recovers() {
        let mut decoder = SseDecoder::with_max_event_size(16);
        let mut out = decoder.push(b"data: 0123456789");
        out.extend(decoder.push(b"abcdef more and more"));
        out.extend(decoder.push(b"\ndata: still the same event\n"));
        out.extend(decoder.push(b"\ndata: small\n\n"));
        assert_eq!(
            out,
            vec![Err(SseError::EventTooLarge { limit: 16 }), data("small")]
        );
        // The cap covers data accumulated over several lines too.
        let mut decoder = SseDecoder::with_max_event_size(16);
        assert_eq!(
            events(
                &mut decoder,
                b"data: 12345678\ndata: 12345678\n\ndata: ok\n\n"
            ),
            vec![Err(SseError::EventTooLarge { limit: 16 }), data("ok")]
        );
        // And memory does not grow while skipping.
        let mut decoder = SseDecoder::with_max_event_size(8);
        for _ in 0..1000 {
            decoder.push(&[b'x'; 1024]);
        }
        assert!(decoder.line.capacity() <= 8);
    }

    #[test]
    fn chunk_decoder_reports_bad_chunks_and_keeps_going() {
        let mut decoder = ChunkStreamDecoder::new();
        let out = decoder.push(b"data: {\"type\":\"text-delta\"}\n\ndata: nope\n\ndata: {\"type\":\"custom\",\"x\":1}\n\ndata: [DONE]\n\n");
        assert!(matches!(
            out[0],
            Err(DecodeError::Chunk(ChunkDecodeError::InvalidFields { .. }))
        ));
        assert!(matches!(
            out[1],
            Err(DecodeError::Chunk(ChunkDecodeError::Json(_)))
        ));
        assert!(matches!(&out[2], Ok(StreamItem::Chunk(Chunk::Unknown(_)))));
        assert!(matches!(out[3], Ok(StreamItem::Done)));
        let mut decoder = ChunkStreamDecoder::with_max_event_size(4);
        assert!(matches!(
            decoder.push(b"data: {\"type\":\"start\"}\n\n")[..],
            [Err(DecodeError::Sse(SseError::EventTooLarge { limit: 4 }))]
        ));
    }

    #[test]
    fn headers_match_the_sdk() {
        assert!(UI_MESSAGE_STREAM_HEADERS.contains(&("x-vercel-ai-ui-message-stream", "v1")));
        assert!(UI_MESSAGE_STREAM_HEADERS.contains(&("x-accel-buffering", "no")));
    }
}
