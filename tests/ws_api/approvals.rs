//! Approvals over the socket: one turn after another, an approval answered in the seed's form
//! and in the AI SDK's (approve, deny, edit), a malformed confirmation refused, expiry, parallel
//! approvals answered in any order, and a chain that asks in its second step.

use super::*;

#[tokio::test]
async fn weather_then_a_second_turn_with_fresh_ids_on_one_socket() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "What's the weather in Tokyo?")).await;
    let first = read_until(&mut socket, "[DONE]").await;
    assert_eq!(first[0]["type"], "start");
    assert!(types(&first).contains(&"tool-output-available".to_string()));
    assert!(text(&first).contains("Tokyo"));

    send(&mut socket, message("c", "東京の天気は?")).await;
    let second = read_until(&mut socket, "[DONE]").await;
    assert_eq!(second[0]["type"], "start");
    assert_ne!(
        first[0]["messageId"], second[0]["messageId"],
        "every turn has its own message id"
    );
    let text_ids = |chunks: &[Value]| -> Vec<Value> {
        chunks
            .iter()
            .filter(|c| c["type"] == "text-start")
            .map(|c| c["id"].clone())
            .collect()
    };
    assert!(
        text_ids(&first)
            .iter()
            .all(|id| !text_ids(&second).contains(id))
    );
    let finish = second.iter().find(|c| c["type"] == "finish").unwrap();
    assert!(finish["messageMetadata"]["usage"].is_object());
}

#[tokio::test]
async fn approval_keeps_the_socket_open_and_continues_the_same_stream() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    assert_eq!(
        types(&first),
        [
            "start",
            "start-step",
            "tool-input-start",
            "tool-input-available",
            "tool-approval-request",
            "finish-step"
        ]
    );
    let (approval, _) = approval_requests(&first).remove(0);
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available");
    assert_eq!(rest[0]["output"]["wallet_balance"], 950);
    assert!(text(&rest).contains("950"));
}

/// A confirmation that says neither yes nor no (`"confirmed": "yes"`) is refused with a clear
/// error, not read as a denial: the approval still waits, and a real answer then decides it.
#[tokio::test]
async fn a_malformed_confirmation_is_refused_and_the_approval_still_waits() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, _) = approval_requests(&first).remove(0);
    for result in [
        json!({"confirmed": "yes"}),
        json!({"approved": 1}),
        json!({"confirmed": true, "reason": 7}),
    ] {
        send(
            &mut socket,
            json!({"type": "tool_result", "toolCallId": approval, "result": result}),
        )
        .await;
        let Frame::Chunk(error) = next(&mut socket).await else {
            panic!("{result}")
        };
        assert_eq!(error["type"], "error", "{error}");
        let said = error["errorText"].as_str().unwrap();
        assert!(
            said.contains(&format!("the answer to approval {approval}")),
            "{said}"
        );
    }
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available", "{rest:?}");
    assert_eq!(rest[0]["output"]["wallet_balance"], 950);
}

#[tokio::test]
async fn deny_and_edit_in_the_ai_sdk_form() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let message_id = first[0]["messageId"].as_str().unwrap().to_string();
    let (approval, call) = approval_requests(&first).remove(0);
    send(
        &mut socket,
        approval_message("c", &message_id, &call, &approval, false),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        rest[0],
        json!({"type": "tool-output-denied", "toolCallId": call})
    );

    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let message_id = first[0]["messageId"].as_str().unwrap().to_string();
    let (approval, call) = approval_requests(&first).remove(0);
    send(&mut socket, json!({"type": "message", "id": "c", "messages": [{"id": message_id, "role": "assistant", "parts": [
        {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded", "input": {},
         "approval": {"id": approval, "approved": true, "editedInput": {"amount": 20, "recipient": "Hanako"}}}]}]})).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["output"]["amount"], 20);
    assert_eq!(rest[0]["output"]["wallet_balance"], 980);
}

#[tokio::test]
async fn an_unanswered_approval_expires() {
    let server = server_with(Opts {
        approval: Duration::from_secs(1),
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    read_until(&mut socket, "finish-step").await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-error");
    assert!(
        rest[0]["errorText"]
            .as_str()
            .unwrap()
            .starts_with("Approval expired")
    );
}

#[tokio::test]
async fn three_parallel_payments_answered_in_shuffled_order() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        message("c", "Send $10 to Alice, $20 to Bob and $30 to Carol"),
    )
    .await;
    let first = read_until(&mut socket, "finish-step").await;
    let approvals = approval_requests(&first);
    assert_eq!(
        approvals.len(),
        3,
        "all three wait at once: {:?}",
        types(&first)
    );
    // Answer Carol (deny), Alice (approve), Bob (approve).
    send(&mut socket, confirm(&approvals[2].0, false)).await;
    assert_eq!(
        read_until(&mut socket, "tool-output-denied")
            .await
            .last()
            .unwrap()["toolCallId"],
        approvals[2].1.as_str()
    );
    send(&mut socket, confirm(&approvals[0].0, true)).await;
    assert_eq!(
        read_until(&mut socket, "tool-output-available")
            .await
            .last()
            .unwrap()["toolCallId"],
        approvals[0].1.as_str()
    );
    send(&mut socket, confirm(&approvals[1].0, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["toolCallId"], approvals[1].1.as_str());
    let session = server.state.runtime.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000 - 3_000);
}

#[tokio::test]
async fn a_sequential_chain_asks_after_the_first_step() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        message("c", "check the weather in Paris, then send Bob $5"),
    )
    .await;
    let first = read_until(&mut socket, "tool-approval-request").await;
    assert!(types(&first).contains(&"tool-output-available".to_string()));
    let (approval, _) = approval_requests(&first).remove(0);
    read_until(&mut socket, "finish-step").await;
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert!(text(&rest).contains("Paris"));
}
