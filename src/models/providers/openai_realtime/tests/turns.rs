//! Typed and gated turns on OpenAI Realtime through the runtime (ADR 0041): a text turn, a
//! spoken payment whose function output goes only after the person's decision (approve and
//! deny), a server error, a call withdrawn by a cancelled response.

use super::*;
use crate::agent::people::LOCAL;
use crate::agent::voice::{VoiceInput, VoiceMode};
use crate::agent::{ApprovalDecision, InputError, PersonInput, Transport, UserTurn};

async fn typed(runtime: &Arc<Runtime>, chat: &str, text: &str) -> LogReader {
    let started = within(
        "start",
        runtime.start_turn(
            chat,
            UserTurn {
                text: text.into(),
                transport: Transport::Bidi,
                ..Default::default()
            },
            None,
        ),
    )
    .await
    .expect("turn started");
    started.log.subscribe(0)
}

fn user_text(event: &Value) -> &str {
    assert_eq!(event["type"], "conversation.item.create", "{event}");
    assert_eq!(event["item"]["role"], "user", "{event}");
    assert_eq!(event["item"]["content"][0]["type"], "input_text", "{event}");
    event["item"]["content"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn a_typed_turn_goes_as_input_text_and_the_answer_streams_back() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let mut reader = typed(&runtime, "t", "Hello there").await;
    let (mut conn, session) = server.next_session().await;
    assert!(session["instructions"].as_str().unwrap().len() > 10);
    assert_eq!(
        session["audio"]["input"]["turn_detection"],
        Value::Null,
        "a chat that never spoke is not listened to"
    );
    assert_eq!(user_text(&conn.recv().await), "Hello there");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "Hi! ").await;
    conn.audio(&response, &tone(24_000, 40)).await;
    conn.say(&response, "How can I help?").await;
    conn.done(&response, "completed").await;
    let read = read_turn(&mut reader).await;
    assert_eq!(read.text, "Hi! How can I help?");
    assert_eq!(read.speech, tone(24_000, 40));
    assert!(read.errors.is_empty(), "{:?}", read.errors);
    assert!(
        runtime
            .models()
            .label()
            .contains("openai-realtime:gpt-realtime")
    );

    // The next turn goes on the same socket with only the new message.
    let mut reader = typed(&runtime, "t", "Thanks").await;
    assert_eq!(user_text(&conn.recv().await), "Thanks");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "You're welcome.").await;
    conn.done(&response, "completed").await;
    assert_eq!(read_turn(&mut reader).await.text, "You're welcome.");
    server.no_new_conn(50).await;
}

/// A spoken "pay Hanako 50 dollars" in chat `chat`: the card is up and the turn waits. Returns
/// the connection (past the call's `response.done`), the turn's reader and the approval id.
pub(super) async fn spoken_payment(
    server: &mut FakeRealtime,
    runtime: &Arc<Runtime>,
    chat: &str,
    finish_response: bool,
) -> (FakeConn, LogReader, String) {
    let first = runtime.clone();
    let chat_id = chat.to_owned();
    let opening = tokio::spawn(async move {
        first
            .voice(
                &chat_id,
                LOCAL,
                VoiceInput::Start {
                    mode: VoiceMode::PushToTalk,
                },
            )
            .await
    });
    let (mut conn, _) = server.next_session().await;
    within("start", opening).await.unwrap().expect("start");
    conn.expect("input_audio_buffer.clear").await;
    let said = tone(16_000, 64);
    runtime
        .voice(chat, LOCAL, VoiceInput::Audio(Arc::from(said.as_slice())))
        .await
        .unwrap();
    runtime.voice(chat, LOCAL, VoiceInput::End).await.unwrap();
    while conn.recv().await["type"] != "response.create" {}
    let response = conn.response_created().await;
    conn.heard("Pay Hanako 50 dollars").await;
    conn.say(&response, "I'll ask for your countersignature.")
        .await;
    conn.call(
        &response,
        "call_pay",
        "process_payment",
        json!({"amount": 50, "recipient": "Hanako", "currency": "USD"}),
    )
    .await;
    if finish_response {
        conn.done(&response, "completed").await;
    }
    let mut reader = current_turn_log(runtime, chat).await;
    let read = read_turn(&mut reader).await;
    let approval = read.approval.expect("the spoken payment asks for approval");
    let record = runtime.session(chat).await.unwrap().snapshot();
    assert_eq!(
        record.history.to_vec().unwrap()[0],
        crate::agent::history::HistoryItem::user("Pay Hanako 50 dollars")
    );
    (conn, reader, approval)
}

pub(super) async fn decide(
    runtime: &Arc<Runtime>,
    chat: &str,
    approval_id: &str,
    decision: ApprovalDecision,
) {
    within(
        "the decision",
        runtime.submit(
            chat,
            &[PersonInput::Approval {
                approval_id: approval_id.to_owned(),
                decision,
                step_up: None,
            }],
        ),
    )
    .await
    .expect("decision accepted");
}

#[tokio::test]
async fn a_spoken_payment_s_function_output_goes_only_after_the_approval() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, mut reader, approval) = spoken_payment(&mut server, &runtime, "pay", true).await;
    // The card waits: nothing goes to the model, whatever time passes.
    conn.silent_for(300).await;
    decide(&runtime, "pay", &approval, ApprovalDecision::Approve).await;
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output");
    assert_eq!(output["item"]["call_id"], "call_pay");
    let result: Value = serde_json::from_str(output["item"]["output"].as_str().unwrap()).unwrap();
    assert_eq!(result["wallet_balance"], 950, "{result}");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "Paid 50 dollars to Hanako.").await;
    conn.done(&response, "completed").await;
    let read = read_turn(&mut reader).await;
    assert_eq!(read.text, "Paid 50 dollars to Hanako.");
    let session = runtime.existing_session("pay").await.unwrap().unwrap();
    assert_eq!(session.snapshot().wallet.balance_cents, 95_000);
}

#[tokio::test]
async fn a_denied_spoken_payment_sends_the_denial_and_nothing_runs() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, mut reader, approval) =
        spoken_payment(&mut server, &runtime, "deny", true).await;
    decide(
        &runtime,
        "deny",
        &approval,
        ApprovalDecision::Deny {
            reason: Some("not today".into()),
        },
    )
    .await;
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output");
    assert_eq!(output["item"]["call_id"], "call_pay");
    let result = output["item"]["output"].as_str().unwrap();
    assert!(result.contains("denied"), "{result}");
    assert!(result.contains("not today"), "{result}");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "All right, I did not pay.").await;
    conn.done(&response, "completed").await;
    assert_eq!(
        read_turn(&mut reader).await.text,
        "All right, I did not pay."
    );
    let session = runtime.existing_session("deny").await.unwrap().unwrap();
    assert_eq!(
        session.snapshot().wallet.balance_cents,
        100_000,
        "nothing paid"
    );
}

/// The step ends with the call at once (no grace); the model then cancels the response that
/// made it: the approval is withdrawn, cannot be approved, and nothing runs.
#[tokio::test]
async fn a_cancelled_response_withdraws_its_waiting_call() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::ZERO);
    let (mut conn, mut reader, approval) =
        spoken_payment(&mut server, &runtime, "gone", false).await;
    conn.done("resp_1", "cancelled").await;
    // The turn goes on: the model hears what became of its call (as words: its call id is
    // void) and answers.
    let told = conn.expect("conversation.item.create").await;
    assert_eq!(
        told["item"]["type"], "message",
        "no function output for a void call"
    );
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "All right, I will not pay.").await;
    conn.done(&response, "completed").await;
    let read = read_turn(&mut reader).await;
    assert_eq!(read.text, "All right, I will not pay.");
    assert!(
        read.tool_errors.iter().any(|e| e.contains("withdrew")),
        "{read:?}"
    );
    let refused = runtime
        .submit(
            "gone",
            &[PersonInput::Approval {
                approval_id: approval.clone(),
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        InputError::ApprovalWithdrawn {
            approval_id: approval
        }
    );
    let session = runtime.existing_session("gone").await.unwrap().unwrap();
    assert_eq!(
        session.snapshot().wallet.balance_cents,
        100_000,
        "nothing paid"
    );
}

/// The step ends with the call at once (no grace) and the card is up; what the model still
/// says in that response — words and speech — reaches the person in the waiting turn's
/// message, and the card still decides: the output goes on the call's id after the click.
#[tokio::test]
async fn what_the_model_says_after_a_grace_ended_step_is_heard() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::ZERO);
    let (mut conn, mut reader, approval) =
        spoken_payment(&mut server, &runtime, "tail", false).await;
    let message = runtime
        .session("tail")
        .await
        .unwrap()
        .snapshot()
        .turn
        .expect("the waiting turn")
        .message_id;
    conn.say("resp_1", "It is on your screen, waiting for you.")
        .await;
    conn.audio("resp_1", &tone(24_000, 40)).await;
    conn.done("resp_1", "completed").await;
    // Read to the turn's next pause: the card waits again after the words.
    let mut read = Read {
        approval: Some(approval.clone()),
        ..Read::default()
    };
    read_on(&mut reader, &mut read, |_| false).await;
    assert_eq!(read.text, "It is on your screen, waiting for you.");
    assert_eq!(read.speech, tone(24_000, 40), "the tail is heard");
    let record = runtime.session("tail").await.unwrap().snapshot();
    let messages = record.messages.to_vec().unwrap();
    let waiting = messages
        .iter()
        .find(|m| m.id == message)
        .expect("the waiting message");
    assert!(
        serde_json::to_string(waiting)
            .unwrap()
            .contains("It is on your screen, waiting for you."),
        "the words are in the message whose card waits: {waiting:?}"
    );
    conn.silent_for(100).await;

    decide(&runtime, "tail", &approval, ApprovalDecision::Approve).await;
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output");
    assert_eq!(output["item"]["call_id"], "call_pay");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.say(&response, "Paid.").await;
    conn.done(&response, "completed").await;
    let read = read_turn(&mut reader).await;
    assert_eq!(read.text, "Paid.");
    let session = runtime.existing_session("tail").await.unwrap().unwrap();
    assert_eq!(session.snapshot().wallet.balance_cents, 95_000);
}

#[tokio::test]
async fn a_server_error_ends_the_turn_with_its_words() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let mut reader = typed(&runtime, "e", "Hello").await;
    let (mut conn, _) = server.next_session().await;
    user_text(&conn.recv().await);
    conn.expect("response.create").await;
    conn.send(json!({"type": "error", "event_id": "ev9", "error": {
        "type": "invalid_request_error", "code": "invalid_value",
        "message": "Invalid value: 'marine'. Supported values are: 'alloy', 'marin'.",
        "param": "session.audio.output.voice", "event_id": null}}))
        .await;
    let read = read_turn(&mut reader).await;
    assert_eq!(read.errors.len(), 1, "{read:?}");
    assert!(
        read.errors[0].contains("Invalid value: 'marine'"),
        "the server's own words: {}",
        read.errors[0]
    );
}

#[tokio::test]
async fn a_refused_key_ends_the_turn_with_the_provider_s_words() {
    let server = FakeRealtime::start_with(Some(401)).await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let mut reader = typed(&runtime, "k", "Hello").await;
    let read = read_turn(&mut reader).await;
    assert_eq!(read.errors.len(), 1, "{read:?}");
    assert!(
        read.errors[0].contains("401") && read.errors[0].contains("Incorrect API key provided"),
        "{}",
        read.errors[0]
    );
    assert!(
        !read.errors[0].contains("test-key"),
        "the key is never shown"
    );
}
