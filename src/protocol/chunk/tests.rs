use super::*;
use serde_json::json;

fn metadata(value: Value) -> ProviderMetadata {
    match value {
        Value::Object(map) => map,
        other => panic!("test metadata must be an object, got {other}"),
    }
}

/// Every chunk type: hand-written wire JSON and the value it must decode to.
/// Each case is checked both ways (decode == expected, encode == JSON).
fn wire_cases() -> Vec<(&'static str, Chunk)> {
    let google = || Some(metadata(json!({"google": {"thoughtSignature": "c2ln"}})));
    vec![
        (r#"{"type":"start"}"#, Chunk::Start(Start::default())),
        (
            r#"{"type":"start","messageId":"asst-1","messageMetadata":{"model":"demo"}}"#,
            Chunk::Start(Start {
                message_id: Some("asst-1".into()),
                message_metadata: Some(json!({"model": "demo"})),
            }),
        ),
        (r#"{"type":"start-step"}"#, Chunk::StartStep),
        (r#"{"type":"finish-step"}"#, Chunk::FinishStep),
        (r#"{"type":"finish"}"#, Chunk::Finish(Finish::default())),
        (
            r#"{"type":"finish","finishReason":"tool-calls","messageMetadata":{"usage":{"totalTokens":12}}}"#,
            Chunk::Finish(Finish {
                finish_reason: Some(FinishReason::ToolCalls),
                message_metadata: Some(json!({"usage": {"totalTokens": 12}})),
            }),
        ),
        (
            r#"{"type":"finish","finishReason":"max-tokens-ish"}"#,
            Chunk::Finish(Finish {
                finish_reason: Some(FinishReason::Unknown("max-tokens-ish".into())),
                message_metadata: None,
            }),
        ),
        (r#"{"type":"abort"}"#, Chunk::abort()),
        (
            r#"{"type":"abort","reason":"user stopped"}"#,
            Chunk::Abort(Abort {
                reason: Some("user stopped".into()),
            }),
        ),
        (
            r#"{"type":"error","errorText":"The model is unavailable."}"#,
            Chunk::error("The model is unavailable."),
        ),
        (
            r#"{"type":"message-metadata","messageMetadata":{"cost":3}}"#,
            Chunk::message_metadata(json!({"cost": 3})),
        ),
        (
            r#"{"type":"text-start","id":"t1"}"#,
            Chunk::text_start("t1"),
        ),
        (
            r#"{"type":"text-start","id":"t1","providerMetadata":{"google":{"thoughtSignature":"c2ln"}}}"#,
            Chunk::TextStart(Boundary {
                id: "t1".into(),
                provider_metadata: google(),
            }),
        ),
        (
            r#"{"type":"text-delta","id":"t1","delta":"Hel"}"#,
            Chunk::text_delta("t1", "Hel"),
        ),
        (r#"{"type":"text-end","id":"t1"}"#, Chunk::text_end("t1")),
        (
            r#"{"type":"reasoning-start","id":"r1"}"#,
            Chunk::reasoning_start("r1"),
        ),
        (
            r#"{"type":"reasoning-delta","id":"r1","delta":"thinking","providerMetadata":{"google":{"thoughtSignature":"c2ln"}}}"#,
            Chunk::ReasoningDelta(Delta {
                id: "r1".into(),
                delta: "thinking".into(),
                provider_metadata: google(),
            }),
        ),
        (
            r#"{"type":"reasoning-end","id":"r1"}"#,
            Chunk::reasoning_end("r1"),
        ),
        (
            r#"{"type":"tool-input-start","toolCallId":"call-1","toolName":"transfer_funds"}"#,
            Chunk::tool_input_start("call-1", "transfer_funds"),
        ),
        (
            r#"{"type":"tool-input-start","toolCallId":"call-1","toolName":"lookup","providerExecuted":true,"dynamic":true,"title":"Lookup","providerMetadata":{"google":{"thoughtSignature":"c2ln"}},"toolMetadata":{"icon":"search"}}"#,
            Chunk::ToolInputStart(Box::new(ToolInputStart {
                tool_call_id: "call-1".into(),
                tool_name: "lookup".into(),
                provider_executed: Some(true),
                dynamic: Some(true),
                title: Some("Lookup".into()),
                provider_metadata: google(),
                tool_metadata: Some(metadata(json!({"icon": "search"}))),
            })),
        ),
        (
            r#"{"type":"tool-input-delta","toolCallId":"call-1","inputTextDelta":"{\"amo"}"#,
            Chunk::tool_input_delta("call-1", "{\"amo"),
        ),
        (
            r#"{"type":"tool-input-available","toolCallId":"call-1","toolName":"transfer_funds","input":{"amount":25}}"#,
            Chunk::tool_input_available("call-1", "transfer_funds", json!({"amount": 25})),
        ),
        (
            r#"{"type":"tool-input-available","toolCallId":"call-1","toolName":"transfer_funds","input":{},"providerExecuted":false,"providerMetadata":{"google":{"thoughtSignature":"c2ln"}},"dynamic":false,"title":"Pay","toolMetadata":{"risk":"high"}}"#,
            Chunk::ToolInputAvailable(Box::new(ToolInputAvailable {
                tool_call_id: "call-1".into(),
                tool_name: "transfer_funds".into(),
                input: json!({}),
                provider_executed: Some(false),
                provider_metadata: google(),
                dynamic: Some(false),
                title: Some("Pay".into()),
                tool_metadata: Some(metadata(json!({"risk": "high"}))),
            })),
        ),
        (
            r#"{"type":"tool-input-error","toolCallId":"call-2","toolName":"transfer_funds","input":"{amount:","errorText":"Invalid JSON input"}"#,
            Chunk::tool_input_error(
                "call-2",
                "transfer_funds",
                json!("{amount:"),
                "Invalid JSON input",
            ),
        ),
        (
            r#"{"type":"tool-approval-request","approvalId":"appr-1","toolCallId":"call-1"}"#,
            Chunk::tool_approval_request("appr-1", "call-1"),
        ),
        (
            r#"{"type":"tool-approval-request","approvalId":"appr-1","toolCallId":"call-1","signature":"hmac"}"#,
            Chunk::ToolApprovalRequest(Box::new(ToolApprovalRequest {
                approval_id: "appr-1".into(),
                tool_call_id: "call-1".into(),
                signature: Some("hmac".into()),
                ..Default::default()
            })),
        ),
        (
            r#"{"type":"tool-output-available","toolCallId":"call-1","output":{"ok":true}}"#,
            Chunk::tool_output_available("call-1", json!({"ok": true})),
        ),
        (
            r#"{"type":"tool-output-available","toolCallId":"call-1","output":null,"providerExecuted":true,"dynamic":true,"preliminary":true,"providerMetadata":{"google":{"thoughtSignature":"c2ln"}},"toolMetadata":{"x":1}}"#,
            Chunk::ToolOutputAvailable(Box::new(ToolOutputAvailable {
                tool_call_id: "call-1".into(),
                output: Value::Null,
                provider_executed: Some(true),
                dynamic: Some(true),
                preliminary: Some(true),
                provider_metadata: google(),
                tool_metadata: Some(metadata(json!({"x": 1}))),
            })),
        ),
        (
            r#"{"type":"tool-output-error","toolCallId":"call-1","errorText":"Insufficient funds"}"#,
            Chunk::tool_output_error("call-1", "Insufficient funds"),
        ),
        (
            r#"{"type":"tool-output-error","toolCallId":"call-1","errorText":"x","providerExecuted":false,"dynamic":false,"providerMetadata":{"p":{}},"toolMetadata":{}}"#,
            Chunk::ToolOutputError(Box::new(ToolOutputError {
                tool_call_id: "call-1".into(),
                error_text: "x".into(),
                provider_executed: Some(false),
                dynamic: Some(false),
                provider_metadata: Some(metadata(json!({"p": {}}))),
                tool_metadata: Some(Map::new()),
            })),
        ),
        (
            r#"{"type":"tool-output-denied","toolCallId":"call-1"}"#,
            Chunk::tool_output_denied("call-1"),
        ),
        (
            r#"{"type":"source-url","sourceId":"src-1","url":"https://example.test/a"}"#,
            Chunk::source_url("src-1", "https://example.test/a"),
        ),
        (
            r#"{"type":"source-url","sourceId":"src-1","url":"https://example.test/a","title":"A","providerMetadata":{"p":{"k":1}}}"#,
            Chunk::SourceUrl(SourceUrl {
                source_id: "src-1".into(),
                url: "https://example.test/a".into(),
                title: Some("A".into()),
                provider_metadata: Some(metadata(json!({"p": {"k": 1}}))),
            }),
        ),
        (
            r#"{"type":"source-document","sourceId":"doc-1","mediaType":"application/pdf","title":"Terms","filename":"terms.pdf"}"#,
            Chunk::SourceDocument(SourceDocument {
                source_id: "doc-1".into(),
                media_type: "application/pdf".into(),
                title: "Terms".into(),
                filename: Some("terms.pdf".into()),
                provider_metadata: None,
            }),
        ),
        (
            r#"{"type":"file","url":"data:image/png;base64,AAAA","mediaType":"image/png"}"#,
            Chunk::file("data:image/png;base64,AAAA", "image/png"),
        ),
        (
            r#"{"type":"data-weather","data":{"celsius":9.5}}"#,
            Chunk::data("weather", json!({"celsius": 9.5})),
        ),
        (
            r#"{"type":"data-progress","id":"p1","data":{"pct":40},"transient":false}"#,
            Chunk::Data(DataChunk {
                name: "progress".into(),
                id: Some("p1".into()),
                data: json!({"pct": 40}),
                transient: Some(false),
            }),
        ),
        (
            r#"{"type":"data-pcm","data":{"content":"AAAA","sampleRate":24000},"transient":true}"#,
            Chunk::transient_data("pcm", json!({"content": "AAAA", "sampleRate": 24000})),
        ),
        (
            r#"{"type":"reasoning-file","url":"data:,x","mediaType":"text/plain","extra":[1,2]}"#,
            Chunk::Unknown(
                json!({"type": "reasoning-file", "url": "data:,x", "mediaType": "text/plain", "extra": [1, 2]}),
            ),
        ),
    ]
}

#[test]
fn every_chunk_type_round_trips_through_the_wire_json() {
    for (text, expected) in wire_cases() {
        let decoded = Chunk::from_json(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(decoded, expected, "decode {text}");
        let wire: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            expected.to_value(Dialect::Full),
            Some(wire.clone()),
            "encode {text}"
        );
        // serde impls agree with the inherent methods.
        assert_eq!(serde_json::to_value(&expected).unwrap(), wire);
        assert_eq!(serde_json::from_str::<Chunk>(text).unwrap(), expected);
    }
}

#[test]
fn the_type_tag_is_serialized_first() {
    let text = Chunk::text_delta("t", "x").to_json(Dialect::Full).unwrap();
    assert_eq!(text, r#"{"type":"text-delta","id":"t","delta":"x"}"#);
}

#[test]
fn wire_type_names_data_and_unknown_chunks() {
    assert_eq!(Chunk::data("weather", json!(1)).wire_type(), "data-weather");
    assert_eq!(
        Chunk::Unknown(json!({"type": "custom"})).wire_type(),
        "custom"
    );
    assert_eq!(
        Chunk::tool_output_denied("c").wire_type(),
        "tool-output-denied"
    );
}

#[test]
fn known_type_with_a_missing_required_field_is_an_error() {
    for text in [
        r#"{"type":"text-delta","id":"t1"}"#,
        r#"{"type":"text-start"}"#,
        r#"{"type":"error"}"#,
        r#"{"type":"tool-input-start","toolCallId":"c"}"#,
        r#"{"type":"tool-approval-request","toolCallId":"c"}"#,
        r#"{"type":"source-document","sourceId":"d","mediaType":"x"}"#,
        r#"{"type":"file","url":"u"}"#,
    ] {
        match Chunk::from_json(text) {
            Err(ChunkDecodeError::InvalidFields { chunk_type, .. }) => {
                assert_eq!(
                    Some(chunk_type.as_str()),
                    serde_json::from_str::<Value>(text).unwrap()["type"].as_str()
                );
            }
            other => panic!("{text}: expected InvalidFields, got {other:?}"),
        }
    }
}

#[test]
fn known_type_with_a_mistyped_field_is_an_error() {
    let error = Chunk::from_json(r#"{"type":"text-delta","id":"t1","delta":5}"#).unwrap_err();
    assert!(
        matches!(error, ChunkDecodeError::InvalidFields { ref chunk_type, .. } if chunk_type == "text-delta")
    );
    assert!(error.to_string().contains("text-delta"), "{error}");
    // providerMetadata must be an object (Record<string, Record<...>>).
    assert!(Chunk::from_json(r#"{"type":"text-end","id":"t","providerMetadata":"x"}"#).is_err());
    // finishReason must be a string even though any string is accepted.
    assert!(Chunk::from_json(r#"{"type":"finish","finishReason":3}"#).is_err());
}

#[test]
fn not_a_chunk_at_all_is_a_typed_error() {
    assert!(matches!(
        Chunk::from_json("{"),
        Err(ChunkDecodeError::Json(_))
    ));
    assert!(matches!(
        Chunk::from_json("[]"),
        Err(ChunkDecodeError::NotAnObject)
    ));
    assert!(matches!(
        Chunk::from_json(r#"{"delta":"x"}"#),
        Err(ChunkDecodeError::MissingType)
    ));
    assert!(matches!(
        Chunk::from_json(r#"{"type":null}"#),
        Err(ChunkDecodeError::MissingType)
    ));
}

#[test]
fn unknown_keys_on_known_types_are_ignored_like_a_loose_schema() {
    let chunk =
        Chunk::from_json(r#"{"type":"text-delta","id":"t","delta":"x","isAutomatic":true}"#)
            .unwrap();
    assert_eq!(chunk, Chunk::text_delta("t", "x"));
}

#[test]
fn explicit_null_metadata_is_kept_apart_from_absent() {
    let chunk = Chunk::from_json(r#"{"type":"start","messageMetadata":null}"#).unwrap();
    assert_eq!(
        chunk,
        Chunk::Start(Start {
            message_id: None,
            message_metadata: Some(Value::Null)
        })
    );
    assert_eq!(
        chunk.to_json(Dialect::Full).unwrap(),
        r#"{"type":"start","messageMetadata":null}"#
    );
}

#[test]
fn unknown_finish_reason_never_fails_and_is_sent_as_other_in_strict_mode() {
    let chunk = Chunk::from_json(r#"{"type":"finish","finishReason":"safety"}"#).unwrap();
    assert_eq!(
        chunk.to_value(Dialect::V6Strict),
        Some(json!({"type": "finish", "finishReason": "other"}))
    );
    assert_eq!(
        chunk.to_value(Dialect::Full),
        Some(json!({"type": "finish", "finishReason": "safety"}))
    );
}

/// Each post-6.0.0 key, set on its chunk: strict mode must drop exactly
/// that key and keep everything else.
#[test]
fn strict_dialect_drops_exactly_the_keys_added_after_6_0_0() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"type": "abort", "reason": "r"}), "reason"),
        (
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "providerMetadata": {"p": {}}}),
            "providerMetadata",
        ),
        (
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "toolMetadata": {"a": 1}}),
            "toolMetadata",
        ),
        (
            json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": {}, "toolMetadata": {"a": 1}}),
            "toolMetadata",
        ),
        (
            json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "t", "input": {}, "errorText": "e", "toolMetadata": {"a": 1}}),
            "toolMetadata",
        ),
        (
            json!({"type": "tool-approval-request", "approvalId": "a", "toolCallId": "c", "signature": "s"}),
            "signature",
        ),
        (
            json!({"type": "tool-output-available", "toolCallId": "c", "output": 1, "providerMetadata": {"p": {}}}),
            "providerMetadata",
        ),
        (
            json!({"type": "tool-output-available", "toolCallId": "c", "output": 1, "toolMetadata": {"a": 1}}),
            "toolMetadata",
        ),
        (
            json!({"type": "tool-output-error", "toolCallId": "c", "errorText": "e", "providerMetadata": {"p": {}}}),
            "providerMetadata",
        ),
        (
            json!({"type": "tool-output-error", "toolCallId": "c", "errorText": "e", "toolMetadata": {"a": 1}}),
            "toolMetadata",
        ),
    ];
    for (wire, dropped) in cases {
        let chunk = Chunk::from_value(wire.clone()).unwrap();
        assert_eq!(chunk.to_value(Dialect::Full), Some(wire.clone()));
        let mut expected = wire.clone();
        expected.as_object_mut().unwrap().remove(dropped);
        assert_eq!(chunk.to_value(Dialect::V6Strict), Some(expected), "{wire}");
    }
}

#[test]
fn strict_dialect_keeps_keys_that_6_0_0_already_had() {
    // providerMetadata on tool-input-available/-error and on text/reasoning
    // chunks, and title/dynamic/providerExecuted, are all in 6.0.0.
    for wire in [
        json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": {}, "providerMetadata": {"p": {}}, "title": "T", "dynamic": true, "providerExecuted": true}),
        json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "t", "input": {}, "errorText": "e", "providerMetadata": {"p": {}}}),
        json!({"type": "tool-output-available", "toolCallId": "c", "output": 1, "preliminary": true, "dynamic": true}),
        json!({"type": "text-delta", "id": "t", "delta": "d", "providerMetadata": {"p": {}}}),
        json!({"type": "data-x", "id": "i", "data": 1, "transient": true}),
        json!({"type": "start", "messageId": "m", "messageMetadata": {"a": 1}}),
    ] {
        let chunk = Chunk::from_value(wire.clone()).unwrap();
        assert!(matches!(
            chunk.for_dialect(Dialect::V6Strict),
            Some(Cow::Borrowed(_))
        ));
        assert_eq!(chunk.to_value(Dialect::V6Strict), Some(wire));
    }
}

#[test]
fn unknown_chunks_are_not_sent_in_strict_mode_but_are_verbatim_in_full() {
    let wire = json!({"type": "reset-step", "stepId": "s"});
    let chunk = Chunk::from_value(wire.clone()).unwrap();
    assert!(matches!(chunk, Chunk::Unknown(_)));
    assert_eq!(chunk.to_json(Dialect::V6Strict), None);
    assert_eq!(chunk.to_value(Dialect::Full), Some(wire));
}

#[test]
fn automatic_approvals_are_v7_only() {
    // A policy rule decided: v7 sees the automatic request and its response; a v6 client sees
    // neither (the request alone would read as one waiting for the person).
    let request = json!({
        "type": "tool-approval-request", "approvalId": "a", "toolCallId": "c",
        "approvalDescriptor": {"countersign": {"decision": "allowed_by_rule", "rule": "small"}},
        "isAutomatic": true
    });
    let response = json!({"type": "tool-approval-response", "approvalId": "a", "approved": true, "reason": "rule small"});
    for wire in [request, response] {
        let chunk = Chunk::from_value(wire.clone()).unwrap();
        assert!(!matches!(chunk, Chunk::Unknown(_)), "{wire}");
        assert_eq!(chunk.to_json(Dialect::V6Strict), None, "{wire}");
        assert_eq!(chunk.to_value(Dialect::Full), Some(wire));
    }
    // A request the person answers keeps its v7 words in full, and is plain in strict mode.
    let asked = json!({
        "type": "tool-approval-request", "approvalId": "a", "toolCallId": "c",
        "approvalDescriptor": {"countersign": {"decision": "asked", "rule": "big", "grantable": false}},
        "reason": "Asked by rule big"
    });
    let chunk = Chunk::from_value(asked.clone()).unwrap();
    assert_eq!(chunk.to_value(Dialect::Full), Some(asked));
    assert_eq!(
        chunk.to_value(Dialect::V6Strict),
        Some(json!({"type": "tool-approval-request", "approvalId": "a", "toolCallId": "c"}))
    );
    assert!(
        Chunk::from_value(json!({"type": "tool-approval-response", "approvalId": "a"})).is_err(),
        "approved is required"
    );
}

#[test]
fn default_dialect_is_strict() {
    assert_eq!(Dialect::default(), Dialect::V6Strict);
}

#[test]
fn a_chunk_stays_small() {
    // Every entry of a turn's log is a chunk, as big as its largest variant. The rare tool
    // payloads (two optional JSON maps each: 72 bytes apiece on the server, whose serde_json
    // keeps key order) are boxed; the rest stay within a text delta's size and a few words.
    let delta = std::mem::size_of::<Delta>();
    assert!(
        std::mem::size_of::<Chunk>() <= delta + 48,
        "Chunk {} bytes, Delta {delta}",
        std::mem::size_of::<Chunk>()
    );
}
