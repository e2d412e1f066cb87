//! Support crate of the fuzz targets in `fuzz_targets/`.
//!
//! It mounts the main crate's `src/protocol` module as `crate::protocol`, so the
//! `crate::protocol::…` paths inside it resolve exactly as in `countersign`,
//! without compiling Leptos. Everything else here is a test oracle the targets
//! share: a whole-input reference SSE decoder, a deterministic way to split
//! bytes, and a JSON comparison that tolerates serde_json's float parsing.

#[path = "../../src/protocol/mod.rs"]
pub mod protocol;

/// The server's WebSocket framing (`transport::ws::frame`), which needs nothing but thiserror.
#[path = "../../src/transport/ws/frame.rs"]
pub mod ws_frame;

/// The page's Markdown parser (`ui::markdown::syntax`, no Leptos in it) and the pulldown-cmark
/// reference the unit tests check it against (`ui::markdown::reference`).
pub mod markdown;

/// The targets' code: each `check` panics when one of its invariants does not hold.
/// `fuzz_targets/` hands them libFuzzer's inputs; `tests/corpus.rs` replays the committed corpus.
pub mod targets {
    pub mod chunk_decode;
    pub mod markdown;
    pub mod sse_decoder;
    pub mod ws_envelope;
    pub mod ws_frame;
}

use protocol::{SseError, SseEvent};
use serde_json::Value;

/// The WHATWG event-stream rules the incremental [`protocol::SseDecoder`]
/// documents, applied to the whole input at once (no size cap): lines end at
/// LF, CRLF or a lone CR; a leading BOM is dropped; `:` lines are comments;
/// `data` fields are joined with `\n`; a blank line dispatches; a `data` value
/// that is not UTF-8 is an error and the rest of its event is skipped; at the
/// end a final unterminated line is processed and a pending event dispatched.
pub fn reference_sse(input: &[u8]) -> Vec<Result<SseEvent, SseError>> {
    let mut lines: Vec<&[u8]> = Vec::new();
    let (mut i, mut start) = (0, 0);
    while i < input.len() {
        match input[i] {
            b'\n' => {
                lines.push(&input[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&input[start..i]);
                i += 1;
                if input.get(i) == Some(&b'\n') {
                    i += 1;
                }
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < input.len() {
        lines.push(&input[start..]);
    }

    let mut out = Vec::new();
    let mut data = String::new();
    let mut has_data = false;
    let mut skipping = false;
    let dispatch = |data: &mut String, has_data: &mut bool, out: &mut Vec<_>| {
        if !std::mem::take(has_data) {
            return;
        }
        let mut text = std::mem::take(data);
        text.pop(); // the `\n` after the last data line
        out.push(Ok(if text == "[DONE]" {
            SseEvent::Done
        } else {
            SseEvent::Data(text)
        }));
    };
    for (index, raw) in lines.into_iter().enumerate() {
        if skipping {
            skipping = !raw.is_empty();
            continue;
        }
        let line = if index == 0 {
            raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw)
        } else {
            raw
        };
        if line.is_empty() {
            dispatch(&mut data, &mut has_data, &mut out);
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field != b"data" {
            continue;
        }
        match std::str::from_utf8(value) {
            Ok(text) => {
                data.push_str(text);
                data.push('\n');
                has_data = true;
            }
            Err(error) => {
                out.push(Err(SseError::InvalidUtf8 {
                    valid_up_to: error.valid_up_to(),
                }));
                data.clear();
                has_data = false;
                skipping = true;
            }
        }
    }
    if !skipping {
        dispatch(&mut data, &mut has_data, &mut out);
    }
    out
}

/// Cuts `bytes` into consecutive pieces (some empty) chosen by a small PRNG
/// seeded with `seed`, so the fuzzer controls the split points.
pub fn split_points(bytes: &[u8], seed: u64) -> Vec<&[u8]> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut pieces = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let roll = next();
        // Mostly short pieces (0..=7 bytes), sometimes long ones.
        let len = if roll & 0xF0 == 0 {
            (roll >> 8) as usize % (rest.len() + 1)
        } else {
            (roll >> 8) as usize % 8
        };
        let (piece, tail) = rest.split_at(len.min(rest.len()));
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

/// JSON equality where two floats also count as equal when they are at most a
/// few ULPs apart. serde_json (without its `float_roundtrip` feature, which
/// the main crate does not enable) may parse a decimal 1 ULP away from the
/// nearest double, so `parse(print(x))` is not always `x` for floats; that is
/// the dependency's documented trade-off, not a protocol bug.
pub fn json_eq_modulo_float_ulp(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if x == y {
                return true;
            }
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) if x.is_finite() && y.is_finite() && (x < 0.0) == (y < 0.0) => {
                    let (x, y) = (x.abs().to_bits(), y.abs().to_bits());
                    x.abs_diff(y) <= 4 && (a.is_f64() || b.is_f64())
                }
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq_modulo_float_ulp(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| json_eq_modulo_float_ulp(x, y)))
        }
        _ => a == b,
    }
}

/// Whether any number in `value` is a float (only then may a round trip
/// legitimately differ, see [`json_eq_modulo_float_ulp`]).
pub fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

/// Asserts that `after` is `before` modulo float ULPs, with both JSON forms in
/// the panic message.
#[track_caller]
pub fn assert_json_round_trip(what: &str, before: &Value, after: &Value) {
    assert!(
        json_eq_modulo_float_ulp(before, after),
        "{what} does not round-trip:\n before: {before}\n after:  {after}"
    );
}
