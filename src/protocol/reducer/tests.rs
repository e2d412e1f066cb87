use serde_json::json;

use super::*;
use crate::protocol::envelope::Trigger;
use crate::protocol::message::{Approval, ReasoningPart, TextState, ToolState};

pub(super) fn reduce(chunks: &[Chunk]) -> MessageReducer {
    let mut reducer = MessageReducer::new("client-id");
    for chunk in chunks {
        reducer
            .apply(chunk)
            .unwrap_or_else(|e| panic!("{chunk:?}: {e}"));
    }
    reducer
}

#[test]
fn plain_text_stream_builds_a_done_text_part() {
    let reducer = reduce(&[
        Chunk::start("asst-1"),
        Chunk::start_step(),
        Chunk::text_start("t"),
        Chunk::text_delta("t", "Hel"),
        Chunk::text_delta("t", "lo"),
        Chunk::text_end("t"),
        Chunk::finish_step(),
        Chunk::finish(FinishReason::Stop),
    ]);
    let message = reducer.message();
    assert_eq!(message.id, "asst-1");
    assert_eq!(message.text(), "Hello");
    assert_eq!(
        serde_json::to_value(message).unwrap(),
        json!({"id": "asst-1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Hello", "state": "done"}
        ]})
    );
    assert_eq!(reducer.finish_reason(), Some(&FinishReason::Stop));
}

#[test]
fn start_without_id_keeps_the_client_id_and_is_quiet() {
    let mut reducer = MessageReducer::new("client-id");
    assert_eq!(
        reducer.apply(&Chunk::Start(Default::default())),
        Ok(Applied::Quiet)
    );
    assert_eq!(reducer.message().id, "client-id");
}

#[test]
fn metadata_merges_deeply_across_start_message_metadata_and_finish() {
    let mut reducer = MessageReducer::new("m");
    reducer
        .apply(&Chunk::Start(chunk::Start {
            message_id: None,
            message_metadata: Some(json!({"model": "demo", "usage": {"in": 1}})),
        }))
        .unwrap();
    reducer
        .apply(&Chunk::message_metadata(json!({"usage": {"out": 2}})))
        .unwrap();
    assert_eq!(
        reducer.apply(&Chunk::message_metadata(Value::Null)),
        Ok(Applied::Quiet)
    );
    let applied = reducer
        .apply(&Chunk::Finish(chunk::Finish {
            finish_reason: Some(FinishReason::Stop),
            message_metadata: Some(json!({"usage": {"in": 5}})),
        }))
        .unwrap();
    assert_eq!(
        applied,
        Applied::Finished {
            finish_reason: Some(FinishReason::Stop),
            metadata_updated: true
        }
    );
    assert!(applied.publishes());
    assert_eq!(
        reducer.message().metadata,
        Some(json!({"model": "demo", "usage": {"in": 5, "out": 2}}))
    );
}

#[test]
fn reasoning_parts_record_their_id() {
    let reducer = reduce(&[
        Chunk::reasoning_start("r0"),
        Chunk::reasoning_delta("r0", "think"),
        Chunk::reasoning_end("r0"),
    ]);
    assert_eq!(
        reducer.message().parts,
        vec![UiPart::Reasoning(ReasoningPart {
            id: Some("r0".into()),
            text: "think".into(),
            state: Some(TextState::Done),
            provider_metadata: None
        })]
    );
}

#[test]
fn delta_provider_metadata_replaces_only_when_present() {
    let signature = json!({"google": {"thoughtSignature": "abc"}});
    let reducer = reduce(&[
        Chunk::text_start("t"),
        Chunk::TextDelta(chunk::Delta {
            id: "t".into(),
            delta: "a".into(),
            provider_metadata: signature.as_object().cloned(),
        }),
        Chunk::text_delta("t", "b"),
        Chunk::text_end("t"),
    ]);
    let UiPart::Text(text) = &reducer.message().parts[0] else {
        panic!("not text")
    };
    assert_eq!(text.provider_metadata, signature.as_object().cloned());
}

#[test]
fn streamed_tool_input_is_parsed_as_partial_json() {
    let mut reducer = MessageReducer::new("m");
    reducer
        .apply(&Chunk::tool_input_start("c1", "transfer_funds"))
        .unwrap();
    let tool = reducer.message().find_tool_part("c1").unwrap();
    assert_eq!(
        (tool.state, tool.input.clone()),
        (ToolState::InputStreaming, None)
    );

    for (delta, expected) in [
        (r#"{"recipient": "Ri"#, json!({"recipient": "Ri"})),
        (
            r#"n", "amount": 2"#,
            json!({"recipient": "Rin", "amount": 2}),
        ),
        ("5}", json!({"recipient": "Rin", "amount": 25})),
    ] {
        reducer
            .apply(&Chunk::tool_input_delta("c1", delta))
            .unwrap();
        assert_eq!(
            reducer.message().find_tool_part("c1").unwrap().input,
            Some(expected)
        );
    }
    reducer
        .apply(&Chunk::tool_input_available(
            "c1",
            "transfer_funds",
            json!({"recipient": "Rin", "amount": 25}),
        ))
        .unwrap();
    let tool = reducer.message().find_tool_part("c1").unwrap();
    assert_eq!(tool.state, ToolState::InputAvailable);
    assert_eq!(reducer.message().parts.len(), 1, "updated in place");
}

#[test]
fn unparseable_partial_input_clears_input() {
    let mut reducer = MessageReducer::new("m");
    reducer.apply(&Chunk::tool_input_start("c1", "t")).unwrap();
    reducer
        .apply(&Chunk::tool_input_delta("c1", "{\"a\": 1"))
        .unwrap();
    reducer.apply(&Chunk::tool_input_delta("c1", " x")).unwrap();
    assert_eq!(reducer.message().find_tool_part("c1").unwrap().input, None);
}

#[test]
fn tool_input_available_needs_no_start_and_keeps_call_provider_metadata() {
    let metadata = json!({"google": {"thoughtSignature": "sig"}});
    let reducer = reduce(&[Chunk::ToolInputAvailable(Box::new(
        chunk::ToolInputAvailable {
            tool_call_id: "c1".into(),
            tool_name: "get_weather".into(),
            input: json!({"city": "Oslo"}),
            provider_metadata: metadata.as_object().cloned(),
            ..Default::default()
        },
    ))]);
    assert_eq!(
        serde_json::to_value(&reducer.message().parts[0]).unwrap(),
        json!({"type": "tool-get_weather", "toolCallId": "c1", "state": "input-available",
               "input": {"city": "Oslo"}, "callProviderMetadata": metadata})
    );
}

#[test]
fn dynamic_tools_become_dynamic_tool_parts() {
    let reducer = reduce(&[
        Chunk::ToolInputStart(Box::new(chunk::ToolInputStart {
            tool_call_id: "c1".into(),
            tool_name: "mcp_search".into(),
            dynamic: Some(true),
            title: Some("Search".into()),
            ..Default::default()
        })),
        Chunk::tool_input_delta("c1", "{\"q\":\"ru"),
        Chunk::tool_output_available("c1", json!(["hit"])),
    ]);
    assert_eq!(
        serde_json::to_value(&reducer.message().parts[0]).unwrap(),
        json!({"type": "dynamic-tool", "toolName": "mcp_search", "toolCallId": "c1", "state": "output-available",
               "title": "Search", "input": {"q": "ru"}, "output": ["hit"]})
    );
}

#[test]
fn tool_input_error_on_a_static_tool_keeps_the_bad_input_as_raw_input() {
    let reducer = reduce(&[
        Chunk::tool_input_start("c1", "transfer_funds"),
        Chunk::tool_input_error("c1", "transfer_funds", json!("{amount: x"), "Invalid input"),
    ]);
    assert_eq!(
        serde_json::to_value(&reducer.message().parts).unwrap(),
        json!([{"type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-error",
                "rawInput": "{amount: x", "errorText": "Invalid input"}])
    );
    // A dynamic part in the current step decides the kind, whatever the flag says.
    let reducer = reduce(&[
        Chunk::ToolInputStart(Box::new(chunk::ToolInputStart {
            tool_call_id: "c2".into(),
            tool_name: "d".into(),
            dynamic: Some(true),
            ..Default::default()
        })),
        Chunk::tool_input_error("c2", "d", json!({"x": 1}), "bad"),
    ]);
    assert_eq!(reducer.message().parts.len(), 1);
    let UiPart::DynamicTool(tool) = &reducer.message().parts[0] else {
        panic!("kind changed")
    };
    assert_eq!(
        (tool.state, tool.input.clone(), tool.raw_input.clone()),
        (ToolState::OutputError, Some(json!({"x": 1})), None)
    );
}

#[test]
fn approval_then_output_keeps_the_approval_and_input() {
    let mut conversation = Conversation::new(vec![UiMessage::user_text("u1", "pay")]);
    conversation.begin_stream(Trigger::SubmitMessage, "fresh");
    for chunk in [
        Chunk::start("a1"),
        Chunk::tool_input_available("c1", "transfer_funds", json!({"amount": 25})),
        Chunk::ToolApprovalRequest(Box::new(chunk::ToolApprovalRequest {
            approval_id: "ap1".into(),
            tool_call_id: "c1".into(),
            signature: Some("sig".into()),
            ..Default::default()
        })),
    ] {
        conversation.apply(&chunk).unwrap();
    }
    assert_eq!(
        conversation.add_tool_approval_response("ap1", true, None),
        1
    );
    assert_eq!(
        conversation.add_tool_approval_response("ap1", true, None),
        0,
        "only approval-requested parts"
    );
    conversation
        .apply(&Chunk::tool_output_available("c1", json!({"ok": true})))
        .unwrap();
    let tool = conversation.messages()[1].find_tool_part("c1").unwrap();
    assert_eq!(tool.state, ToolState::OutputAvailable);
    assert_eq!(tool.input, Some(json!({"amount": 25})));
    assert_eq!(
        tool.approval,
        Some(Approval {
            id: "ap1".into(),
            approved: Some(true),
            reason: None,
            signature: Some("sig".into()),
            edited_input: None,
            ..Default::default()
        })
    );
}

#[test]
fn output_denied_keeps_the_approval() {
    let mut reducer = reduce(&[
        Chunk::tool_input_available("c1", "t", json!({})),
        Chunk::tool_approval_request("ap1", "c1"),
    ]);
    let mut message = reducer.message().clone();
    if let Some(tool) = message.parts[0].as_tool_mut() {
        tool.state = ToolState::ApprovalResponded;
        tool.approval = Some(Approval {
            id: "ap1".into(),
            approved: Some(false),
            reason: Some("no".into()),
            signature: None,
            edited_input: None,
            ..Default::default()
        });
    }
    reducer = MessageReducer::continuing(message);
    reducer.apply(&Chunk::tool_output_denied("c1")).unwrap();
    let tool = reducer.message().find_tool_part("c1").unwrap();
    assert_eq!(tool.state, ToolState::OutputDenied);
    assert_eq!(tool.approval.as_ref().and_then(|a| a.approved), Some(false));
}

#[test]
fn output_provider_metadata_goes_to_result_provider_metadata() {
    let reducer = reduce(&[
        Chunk::tool_input_available("c1", "t", json!({})),
        Chunk::ToolOutputAvailable(Box::new(chunk::ToolOutputAvailable {
            tool_call_id: "c1".into(),
            output: json!(1),
            provider_metadata: json!({"p": {"k": 1}}).as_object().cloned(),
            provider_executed: Some(true),
            preliminary: Some(true),
            ..Default::default()
        })),
        // A later output without providerExecuted keeps it; preliminary is replaced.
        Chunk::tool_output_available("c1", json!(2)),
    ]);
    let tool = reducer.message().find_tool_part("c1").unwrap();
    assert_eq!(
        tool.result_provider_metadata,
        json!({"p": {"k": 1}}).as_object().cloned()
    );
    assert_eq!(tool.call_provider_metadata, None);
    assert_eq!(tool.provider_executed, Some(true));
    assert_eq!(tool.preliminary, None);
    assert_eq!(tool.output, Some(json!(2)));
}

#[test]
fn raw_input_is_cleared_by_a_static_result_but_kept_on_dynamic_tools() {
    // Static: a later output replaces the failed input's rawInput.
    let reducer = reduce(&[
        Chunk::tool_input_error("c1", "t", json!("{bad"), "Invalid input"),
        Chunk::tool_output_available("c1", json!(1)),
    ]);
    assert_eq!(
        reducer.message().find_tool_part("c1").unwrap().raw_input,
        None
    );
    // Static: an output error keeps it.
    let reducer = reduce(&[
        Chunk::tool_input_error("c1", "t", json!("{bad"), "Invalid input"),
        Chunk::tool_output_error("c1", "still bad"),
    ]);
    assert_eq!(
        reducer.message().find_tool_part("c1").unwrap().raw_input,
        Some(json!("{bad"))
    );
    // Dynamic: updates without rawInput keep the stored one.
    let message: UiMessage = serde_json::from_value(json!({"id": "m", "role": "assistant", "parts": [
        {"type": "dynamic-tool", "toolName": "d", "toolCallId": "c2", "state": "output-error", "rawInput": "{x", "errorText": "e"}
    ]}))
    .unwrap();
    let mut reducer = MessageReducer::continuing(message);
    reducer
        .apply(&Chunk::tool_output_available("c2", json!(2)))
        .unwrap();
    assert_eq!(
        reducer.message().find_tool_part("c2").unwrap().raw_input,
        Some(json!("{x"))
    );
}

#[test]
fn tool_lookup_prefers_the_current_step() {
    // The same call id in two steps (a provider re-using ids): results go
    // to the current step's part.
    let reducer = reduce(&[
        Chunk::start_step(),
        Chunk::tool_input_available("c1", "t", json!({"n": 1})),
        Chunk::finish_step(),
        Chunk::start_step(),
        Chunk::tool_input_available("c1", "t", json!({"n": 2})),
        Chunk::tool_output_available("c1", json!("second")),
    ]);
    let tools: Vec<_> = reducer.message().tool_parts().collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0].state, ToolState::InputAvailable);
    assert_eq!(tools[1].output, Some(json!("second")));
}

#[test]
fn data_parts_replace_by_name_and_id_and_transient_ones_are_not_stored() {
    let mut reducer = MessageReducer::new("m");
    for chunk in [
        Chunk::data_with_id("progress", "p1", json!({"pct": 10})),
        Chunk::data_with_id("status", "p1", json!("other name, same id")),
        Chunk::data("note", json!(1)),
        Chunk::data("note", json!(2)),
        Chunk::data_with_id("progress", "p1", json!({"pct": 90})),
    ] {
        assert_eq!(reducer.apply(&chunk), Ok(Applied::Updated));
    }
    let transient = Chunk::transient_data("pcm", json!("AAAA"));
    let Chunk::Data(expected) = transient.clone() else {
        unreachable!()
    };
    assert_eq!(reducer.apply(&transient), Ok(Applied::Transient(expected)));
    assert_eq!(
        serde_json::to_value(&reducer.message().parts).unwrap(),
        json!([
            {"type": "data-progress", "id": "p1", "data": {"pct": 90}},
            {"type": "data-status", "id": "p1", "data": "other name, same id"},
            {"type": "data-note", "data": 1},
            {"type": "data-note", "data": 2}
        ])
    );
}

#[test]
fn sources_and_files_are_appended() {
    let reducer = reduce(&[
        Chunk::source_url("s1", "https://example.test"),
        Chunk::SourceDocument(chunk::SourceDocument {
            source_id: "d1".into(),
            media_type: "application/pdf".into(),
            title: "Terms".into(),
            ..Default::default()
        }),
        Chunk::file("data:image/png;base64,AA", "image/png"),
    ]);
    assert_eq!(
        serde_json::to_value(&reducer.message().parts).unwrap(),
        json!([
            {"type": "source-url", "sourceId": "s1", "url": "https://example.test"},
            {"type": "source-document", "sourceId": "d1", "mediaType": "application/pdf", "title": "Terms"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA"}
        ])
    );
}

#[test]
fn error_abort_and_unknown_chunks_do_not_touch_the_message() {
    let mut reducer = reduce(&[Chunk::text_start("t"), Chunk::text_delta("t", "partial")]);
    let before = reducer.message().clone();
    assert_eq!(
        reducer.apply(&Chunk::error("Model overloaded")),
        Ok(Applied::Error {
            error_text: "Model overloaded".into()
        })
    );
    assert_eq!(
        reducer.apply(&Chunk::abort()),
        Ok(Applied::Aborted { reason: None })
    );
    assert_eq!(
        reducer.apply(&Chunk::Unknown(json!({"type": "reset-step"}))),
        Ok(Applied::Ignored)
    );
    assert_eq!(reducer.message(), &before);
    assert_eq!(reducer.error_text(), Some("Model overloaded"));
    assert!(reducer.is_aborted());
    assert_eq!(reducer.abort_reason(), None);
}

// -- Error rules: each one leaves the message unchanged. --

fn assert_rejected(prefix: &[Chunk], bad: Chunk, expected: ReduceError) {
    let mut reducer = reduce(prefix);
    let before = reducer.clone();
    assert_eq!(reducer.apply(&bad), Err(expected));
    assert_eq!(reducer, before, "a rejected chunk changes nothing");
}

#[test]
fn deltas_and_ends_without_their_start_are_rejected() {
    assert_rejected(
        &[],
        Chunk::text_delta("t", "x"),
        ReduceError::TextDeltaWithoutStart { id: "t".into() },
    );
    assert_rejected(
        &[],
        Chunk::text_end("t"),
        ReduceError::TextEndWithoutStart { id: "t".into() },
    );
    assert_rejected(
        &[],
        Chunk::reasoning_delta("r", "x"),
        ReduceError::ReasoningDeltaWithoutStart { id: "r".into() },
    );
    assert_rejected(
        &[],
        Chunk::reasoning_end("r"),
        ReduceError::ReasoningEndWithoutStart { id: "r".into() },
    );
    // Ended parts are closed for good.
    assert_rejected(
        &[Chunk::text_start("t"), Chunk::text_end("t")],
        Chunk::text_delta("t", "late"),
        ReduceError::TextDeltaWithoutStart { id: "t".into() },
    );
    // A text id is per kind: a reasoning id does not open text.
    assert_rejected(
        &[Chunk::reasoning_start("x")],
        Chunk::text_delta("x", "d"),
        ReduceError::TextDeltaWithoutStart { id: "x".into() },
    );
    assert_rejected(
        &[],
        Chunk::tool_input_delta("c9", "{"),
        ReduceError::ToolInputDeltaWithoutStart {
            tool_call_id: "c9".into(),
        },
    );
}

#[test]
fn text_delta_after_finish_step_for_an_old_id_is_rejected() {
    assert_rejected(
        &[
            Chunk::start_step(),
            Chunk::text_start("t0"),
            Chunk::text_delta("t0", "a"),
            Chunk::finish_step(),
            Chunk::start_step(),
        ],
        Chunk::text_delta("t0", "b"),
        ReduceError::TextDeltaWithoutStart { id: "t0".into() },
    );
    assert_rejected(
        &[Chunk::reasoning_start("r0"), Chunk::finish_step()],
        Chunk::reasoning_end("r0"),
        ReduceError::ReasoningEndWithoutStart { id: "r0".into() },
    );
}

#[test]
fn results_and_approvals_for_unknown_tool_calls_are_rejected() {
    let not_found = |chunk_type, id: &str| ReduceError::ToolCallNotFound {
        chunk_type,
        tool_call_id: id.to_owned(),
    };
    let prefix = [Chunk::tool_input_available("c1", "t", json!({}))];
    assert_rejected(
        &prefix,
        Chunk::tool_output_available("c2", json!(1)),
        not_found("tool-output-available", "c2"),
    );
    assert_rejected(
        &prefix,
        Chunk::tool_output_error("c2", "x"),
        not_found("tool-output-error", "c2"),
    );
    assert_rejected(
        &prefix,
        Chunk::tool_output_denied("c2"),
        not_found("tool-output-denied", "c2"),
    );
    assert_rejected(
        &prefix,
        Chunk::tool_approval_request("ap", "c2"),
        not_found("tool-approval-request", "c2"),
    );
    assert_rejected(
        &[],
        Chunk::tool_approval_request("ap", "c1"),
        not_found("tool-approval-request", "c1"),
    );
}

#[test]
fn errors_read_well() {
    let error = ReduceError::ToolCallNotFound {
        chunk_type: "tool-output-available",
        tool_call_id: "c7".into(),
    };
    assert_eq!(
        error.to_string(),
        "tool-output-available: no tool invocation found for tool call `c7`"
    );
}
