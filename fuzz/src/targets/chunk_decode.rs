//! Arbitrary text into the chunk decoder (`Chunk::from_json` / `from_value`)
//! and the `MessageReducer` / `Conversation` that fold chunks into messages.
//!
//! The input is read as UTF-8 (lossily). The whole text is decoded as one
//! chunk and checked as below; then every line (up to 100) is decoded, and
//! the lines that parse are applied in order to a `MessageReducer` and to a
//! `Conversation`, like the chunks of one response. Lines starting with `!` drive the `useChat` side between chunks:
//! `!approve <approvalId>`, `!deny <approvalId>`, `!output <toolCallId>`,
//! `!error <toolCallId>`, `!next` (end the stream, start the next with
//! `submit-message`), `!regen` (same with `regenerate-message`).
//!
//! Invariants:
//! * nothing panics;
//! * `from_json`, `from_value` and serde's `Deserialize` agree;
//! * a decoded chunk re-encodes (`Dialect::Full`) and re-decodes to itself,
//!   and the `V6Strict` form re-decodes to `for_dialect(V6Strict)` and is
//!   stable; `encode_chunk` + `ChunkStreamDecoder` give the chunk back;
//! * a chunk the reducer rejects changes nothing (reducer and conversation);
//! * a publishing chunk leaves the conversation's last message equal to the
//!   reducer's, any other leaves the message list alone; the messages (and a `ChatRequest` carrying them) round-trip
//!   through JSON.
//!
//! JSON numbers that are floats are compared modulo a few ULPs: serde_json
//! without `float_roundtrip` may parse a printed float 1 ULP off.

use crate::protocol::{
    ChatRequest, Chunk, ChunkStreamDecoder, Conversation, Dialect, MessageReducer, PartialJson,
    StreamItem, Trigger, UiMessage, encode_chunk, parse_partial_json,
};
use crate::{assert_json_round_trip, json_eq_modulo_float_ulp};
use serde_json::Value;

/// `a == b`, or the same JSON modulo float ULPs.
#[track_caller]
fn assert_same_chunk(what: &str, a: &Chunk, b: &Chunk) {
    if a != b {
        let full = |c: &Chunk| c.to_value(Dialect::Full).expect("Full never refuses");
        assert_json_round_trip(what, &full(a), &full(b));
        // Same JSON but different values would be a decoder inconsistency.
        assert_eq!(a.wire_type(), b.wire_type(), "{what}");
    }
}

fn check_chunk(text: &str, value: Value) -> Option<Chunk> {
    let from_json = Chunk::from_json(text);
    let from_value = Chunk::from_value(value.clone());
    let via_serde: Result<Chunk, _> = serde_json::from_value(value);
    let chunk = match (from_json, from_value, via_serde) {
        (Ok(a), Ok(b), Ok(c)) => {
            assert_eq!(a, b, "from_json vs from_value");
            assert_eq!(a, c, "from_json vs Deserialize");
            a
        }
        (Err(_), Err(_), Err(_)) => return None,
        (a, b, c) => panic!("decoders disagree: {a:?} / {b:?} / {c:?}"),
    };

    // Full dialect: everything we model survives.
    let json = chunk.to_json(Dialect::Full).expect("Full never refuses");
    let again = Chunk::from_json(&json).unwrap_or_else(|e| panic!("re-decode of {json}: {e}"));
    assert_same_chunk("Full round trip", &chunk, &again);
    let value = chunk.to_value(Dialect::Full).expect("Full never refuses");
    assert_eq!(
        serde_json::from_str::<Value>(&json)
            .ok()
            .as_ref()
            .map(|v| json_eq_modulo_float_ulp(v, &value)),
        Some(true),
        "to_json and to_value disagree"
    );
    assert_eq!(
        serde_json::to_string(&chunk).expect("serialize"),
        json,
        "Serialize is Dialect::Full"
    );

    // Strict dialect: only unknown chunks are refused; the form is stable.
    match chunk.to_json(Dialect::V6Strict) {
        None => assert!(
            matches!(chunk, Chunk::Unknown(_)),
            "only Unknown is refused"
        ),
        Some(strict) => {
            let expected = chunk
                .for_dialect(Dialect::V6Strict)
                .expect("same as to_json");
            let decoded = Chunk::from_json(&strict)
                .unwrap_or_else(|e| panic!("re-decode of strict {strict}: {e}"));
            assert_same_chunk("V6Strict round trip", &expected, &decoded);
            if decoded == *expected {
                assert_eq!(decoded.to_json(Dialect::V6Strict).as_ref(), Some(&strict));
            }
        }
    }

    // SSE framing: one frame, the same chunk back.
    let frame = encode_chunk(&chunk, Dialect::Full).expect("Full never refuses");
    let mut decoder = ChunkStreamDecoder::new();
    let mut frames = decoder.push(frame.as_bytes());
    frames.extend(decoder.finish());
    match frames.as_slice() {
        [Ok(StreamItem::Chunk(back))] => assert_same_chunk("SSE framing", &chunk, back),
        other => panic!("{frame:?} decoded to {other:?}"),
    }
    Some(chunk)
}

fn check_message_round_trip(message: &UiMessage) {
    let value = serde_json::to_value(message).expect("messages serialize");
    let back: UiMessage = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("reducer output does not decode: {e}\n{value}"));
    if back != *message {
        assert_json_round_trip(
            "message",
            &value,
            &serde_json::to_value(&back).expect("serialize"),
        );
    }
}

/// One fuzz input: panics when an invariant above does not hold.
pub fn check(input: &[u8]) {
    let text = String::from_utf8_lossy(input);

    // The whole input as one chunk, and as a partial JSON text.
    let whole: Result<Value, _> = serde_json::from_str(&text);
    if let Ok(value) = &whole {
        check_chunk(&text, value.clone());
    } else {
        assert!(Chunk::from_json(&text).is_err());
    }
    let partial = parse_partial_json(&text);
    if let Ok(value) = whole {
        match &partial {
            PartialJson::Complete(parsed) => assert_json_round_trip("partial JSON", &value, parsed),
            other => panic!("valid JSON {value} parsed partially as {other:?}"),
        }
    }

    // Every line a chunk of one response, applied to a reducer and a conversation.
    let mut reducer = MessageReducer::new("fuzz-assistant");
    let mut conversation = Conversation::new(vec![UiMessage::user_text("fuzz-user", "hi")]);
    conversation.begin_stream(Trigger::SubmitMessage, "fuzz-assistant");
    let mut streams = 0;
    for line in text.split('\n').take(100) {
        if let Some(command) = line.strip_prefix('!') {
            let (verb, arg) = command.split_once(' ').unwrap_or((command, ""));
            match verb {
                "approve" | "deny" => {
                    conversation.add_tool_approval_response(arg, verb == "approve", None);
                }
                "output" => {
                    conversation.add_tool_output(arg, Value::from(arg));
                }
                "error" => {
                    conversation.add_tool_error(arg, "fuzz");
                }
                "next" | "regen" if streams < 8 => {
                    streams += 1;
                    conversation.end_stream();
                    let trigger = if verb == "next" {
                        Trigger::SubmitMessage
                    } else {
                        Trigger::RegenerateMessage
                    };
                    conversation.begin_stream(trigger, format!("fuzz-assistant-{streams}"));
                }
                _ => {}
            }
            continue;
        }
        // (The round-trip checks ran on the whole input; here only the reducer's.)
        let Ok(chunk) = Chunk::from_json(line) else {
            continue;
        };

        let before = reducer.clone();
        if reducer.apply(&chunk).is_err() {
            assert_eq!(reducer, before, "a rejected chunk changed the reducer");
        }

        let before = conversation.clone();
        match conversation.apply(&chunk) {
            Err(_) => assert_eq!(
                conversation, before,
                "a rejected chunk changed the conversation"
            ),
            Ok(applied) => {
                let active = conversation.active().expect("a stream is active").message();
                if applied.publishes() {
                    assert_eq!(conversation.messages().last(), Some(active));
                } else {
                    // A chunk that does not publish never touches the message list.
                    assert_eq!(conversation.messages(), before.messages(), "{applied:?}");
                }
            }
        }
    }

    check_message_round_trip(reducer.message());
    let messages = conversation.messages().to_vec();
    for message in &messages {
        check_message_round_trip(message);
    }
    let request = ChatRequest {
        id: "fuzz-chat".into(),
        message_id: messages.last().map(|m| m.id.clone()),
        messages,
        trigger: Some(Trigger::SubmitMessage),
    };
    let body = serde_json::to_string(&request).expect("requests serialize");
    let back = ChatRequest::from_json(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    if back != request {
        assert_json_round_trip(
            "chat request",
            &serde_json::to_value(&request).expect("serialize"),
            &serde_json::to_value(&back).expect("serialize"),
        );
    }
}
