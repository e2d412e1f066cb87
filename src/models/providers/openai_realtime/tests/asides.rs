//! Speaking while a spoken call's card waits, on OpenAI Realtime (ADR 0035, asides): the
//! response to the speech streams into the waiting turn, the words decide nothing, the card
//! stays decidable and the call's output still goes on its own call id after the decision; a
//! call the model makes in the aside gets an output saying it was not run.

use super::turns::{decide, spoken_payment};
use super::*;
use crate::agent::people::LOCAL;
use crate::agent::store::{AuditKind, AuditQuery};
use crate::agent::voice::{VoiceInput, VoiceMode};
use crate::agent::{ApprovalDecision, history::HistoryItem};

/// The person speaks again while the card waits: push-to-talk to its `response.create`, then
/// the server's response to it, heard as `words`. Returns the response id.
async fn say_while_it_waits(runtime: &Arc<Runtime>, conn: &mut FakeConn, words: &str) -> String {
    runtime
        .voice(
            "pay",
            LOCAL,
            VoiceInput::Start {
                mode: VoiceMode::PushToTalk,
            },
        )
        .await
        .expect("start");
    conn.expect("input_audio_buffer.clear").await;
    let said = tone(16_000, 64);
    runtime
        .voice("pay", LOCAL, VoiceInput::Audio(Arc::from(said.as_slice())))
        .await
        .unwrap();
    runtime.voice("pay", LOCAL, VoiceInput::End).await.unwrap();
    while conn.recv().await["type"] != "response.create" {}
    let response = conn.response_created().await;
    conn.heard(words).await;
    response
}

/// The waiting turn's log through an aside, to the pause after it: (the words heard, the
/// answer's text, its speech).
async fn read_aside(reader: &mut LogReader) -> (String, String, Vec<u8>) {
    let (mut heard, mut text, mut speech) = (String::new(), String::new(), Vec::new());
    loop {
        match within("the aside", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::Data(d))) if d.name == "voice" => {
                assert_ne!(d.data["state"], "heard", "no spoken turn of its own: {d:?}");
                if d.data["state"] == "aside" {
                    heard = d.data["text"].as_str().unwrap_or_default().to_owned();
                }
            }
            Some(TurnEntry::Chunk(Chunk::Data(d))) if d.name == "pcm" => {
                speech.extend(unb64(&d.data["content"]))
            }
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => {
                panic!("the aside asked for a call: {r:?}")
            }
            Some(TurnEntry::Pause) if !heard.is_empty() => return (heard, text, speech),
            Some(TurnEntry::End) | None => panic!("the waiting turn ended"),
            Some(_) => {}
        }
    }
}

async fn balance(runtime: &Arc<Runtime>) -> i64 {
    runtime
        .session("pay")
        .await
        .unwrap()
        .snapshot()
        .wallet
        .balance_cents
}

/// "Yes, approve it" while the card waits, answered by a model that claims it paid: the
/// answer (words and speech) reaches the person inside the waiting turn, nothing goes to the
/// model for the waiting call, the words are in the approval's audit, and the click — the card
/// was not superseded — runs the call, whose output goes on `call_pay`.
#[tokio::test]
async fn a_spoken_yes_is_an_aside_and_the_card_still_decides() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, mut reader, approval) = spoken_payment(&mut server, &runtime, "pay", true).await;
    let response = say_while_it_waits(&runtime, &mut conn, "yes, approve it").await;
    conn.say(&response, "Done, I paid Hanako.").await;
    conn.audio(&response, &tone(24_000, 40)).await;
    conn.done(&response, "completed").await;
    let (heard, text, speech) = read_aside(&mut reader).await;
    assert_eq!(heard, "yes, approve it");
    assert_eq!(text, "Done, I paid Hanako.");
    assert_eq!(speech, tone(24_000, 40), "the aside is heard");
    conn.silent_for(200).await;
    assert_eq!(balance(&runtime).await, 100_000, "nothing was paid");
    let record = runtime.session("pay").await.unwrap().snapshot();
    assert!(
        !record
            .history
            .to_vec()
            .unwrap()
            .contains(&HistoryItem::user("yes, approve it"))
    );
    let audit = runtime.store.audit(&AuditQuery::default()).await.unwrap();
    let spoken = audit
        .iter()
        .find(|r| {
            r.event.kind == AuditKind::Spoken
                && r.event.approval_id.as_deref() == Some(approval.as_str())
        })
        .and_then(|r| r.event.reason.clone())
        .expect("the words in the approval's audit");
    assert!(spoken.contains("\"yes, approve it\""), "{spoken}");

    decide(&runtime, "pay", &approval, ApprovalDecision::Approve).await;
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output");
    assert_eq!(output["item"]["call_id"], "call_pay", "the same call id");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "Paid 50 dollars to Hanako.").await;
    conn.done(&response, "completed").await;
    assert_eq!(
        read_turn(&mut reader).await.text,
        "Paid 50 dollars to Hanako."
    );
    assert_eq!(balance(&runtime).await, 95_000, "it ran once, by the card");
    server.no_new_conn(50).await;
}

/// The model calls `process_payment` again in the aside: the call gets at once an output
/// saying it was not run (no `response.create`: nothing new is generated for it), no card
/// appears for it, and only the waiting call runs.
#[tokio::test]
async fn a_call_made_in_an_aside_is_answered_as_not_run() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, mut reader, approval) = spoken_payment(&mut server, &runtime, "pay", true).await;
    let response = say_while_it_waits(&runtime, &mut conn, "and pay Bob 50 too").await;
    conn.call(
        &response,
        "call_bob",
        "process_payment",
        json!({"amount": 50, "recipient": "Bob", "currency": "USD"}),
    )
    .await;
    let refused = conn.expect("conversation.item.create").await;
    assert_eq!(refused["item"]["type"], "function_call_output");
    assert_eq!(refused["item"]["call_id"], "call_bob");
    assert!(
        refused["item"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("not run")),
        "{refused}"
    );
    conn.say(&response, "Once this one is decided.").await;
    conn.done(&response, "completed").await;
    read_aside(&mut reader).await;
    conn.silent_for(100).await;
    decide(&runtime, "pay", &approval, ApprovalDecision::Approve).await;
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["call_id"], "call_pay");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "Paid Hanako.").await;
    conn.done(&response, "completed").await;
    read_turn(&mut reader).await;
    assert_eq!(balance(&runtime).await, 95_000, "Hanako only, once");
}
