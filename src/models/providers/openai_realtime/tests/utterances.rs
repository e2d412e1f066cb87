//! Speech the runner has not taken yet (ADR 0041, "utterances"), at the model's own interface
//! so that the order of the steps is the test's: an utterance answered while a turn of the
//! chat is still running keeps its answer through the steps that turn takes first, and a second
//! utterance while the first waits is announced and answered too. Nothing is said twice (no
//! utterance goes again as text, no answer is asked for again) and nothing is lost.

use super::*;
use crate::agent::history::{AssistantPart, HistoryItem, Outcome, ToolCall, ToolResult};
use crate::agent::model::{Model, ModelEvent, ModelRequest};
use crate::agent::voice::{VoiceInput, VoiceMode, VoiceNotice, VoiceSubscription};
use crate::models::providers::testing::{text_of, until_finish};

const CHAT: &str = "u";

fn request(history: &[HistoryItem]) -> ModelRequest {
    ModelRequest {
        session_id: CHAT.into(),
        system: "Be brief.".into(),
        history: Arc::new(history.to_vec()),
        tools: Vec::new(),
    }
}

/// What the runner records of a step that only spoke.
fn said(text: &str) -> HistoryItem {
    HistoryItem::Assistant {
        parts: vec![AssistantPart::Text {
            text: text.into(),
            provider_data: None,
        }],
    }
}

async fn heard(notices: &mut VoiceSubscription) -> String {
    match within("a spoken turn announced", notices.recv()).await {
        Some(VoiceNotice::Heard {
            session_id,
            transcript,
        }) => {
            assert_eq!(session_id, CHAT);
            transcript
        }
        other => panic!("expected the words heard, got {other:?}"),
    }
}

async fn committed(conn: &mut FakeConn, item: &str) {
    conn.send(json!({"type": "input_audio_buffer.committed", "item_id": item}))
        .await;
}

async fn transcribed(conn: &mut FakeConn, item: &str, transcript: &str) {
    conn.send(
        json!({"type": "conversation.item.input_audio_transcription.completed",
        "item_id": item, "content_index": 0, "transcript": transcript}),
    )
    .await;
}

/// The model hands-free, its socket open and the chat's voice notices followed.
async fn listening(
    server: &mut FakeRealtime,
) -> (OpenAiRealtimeModel, FakeConn, VoiceSubscription) {
    let model = OpenAiRealtimeModel::with_clock(
        config(server, Duration::from_secs(2)),
        server.clock.clone(),
    )
    .expect("model");
    let notices = model.voice_notices().expect("a voice model announces");
    model.voice_context(request(&[]));
    model
        .voice(
            CHAT,
            VoiceInput::Start {
                mode: VoiceMode::HandsFree,
            },
        )
        .expect("start");
    let (conn, _) = server.next_session().await;
    (model, conn, notices)
}

#[tokio::test]
async fn speech_answered_while_a_turn_runs_keeps_its_answer_and_a_second_utterance_is_not_lost() {
    let mut server = FakeRealtime::start().await;
    let (model, mut conn, mut notices) = listening(&mut server).await;
    let mut history = vec![HistoryItem::user("What's the weather in Tokyo?")];

    // A typed turn's first step: the model calls a tool, and meanwhile the person speaks; the
    // server commits the speech and starts answering it (`response.created` of its own).
    let mut first = model.stream(request(&history));
    conn.expect("conversation.item.create").await;
    conn.expect("response.create").await;
    let typed = conn.response_created().await;
    conn.call(
        &typed,
        "call_w",
        "get_weather",
        json!({"location": "Tokyo"}),
    )
    .await;
    committed(&mut conn, "item_u1").await;
    let joke = conn.server_response_created().await;
    transcribed(&mut conn, "item_u1", "Tell me a joke").await;
    assert_eq!(heard(&mut notices).await, "Tell me a joke");
    conn.done(&typed, "completed").await;
    let events = until_finish(&mut first).await;
    let mut call: ToolCall = events
        .iter()
        .find_map(|e| match e {
            ModelEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .expect("the call");
    call.id = "call-1".into();
    history.push(HistoryItem::Assistant {
        parts: vec![AssistantPart::ToolCall { call: call.clone() }],
    });
    history.push(HistoryItem::ToolResults {
        results: vec![ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            outcome: Outcome::Output {
                output: json!({"temperature_c": 21}),
            },
            edited_args: None,
        }],
    });

    // The turn's next step comes before the spoken turn (the runtime starts that one when this
    // turn stops): it is not the spoken turn's, so it sends its own request and the answer to
    // the speech stays held for its turn. Its `response.create` waits for that answer's end.
    let mut second = model.stream(request(&history));
    let output = conn.expect("conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output", "{output}");
    conn.say(&joke, "Why did the chicken cross the road?").await;
    conn.done(&joke, "completed").await;
    conn.expect("response.create").await;
    let weather = conn.response_created().await;
    conn.say(&weather, "Sunny in Tokyo.").await;
    conn.done(&weather, "completed").await;
    assert_eq!(text_of(&until_finish(&mut second).await), "Sunny in Tokyo.");
    history.push(said("Sunny in Tokyo."));

    // Before the spoken turn starts, the person speaks again and that is answered too.
    committed(&mut conn, "item_u2").await;
    let knock = conn.server_response_created().await;
    transcribed(&mut conn, "item_u2", "Another one").await;
    conn.say(&knock, "Knock knock.").await;
    conn.done(&knock, "completed").await;
    assert_eq!(heard(&mut notices).await, "Another one");

    // The spoken turns, in the order they were said: each one's step plays the answer the
    // server gave, and nothing goes to the server for either (it heard both).
    history.push(HistoryItem::user("Tell me a joke"));
    let mut third = model.stream(request(&history));
    assert_eq!(
        text_of(&until_finish(&mut third).await),
        "Why did the chicken cross the road?"
    );
    history.push(said("Why did the chicken cross the road?"));
    history.push(HistoryItem::user("Another one"));
    let mut fourth = model.stream(request(&history));
    assert_eq!(text_of(&until_finish(&mut fourth).await), "Knock knock.");
    conn.silent_for(200).await;
    server.no_new_conn(50).await;
}

/// The person spoke just before a typed step's `response.create` reached the server, which
/// started answering the speech on its own and refused ours: the step is not handed the
/// answer to the speech (its `response.created` carries none of our `metadata`), asks again
/// when that answer ends and reads only its own response; the spoken turn then plays the
/// server's answer.
#[tokio::test]
async fn a_typed_step_that_meets_the_servers_answer_to_speech_waits_for_it() {
    let mut server = FakeRealtime::start().await;
    let (model, mut conn, mut notices) = listening(&mut server).await;
    let mut history = vec![HistoryItem::user("Hello")];
    let mut typed = model.stream(request(&history));
    conn.expect("conversation.item.create").await;
    committed(&mut conn, "item_u1").await;
    let answer = conn.server_response_created().await;
    conn.refuse_next_create().await;
    transcribed(&mut conn, "item_u1", "Good morning").await;
    assert_eq!(heard(&mut notices).await, "Good morning");
    conn.say(&answer, "Morning!").await;
    conn.done(&answer, "completed").await;
    let again = conn.expect("response.create").await;
    assert_eq!(
        again["response"]["metadata"]["countersign"], "step",
        "{again}"
    );
    let mine = conn.response_created().await;
    conn.say(&mine, "Hi there.").await;
    conn.done(&mine, "completed").await;
    assert_eq!(text_of(&until_finish(&mut typed).await), "Hi there.");

    history.push(said("Hi there."));
    history.push(HistoryItem::user("Good morning"));
    let mut spoken = model.stream(request(&history));
    assert_eq!(text_of(&until_finish(&mut spoken).await), "Morning!");
    conn.silent_for(200).await;
}

/// Words the runtime starts no turn for (the chat is not the speaker's any more) are declined:
/// their answer goes, so the next aside plays the answer to the words said after them, not to
/// the declined ones.
#[tokio::test]
async fn declined_words_lose_their_answer_and_the_next_aside_plays_the_next_one() {
    let mut server = FakeRealtime::start().await;
    let (model, mut conn, mut notices) = listening(&mut server).await;
    for (item, words, answer) in [
        ("item_u1", "Pay Hanako", "Declined words."),
        ("item_u2", "Is it sunny?", "It is sunny."),
    ] {
        committed(&mut conn, item).await;
        let response = conn.server_response_created().await;
        transcribed(&mut conn, item, words).await;
        conn.say(&response, answer).await;
        conn.done(&response, "completed").await;
        assert_eq!(heard(&mut notices).await, words);
    }
    model.decline_spoken(CHAT, "Pay Hanako");
    let mut aside = model.aside(CHAT);
    assert_eq!(text_of(&until_finish(&mut aside).await), "It is sunny.");
    conn.silent_for(100).await;
}
