//! One response at a time (ADR 0041): the server refuses a `response.create` while a response
//! is active (`conversation_already_has_active_response`, which the fake answers too), so a
//! step whose response would go over one still under way — the rest of a step that ended at
//! the tool-call grace — asks for its response once that one's `response.done` came.

use super::turns::{decide, spoken_payment};
use super::*;
use crate::agent::ApprovalDecision;

/// The step ends with the payment at once (no grace) and the model goes on talking; the
/// person approves before that response ends: the output goes on the call's id, and its
/// `response.create` waits for the active response's `response.done`.
#[tokio::test]
async fn a_decision_before_the_grace_ended_response_ends_waits_for_its_response_done() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::ZERO);
    let (mut conn, mut reader, approval) =
        spoken_payment(&mut server, &runtime, "late", false).await;
    decide(&runtime, "late", &approval, ApprovalDecision::Approve).await;
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output", "{output}");
    assert_eq!(output["item"]["call_id"], "call_pay");
    // resp_1 is still under way: no response.create goes over it.
    conn.silent_for(150).await;
    conn.done("resp_1", "completed").await;
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "Paid.").await;
    conn.done(&response, "completed").await;
    let read = read_turn(&mut reader).await;
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    assert_eq!(read.text, "Paid.");
    let session = runtime.existing_session("late").await.unwrap().unwrap();
    assert_eq!(session.snapshot().wallet.balance_cents, 95_000);
}

/// A call that needs no card (the weather) made in a response that goes on past the grace:
/// its result goes at once, its `response.create` after that response's `response.done`.
#[tokio::test]
async fn the_result_of_an_ungated_call_asks_for_a_response_once_the_active_one_ended() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::ZERO);
    let started = within(
        "start",
        runtime.start_turn(
            "w",
            crate::agent::UserTurn {
                text: "Weather in Tokyo?".into(),
                transport: crate::agent::Transport::Bidi,
                ..Default::default()
            },
            None,
        ),
    )
    .await
    .expect("turn started");
    let mut reader = started.log.subscribe(0);
    let (mut conn, _) = server.next_session().await;
    conn.expect("conversation.item.create").await;
    conn.expect("response.create").await;
    let first = conn.response_created().await;
    conn.call(
        &first,
        "call_w",
        "get_weather",
        json!({"location": "Tokyo"}),
    )
    .await;
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output", "{output}");
    assert_eq!(output["item"]["call_id"], "call_w");
    conn.silent_for(150).await;
    conn.done(&first, "completed").await;
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "Sunny in Tokyo.").await;
    conn.done(&response, "completed").await;
    let read = read_turn(&mut reader).await;
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    assert_eq!(read.text, "Sunny in Tokyo.");
}
