//! Gemini Live behind the runtime: BIDI turns that wait for the person's approval.

use super::*;

/// A runtime whose BIDI turns use Live (the demo model answers SSE turns) with a BIDI turn in
/// chat `chat` that asked to pay Hanako 50 dollars and now waits for the person's approval:
/// (the fake server, its connection, the runtime, a reader of the turn's log past the approval
/// request, the approval id).
async fn payment_awaiting_approval(
    chat: &str,
) -> (
    FakeLive,
    FakeConn,
    Arc<crate::agent::Runtime>,
    crate::agent::session::LogReader,
    String,
) {
    use crate::agent::{TurnEntry, UserTurn};
    use crate::protocol::Chunk;

    let mut server = FakeLive::start().await;
    let runtime = live_runtime(&server, BLOCKING_MODEL);
    let started = within(
        "start",
        runtime.start_turn(
            chat,
            UserTurn {
                message_id: None,
                text: "Pay Hanako 50 dollars".into(),
                attachments: Vec::new(),
                transport: crate::agent::Transport::Bidi,
                ask_again: None,
            },
            None,
        ),
    )
    .await
    .expect("turn started");
    let mut conn = server.next_conn().await;
    conn.setup().await;
    assert_eq!(conn.recv().await, user_turn("Pay Hanako 50 dollars"));
    conn.send(
        json!({"toolCall": {"functionCalls": [{"id": "fc-pay", "name": "process_payment",
        "args": {"amount": 50, "recipient": "Hanako", "currency": "USD"}}]}}),
    )
    .await;
    let mut reader = started.log.subscribe(0);
    let approval_id = loop {
        match within("approval request", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => break r.approval_id,
            Some(_) => {}
            None => panic!("the turn ended without asking for approval"),
        }
    };
    (server, conn, runtime, reader, approval_id)
}

/// The whole path a BIDI turn takes with Gemini Live: the runtime (demo model for SSE, Live for
/// BIDI) sends the person's message, the model asks for a payment, the approval gate holds it
/// until the person approves, the payment runs, its result goes back as a `toolResponse` with
/// the Live call id, and the transcript of the answer streams out as text.
#[tokio::test]
async fn a_bidi_turn_through_the_runtime_waits_for_approval_then_answers() {
    use crate::agent::{ApprovalDecision, PersonInput, TurnEntry};
    use crate::protocol::Chunk;

    let (_server, mut conn, runtime, mut reader, approval_id) =
        payment_awaiting_approval("live-chat").await;
    assert!(runtime.models().label().contains("BIDI: gemini-live"));
    assert_eq!(
        within("finish-step", reader.next()).await,
        Some(TurnEntry::Chunk(Chunk::FinishStep))
    );
    assert_eq!(within("pause", reader.next()).await, Some(TurnEntry::Pause));
    conn.silent_for(200).await;

    within(
        "submit",
        runtime.submit(
            "live-chat",
            &[PersonInput::Approval {
                approval_id,
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        ),
    )
    .await
    .expect("approval accepted");
    let response = conn.recv().await;
    let answer = &response["toolResponse"]["functionResponses"][0];
    assert_eq!(answer["id"], "fc-pay", "{response}");
    assert_eq!(answer["name"], "process_payment");
    assert_eq!(answer["response"]["wallet_balance"], 950, "{response}");
    conn.turn_complete().await;
    conn.say("Paid 50 dollars to Hanako.").await;
    conn.turn_complete().await;

    let mut text = String::new();
    let mut model = None;
    loop {
        match within("the answer", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::Finish(f))) => {
                model = f.message_metadata.map(|m| m["model"].clone());
            }
            Some(TurnEntry::End) | None => break,
            Some(_) => {}
        }
    }
    assert_eq!(text, "Paid 50 dollars to Hanako.");
    assert!(
        model
            .and_then(|m| m.as_str().map(str::to_owned))
            .is_some_and(|m| m.contains("gemini-live")),
        "the finish names the Live model"
    );
}

/// The turn reports the call withdrawn, and approving it now is refused as withdrawn.
async fn withdrawn_and_unapprovable(
    runtime: &Arc<crate::agent::Runtime>,
    reader: &mut crate::agent::session::LogReader,
    chat: &str,
    approval_id: String,
) {
    use crate::agent::{ApprovalDecision, InputError, PersonInput, TurnEntry};
    use crate::protocol::Chunk;

    let withdrawn = loop {
        match within("the withdrawal", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolOutputError(e))) => break e.error_text,
            Some(_) => {}
            None => panic!("the turn ended without reporting the withdrawal"),
        }
    };
    assert!(withdrawn.contains("withdrew"), "{withdrawn}");
    let refused = runtime
        .submit(
            chat,
            &[PersonInput::Approval {
                approval_id: approval_id.clone(),
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(refused, InputError::ApprovalWithdrawn { approval_id });
}

/// The model's cancellation of the waiting call comes first in a flood of cancellations (1,000
/// more ids in the same message): none is lost, so the approval still ends withdrawn and the
/// payment can never run. The broadcast channel of 64 the notices used to travel on dropped
/// the oldest of a burst, exactly this one, and the withdrawn call stayed approvable.
#[tokio::test]
async fn a_withdrawal_followed_by_a_flood_of_cancellations_is_not_lost() {
    let (_server, mut conn, runtime, mut reader, approval_id) =
        payment_awaiting_approval("flooded").await;
    let mut ids = vec![json!("fc-pay")];
    ids.extend((0..1_000).map(|n| json!(format!("gone-{n}"))));
    conn.send(json!({"toolCallCancellation": {"ids": ids}}))
        .await;
    withdrawn_and_unapprovable(&runtime, &mut reader, "flooded", approval_id).await;
}

/// Gemini Live withdraws a call while the person is still deciding (`toolCallCancellation`
/// after the step): the runtime ends the call, the approval can no longer be answered, the
/// audit log says why, and the turn goes on.
#[tokio::test]
async fn a_call_withdrawn_during_the_approval_wait_cannot_be_approved() {
    use crate::agent::{
        TurnEntry,
        store::{AuditKind, AuditQuery},
    };
    use crate::protocol::Chunk;

    let (_server, mut conn, runtime, mut reader, approval_id) =
        payment_awaiting_approval("withdrawn").await;

    conn.send(json!({"toolCallCancellation": {"ids": ["fc-pay"]}}))
        .await;
    withdrawn_and_unapprovable(&runtime, &mut reader, "withdrawn", approval_id).await;

    // The turn goes on: the model hears what became of its call and answers.
    let next = conn.recv().await;
    assert!(
        next.get("clientContent").is_some() || next.get("toolResponse").is_some(),
        "{next}"
    );
    conn.say("All right, I will not pay.").await;
    conn.turn_complete().await;
    let mut text = String::new();
    loop {
        match within("the answer", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::End) | None => break,
            Some(_) => {}
        }
    }
    assert_eq!(text, "All right, I will not pay.");
    let audit = runtime.store.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(audit[0].event.kind, AuditKind::Interrupted);
    assert_eq!(
        audit[0].event.reason.as_deref(),
        Some("withdrawn by the model")
    );
    let session = runtime
        .existing_session("withdrawn")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        session.snapshot().wallet.balance_cents,
        100_000,
        "nothing paid"
    );
}
