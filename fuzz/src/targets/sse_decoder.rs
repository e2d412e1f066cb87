//! Arbitrary bytes into the incremental SSE decoder (`protocol::sse`).
//!
//! Input layout: byte 0 picks the event size cap (high bit clear: the default
//! 16 MiB cap; set: a cap of 1..=128 bytes so the cap is exercised), byte 1
//! seeds the split points, the rest is the stream.
//!
//! Invariants:
//! * nothing panics;
//! * the cap holds: no event's data exceeds it, and the decoder's buffered
//!   state stays proportional to it after every push (checked on the split run);
//! * decoding in one piece, in fuzzer-chosen pieces (empty ones included) and
//!   byte by byte yields the same events;
//! * when the cap never fired, the events equal a whole-input reference
//!   decoder's;
//! * `ChunkStreamDecoder` yields exactly those events, each parsed with
//!   `Chunk::from_json`.

use crate::protocol::sse::DEFAULT_MAX_EVENT_SIZE;
use crate::protocol::{
    Chunk, ChunkStreamDecoder, DecodeError, SseDecoder, SseError, SseEvent, StreamItem,
};
use crate::{reference_sse, split_points};

type Events = Vec<Result<SseEvent, SseError>>;

fn decode<'a>(cap: usize, pieces: impl IntoIterator<Item = &'a [u8]>, bounded: bool) -> Events {
    let mut decoder = SseDecoder::with_max_event_size(cap);
    let mut out = Vec::new();
    for piece in pieces {
        out.extend(decoder.push(piece));
        if bounded {
            // The buffered line and data are private; their Debug form is a
            // faithful proxy (at most 6 characters per buffered byte).
            let shown = format!("{decoder:?}").len();
            assert!(
                shown <= 6 * cap + 512,
                "decoder buffers {shown} Debug chars with a {cap}-byte cap"
            );
        }
    }
    out.extend(decoder.finish());
    out
}

/// One fuzz input: panics when an invariant above does not hold.
pub fn check(input: &[u8]) {
    let (cap, seed, stream) = match input {
        [cap, seed, stream @ ..] => (
            if cap & 0x80 == 0 {
                DEFAULT_MAX_EVENT_SIZE
            } else {
                usize::from(cap & 0x7F) + 1
            },
            u64::from(*seed) | (stream.len() as u64) << 8,
            stream,
        ),
        _ => return,
    };
    let bounded = cap < DEFAULT_MAX_EVENT_SIZE;

    let whole = decode(cap, [stream], bounded);
    let split = decode(cap, split_points(stream, seed), bounded);
    assert_eq!(whole, split, "split decoding differs from whole decoding");
    let bytewise = decode(cap, stream.chunks(1), false);
    assert_eq!(whole, bytewise, "byte-by-byte decoding differs");

    let mut capped = false;
    for event in &whole {
        match event {
            Ok(SseEvent::Data(data)) => {
                assert!(
                    data.len() <= cap,
                    "a {}-byte event passed a {cap}-byte cap",
                    data.len()
                )
            }
            Err(SseError::EventTooLarge { limit }) => {
                assert_eq!(*limit, cap);
                capped = true;
            }
            Ok(SseEvent::Done) | Err(SseError::InvalidUtf8 { .. }) => {}
        }
    }
    if !capped {
        assert_eq!(
            whole,
            reference_sse(stream),
            "differs from the reference decoder"
        );
    }

    // The chunk layer is the SSE layer plus `Chunk::from_json`, item by item.
    let mut chunks = ChunkStreamDecoder::with_max_event_size(cap);
    let mut frames = Vec::new();
    for piece in split_points(stream, seed.rotate_left(17)) {
        frames.extend(chunks.push(piece));
    }
    frames.extend(chunks.finish());
    assert_eq!(
        frames.len(),
        whole.len(),
        "frame count differs from event count"
    );
    for (frame, event) in frames.iter().zip(&whole) {
        match (frame, event) {
            (Ok(StreamItem::Done), Ok(SseEvent::Done)) => {}
            (Err(DecodeError::Sse(a)), Err(b)) => assert_eq!(a, b),
            (frame, Ok(SseEvent::Data(data))) => match (frame, Chunk::from_json(data)) {
                (Ok(StreamItem::Chunk(a)), Ok(b)) => assert_eq!(*a, b),
                (Err(DecodeError::Chunk(_)), Err(_)) => {}
                (frame, direct) => panic!("frame {frame:?} but from_json gives {direct:?}"),
            },
            (frame, event) => panic!("frame {frame:?} for event {event:?}"),
        }
    }
}
