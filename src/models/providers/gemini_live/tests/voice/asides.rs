//! Speaking while a spoken call's card waits (ADR 0035, asides): the conversation goes on
//! around the waiting call. The answer streams into the waiting turn; the words decide nothing
//! and are kept in the approval's audit; the card stays decidable and the outcome still goes on
//! the call's own id; a call the aside asks for runs nothing; a typed message still supersedes.

use super::approvals::{
    CALL, approve, balance, only_response, speak, spoken_payment, text_to_end, told_it_waits,
    told_withdrawn,
};
use super::*;
use crate::agent::{
    InputError, UserTurn,
    history::HistoryItem,
    store::{AuditKind, AuditQuery},
};

/// The person holds the button again while the card waits and says `words`; the fake model
/// hears them (input transcription).
async fn say_while_it_waits(runtime: &Arc<Runtime>, conn: &mut FakeConn, words: &str) {
    runtime
        .voice(
            "c",
            LOCAL,
            VoiceInput::Start {
                mode: VoiceMode::PushToTalk,
            },
        )
        .await
        .expect("start");
    assert_eq!(
        conn.recv().await,
        json!({"realtimeInput": {"activityStart": {}}})
    );
    speak(runtime, conn).await;
    conn.send(json!({"serverContent": {"inputTranscription": {"text": words}}}))
        .await;
}

/// What the waiting turn's log shows of an aside, up to the pause after it: (the words heard,
/// the answer's text).
async fn read_aside(reader: &mut LogReader) -> (String, String) {
    let (mut heard, mut text) = (String::new(), String::new());
    loop {
        match within("the aside", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::Data(d))) if d.name == "voice" => {
                if d.data["state"] == "aside" {
                    heard = d.data["text"].as_str().unwrap_or_default().to_owned();
                }
                assert_ne!(d.data["state"], "heard", "no spoken turn of its own: {d:?}");
            }
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => {
                panic!("the aside asked for a call: {r:?}")
            }
            Some(TurnEntry::Pause) if !heard.is_empty() => return (heard, text),
            Some(TurnEntry::End) | None => panic!("the waiting turn ended"),
            Some(_) => {}
        }
    }
}

/// The audit events of the approval.
async fn audit_of(runtime: &Arc<Runtime>, approval_id: &str) -> Vec<(AuditKind, Option<String>)> {
    let mut events: Vec<_> = runtime
        .store
        .audit(&AuditQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.event.approval_id.as_deref() == Some(approval_id))
        .map(|r| (r.seq, r.event.kind, r.event.reason))
        .collect();
    events.sort_by_key(|(seq, ..)| *seq);
    events
        .into_iter()
        .map(|(_, kind, reason)| (kind, reason))
        .collect()
}

/// "Yes, approve it" said while the card waits, to a model that takes it as a yes (the hazard):
/// its answer reaches the person inside the waiting turn, nothing runs, the words are kept as
/// what was said, and the card — not superseded — is what runs the call, whose outcome goes on
/// the call's own id. (Before asides, the utterance superseded the card: it could no longer be
/// approved, and the conversation did not go on around it.)
#[tokio::test]
async fn a_spoken_yes_is_an_aside_that_approves_nothing_and_the_card_still_decides() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    say_while_it_waits(&runtime, &mut conn, "yes, approve it").await;
    conn.say("Done, I paid Hanako.").await;
    conn.turn_complete().await;
    let (heard, text) = read_aside(&mut reader).await;
    assert_eq!(heard, "yes, approve it");
    assert_eq!(
        text, "Done, I paid Hanako.",
        "the answer streams into the turn"
    );
    // Nothing went to the model for the waiting call: it still waits.
    conn.silent_for(100).await;
    assert_eq!(balance(&runtime).await, 100_000, "nothing was paid");
    let record = runtime.session("c").await.unwrap().snapshot();
    assert!(
        !record
            .history
            .to_vec()
            .unwrap()
            .contains(&HistoryItem::user("yes, approve it")),
        "an aside is not a message of the history (the call's result must follow the call)"
    );
    let audit = audit_of(&runtime, &approval_id).await;
    let spoken: Vec<_> = audit
        .iter()
        .filter(|(kind, _)| *kind == AuditKind::Spoken)
        .collect();
    assert_eq!(spoken.len(), 1, "{audit:?}");
    let words = spoken[0].1.clone().unwrap_or_default();
    assert!(
        words.contains("\"yes, approve it\"") && words.contains("decide nothing"),
        "{words}"
    );
    assert!(
        !audit
            .iter()
            .any(|(k, _)| matches!(k, AuditKind::Approved | AuditKind::Executed)),
        "{audit:?}"
    );

    approve(&runtime, &approval_id)
        .await
        .expect("the card still decides");
    let outcome = conn.recv().await;
    let response = only_response(&outcome);
    assert_eq!(response["id"], CALL, "the same call id: {outcome}");
    assert_eq!(response["response"]["wallet_balance"], 950, "{outcome}");
    assert_eq!(response["willContinue"], false);
    assert_eq!(response["scheduling"], "WHEN_IDLE");
    conn.say("Paid 50 dollars to Hanako.").await;
    conn.turn_complete().await;
    assert!(
        text_to_end(&mut reader)
            .await
            .ends_with("Paid 50 dollars to Hanako.")
    );
    assert_eq!(balance(&runtime).await, 95_000, "it ran once, by the card");
    let kinds: Vec<AuditKind> = audit_of(&runtime, &approval_id)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let spoken_at = kinds.iter().position(|k| *k == AuditKind::Spoken);
    let approved_at = kinds.iter().position(|k| *k == AuditKind::Approved);
    assert!(spoken_at < approved_at, "{kinds:?}");
    server.no_new_conn(100).await;
}

/// The click lands while the aside's answer is still streaming: the answer ends first, then
/// the call runs once and its outcome goes on its id.
#[tokio::test]
async fn the_click_racing_an_aside_runs_the_call_once_after_the_answer() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    say_while_it_waits(&runtime, &mut conn, "is it done yet?").await;
    conn.say("Not yet; it waits for your approval").await;
    // The aside is under way (its first words are in the log) when the card is clicked.
    loop {
        match within("the aside's words", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(_))) => break,
            Some(TurnEntry::End) | None => panic!("the waiting turn ended"),
            Some(_) => {}
        }
    }
    approve(&runtime, &approval_id).await.expect("approved");
    conn.say(" on screen.").await;
    conn.turn_complete().await;
    let outcome = conn.recv().await;
    let response = only_response(&outcome);
    assert_eq!(response["id"], CALL, "{outcome}");
    assert_eq!(response["response"]["wallet_balance"], 950, "{outcome}");
    conn.say("Paid.").await;
    conn.turn_complete().await;
    let text = text_to_end(&mut reader).await;
    assert_eq!(
        text, " on screen.Paid.",
        "the aside's end, then the outcome"
    );
    assert_eq!(balance(&runtime).await, 95_000, "it ran once");
}

/// The provider cancels the waiting call during the aside (`toolCallCancellation` in the
/// answer to the speech): the card says the model withdrew it, a late click is refused, and
/// nothing ever runs.
#[tokio::test]
async fn a_call_the_provider_cancels_during_an_aside_can_never_run() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    say_while_it_waits(&runtime, &mut conn, "actually, cancel that").await;
    conn.say("All right, I cancelled it.").await;
    conn.send(json!({"toolCallCancellation": {"ids": [CALL]}}))
        .await;
    conn.turn_complete().await;
    told_withdrawn(&runtime, &mut reader, &approval_id).await;
    let next = conn.recv().await;
    assert!(next.get("toolResponse").is_none(), "{next}");
    conn.say("Cancelled.").await;
    conn.turn_complete().await;
    text_to_end(&mut reader).await;
    assert_eq!(balance(&runtime).await, 100_000, "nothing was paid");
}

/// The model asks for another payment in the aside: it is answered at once as not run (on its
/// own id, silently), no card appears for it, and only the waiting call runs, once.
#[tokio::test]
async fn a_call_asked_for_in_an_aside_runs_nothing() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, mut reader, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    say_while_it_waits(&runtime, &mut conn, "and pay Bob 50 too").await;
    conn.send(
        json!({"toolCall": {"functionCalls": [{"id": "fc-bob", "name": "process_payment",
        "args": {"amount": 50, "recipient": "Bob", "currency": "USD"}}]}}),
    )
    .await;
    let refused = conn.recv().await;
    let response = only_response(&refused);
    assert_eq!(response["id"], "fc-bob", "{refused}");
    assert!(
        response["response"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("not run")),
        "{refused}"
    );
    assert_eq!(response["scheduling"], "SILENT");
    conn.say("I can do that once this one is decided.").await;
    conn.turn_complete().await;
    read_aside(&mut reader).await;
    approve(&runtime, &approval_id).await.expect("approved");
    let outcome = conn.recv().await;
    assert_eq!(only_response(&outcome)["id"], CALL, "{outcome}");
    conn.say("Paid Hanako.").await;
    conn.turn_complete().await;
    text_to_end(&mut reader).await;
    assert_eq!(balance(&runtime).await, 95_000, "Hanako only, once");
}

/// A typed message while a spoken call waits is a new request, as in any chat: it supersedes
/// the card (nothing runs), the model gets the call's last response on its id (silently) and
/// then the message.
#[tokio::test]
async fn a_typed_message_while_a_spoken_call_waits_supersedes_it() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, _, approval_id) = spoken_payment(&runtime, &mut server).await;
    told_it_waits(&mut conn).await;
    runtime
        .start_turn(
            "c",
            UserTurn {
                text: "never mind, what is the time?".into(),
                transport: crate::agent::Transport::Bidi,
                ..Default::default()
            },
            None,
        )
        .await
        .expect("typed turn");
    let ended = conn.recv().await;
    let response = only_response(&ended);
    assert_eq!(response["id"], CALL, "{ended}");
    assert_eq!(response["response"]["superseded"], true, "{ended}");
    assert_eq!(response["willContinue"], false);
    assert_eq!(response["scheduling"], "SILENT");
    assert_eq!(
        conn.recv().await,
        user_turn("never mind, what is the time?")
    );
    assert_eq!(
        approve(&runtime, &approval_id).await,
        Err(InputError::ApprovalSuperseded { approval_id })
    );
    assert_eq!(balance(&runtime).await, 100_000);
}
