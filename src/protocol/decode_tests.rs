//! The hand-written chunk and part decoders (`chunk/decode.rs`, `message/decode.rs`) against
//! the serde derives they replaced.
//!
//! The test build still derives `Deserialize` on every payload struct; `old_chunk` and
//! `old_part` are the decoders as they were (`serde_json::from_value` per payload). Every
//! input below must give the same result from both: the same value, or the same error variant
//! with the same message (which names the first wrong field serde would have named).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::chunk::{Chunk, ChunkDecodeError};
use super::json_util::split_tagged;
use super::message::{PartDecodeError, UiPart};

// -- The reference: the decoders before the hand-written ones, verbatim. --

fn payload<T: DeserializeOwned>(chunk_type: &str, object: Value) -> Result<T, ChunkDecodeError> {
    serde_json::from_value(object).map_err(|source| ChunkDecodeError::InvalidFields {
        chunk_type: chunk_type.to_owned(),
        source,
    })
}

fn old_chunk(value: Value) -> Result<Chunk, ChunkDecodeError> {
    let (kind, map) = split_tagged(value)?;
    let object = Value::Object(map);
    let chunk = match kind.as_str() {
        "start" => Chunk::Start(payload(&kind, object)?),
        "start-step" => Chunk::StartStep,
        "finish-step" => Chunk::FinishStep,
        "finish" => Chunk::Finish(payload(&kind, object)?),
        "abort" => Chunk::Abort(payload(&kind, object)?),
        "error" => Chunk::Error(payload(&kind, object)?),
        "message-metadata" => Chunk::MessageMetadata(payload(&kind, object)?),
        "text-start" => Chunk::TextStart(payload(&kind, object)?),
        "text-delta" => Chunk::TextDelta(payload(&kind, object)?),
        "text-end" => Chunk::TextEnd(payload(&kind, object)?),
        "reasoning-start" => Chunk::ReasoningStart(payload(&kind, object)?),
        "reasoning-delta" => Chunk::ReasoningDelta(payload(&kind, object)?),
        "reasoning-end" => Chunk::ReasoningEnd(payload(&kind, object)?),
        "tool-input-start" => Chunk::ToolInputStart(payload(&kind, object)?),
        "tool-input-delta" => Chunk::ToolInputDelta(payload(&kind, object)?),
        "tool-input-available" => Chunk::ToolInputAvailable(payload(&kind, object)?),
        "tool-input-error" => Chunk::ToolInputError(payload(&kind, object)?),
        "tool-approval-request" => Chunk::ToolApprovalRequest(payload(&kind, object)?),
        "tool-approval-response" => Chunk::ToolApprovalResponse(payload(&kind, object)?),
        "tool-output-available" => Chunk::ToolOutputAvailable(payload(&kind, object)?),
        "tool-output-error" => Chunk::ToolOutputError(payload(&kind, object)?),
        "tool-output-denied" => Chunk::ToolOutputDenied(payload(&kind, object)?),
        "source-url" => Chunk::SourceUrl(payload(&kind, object)?),
        "source-document" => Chunk::SourceDocument(payload(&kind, object)?),
        "file" => Chunk::File(payload(&kind, object)?),
        other => match other.strip_prefix("data-") {
            Some(name) => {
                let mut data: super::chunk::DataChunk = payload(&kind, object)?;
                data.name = name.to_owned();
                Chunk::Data(data)
            }
            None => Chunk::Unknown(object),
        },
    };
    Ok(chunk)
}

fn part_payload<T: DeserializeOwned>(part_type: &str, object: Value) -> Result<T, PartDecodeError> {
    serde_json::from_value(object).map_err(|source| PartDecodeError::InvalidFields {
        part_type: part_type.to_owned(),
        source,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DynamicToolName {
    tool_name: String,
}

fn old_part(value: Value) -> Result<UiPart, PartDecodeError> {
    use super::message::{DataPart, ToolPart};
    let (kind, map) = split_tagged(value)?;
    let object = Value::Object(map);
    let part = match kind.as_str() {
        "text" => UiPart::Text(part_payload(&kind, object)?),
        "reasoning" => UiPart::Reasoning(part_payload(&kind, object)?),
        "source-url" => UiPart::SourceUrl(part_payload(&kind, object)?),
        "source-document" => UiPart::SourceDocument(part_payload(&kind, object)?),
        "file" => UiPart::File(part_payload(&kind, object)?),
        "step-start" => UiPart::StepStart,
        "dynamic-tool" => {
            let DynamicToolName { tool_name } = part_payload(&kind, object.clone())?;
            let mut tool: ToolPart = part_payload(&kind, object)?;
            tool.tool_name = tool_name;
            UiPart::DynamicTool(tool)
        }
        other => {
            if let Some(name) = other.strip_prefix("tool-") {
                let mut tool: ToolPart = part_payload(&kind, object)?;
                tool.tool_name = name.to_owned();
                UiPart::Tool(tool)
            } else if let Some(name) = other.strip_prefix("data-") {
                let mut data: DataPart = part_payload(&kind, object)?;
                data.name = name.to_owned();
                UiPart::Data(data)
            } else {
                UiPart::Unknown(object)
            }
        }
    };
    Ok(part)
}

// -- Inputs. --

/// Every chunk type with every key it has set to a valid value.
fn chunk_bases() -> Vec<Value> {
    let meta = json!({"google": {"thoughtSignature": "c2ln"}});
    let boundary = |kind: &str| json!({"type": kind, "id": "t1", "providerMetadata": meta});
    let delta =
        |kind: &str| json!({"type": kind, "id": "t1", "delta": "Hi", "providerMetadata": meta});
    vec![
        json!({"type": "start", "messageId": "m1", "messageMetadata": {"a": 1}}),
        json!({"type": "start-step"}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "stop", "messageMetadata": null}),
        json!({"type": "abort", "reason": "user"}),
        json!({"type": "error", "errorText": "boom"}),
        json!({"type": "message-metadata", "messageMetadata": {"usage": 1}}),
        boundary("text-start"),
        delta("text-delta"),
        boundary("text-end"),
        boundary("reasoning-start"),
        delta("reasoning-delta"),
        boundary("reasoning-end"),
        json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "pay", "providerExecuted": false, "dynamic": true, "title": "Pay", "providerMetadata": meta, "toolMetadata": {"risk": "high"}}),
        json!({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{\"a\""}),
        json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "pay", "input": {"a": 1}, "providerExecuted": false, "providerMetadata": meta, "dynamic": false, "title": "Pay", "toolMetadata": {}}),
        json!({"type": "tool-input-error", "toolCallId": "c1", "toolName": "pay", "input": "{a", "errorText": "bad", "providerExecuted": true, "providerMetadata": meta, "dynamic": true, "title": "Pay", "toolMetadata": {}}),
        json!({"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1", "signature": "hmac"}),
        json!({"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1", "approvalDescriptor": {"k": [1]}, "reason": "why", "isAutomatic": true}),
        json!({"type": "tool-approval-response", "approvalId": "a1", "approved": false, "reason": "no", "providerExecuted": false}),
        json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"ok": true}, "providerExecuted": true, "dynamic": true, "preliminary": true, "providerMetadata": meta, "toolMetadata": {"x": 1}}),
        json!({"type": "tool-output-error", "toolCallId": "c1", "errorText": "no", "providerExecuted": false, "dynamic": false, "providerMetadata": meta, "toolMetadata": {}}),
        json!({"type": "tool-output-denied", "toolCallId": "c1"}),
        json!({"type": "source-url", "sourceId": "s1", "url": "https://example.test", "title": "A", "providerMetadata": meta}),
        json!({"type": "source-document", "sourceId": "d1", "mediaType": "application/pdf", "title": "Terms", "filename": "t.pdf", "providerMetadata": meta}),
        json!({"type": "file", "url": "data:,x", "mediaType": "text/plain", "providerMetadata": meta}),
        json!({"type": "data-weather", "id": "w1", "data": {"celsius": 9.5}, "transient": false}),
        json!({"type": "data-", "data": 1}),
        json!({"type": "reasoning-file", "url": "data:,x", "mediaType": "text/plain"}),
    ]
}

/// Every part type with every key it has set to a valid value.
fn part_bases() -> Vec<Value> {
    let meta = json!({"google": {"thoughtSignature": "c2ln"}});
    let tool = json!({
        "toolCallId": "c1", "state": "output-available", "title": "Pay", "input": {"a": 1},
        "output": null, "rawInput": "{a", "errorText": "e",
        "approval": {"id": "a1", "approved": true, "reason": "ok", "signature": "s", "editedInput": {"a": 2}},
        "providerExecuted": false, "callProviderMetadata": meta, "resultProviderMetadata": {},
        "preliminary": true, "toolMetadata": {"x": 1}
    });
    let with_type = |kind: &str, extra: &[(&str, Value)]| {
        let mut object = tool.as_object().cloned().unwrap_or_default();
        object.insert("type".into(), json!(kind));
        for (key, value) in extra {
            object.insert((*key).into(), value.clone());
        }
        Value::Object(object)
    };
    vec![
        json!({"type": "text", "text": "Hi", "state": "done", "providerMetadata": meta}),
        json!({"type": "reasoning", "id": "r1", "text": "hm", "state": "streaming", "providerMetadata": meta}),
        json!({"type": "source-url", "sourceId": "s1", "url": "https://example.test", "title": "A", "providerMetadata": meta}),
        json!({"type": "source-document", "sourceId": "d1", "mediaType": "application/pdf", "title": "Terms", "filename": "t.pdf", "providerMetadata": meta}),
        json!({"type": "file", "mediaType": "image/png", "url": "data:,x", "filename": "x.png", "providerMetadata": meta}),
        json!({"type": "step-start"}),
        json!({"type": "data-question", "id": "q1", "data": {"state": "open"}}),
        with_type("tool-transfer_funds", &[]),
        with_type("tool-", &[]),
        with_type("dynamic-tool", &[("toolName", json!("mcp_lookup"))]),
        json!({"type": "custom", "anything": [1, 2]}),
    ]
}

/// Values each key is set to: every JSON type, the strings and objects the enums and
/// `approval` accept (and nearly accept), and `None` for an absent key.
fn palette() -> Vec<Option<Value>> {
    let values = [
        json!(null),
        json!(true),
        json!(false),
        json!(0),
        json!(7),
        json!(-3),
        json!(1.5),
        json!(""),
        json!("x"),
        json!("done"),
        json!("streaming"),
        json!("input-available"),
        json!("output-denied"),
        json!("call"),
        json!([]),
        json!([5]),
        json!([null]),
        json!(["a"]),
        json!(["a", "yes"]),
        json!(["a", true, "r", "s", {"x": 1}]),
        json!(["a", null, null, null, null]),
        json!(["a", true, "r", "s", null, 9]),
        json!({}),
        json!({"a": 1}),
        json!({"google": {"s": "x"}}),
        json!({"done": null}),
        json!({"output-error": null}),
        json!({"done": 1}),
        json!({"nope": null}),
        json!({"done": null, "streaming": null}),
        json!({"id": "a1"}),
        json!({"id": null}),
        json!({"approved": true}),
        json!({"id": "a1", "approved": "yes", "reason": 5}),
        json!({"id": 5, "signature": false}),
        json!({"id": "a1", "editedInput": null}),
        json!({"id": "a1", "editedInput": [1]}),
    ];
    std::iter::once(None)
        .chain(values.into_iter().map(Some))
        .collect()
}

/// The keys of `base` that are worth mutating: its own (but `type`) and one it does not know.
fn keys(base: &Value) -> Vec<String> {
    let mut keys: Vec<String> = base
        .as_object()
        .map(|object| object.keys().filter(|k| *k != "type").cloned().collect())
        .unwrap_or_default();
    keys.push("extra".into());
    keys
}

fn with(base: &Value, changes: &[(&str, &Option<Value>)]) -> Value {
    let mut object = base.as_object().cloned().unwrap_or_default();
    for (key, value) in changes {
        match value {
            Some(value) => object.insert((*key).to_owned(), value.clone()),
            None => object.remove(*key),
        };
    }
    Value::Object(object)
}

/// `base`, each key set to each palette value, each pair of keys set to pairs from the
/// start of the palette, and pseudo-random mixes of all keys.
fn mutations(base: &Value) -> Vec<Value> {
    let palette = palette();
    let keys = keys(base);
    let mut out = vec![base.clone()];
    for key in &keys {
        for value in &palette {
            out.push(with(base, &[(key, value)]));
        }
    }
    let few = &palette[..12];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            for x in few {
                for y in few {
                    out.push(with(base, &[(a, x), (b, y)]));
                }
            }
        }
    }
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..400 {
        let mut changes = Vec::new();
        for key in &keys {
            let roll = next();
            if roll % 3 == 0 {
                changes.push((key.as_str(), &palette[(roll >> 8) as usize % palette.len()]));
            }
        }
        out.push(with(base, &changes));
    }
    out
}

#[test]
fn the_comparisons_feed_objects_in_key_order() {
    // `Fields` reports the mistyped key that sorts first; serde's derive reports the first one
    // in the map's order. The browser's serde_json keeps maps sorted; the server's keeps the
    // order keys came in (`preserve_order`, turned on by the policy engine), where of several
    // mistyped keys the derive would name the first sent and `Fields` names the first by name.
    // The comparisons below feed objects with their keys in order, so both name the same one.
    let mut map = Map::new();
    map.insert("b".into(), json!(1));
    map.insert("a".into(), json!(2));
    let sorted = super::json_util::sorted(&Value::Object(map));
    assert_eq!(
        sorted.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["a", "b"]
    );
}

#[test]
fn chunks_decode_exactly_as_the_derives_did() {
    let mut errors = 0;
    let mut total = 0;
    for base in chunk_bases() {
        for input in mutations(&base) {
            let input = super::json_util::sorted(&input);
            let new = Chunk::from_value(input.clone());
            let old = old_chunk(input.clone());
            assert_eq!(format!("{new:?}"), format!("{old:?}"), "{input}");
            errors += usize::from(new.is_err());
            total += 1;
        }
    }
    // Both outcomes are well represented.
    assert!(
        errors > total / 10 && errors < total * 9 / 10,
        "{errors} of {total}"
    );
}

#[test]
fn parts_decode_exactly_as_the_derives_did() {
    let mut errors = 0;
    let mut total = 0;
    for base in part_bases() {
        for input in mutations(&base) {
            let input = super::json_util::sorted(&input);
            let new = UiPart::from_value(input.clone());
            let old = old_part(input.clone());
            assert_eq!(format!("{new:?}"), format!("{old:?}"), "{input}");
            errors += usize::from(new.is_err());
            total += 1;
        }
    }
    assert!(
        errors > total / 10 && errors < total * 9 / 10,
        "{errors} of {total}"
    );
}

#[test]
fn approvals_decode_exactly_as_the_derive_did() {
    // The approval object and its array form, field by field.
    let base = json!({"id": "a1", "approved": false, "reason": "no", "signature": "s", "editedInput": {"a": 1}});
    let mut inputs = mutations(&base);
    inputs.extend(palette().into_iter().flatten());
    for approval in inputs {
        let part = super::json_util::sorted(
            &json!({"type": "tool-x", "toolCallId": "c", "state": "approval-responded", "approval": approval}),
        );
        let new = UiPart::from_value(part.clone());
        let old = old_part(part.clone());
        assert_eq!(format!("{new:?}"), format!("{old:?}"), "{part}");
    }
}

/// The message of an `InvalidFields` error, or a description of what came instead.
fn chunk_error(input: Value) -> String {
    match Chunk::from_value(input) {
        Err(ChunkDecodeError::InvalidFields { chunk_type, source }) => {
            format!("{chunk_type}: {source}")
        }
        other => format!("not InvalidFields: {other:?}"),
    }
}

fn part_error(input: Value) -> String {
    match UiPart::from_value(input) {
        Err(PartDecodeError::InvalidFields { part_type, source }) => {
            format!("{part_type}: {source}")
        }
        other => format!("not InvalidFields: {other:?}"),
    }
}

#[test]
fn hostile_chunks_are_invalid_fields_with_serde_messages() {
    for (input, expected) in [
        (
            json!({"type": "text-delta", "id": "t", "delta": 5}),
            "text-delta: invalid type: integer `5`, expected a string",
        ),
        (
            json!({"type": "text-delta", "id": "t", "delta": -5}),
            "text-delta: invalid type: integer `-5`, expected a string",
        ),
        (
            json!({"type": "text-delta", "id": "t", "delta": 1.5}),
            "text-delta: invalid type: floating point `1.5`, expected a string",
        ),
        (
            json!({"type": "error", "errorText": null}),
            "error: invalid type: null, expected a string",
        ),
        (json!({"type": "error"}), "error: missing field `errorText`"),
        (
            json!({"type": "text-start", "id": "t", "providerMetadata": "x"}),
            "text-start: invalid type: string \"x\", expected a map",
        ),
        (
            json!({"type": "text-start", "id": "t", "providerMetadata": [1]}),
            "text-start: invalid type: sequence, expected a map",
        ),
        (
            json!({"type": "finish", "finishReason": 3}),
            "finish: invalid type: integer `3`, expected a string",
        ),
        (
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "dynamic": "yes"}),
            "tool-input-start: invalid type: string \"yes\", expected a boolean",
        ),
        (
            json!({"type": "data-x", "transient": 1}),
            "data-x: invalid type: integer `1`, expected a boolean",
        ),
        // Two missing: the first declared is named.
        (
            json!({"type": "tool-input-delta"}),
            "tool-input-delta: missing field `toolCallId`",
        ),
        (
            json!({"type": "source-document", "title": "T"}),
            "source-document: missing field `sourceId`",
        ),
        // Mistyped beats missing, whatever the order.
        (
            json!({"type": "text-delta", "id": "t", "providerMetadata": false}),
            "text-delta: invalid type: boolean `false`, expected a map",
        ),
        // Two mistyped: the key that sorts first (`delta` < `id`) is named.
        (
            json!({"type": "text-delta", "id": 1, "delta": null}),
            "text-delta: invalid type: null, expected a string",
        ),
    ] {
        assert_eq!(chunk_error(input.clone()), expected, "{input}");
    }
}

#[test]
fn null_and_absent_keys_decode_as_the_derives_did() {
    // `null` is `None` for optional keys, and kept for `messageMetadata` on `start`.
    assert_eq!(
        Chunk::from_value(json!({"type": "start", "messageId": null, "messageMetadata": null}))
            .ok(),
        Some(Chunk::Start(super::chunk::Start {
            message_id: None,
            message_metadata: Some(Value::Null),
        }))
    );
    assert_eq!(
        Chunk::from_value(json!({"type": "tool-output-available", "toolCallId": "c"})).ok(),
        Some(Chunk::tool_output_available("c", Value::Null))
    );
    assert_eq!(
        Chunk::from_value(json!({"type": "text-end", "id": "t", "providerMetadata": null})).ok(),
        Some(Chunk::text_end("t"))
    );
}

#[test]
fn hostile_parts_are_invalid_fields_with_serde_messages() {
    for (input, expected) in [
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": "call"}),
            "tool-x: unknown variant `call`, expected one of `input-streaming`, `input-available`, `approval-requested`, `approval-responded`, `output-available`, `output-error`, `output-denied`",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": 3}),
            "tool-x: invalid type: integer `3`, expected string or map",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": {}}),
            "tool-x: invalid value: map, expected map with a single key",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": {"output-error": 1}}),
            "tool-x: invalid type: integer `1`, expected unit",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": null}),
            "tool-x: invalid type: null, expected string or map",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c"}),
            "tool-x: missing field `state`",
        ),
        (
            json!({"type": "text", "text": "x", "state": "open"}),
            "text: unknown variant `open`, expected `streaming` or `done`",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-denied", "approval": {"approved": false}}),
            "tool-x: missing field `id`",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-denied", "approval": "a1"}),
            "tool-x: invalid type: string \"a1\", expected struct Approval",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-denied", "approval": []}),
            "tool-x: invalid length 0, expected struct Approval with 11 elements",
        ),
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": "output-denied", "approval": ["a", true, "r", "s", null, {}, "why", true, null, false, null, 9]}),
            "tool-x: invalid length 12, expected fewer elements in array",
        ),
        (
            json!({"type": "dynamic-tool", "toolCallId": "c", "state": "input-available"}),
            "dynamic-tool: missing field `toolName`",
        ),
        // `toolName` is checked before the rest of a dynamic tool part.
        (
            json!({"type": "dynamic-tool", "toolName": 1, "toolCallId": 2}),
            "dynamic-tool: invalid type: integer `1`, expected a string",
        ),
        (
            json!({"type": "file", "url": "u"}),
            "file: missing field `mediaType`",
        ),
    ] {
        assert_eq!(part_error(input.clone()), expected, "{input}");
    }
}

#[test]
fn approvals_in_array_form_and_with_null_fields_decode_as_the_derive_did() {
    let decode = |approval: Value| {
        UiPart::from_value(json!({"type": "tool-x", "toolCallId": "c", "state": "approval-responded", "approval": approval}))
            .ok()
            .and_then(|part| part.as_tool().and_then(|tool| tool.approval.clone()))
    };
    let expected = super::message::Approval {
        id: "a1".into(),
        approved: Some(true),
        reason: None,
        signature: None,
        edited_input: None,
        ..Default::default()
    };
    assert_eq!(decode(json!(["a1", true])), Some(expected.clone()));
    // A plain `Option<Value>`: `editedInput: null` is `None`.
    assert_eq!(
        decode(json!({"id": "a1", "approved": true, "reason": null, "editedInput": null})),
        Some(expected)
    );
}
