//! The recorded-shape scenarios A to G, played through the conversation as `useChat` plays
//! them, and every fixture against the strict dialect and SSE framing.

use super::*;

#[test]
fn a_sse_approval_continues_the_same_assistant_message() {
    let streams = streams(include_str!("../testdata/a_payment_approved_sse.jsonl"));
    assert_eq!(streams.len(), 2);
    let mut conversation = Conversation::new(vec![UiMessage::user_text(
        "msg-u1",
        "Send 25 EUR to Rin Okabe",
    )]);

    // Request 1: the call streams in and stops at the approval request.
    let mut partial_inputs = Vec::new();
    let first = play(
        &mut conversation,
        &streams[0],
        "client-1",
        |conversation, chunk, _| {
            if matches!(chunk, Chunk::ToolInputDelta(_)) {
                partial_inputs.push(
                    tool(&conversation.messages()[1], "call-pay-01")
                        .input
                        .clone(),
                );
            }
        },
    );
    assert_eq!(
        partial_inputs,
        [
            Some(json!({"recipient": "Rin Ok"})),
            Some(json!({"recipient": "Rin Okabe", "amount": 25, "currency": "EUR"}))
        ]
    );
    assert_eq!(first.finish_reason(), Some(&FinishReason::ToolCalls));
    let assistant = &conversation.messages()[1];
    assert_eq!(assistant.id, "asst-pay-01");
    assert_eq!(
        shape(assistant),
        [
            "step-start",
            "tool-transfer_funds:call-pay-01:approval-requested"
        ]
    );
    assert!(!approvals_complete(conversation.messages()));

    // The user approves; the automatic send fires.
    assert_eq!(
        conversation.add_tool_approval_response("appr-pay-01", true, None),
        1
    );
    assert!(approvals_complete(conversation.messages()));
    let request = next_request(&conversation);
    assert_eq!(request.message_id.as_deref(), Some("asst-pay-01"));
    assert_eq!(
        serde_json::to_value(&request.messages[1].parts[1]).unwrap(),
        json!({"type": "tool-transfer_funds", "toolCallId": "call-pay-01", "state": "approval-responded",
               "input": {"recipient": "Rin Okabe", "amount": 25, "currency": "EUR"},
               "approval": {"id": "appr-pay-01", "approved": true}})
    );

    // Request 2: `start` reuses the id, so the same message is extended.
    play(&mut conversation, &streams[1], "client-2", no_reaction);
    assert_eq!(
        conversation.messages().len(),
        2,
        "continued, not duplicated"
    );
    assert_eq!(
        serde_json::to_value(&conversation.messages()[1]).unwrap(),
        json!({
            "id": "asst-pay-01",
            "role": "assistant",
            "metadata": {"usage": {"inputTokens": 812, "outputTokens": 22}},
            "parts": [
                {"type": "step-start"},
                {"type": "tool-transfer_funds", "toolCallId": "call-pay-01", "state": "output-available",
                 "input": {"recipient": "Rin Okabe", "amount": 25, "currency": "EUR"},
                 "output": {"ok": true, "transferId": "tr-5521", "balance": 975},
                 "approval": {"id": "appr-pay-01", "approved": true}},
                {"type": "step-start"},
                {"type": "text", "text": "Sent 25 € to Rin Okabe (transfer tr-5521). Your balance is 975 €.", "state": "done"}
            ]
        })
    );
    assert!(
        !approvals_complete(conversation.messages()),
        "no loop: the last step has no tool parts"
    );
}

#[test]
fn b_bidi_approval_in_one_stream() {
    let streams = streams(include_str!("../testdata/b_payment_approved_bidi.jsonl"));
    assert_eq!(streams.len(), 1);
    let mut conversation =
        Conversation::new(vec![UiMessage::user_text("msg-u1", "Pay Kiri 40 EUR")]);
    let mut checked_predicate = false;
    let mut answer = answer_approvals(&[("appr-live-31", true)]);
    play(
        &mut conversation,
        &streams[0],
        "client-1",
        |conversation, chunk, applied| {
            answer(conversation, chunk, applied);
            if matches!(chunk, Chunk::ToolApprovalRequest(_)) {
                // The seed injects `start-step` *after* the tool call, so the
                // answered part is not in the last step and the SDK's predicate
                // stays false: that shape needs a custom `sendAutomaticallyWhen`.
                assert_eq!(
                    tool(&conversation.messages()[1], "call-live-31").state,
                    ToolState::ApprovalResponded
                );
                assert!(!approvals_complete(conversation.messages()));
                checked_predicate = true;
            }
        },
    );
    assert!(checked_predicate);
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "reasoning:Done",
            "reasoning:Done",
            "tool-transfer_funds:call-live-31:output-available",
            "step-start",
            "text:Done"
        ]
    );
    let paid = tool(assistant, "call-live-31");
    assert_eq!(paid.approval, approval("appr-live-31", Some(true), None));
    assert_eq!(
        paid.output,
        Some(json!({"ok": true, "transferId": "tr-8810", "balance": 935}))
    );
    assert_eq!(assistant.text(), "Done: 40 € sent to Kiri.");
    assert_eq!(
        assistant.metadata.as_ref().unwrap()["usage"]["outputTokens"],
        Value::Null
    );
}

#[test]
fn c1_sse_denial_marks_the_call_denied_and_keeps_the_reason() {
    let streams = streams(include_str!("../testdata/c1_payment_denied_sse.jsonl"));
    let mut conversation =
        Conversation::new(vec![UiMessage::user_text("msg-u1", "Send 300 EUR to Moss")]);
    play(&mut conversation, &streams[0], "client-1", no_reaction);
    assert_eq!(
        conversation.add_tool_approval_response("appr-deny-02", false, Some("Too much".into())),
        1
    );
    assert!(approvals_complete(conversation.messages()));
    let request = next_request(&conversation);
    assert_eq!(
        request.messages[1].parts[0].as_tool().unwrap().approval,
        approval("appr-deny-02", Some(false), Some("Too much"))
    );

    play(&mut conversation, &streams[1], "client-2", no_reaction);
    assert_eq!(conversation.messages().len(), 2);
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "tool-transfer_funds:call-deny-02:output-denied",
            "text:Done"
        ]
    );
    assert_eq!(
        tool(assistant, "call-deny-02").approval,
        approval("appr-deny-02", Some(false), Some("Too much"))
    );
    assert!(!tool_calls_complete(conversation.messages()));
}

#[test]
fn c2_bidi_denial_in_one_stream() {
    let streams = streams(include_str!("../testdata/c2_payment_denied_bidi.jsonl"));
    let mut conversation =
        Conversation::new(vec![UiMessage::user_text("msg-u1", "Send 300 EUR to Moss")]);
    play(
        &mut conversation,
        &streams[0],
        "client-1",
        answer_approvals(&[("appr-live-deny-03", false)]),
    );
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "reasoning:Done",
            "tool-transfer_funds:call-live-deny-03:output-denied",
            "step-start",
            "text:Done"
        ]
    );
    assert_eq!(
        tool(assistant, "call-live-deny-03").approval,
        approval("appr-live-deny-03", Some(false), None)
    );
    assert_eq!(assistant.text(), "Okay, the payment was cancelled.");
}

#[test]
fn d1_browser_tool_approved_then_executed_in_the_browser() {
    let streams = streams(include_str!("../testdata/d1_location_approved_sse.jsonl"));
    let mut conversation = Conversation::new(vec![UiMessage::user_text("msg-u1", "Where am I?")]);
    play(&mut conversation, &streams[0], "client-1", no_reaction);
    assert_eq!(
        conversation.add_tool_approval_response("appr-geo-04", true, None),
        1
    );
    assert!(approvals_complete(conversation.messages()));
    assert!(!tool_calls_complete(conversation.messages()));

    // The browser runs the geolocation tool and records its output.
    let location =
        json!({"latitude": 47.3769, "longitude": 8.5417, "accuracy": 35, "city": "Zürich"});
    assert_eq!(
        conversation.add_tool_output("call-geo-04", location.clone()),
        1
    );
    assert!(tool_calls_complete(conversation.messages()));
    assert!(
        !approvals_complete(conversation.messages()),
        "no approval-responded part left"
    );

    play(&mut conversation, &streams[1], "client-2", no_reaction);
    assert_eq!(conversation.messages().len(), 2);
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "tool-get_location:call-geo-04:output-available",
            "text:Done"
        ]
    );
    let geo = tool(assistant, "call-geo-04");
    assert_eq!(geo.output, Some(location));
    assert_eq!(geo.approval, approval("appr-geo-04", Some(true), None));
}

#[test]
fn d2_bidi_browser_tool_in_one_stream() {
    let streams = streams(include_str!("../testdata/d2_location_approved_bidi.jsonl"));
    let mut conversation = Conversation::new(vec![UiMessage::user_text("msg-u1", "Where am I?")]);
    play(
        &mut conversation,
        &streams[0],
        "client-1",
        answer_approvals(&[("appr-live-geo-05", true)]),
    );
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "reasoning:Done",
            "tool-get_location:call-live-geo-05:output-available",
            "step-start",
            "text:Done"
        ]
    );
    assert_eq!(
        tool(assistant, "call-live-geo-05").output.as_ref().unwrap()["city"],
        "Zürich"
    );
}

#[test]
fn e_plain_tool_call_with_streamed_input_and_data_parts() {
    let streams = streams(include_str!("../testdata/e_weather_sse.jsonl"));
    let mut conversation =
        Conversation::new(vec![UiMessage::user_text("msg-u1", "Weather in Oslo?")]);
    let mut partial_inputs = Vec::new();
    let mut transient = Vec::new();
    play(
        &mut conversation,
        &streams[0],
        "client-1",
        |conversation, chunk, applied| {
            if matches!(chunk, Chunk::ToolInputDelta(_)) {
                partial_inputs.push(
                    tool(&conversation.messages()[1], "call-wx-06")
                        .input
                        .clone(),
                );
            }
            if let Applied::Transient(data) = applied {
                transient.push(data.name.clone());
            }
        },
    );
    assert_eq!(
        partial_inputs,
        [
            Some(json!({})),
            Some(json!({"location": "Osl"})),
            Some(json!({"location": "Oslo"}))
        ]
    );
    assert_eq!(transient, ["tts"]);
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "step-start",
            "tool-get_weather:call-wx-06:output-available",
            "data-forecast",
            "step-start",
            "text:Done"
        ]
    );
    assert_eq!(
        serde_json::to_value(&assistant.parts[2]).unwrap(),
        json!({"type": "data-forecast", "id": "fc-oslo", "data": {"status": "ready", "temperature": -3.5}})
    );
    assert!(
        !tool_calls_complete(conversation.messages()),
        "last step holds only text"
    );
}

#[test]
fn f1_parallel_approvals_send_only_when_all_are_answered() {
    let streams = streams(include_str!("../testdata/f1_payments_parallel_sse.jsonl"));
    let mut conversation = Conversation::new(vec![UiMessage::user_text(
        "msg-u1",
        "Pay Ada 30 and Ben 40",
    )]);
    play(&mut conversation, &streams[0], "client-1", no_reaction);
    assert_eq!(
        shape(&conversation.messages()[1]),
        [
            "tool-transfer_funds:call-multi-a:approval-requested",
            "tool-transfer_funds:call-multi-b:approval-requested"
        ]
    );
    assert_eq!(
        conversation.add_tool_approval_response("appr-multi-a", true, None),
        1
    );
    assert!(
        !approvals_complete(conversation.messages()),
        "one still open"
    );
    assert_eq!(
        conversation.add_tool_approval_response("appr-multi-b", true, None),
        1
    );
    assert!(approvals_complete(conversation.messages()));

    play(&mut conversation, &streams[1], "client-2", no_reaction);
    assert_eq!(conversation.messages().len(), 2);
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "tool-transfer_funds:call-multi-a:output-available",
            "tool-transfer_funds:call-multi-b:output-available",
            "text:Done"
        ]
    );
    for (call, approval_id) in [
        ("call-multi-a", "appr-multi-a"),
        ("call-multi-b", "appr-multi-b"),
    ] {
        assert_eq!(
            tool(assistant, call).approval,
            approval(approval_id, Some(true), None)
        );
    }
}

#[test]
fn f2_sequential_approvals_in_one_stream() {
    let streams = streams(include_str!(
        "../testdata/f2_payments_sequential_bidi.jsonl"
    ));
    let mut conversation = Conversation::new(vec![UiMessage::user_text(
        "msg-u1",
        "Pay Ada 30 and Ben 40",
    )]);
    play(
        &mut conversation,
        &streams[0],
        "client-1",
        answer_approvals(&[("appr-live-multi-a", true), ("appr-live-multi-b", true)]),
    );
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "reasoning:Done",
            "tool-transfer_funds:call-live-multi-a:output-available",
            "step-start",
            "tool-transfer_funds:call-live-multi-b:output-available",
            "step-start",
            "text:Done"
        ]
    );
    assert_eq!(assistant.text(), "Sent 30 € to Ada and 40 € to Ben.");
}

#[test]
fn g_approval_timeout_ends_in_output_error() {
    let streams = streams(include_str!("../testdata/g_approval_timeout_bidi.jsonl"));
    let mut conversation = Conversation::new(vec![UiMessage::user_text("msg-u1", "Pay Ada 100")]);
    play(&mut conversation, &streams[0], "client-1", no_reaction);
    let assistant = &conversation.messages()[1];
    assert_eq!(
        shape(assistant),
        [
            "reasoning:Done",
            "tool-transfer_funds:call-live-wait-10:output-error",
            "step-start",
            "reasoning:Done",
            "text:Done"
        ]
    );
    let timed_out = tool(assistant, "call-live-wait-10");
    assert_eq!(
        timed_out.error_text.as_deref(),
        Some("Approval request timed out")
    );
    assert_eq!(
        timed_out.approval,
        approval("appr-live-wait-10", None, None),
        "never answered"
    );
    assert_eq!(timed_out.input.as_ref().unwrap()["amount"], 100);
    assert!(!approvals_complete(conversation.messages()));
}

#[test]
fn resuming_a_continuation_from_an_empty_message_fails_as_the_sdk_does() {
    // §A.8: a resumed stream starts from an empty message, so a continuation
    // whose first content is a tool result cannot find its tool part.
    let streams = streams(include_str!("../testdata/a_payment_approved_sse.jsonl"));
    let mut conversation = Conversation::new(vec![UiMessage::user_text("msg-u1", "x")]);
    conversation.begin_resume("client-r");
    conversation.apply(&streams[1][0]).unwrap();
    assert!(conversation.apply(&streams[1][1]).is_err());
}

#[test]
fn every_fixture_is_v6_strict_clean_and_survives_sse_framing_byte_by_byte() {
    for fixture in [
        include_str!("../testdata/a_payment_approved_sse.jsonl"),
        include_str!("../testdata/b_payment_approved_bidi.jsonl"),
        include_str!("../testdata/c1_payment_denied_sse.jsonl"),
        include_str!("../testdata/c2_payment_denied_bidi.jsonl"),
        include_str!("../testdata/d1_location_approved_sse.jsonl"),
        include_str!("../testdata/d2_location_approved_bidi.jsonl"),
        include_str!("../testdata/e_weather_sse.jsonl"),
        include_str!("../testdata/f1_payments_parallel_sse.jsonl"),
        include_str!("../testdata/f2_payments_sequential_bidi.jsonl"),
        include_str!("../testdata/g_approval_timeout_bidi.jsonl"),
    ] {
        let mut wire = String::new();
        let mut expected = Vec::new();
        for stream in streams(fixture) {
            for chunk in stream {
                assert!(
                    matches!(
                        chunk.for_dialect(Dialect::V6Strict),
                        Some(std::borrow::Cow::Borrowed(_))
                    ),
                    "fixture uses a post-6.0.0 key: {chunk:?}"
                );
                wire.push_str(&encode_chunk(&chunk, Dialect::V6Strict).unwrap());
                wire.push_str(": keep-alive\n\n");
                expected.push(StreamItem::Chunk(chunk));
            }
            wire.push_str(DONE_FRAME);
            expected.push(StreamItem::Done);
        }
        let mut decoder = ChunkStreamDecoder::new();
        let mut frames = Vec::new();
        for byte in wire.as_bytes() {
            frames.extend(
                decoder
                    .push(std::slice::from_ref(byte))
                    .into_iter()
                    .map(|f| f.unwrap()),
            );
        }
        frames.extend(decoder.finish().into_iter().map(|f| f.unwrap()));
        assert_eq!(frames, expected);
    }
}
