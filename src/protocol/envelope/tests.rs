use super::*;
use serde_json::{Value, json};

#[test]
fn a_tool_result_reads_as_a_confirmation_a_failure_or_an_output() {
    assert_eq!(
        ToolReport::read("apv-1".into(), json!({"approved": true}), |id| id
            == "apv-1"),
        Ok(ToolReport::Confirmation {
            approval_id: "apv-1".into(),
            approved: true,
            reason: None
        })
    );
    assert_eq!(
        ToolReport::read(
            "confirmation-apv-9".into(),
            json!({"confirmed": false, "reason": "no"}),
            |_| false
        ),
        Ok(ToolReport::Confirmation {
            approval_id: "apv-9".into(),
            approved: false,
            reason: Some("no".into())
        })
    );
    assert_eq!(
        ToolReport::read("c".into(), json!({"error": "no", "message": "m"}), |_| {
            false
        }),
        Ok(ToolReport::Failed {
            tool_call_id: "c".into(),
            message: "no".into()
        })
    );
    assert_eq!(
        ToolReport::read("c".into(), json!({"success": false}), |_| false),
        Ok(ToolReport::Failed {
            tool_call_id: "c".into(),
            message: "the browser reported an error".into()
        })
    );
    let output = json!({"latitude": 1.0, "error": "coarse fix"});
    assert_eq!(
        ToolReport::read("c".into(), output.clone(), |_| false),
        Ok(ToolReport::Output {
            tool_call_id: "c".into(),
            output
        })
    );
}

#[test]
fn a_confirmation_that_says_neither_yes_nor_no_is_refused_not_read_as_a_denial() {
    let waiting = |id: &str| id == "apv-1";
    for result in [
        json!({"confirmed": "yes"}),
        json!({"confirmed": null}),
        json!({"approved": 1}),
        json!({}),
        json!("approve"),
    ] {
        assert_eq!(
            ToolReport::read("apv-1".into(), result.clone(), waiting),
            Err(ToolReportError::NoDecision {
                approval_id: "apv-1".into()
            }),
            "{result}"
        );
    }
    // By its shape alone (no waiting approval named), too.
    assert_eq!(
        ToolReport::read(
            "confirmation-apv-2".into(),
            json!({"confirmed": "no"}),
            |_| false
        ),
        Err(ToolReportError::NoDecision {
            approval_id: "apv-2".into()
        })
    );
    assert_eq!(
        ToolReport::read(
            "apv-1".into(),
            json!({"confirmed": false, "reason": 7}),
            waiting
        ),
        Err(ToolReportError::Reason {
            approval_id: "apv-1".into()
        })
    );
    assert_eq!(
        ToolReport::read(
            "apv-1".into(),
            json!({"confirmed": true, "reason": null}),
            waiting
        ),
        Ok(ToolReport::Confirmation {
            approval_id: "apv-1".into(),
            approved: true,
            reason: None
        })
    );
}

#[test]
fn chat_request_matches_the_ai_sdk_body() {
    let body = r#"{
        "id": "chat-7",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Pay Rin 25 EUR"}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-transfer_funds", "toolCallId": "c1", "state": "approval-responded",
                 "input": {"amount": 25}, "approval": {"id": "ap1", "approved": true}}
            ]}
        ],
        "trigger": "submit-message",
        "messageId": "a1",
        "extraBodyField": {"anything": true}
    }"#;
    let request = ChatRequest::from_json(body).unwrap();
    assert_eq!(request.id, "chat-7");
    assert_eq!(request.trigger, Some(Trigger::SubmitMessage));
    assert_eq!(request.message_id.as_deref(), Some("a1"));
    assert_eq!(request.messages.len(), 2);
    let mut expected: Value = serde_json::from_str(body).unwrap();
    expected.as_object_mut().unwrap().remove("extraBodyField");
    assert_eq!(serde_json::to_value(&request).unwrap(), expected);

    // `sendMessage(newMessage)`: messageId is undefined, so the key is absent.
    let minimal =
        ChatRequest::from_json(r#"{"id":"c","messages":[],"trigger":"regenerate-message"}"#)
            .unwrap();
    assert_eq!(minimal.message_id, None);
    assert_eq!(minimal.trigger, Some(Trigger::RegenerateMessage));
    assert!(ChatRequest::from_json(r#"{"id":"c","messages":[],"trigger":"resume"}"#).is_err());
}

const LIMITS: ReadLimits = ReadLimits {
    max_messages: 5,
    earlier: 2,
};

#[test]
fn a_server_decodes_earlier_messages_only_for_a_new_user_message() {
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]});
    let assistant = json!({"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}]});
    let read =
        |body: &Value| ChatRequest::from_slice_for_server(body.to_string().as_bytes(), LIMITS);
    // Answers: the earlier messages are JSON but need not be messages the server reads.
    let answers = json!({"id": "c", "messages": [{"role": 7}, assistant.clone()],
                         "trigger": "submit-message", "messageId": "a1"});
    let request = read(&answers).unwrap();
    assert_eq!(request.messages.len(), 1);
    assert_eq!(request.message_id.as_deref(), Some("a1"));
    // A new message: the messages before it are decoded, as from_json does.
    let turn = json!({"id": "c", "messages": [user.clone(), assistant.clone(), user.clone()]});
    assert_eq!(
        read(&turn).unwrap(),
        ChatRequest::from_json(&turn.to_string()).unwrap()
    );
    let bad =
        json!({"id": "c", "messages": [{"role": 7}, {"id": "u", "role": "user", "parts": []}]});
    assert!(read(&bad).is_err());
    assert!(
        ChatRequest::from_slice_for_server(b"{\"id\":\"c\",\"messages\":[{]}", LIMITS).is_err()
    );
    let empty = read(&json!({"id": "c", "messages": []})).unwrap();
    assert!(empty.messages.is_empty());
    assert!(read(&json!({"id": "c", "messages": null})).is_err());
}

/// Only the last `earlier + 1` messages are decoded (older ones, even broken or nested
/// deeper than a decoder goes, are only JSON); more than `max_messages` is refused.
#[test]
fn a_server_reads_the_latest_messages_and_no_more_than_the_cap() {
    let user = |id: &str| format!(r#"{{"id":"{id}","role":"user","parts":[]}}"#);
    let body = |messages: &[String]| format!(r#"{{"id":"c","messages":[{}]}}"#, messages.join(","));
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let five = body(&[
        deep,
        r#"{"role":7}"#.into(),
        user("a"),
        user("b"),
        user("c"),
    ]);
    let request = ChatRequest::from_slice_for_server(five.as_bytes(), LIMITS).unwrap();
    let ids: Vec<&str> = request.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);

    let six: Vec<String> = (0..6).map(|i| user(&format!("u{i}"))).collect();
    let over = body(&six);
    assert!(matches!(
        ChatRequest::from_slice_for_server(over.as_bytes(), LIMITS),
        Err(ReadError::TooManyMessages { max: 5 })
    ));
    let raw = RawValue::from_string(format!("[{}]", six[..3].join(","))).unwrap();
    let kept = latest_messages(&raw, 2, 5).unwrap();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[1].get(), six[2]);
    assert!(latest_messages(&raw, 0, 5).unwrap().is_empty());
}

#[test]
fn every_client_frame_decodes_with_extra_keys_tolerated() {
    let cases = [
        (
            json!({"type": "message", "version": "1.0", "timestamp": 1, "id": "chat", "messages": [], "trigger": "submit-message", "messageId": "m"}),
            ClientFrame::Message {
                id: "chat".into(),
                messages: vec![],
                trigger: Some(Trigger::SubmitMessage),
                message_id: Some("m".into()),
            },
        ),
        (
            json!({"type": "tool_result", "version": "1.0", "toolCallId": "geo-1", "result": {"lat": 59.9}}),
            ClientFrame::ToolResult {
                tool_call_id: "geo-1".into(),
                result: json!({"lat": 59.9}),
            },
        ),
        (
            json!({"type": "interrupt", "reason": "user_abort"}),
            ClientFrame::Interrupt {
                reason: Some("user_abort".into()),
            },
        ),
        (
            json!({"type": "interrupt"}),
            ClientFrame::Interrupt { reason: None },
        ),
        (
            json!({"type": "ping", "version": "1.0", "timestamp": 1_700_000_000_123_u64}),
            ClientFrame::Ping {
                timestamp: Some(1_700_000_000_123_u64.into()),
            },
        ),
        (
            json!({"type": "audio_chunk", "chunk": "AAAA", "sampleRate": 16000, "channels": 1, "bitDepth": 16}),
            ClientFrame::AudioChunk {
                chunk: "AAAA".into(),
                sample_rate: Some(16000),
                channels: Some(1),
                bit_depth: Some(16),
            },
        ),
        (
            json!({"type": "audio_control", "action": "stop"}),
            ClientFrame::AudioControl {
                action: AudioAction::Stop,
                id: None,
                mode: None,
            },
        ),
        (
            json!({"type": "audio_control", "action": "start", "id": "chat", "mode": "hands_free"}),
            ClientFrame::AudioControl {
                action: AudioAction::Start,
                id: Some("chat".into()),
                mode: Some(AudioMode::HandsFree),
            },
        ),
        (
            json!({"type": "resume", "id": "chat", "received": 42}),
            ClientFrame::Resume {
                id: "chat".into(),
                received: 42,
            },
        ),
    ];
    for (wire, expected) in cases {
        assert_eq!(
            ClientFrame::from_value(wire.clone()).unwrap(),
            expected,
            "{wire}"
        );
        // A server reads the same frame from its text.
        let read = ClientFrame::value_for_server(&wire.to_string(), LIMITS).unwrap();
        assert_eq!(ClientFrame::from_value(read).unwrap(), expected, "{wire}");
        // Re-encoding drops only the tolerated extras.
        let mut trimmed = wire.clone();
        let map = trimmed.as_object_mut().unwrap();
        map.remove("version");
        if !matches!(expected, ClientFrame::Ping { .. }) {
            map.remove("timestamp");
        }
        assert_eq!(serde_json::to_value(&expected).unwrap(), trimmed);
    }
}

#[test]
fn a_server_reads_a_message_frame_as_it_reads_a_post() {
    let user = |id: &str| json!({"id": id, "role": "user", "parts": []});
    let frame = json!({"type": "message", "id": "c", "junk": {"a": [1, 2, 3]},
        "messages": [{"role": 7}, user("a"), user("b"), user("c")]});
    let read = ClientFrame::value_for_server(&frame.to_string(), LIMITS).unwrap();
    assert_eq!(
        read,
        json!({"type": "message", "id": "c", "messages": [user("a"), user("b"), user("c")]})
    );
    // Answers: only the last message is read (the earlier ones are only JSON), as in a POST.
    let assistant = json!({"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}]});
    let answers = json!({"type": "message", "id": "c",
        "messages": [user("a"), {"role": 7}, assistant.clone()]});
    let read = ClientFrame::value_for_server(&answers.to_string(), LIMITS).unwrap();
    assert_eq!(read["messages"], json!([assistant]));
    let many = json!({"type": "message", "id": "c", "messages": vec![user("u"); 6]});
    assert!(matches!(
        ClientFrame::value_for_server(&many.to_string(), LIMITS),
        Err(ReadError::TooManyMessages { max: 5 })
    ));
    // Valid JSON that is no frame reads as none; broken JSON is an error.
    assert_eq!(
        ClientFrame::value_for_server("[1]", LIMITS).unwrap(),
        Value::Null
    );
    assert!(matches!(
        ClientFrame::from_value(Value::Null),
        Err(EnvelopeError::NotAnObject)
    ));
    assert!(ClientFrame::value_for_server("{", LIMITS).is_err());
    // A message frame whose messages are not an array stays one that cannot be read.
    let wrong = json!({"type": "message", "id": "c", "messages": "no"});
    let read = ClientFrame::value_for_server(&wrong.to_string(), LIMITS).unwrap();
    assert!(matches!(
        ClientFrame::from_value(read),
        Err(EnvelopeError::InvalidFields { .. })
    ));
}

#[test]
fn a_message_frame_is_a_chat_request() {
    let frame = ClientFrame::from_json(
        r#"{"type":"message","id":"c","messages":[{"id":"u","role":"user","parts":[]}]}"#,
    )
    .unwrap();
    let request = frame.into_chat_request().unwrap();
    assert_eq!(
        (request.id.as_str(), request.messages.len(), request.trigger),
        ("c", 1, None)
    );
    assert!(
        ClientFrame::Interrupt { reason: None }
            .into_chat_request()
            .is_none()
    );
}

#[test]
fn bad_frames_are_typed_errors() {
    match ClientFrame::from_json(r#"{"type":"subscribe","topic":"x"}"#) {
        Err(EnvelopeError::UnknownType { type_name }) => assert_eq!(type_name, "subscribe"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ClientFrame::from_json("not json"),
        Err(EnvelopeError::Json(_))
    ));
    assert!(matches!(
        ClientFrame::from_json("[1]"),
        Err(EnvelopeError::NotAnObject)
    ));
    assert!(matches!(
        ClientFrame::from_json(r#"{"toolCallId":"x"}"#),
        Err(EnvelopeError::MissingType)
    ));
    match ClientFrame::from_json(r#"{"type":"tool_result","toolCallId":"x"}"#) {
        Err(EnvelopeError::InvalidFields { frame_type, .. }) => {
            assert_eq!(frame_type, "tool_result")
        }
        other => panic!("{other:?}"),
    }
    assert!(ClientFrame::from_json(r#"{"type":"audio_control","action":"pause"}"#).is_err());
    assert!(
        ClientFrame::from_json(r#"{"type":"audio_control","action":"start","mode":"vad"}"#)
            .is_err()
    );
    assert!(ClientFrame::from_json(r#"{"type":"resume","id":"c","received":-1}"#).is_err());
    assert!(ClientFrame::from_json(r#"{"type":"message","id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"tool-x"}]}]}"#).is_err());
}

#[test]
fn pong_echoes_the_timestamp_exactly() {
    let Ok(ClientFrame::Ping { timestamp }) =
        ClientFrame::from_json(r#"{"type":"ping","timestamp":1700000000123}"#)
    else {
        panic!("not a ping");
    };
    assert_eq!(
        ServerControl::Pong { timestamp }.to_json(),
        r#"{"type":"pong","timestamp":1700000000123}"#
    );
    let Ok(ClientFrame::Ping { timestamp }) =
        ClientFrame::from_json(r#"{"type":"ping","timestamp":12.5}"#)
    else {
        panic!("not a ping");
    };
    assert_eq!(
        ServerControl::Pong { timestamp }.to_json(),
        r#"{"type":"pong","timestamp":12.5}"#
    );
}
