//! A gated call asked for by voice (ADR 0035): the model is told at once that the call waits
//! for a countersignature (`willContinue: true`), and answered on the same id once people
//! decided; a spoken "yes" decides nothing; a call the model cancels can never run; a socket
//! that goes away while the call waits leaves the approval on the server.

use super::*;
use crate::agent::{ApprovalDecision, InputError, PersonInput, UserTurn};

/// The pay call's Live id, as the fake issues it.
pub(super) const CALL: &str = "fc-pay";

/// A voice chat "c" whose spoken payment waits for approval: (the socket, a reader of the
/// turn's log past the approval request, the approval id).
pub(super) async fn spoken_payment(
    runtime: &Arc<Runtime>,
    server: &mut FakeLive,
) -> (FakeConn, LogReader, String) {
    let (mut conn, _) = open_voice(runtime, server, VoiceMode::PushToTalk).await;
    assert_eq!(
        conn.recv().await,
        json!({"realtimeInput": {"activityStart": {}}})
    );
    speak(runtime, &mut conn).await;
    conn.send(json!({"serverContent": {"inputTranscription": {"text": "Pay Hanako 50 dollars"}}}))
        .await;
    conn.send(
        json!({"toolCall": {"functionCalls": [{"id": CALL, "name": "process_payment",
        "args": {"amount": 50, "recipient": "Hanako", "currency": "USD"}}]}}),
    )
    .await;
    conn.say("I'll send that payment.").await;
    conn.turn_complete().await;
    let mut reader = spoken_turn_log(runtime, "c").await;
    let approval_id = loop {
        match within("approval request", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => break r.approval_id,
            Some(TurnEntry::End) | None => panic!("the spoken payment did not ask"),
            Some(_) => {}
        }
    };
    (conn, reader, approval_id)
}

/// The person holds the button, says something, lets go (the fake reads the three messages).
pub(super) async fn speak(runtime: &Arc<Runtime>, conn: &mut FakeConn) {
    let pcm = tone(16_000, 200);
    runtime
        .voice("c", LOCAL, VoiceInput::Audio(Arc::from(pcm.as_slice())))
        .await
        .expect("audio");
    assert!(conn.recv().await["realtimeInput"]["audio"].is_object());
    runtime
        .voice("c", LOCAL, VoiceInput::End)
        .await
        .expect("end");
    assert_eq!(
        conn.recv().await,
        json!({"realtimeInput": {"activityEnd": {}}})
    );
}

/// The one function response of a `toolResponse` message.
pub(super) fn only_response(message: &Value) -> &Value {
    let responses = message["toolResponse"]["functionResponses"]
        .as_array()
        .unwrap_or_else(|| panic!("expected a toolResponse: {message}"));
    assert_eq!(responses.len(), 1, "{message}");
    &responses[0]
}

/// The model is told at once that the call waits (so it goes on talking), and the same call
/// id carries the outcome once the person approved.
pub(super) async fn told_it_waits(conn: &mut FakeConn) {
    let awaiting = conn.recv().await;
    let response = only_response(&awaiting);
    assert_eq!(response["id"], CALL, "{awaiting}");
    assert_eq!(response["name"], "process_payment");
    assert_eq!(
        response["response"]["output"]["status"],
        "awaiting_countersignature"
    );
    assert_eq!(response["willContinue"], true);
    assert_eq!(response["scheduling"], "WHEN_IDLE");
}

pub(super) async fn approve(runtime: &Arc<Runtime>, approval_id: &str) -> Result<(), InputError> {
    within(
        "submit",
        runtime.submit(
            "c",
            &[PersonInput::Approval {
                approval_id: approval_id.to_owned(),
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        ),
    )
    .await
    .map(|_| ())
}

/// The card says the call was withdrawn (its output an error naming it), and an approval of
/// it is refused as withdrawn: it can never run.
pub(super) async fn told_withdrawn(
    runtime: &Arc<Runtime>,
    reader: &mut LogReader,
    approval_id: &str,
) {
    let error = loop {
        match within("the withdrawal", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolOutputError(e))) => break e.error_text,
            Some(TurnEntry::End) | None => panic!("the card did not say it ended"),
            Some(_) => {}
        }
    };
    assert!(
        error.starts_with(crate::protocol::chunk::WITHDRAWN_PREFIX),
        "{error}"
    );
    assert_eq!(
        approve(runtime, approval_id).await,
        Err(InputError::ApprovalWithdrawn {
            approval_id: approval_id.to_owned()
        })
    );
}

pub(super) async fn balance(runtime: &Arc<Runtime>) -> i64 {
    runtime
        .session("c")
        .await
        .unwrap()
        .snapshot()
        .wallet
        .balance_cents
}

/// The text of the turn's log from `reader` to its end.
pub(super) async fn text_to_end(reader: &mut LogReader) -> String {
    let mut text = String::new();
    loop {
        match within("the turn's log", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::End) | None => return text,
            Some(_) => {}
        }
    }
}

/// The text and speech the waiting turn's log shows up to the pause after them (the turn waits
/// again): (the text, the `data-pcm` chunks).
pub(super) async fn talk_while_it_waits(reader: &mut LogReader) -> (String, usize) {
    let (mut text, mut speech) = (String::new(), 0);
    loop {
        match within("the talk while it waits", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::Data(d))) if d.name == "pcm" => speech += 1,
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => {
                panic!("the talk asked for a call: {r:?}")
            }
            Some(TurnEntry::Pause) if !text.is_empty() => return (text, speech),
            Some(TurnEntry::End) | None => panic!("the waiting turn ended"),
            Some(_) => {}
        }
    }
}

/// What the model says once told the call waits ("waiting for your approval") reaches the
/// person inside the waiting turn, words and voice, and is kept in its message (before, it
/// belonged to no step and was dropped); the same call id carries the outcome once the person
/// approved.
#[tokio::test]
async fn a_spoken_payment_is_told_it_waits_and_answered_on_the_same_id_after_approval() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    // The model says so while the card waits: its words and its voice.
    conn.send(json!({"serverContent": {
        "modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000",
            "data": b64(&tone(24_000, 100))}}]},
        "outputTranscription": {"text": "It is on your screen, waiting for your approval."}
    }}))
    .await;
    conn.turn_complete().await;
    let (text, speech) = talk_while_it_waits(&mut reader).await;
    assert_eq!(text, "It is on your screen, waiting for your approval.");
    assert_eq!(speech, 1, "its voice is played too");
    // Nothing went to the model: the call still waits, and nothing ran.
    conn.silent_for(100).await;
    assert_eq!(balance(&runtime).await, 100_000, "nothing ran yet");
    let record = runtime.session("c").await.unwrap().snapshot();
    let kept = record.messages.to_vec().unwrap().pop().unwrap();
    assert!(
        serde_json::to_string(&kept)
            .unwrap()
            .contains("waiting for your approval"),
        "the waiting message keeps what the model said: {kept:?}"
    );

    approve(&runtime, &approval_id).await.expect("approved");
    let outcome = conn.recv().await;
    let response = only_response(&outcome);
    assert_eq!(response["id"], CALL, "the same call id: {outcome}");
    assert_eq!(response["response"]["wallet_balance"], 950, "{outcome}");
    assert_eq!(response["willContinue"], false, "the last response");
    assert_eq!(
        response["scheduling"], "WHEN_IDLE",
        "the model says what happened"
    );
    conn.say("Paid 50 dollars to Hanako.").await;
    conn.turn_complete().await;
    let text = text_to_end(&mut reader).await;
    assert_eq!(text, "Paid 50 dollars to Hanako.", "told once");
    assert_eq!(balance(&runtime).await, 95_000);
    server.no_new_conn(100).await;
}

#[tokio::test]
async fn a_denied_spoken_payment_is_answered_on_the_same_id_with_the_denial() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    within(
        "submit",
        runtime.submit(
            "c",
            &[PersonInput::Approval {
                approval_id,
                decision: ApprovalDecision::Deny {
                    reason: Some("not today".into()),
                },
                step_up: None,
            }],
        ),
    )
    .await
    .expect("denied");
    let outcome = conn.recv().await;
    let response = only_response(&outcome);
    assert_eq!(response["id"], CALL);
    assert_eq!(response["response"]["denied"], true, "{outcome}");
    assert_eq!(response["response"]["reason"], "not today", "{outcome}");
    assert_eq!(response["willContinue"], false);
    assert_eq!(response["scheduling"], "WHEN_IDLE");
    conn.say("All right, I did not pay.").await;
    conn.turn_complete().await;
    assert!(text_to_end(&mut reader).await.ends_with("I did not pay."));
    assert_eq!(balance(&runtime).await, 100_000);
}

/// A typed BIDI chat is not a voice chat: its calls are answered once, after the decision.
#[tokio::test]
async fn a_typed_payment_on_the_same_model_is_not_told_it_waits() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let started = runtime
        .start_turn(
            "c",
            UserTurn {
                text: "Pay Hanako 50 dollars".into(),
                transport: crate::agent::Transport::Bidi,
                ..Default::default()
            },
            None,
        )
        .await
        .expect("typed turn");
    let mut conn = server.next_conn().await;
    conn.setup().await;
    assert_eq!(conn.recv().await, user_turn("Pay Hanako 50 dollars"));
    conn.send(
        json!({"toolCall": {"functionCalls": [{"id": CALL, "name": "process_payment",
        "args": {"amount": 50, "recipient": "Hanako", "currency": "USD"}}]}}),
    )
    .await;
    conn.turn_complete().await;
    let mut reader = started.log.subscribe(0);
    loop {
        match within("approval request", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(_))) => break,
            Some(TurnEntry::End) | None => panic!("the payment did not ask"),
            Some(_) => {}
        }
    }
    conn.silent_for(200).await;
}

/// `toolCallCancellation` of the waiting call: the card says the model withdrew it, a late
/// approval is refused, nothing runs, and no response goes to the dead id.
#[tokio::test]
async fn a_call_the_model_cancels_while_it_waits_can_never_run() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    conn.send(json!({"toolCallCancellation": {"ids": [CALL]}}))
        .await;
    told_withdrawn(&runtime, &mut reader, &approval_id).await;
    // The model hears what became of it as text, never as a response to the cancelled id.
    let next = conn.recv().await;
    assert!(next.get("toolResponse").is_none(), "{next}");
    assert!(next.to_string().contains("withdrew"), "{next}");
    conn.say("Cancelled.").await;
    conn.turn_complete().await;
    text_to_end(&mut reader).await;
    assert_eq!(balance(&runtime).await, 100_000, "nothing was paid");
    assert_eq!(
        approve(&runtime, &approval_id).await,
        Err(InputError::ApprovalWithdrawn { approval_id })
    );
}

/// `goAway` while the call waits: the socket is gone, the approval is not (it lives on the
/// server); after the decision the outcome reaches the new socket as text (its ids mean
/// nothing there), and nothing is sent for the dead id.
#[tokio::test]
async fn a_socket_that_goes_away_while_the_call_waits_leaves_the_approval() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    // Not resumable while a call is out (§1 of voice.md): no handle to resume with.
    conn.send(json!({"sessionResumptionUpdate": {"resumable": false}}))
        .await;
    conn.send(json!({"goAway": {"timeLeft": "1s"}})).await;
    conn.close(1000, "").await;

    approve(&runtime, &approval_id).await.expect("approved");
    let mut next = server.next_conn().await;
    let setup = next.setup().await;
    assert!(
        setup["sessionResumption"].get("handle").is_none(),
        "a fresh session, seeded: {setup}"
    );
    let mut outcome = None;
    for _ in 0..3 {
        let message = next.recv().await;
        assert!(message.get("toolResponse").is_none(), "{message}");
        if message.to_string().contains("have finished") {
            outcome = Some(message);
            break;
        }
    }
    let outcome = outcome.expect("the outcome as text");
    assert!(outcome.to_string().contains("950"), "{outcome}");
    next.say("Paid.").await;
    next.turn_complete().await;
    assert!(text_to_end(&mut reader).await.ends_with("Paid."));
    assert_eq!(balance(&runtime).await, 95_000, "it ran once");
}

/// The person approves at the very moment the model cancels the call (`toolCallCancellation`),
/// round after round, the approval a little later in some, on two threads: exactly one of them
/// wins, and everything agrees with it. Approved: the payment ran once and the model is told
/// its outcome. Withdrawn: the approval is refused as withdrawn, nothing ran, and the dead id
/// gets no response. Either way a second approval is refused and the money moved at most once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_racing_the_models_cancellation_runs_the_call_once_or_never() {
    use crate::agent::store::{AuditKind, AuditQuery};
    const ROUNDS: usize = 24;
    let (mut approved, mut withdrawn) = (0, 0);
    for round in 0..ROUNDS {
        let mut server = FakeLive::start().await;
        let runtime = runtime(&server);
        let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
        told_it_waits(&mut conn).await;
        let approving = {
            let (runtime, approval_id) = (runtime.clone(), approval_id.clone());
            // The approval at once, after a few turns of the scheduler, or after a timer's
            // tick: the cancellation, on its way over the model's socket, arrives before, with
            // or after it.
            tokio::spawn(async move {
                match round % 3 {
                    0 => {}
                    1 => {
                        for _ in 0..round {
                            tokio::task::yield_now().await;
                        }
                    }
                    _ => tokio::time::sleep(Duration::from_millis(1)).await,
                }
                approve(&runtime, &approval_id).await
            })
        };
        conn.send(json!({"toolCallCancellation": {"ids": [CALL]}}))
            .await;
        let answer = within("the approval", approving).await.expect("joined");
        let told = conn.recv().await;
        let paid = match answer {
            Ok(()) => {
                approved += 1;
                assert!(told.to_string().contains("950"), "round {round}: {told}");
                true
            }
            Err(InputError::ApprovalWithdrawn { .. }) => {
                withdrawn += 1;
                assert!(told.get("toolResponse").is_none(), "round {round}: {told}");
                assert!(
                    told.to_string().contains("withdrew"),
                    "round {round}: {told}"
                );
                false
            }
            Err(other) => panic!("round {round}: the approval was refused otherwise: {other:?}"),
        };
        conn.say("Done.").await;
        conn.turn_complete().await;
        text_to_end(&mut reader).await;
        assert_eq!(
            balance(&runtime).await,
            if paid { 95_000 } else { 100_000 },
            "round {round}: the money moved {}",
            if paid { "once" } else { "never" }
        );
        assert!(
            approve(&runtime, &approval_id).await.is_err(),
            "round {round}: a second approval is refused"
        );
        assert_eq!(balance(&runtime).await, if paid { 95_000 } else { 100_000 });
        // The audit tells the same one story.
        let kinds: Vec<AuditKind> = runtime
            .store
            .audit(&AuditQuery::default())
            .await
            .expect("audit")
            .into_iter()
            .map(|e| e.event)
            .filter(|e| e.approval_id.as_deref() == Some(approval_id.as_str()))
            .map(|e| e.kind)
            .filter(|k| *k != AuditKind::Requested && *k != AuditKind::Spoken)
            .collect();
        let story = if paid {
            vec![AuditKind::Approved, AuditKind::Executed]
        } else {
            vec![AuditKind::Interrupted]
        };
        let mut sorted = kinds.clone();
        sorted.sort_by_key(|k| format!("{k:?}"));
        assert_eq!(sorted, story, "round {round}: the audit says {kinds:?}");
    }
    assert_eq!(approved + withdrawn, ROUNDS);
    eprintln!("approval won {approved} rounds, the cancellation {withdrawn}");
}
