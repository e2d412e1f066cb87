//! A socket lost while a card waits (ADR 0041): the next socket is seeded with the history,
//! the waiting call as a `function_call` item on its Realtime id, so the decision goes as that
//! call's `function_call_output` — a real tool result, not words about one.

use super::turns::{decide, spoken_payment};
use super::*;
use crate::agent::ApprovalDecision;

#[tokio::test]
async fn a_decision_after_the_socket_was_lost_goes_as_the_call_s_output_on_the_next_socket() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, mut reader, approval) =
        spoken_payment(&mut server, &runtime, "lost", true).await;
    // The server goes away while the card waits; its close is answered once the actor read it.
    within("the close", conn.ws.close(None))
        .await
        .expect("close");
    while let Some(Ok(frame)) = within("the client's close", conn.ws.next()).await {
        if frame.is_close() {
            break;
        }
    }
    drop(conn);

    decide(&runtime, "lost", &approval, ApprovalDecision::Approve).await;
    let (mut conn, _) = server.next_session().await;
    let mut items = Vec::new();
    loop {
        let event = conn.recv().await;
        if event["type"] == "response.create" {
            break;
        }
        assert_eq!(event["type"], "conversation.item.create", "{event}");
        items.push(event["item"].clone());
    }
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "function_call",
            "function_call_output"
        ],
        "{items:?}"
    );
    assert_eq!(items[0]["role"], "user");
    assert_eq!(items[0]["content"][0]["text"], "Pay Hanako 50 dollars");
    assert_eq!(items[1]["role"], "assistant");
    assert_eq!(
        items[1]["content"][0]["text"],
        "I'll ask for your countersignature."
    );
    assert_eq!(items[2]["call_id"], "call_pay");
    assert_eq!(items[2]["name"], "process_payment");
    let arguments: Value = serde_json::from_str(items[2]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["amount"], 50, "{arguments}");
    assert_eq!(items[3]["call_id"], "call_pay");
    let result: Value = serde_json::from_str(items[3]["output"].as_str().unwrap()).unwrap();
    assert_eq!(result["wallet_balance"], 950, "{result}");

    let response = conn.response_created().await;
    conn.say(&response, "Paid 50 dollars to Hanako.").await;
    conn.done(&response, "completed").await;
    let read = read_turn(&mut reader).await;
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    assert_eq!(read.text, "Paid 50 dollars to Hanako.");
    let session = runtime.existing_session("lost").await.unwrap().unwrap();
    assert_eq!(session.snapshot().wallet.balance_cents, 95_000);
}
