use super::*;
use serde_json::json;

fn round_trip(wire: Value) -> UiPart {
    let part = UiPart::from_value(wire.clone()).unwrap_or_else(|e| panic!("{wire}: {e}"));
    assert_eq!(serde_json::to_value(&part).unwrap(), wire, "re-encode");
    let via_serde: UiPart = serde_json::from_value(wire).unwrap();
    assert_eq!(via_serde, part);
    part
}

#[test]
fn every_non_tool_part_round_trips() {
    let text = round_trip(json!({"type": "text", "text": "Hi", "state": "done"}));
    assert_eq!(
        text,
        UiPart::Text(TextPart {
            text: "Hi".into(),
            state: Some(TextState::Done),
            provider_metadata: None
        })
    );
    round_trip(
        json!({"type": "text", "text": "", "state": "streaming", "providerMetadata": {"p": {"k": 1}}}),
    );
    let reasoning =
        round_trip(json!({"type": "reasoning", "id": "r0", "text": "hm", "state": "done"}));
    assert!(matches!(
        reasoning,
        UiPart::Reasoning(ReasoningPart { id: Some(_), .. })
    ));
    round_trip(json!({"type": "reasoning", "text": "no id"}));
    round_trip(
        json!({"type": "source-url", "sourceId": "s", "url": "https://example.test", "title": "T"}),
    );
    round_trip(
        json!({"type": "source-document", "sourceId": "d", "mediaType": "application/pdf", "title": "Doc", "filename": "d.pdf"}),
    );
    let file = round_trip(
        json!({"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA", "filename": "a.png"}),
    );
    assert!(matches!(
        file,
        UiPart::File(FilePart {
            filename: Some(_),
            ..
        })
    ));
    assert_eq!(round_trip(json!({"type": "step-start"})), UiPart::StepStart);
    let data = round_trip(json!({"type": "data-weather", "id": "w1", "data": {"c": 9}}));
    assert_eq!(
        data,
        UiPart::Data(DataPart {
            name: "weather".into(),
            id: Some("w1".into()),
            data: json!({"c": 9})
        })
    );
    round_trip(json!({"type": "data-note", "data": "plain"}));
    let unknown = round_trip(json!({"type": "custom-widget", "anything": [1, {"x": null}]}));
    assert!(matches!(unknown, UiPart::Unknown(_)));
}

#[test]
fn tool_parts_round_trip_in_every_state() {
    let cases = [
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "input-streaming"}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "input-streaming", "input": {"amount": 2}}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "input-available", "input": {"amount": 25}, "callProviderMetadata": {"google": {"thoughtSignature": "c2ln"}}}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "approval-requested", "input": {"amount": 25}, "approval": {"id": "a1"}}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "approval-requested", "input": {"amount": 25}, "approval": {"id": "a1", "signature": "sig"}}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "approval-responded", "input": {"amount": 25}, "approval": {"id": "a1", "approved": true}}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-available", "input": {"amount": 25}, "output": {"ok": true}, "approval": {"id": "a1", "approved": true, "reason": "fine"}, "resultProviderMetadata": {"p": {}}}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-available", "input": {}, "output": null, "preliminary": true}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-error", "rawInput": "{bad", "errorText": "Invalid input"}),
        json!({"type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-denied", "input": {"amount": 25}, "approval": {"id": "a1", "approved": false, "reason": "too much"}}),
        json!({"type": "tool-search", "toolCallId": "c2", "state": "output-available", "input": {"q": "x"}, "output": [1], "providerExecuted": true, "title": "Search", "toolMetadata": {"icon": "s"}}),
    ];
    for wire in cases {
        let part = round_trip(wire.clone());
        let UiPart::Tool(tool) = &part else {
            panic!("{wire} is not a static tool part");
        };
        assert_eq!(tool.tool_call_id, wire["toolCallId"].as_str().unwrap());
        assert_eq!(tool.state.as_str(), wire["state"].as_str().unwrap());
        assert_eq!(
            format!("tool-{}", tool.tool_name),
            wire["type"].as_str().unwrap()
        );
    }
}

#[test]
fn approval_object_decodes_to_typed_fields() {
    let part = UiPart::from_value(json!({
        "type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-denied",
        "input": {"amount": 25}, "approval": {"id": "a1", "approved": false, "reason": "no"}
    }))
    .unwrap();
    let tool = part.as_tool().unwrap();
    assert_eq!(
        tool.approval,
        Some(Approval {
            id: "a1".into(),
            approved: Some(false),
            reason: Some("no".into()),
            signature: None,
            edited_input: None,
            ..Default::default()
        })
    );
    assert_eq!(tool.state, ToolState::OutputDenied);
}

#[test]
fn tool_names_with_dashes_keep_everything_after_the_first_prefix() {
    let part = round_trip(
        json!({"type": "tool-get-weather-v2", "toolCallId": "c", "state": "input-available", "input": {}}),
    );
    assert_eq!(part.as_tool().unwrap().tool_name, "get-weather-v2");
}

#[test]
fn dynamic_tool_carries_its_name_as_a_key() {
    let wire = json!({"type": "dynamic-tool", "toolName": "mcp_lookup", "toolCallId": "c3", "state": "output-error", "input": {"q": 1}, "errorText": "boom"});
    let part = round_trip(wire);
    let UiPart::DynamicTool(tool) = &part else {
        panic!("not dynamic");
    };
    assert_eq!(tool.tool_name, "mcp_lookup");
    assert!(
        UiPart::from_value(
            json!({"type": "dynamic-tool", "toolCallId": "c", "state": "input-available"})
        )
        .is_err()
    );
}

#[test]
fn a_static_tool_part_ignores_a_redundant_tool_name_key() {
    let part = UiPart::from_value(json!({"type": "tool-x", "toolName": "y", "toolCallId": "c", "state": "input-available", "input": {}})).unwrap();
    assert_eq!(part.as_tool().unwrap().tool_name, "x");
    assert!(
        serde_json::to_value(&part)
            .unwrap()
            .get("toolName")
            .is_none()
    );
}

#[test]
fn broken_known_parts_are_errors_and_name_the_type() {
    for (wire, part_type) in [
        (
            json!({"type": "tool-x", "toolCallId": "c", "state": "call"}),
            "tool-x",
        ),
        (
            json!({"type": "tool-x", "state": "input-available"}),
            "tool-x",
        ),
        (json!({"type": "text"}), "text"),
        (json!({"type": "file", "url": "u"}), "file"),
    ] {
        match UiPart::from_value(wire.clone()) {
            Err(PartDecodeError::InvalidFields { part_type: got, .. }) => {
                assert_eq!(got, part_type)
            }
            other => panic!("{wire}: {other:?}"),
        }
    }
    assert!(matches!(
        UiPart::from_value(json!("text")),
        Err(PartDecodeError::NotAnObject)
    ));
    assert!(matches!(
        UiPart::from_value(json!({"text": "x"})),
        Err(PartDecodeError::MissingType)
    ));
}

#[test]
fn ui_message_round_trips_with_and_without_metadata() {
    for wire in [
        json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Pay Rin 25 EUR"}]}),
        json!({"id": "a1", "role": "assistant", "metadata": {"model": "demo"}, "parts": [{"type": "step-start"}, {"type": "text", "text": "ok", "state": "done"}]}),
        json!({"id": "s1", "role": "system", "metadata": null, "parts": []}),
    ] {
        let message: UiMessage = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(serde_json::to_value(&message).unwrap(), wire);
    }
    assert!(
        serde_json::from_value::<UiMessage>(json!({"id": "x", "role": "tool", "parts": []}))
            .is_err()
    );
}

#[test]
fn helpers_read_the_message_like_the_sdk() {
    let message: UiMessage = serde_json::from_value(json!({
        "id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Checking. "},
            {"type": "tool-transfer_funds", "toolCallId": "c1", "state": "output-available", "input": {}, "output": 1},
            {"type": "step-start"},
            {"type": "reasoning", "text": "hidden"},
            {"type": "text", "text": "Done."},
            {"type": "dynamic-tool", "toolName": "d", "toolCallId": "c2", "state": "input-available", "input": {}}
        ]
    }))
    .unwrap();
    assert_eq!(message.text(), "Checking. Done.");
    assert_eq!(
        message
            .tool_parts()
            .map(|t| t.tool_call_id.as_str())
            .collect::<Vec<_>>(),
        ["c1", "c2"]
    );
    assert_eq!(message.last_step_parts().len(), 3);
    assert_eq!(
        message.find_tool_part("c1").unwrap().state,
        ToolState::OutputAvailable
    );
    assert!(message.find_tool_part("nope").is_none());
    assert_eq!(UiMessage::user_text("u", "hi").last_step_parts().len(), 1);
    assert_eq!(
        serde_json::to_value(UiMessage::user_text("u", "hi")).unwrap(),
        json!({"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    );
}

fn assistant(parts: Value) -> UiMessage {
    serde_json::from_value(json!({"id": "a", "role": "assistant", "parts": parts})).unwrap()
}

fn tool(state: &str) -> Value {
    json!({"type": "tool-t", "toolCallId": format!("c-{state}"), "state": state, "input": {}})
}

#[test]
fn approval_predicate_matches_the_sdk() {
    let user = UiMessage::user_text("u", "hi");
    let check = |messages: &[UiMessage]| {
        last_assistant_message_is_complete_with_approval_responses(messages)
    };

    assert!(!check(&[]));
    assert!(!check(std::slice::from_ref(&user)));
    // One responded approval: send.
    assert!(check(&[
        user.clone(),
        assistant(json!([tool("approval-responded")]))
    ]));
    // Parallel approvals, one still open: wait.
    assert!(!check(&[assistant(json!([
        tool("approval-responded"),
        tool("approval-requested")
    ]))]));
    // Responded plus finished tools: send.
    assert!(check(&[assistant(json!([
        tool("output-available"),
        tool("output-error"),
        tool("approval-responded")
    ]))]));
    // No approval response at all: do not send.
    assert!(!check(&[assistant(json!([tool("output-available")]))]));
    // output-denied is not terminal for this predicate (upstream behaviour).
    assert!(!check(&[assistant(json!([
        tool("approval-responded"),
        tool("output-denied")
    ]))]));
    // Only the last step counts.
    assert!(check(&[assistant(
        json!([tool("approval-requested"), {"type": "step-start"}, tool("approval-responded")])
    )]));
    assert!(!check(&[assistant(
        json!([tool("approval-responded"), {"type": "step-start"}, {"type": "text", "text": "x"}])
    )]));
    // Provider-executed parts count (6.0.123+): an open one blocks.
    let mut open = tool("input-available");
    open["providerExecuted"] = json!(true);
    assert!(!check(&[assistant(json!([
        tool("approval-responded"),
        open
    ]))]));
    // Last message must be the assistant's.
    assert!(!check(&[
        assistant(json!([tool("approval-responded")])),
        user
    ]));
}

#[test]
fn tool_call_predicate_matches_the_sdk() {
    let check =
        |messages: &[UiMessage]| last_assistant_message_is_complete_with_tool_calls(messages);
    assert!(!check(&[]));
    assert!(!check(&[assistant(json!([{"type": "text", "text": "x"}]))]));
    assert!(check(&[assistant(json!([tool("output-available")]))]));
    assert!(check(&[assistant(json!([
        tool("output-available"),
        tool("output-error")
    ]))]));
    assert!(!check(&[assistant(json!([
        tool("output-available"),
        tool("input-available")
    ]))]));
    assert!(!check(&[assistant(json!([tool("approval-responded")]))]));
    assert!(!check(&[assistant(json!([tool("output-denied")]))]));
    // Provider-executed parts are ignored, both ways.
    let mut provider = tool("input-available");
    provider["providerExecuted"] = json!(true);
    assert!(check(&[assistant(json!([
        tool("output-available"),
        provider.clone()
    ]))]));
    assert!(!check(&[assistant(json!([provider]))]));
    // Last step only.
    assert!(check(&[assistant(
        json!([tool("input-available"), {"type": "step-start"}, tool("output-available")])
    )]));
    assert!(!check(&[
        assistant(json!([tool("output-available")])),
        UiMessage::user_text("u", "x")
    ]));
}

#[test]
fn only_exact_raster_image_types_are_shown_inline() {
    for (media_type, inline) in [
        ("image/png", Some("image/png")),
        ("IMAGE/JPEG", Some("image/jpeg")),
        ("image/gif", Some("image/gif")),
        ("image/webp", Some("image/webp")),
        ("image/avif", Some("image/avif")),
        ("image/svg+xml", None),
        ("image/x, text/html", None),
        ("image/png, text/html", None),
        ("image/png; charset=utf-8", None),
        (" image/png", None),
        ("image/png\n", None),
        ("image/", None),
        ("image/x-icon", None),
        ("text/html", None),
        ("application/pdf", None),
        ("", None),
    ] {
        assert_eq!(inline_image_type(media_type), inline, "{media_type:?}");
    }
}

#[test]
fn a_message_asks_a_call_again_in_our_metadata_and_keeps_the_rest() {
    let mut message = UiMessage::user_text("u", "Ask me again");
    assert_eq!(message.ask_again(), None);
    message.set_ask_again("call-1");
    assert_eq!(
        message.metadata,
        Some(json!({"countersign": {"askAgain": "call-1"}}))
    );
    let mut other = UiMessage::user_text("u", "x");
    other.metadata = Some(json!({"client": 1, "countersign": "not ours", "n": [1]}));
    other.set_ask_again("call-2");
    assert_eq!(other.ask_again(), Some(&json!("call-2")));
    assert_eq!(other.metadata.as_ref().unwrap()["client"], 1);
    assert_eq!(other.metadata.as_ref().unwrap()["n"], json!([1]));
}
