//! Arbitrary text into the request parsers (`protocol::envelope`): the
//! WebSocket client frame parser (`ClientFrame::from_json` / `from_value`)
//! and the SSE `POST` body parser (`ChatRequest::from_json`).
//!
//! The input is read as UTF-8 (lossily) and given to both parsers.
//!
//! Invariants:
//! * nothing panics;
//! * `from_json` and `from_value` agree, and only the errors they document
//!   come out (an unknown `type` is named, not a serde message);
//! * a decoded frame re-encodes and re-decodes to itself; a `message` frame is
//!   the same `ChatRequest` as the one its fields decode to directly;
//! * a `ping`'s `pong` echoes the timestamp (integers exactly);
//! * a decoded `ChatRequest` re-encodes and re-decodes to itself.
//!
//! JSON numbers that are floats are compared modulo a few ULPs: serde_json
//! without `float_roundtrip` may parse a printed float 1 ULP off.

use crate::assert_json_round_trip;
use crate::protocol::{ChatRequest, ClientFrame, EnvelopeError, ServerControl};
use serde_json::Value;

const FRAME_TYPES: [&str; 7] = [
    "message",
    "tool_result",
    "interrupt",
    "ping",
    "audio_chunk",
    "audio_control",
    "resume",
];

#[track_caller]
fn assert_same<T: PartialEq + serde::Serialize + std::fmt::Debug>(what: &str, a: &T, b: &T) {
    if a != b {
        let json = |x: &T| serde_json::to_value(x).expect("wire types serialize");
        assert_json_round_trip(what, &json(a), &json(b));
    }
}

fn check_frame(text: &str) {
    let from_json = ClientFrame::from_json(text);
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) => {
            assert!(
                matches!(from_json, Err(EnvelopeError::Json(_))),
                "{from_json:?}"
            );
            return;
        }
    };
    let from_value = ClientFrame::from_value(value.clone());
    let frame = match (from_json, from_value) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "from_json vs from_value");
            a
        }
        (Err(a), Err(b)) => {
            assert_eq!(
                a.to_string(),
                b.to_string(),
                "from_json vs from_value errors"
            );
            match a {
                EnvelopeError::Json(_) => panic!("valid JSON reported as invalid: {a}"),
                EnvelopeError::NotAnObject => assert!(!value.is_object()),
                EnvelopeError::MissingType => {
                    assert!(!value.get("type").is_some_and(Value::is_string))
                }
                EnvelopeError::UnknownType { type_name } => {
                    assert_eq!(value.get("type").and_then(Value::as_str), Some(&*type_name));
                    assert!(!FRAME_TYPES.contains(&type_name.as_str()));
                }
                EnvelopeError::InvalidFields { frame_type, .. } => {
                    assert!(FRAME_TYPES.contains(&frame_type.as_str()))
                }
            }
            return;
        }
        (a, b) => panic!("from_json {a:?} but from_value {b:?}"),
    };
    assert_eq!(
        value
            .get("type")
            .and_then(Value::as_str)
            .map(|t| FRAME_TYPES.contains(&t)),
        Some(true)
    );

    let encoded = serde_json::to_string(&frame).expect("frames serialize");
    let again =
        ClientFrame::from_json(&encoded).unwrap_or_else(|e| panic!("re-decode of {encoded}: {e}"));
    assert_same("client frame", &frame, &again);

    match &frame {
        ClientFrame::Message { .. } => {
            let request = frame.clone().into_chat_request().expect("a message frame");
            // The frame's fields are a ChatRequest body (plus `type`, ignored).
            // (From the parsed value: `from_json` on the raw text would also reject
            // duplicate keys, which a `Value` has already collapsed.)
            let direct = serde_json::from_value::<ChatRequest>(value.clone())
                .unwrap_or_else(|e| panic!("message frame fields are not a ChatRequest: {e}"));
            assert_same("message frame vs ChatRequest", &request, &direct);
        }
        ClientFrame::Ping { timestamp } => {
            let pong = ServerControl::Pong {
                timestamp: timestamp.clone(),
            }
            .to_json();
            let echoed: Value = serde_json::from_str(&pong).expect("pong is JSON");
            assert_eq!(echoed.get("type"), Some(&Value::from("pong")));
            match timestamp {
                None => assert_eq!(echoed.get("timestamp"), None),
                Some(sent) => {
                    let echoed = echoed.get("timestamp").expect("timestamp echoed");
                    if sent.is_f64() {
                        assert_json_round_trip(
                            "pong timestamp",
                            &Value::Number(sent.clone()),
                            echoed,
                        );
                    } else {
                        assert_eq!(echoed, &Value::Number(sent.clone()), "pong timestamp");
                    }
                }
            }
        }
        _ => assert!(frame.clone().into_chat_request().is_none()),
    }
}

fn check_chat_request(text: &str) {
    let Ok(request) = ChatRequest::from_json(text) else {
        return;
    };
    let body = serde_json::to_string(&request).expect("requests serialize");
    let again =
        ChatRequest::from_json(&body).unwrap_or_else(|e| panic!("re-decode of {body}: {e}"));
    assert_same("chat request", &request, &again);
    // The same body sent over the socket is a `message` frame.
    let mut value = serde_json::to_value(&request).expect("requests serialize");
    value
        .as_object_mut()
        .expect("a request is an object")
        .insert("type".into(), Value::from("message"));
    let frame = ClientFrame::from_value(value)
        .unwrap_or_else(|e| panic!("request {body} is not a message frame: {e}"));
    assert_same(
        "ChatRequest vs message frame",
        &request,
        &frame.into_chat_request().expect("a message frame"),
    );
}

/// One fuzz input: panics when an invariant above does not hold.
pub fn check(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    check_frame(&text);
    check_chat_request(&text);
}
