//! The held-answer race on Gemini Live (ADR 0035), at the model's own interface so that the
//! order of the steps is the test's: the person speaks after a running turn's step called a
//! tool, the model answers the speech at once, and the turn's next step reaches the actor
//! before the spoken turn does. That step waits for the answer's generation to end, goes the
//! usual way, and the spoken turn then plays the answer the model gave: nothing goes again.

use super::*;
use crate::agent::history::Outcome;
use crate::agent::model::Model;
use crate::agent::voice::{VoiceNotice, VoiceSubscription};

/// The model hands-free for chat `chat-1`, its socket open and its voice notices followed.
async fn listening(server: &mut FakeLive) -> (GeminiLiveModel, FakeConn, VoiceSubscription) {
    let model = live(server, BLOCKING_MODEL);
    let notices = model.voice_notices().expect("a voice model announces");
    model.voice_context(Chat::new().request());
    model
        .voice(
            "chat-1",
            VoiceInput::Start {
                mode: VoiceMode::HandsFree,
            },
        )
        .expect("start");
    let mut conn = server.next_conn().await;
    conn.setup().await;
    (model, conn, notices)
}

/// The words of the next spoken turn the model announces.
async fn heard(notices: &mut VoiceSubscription, what: &str) -> String {
    match within(what, notices.recv()).await {
        Some(VoiceNotice::Heard { transcript, .. }) => transcript,
        other => panic!("expected the words heard, got {other:?}"),
    }
}

#[tokio::test]
async fn a_running_turns_next_step_leaves_the_answer_to_speech_for_its_own_turn() {
    let mut server = FakeLive::start().await;
    let (model, mut conn, mut notices) = listening(&mut server).await;
    let mut chat = Chat::new();

    // A typed turn's step calls a tool.
    chat.user("What's the weather in Tokyo?");
    let mut first = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("What's the weather in Tokyo?"));
    conn.send(json!({"toolCall": {"functionCalls": [
        {"id": "fc-w", "name": "get_weather", "args": {"location": "Tokyo"}}
    ]}}))
    .await;
    let events = until_finish(&mut first).await;
    let calls = chat.record(&events);

    // Meanwhile the person speaks, and the model begins answering that at once.
    model
        .voice("chat-1", VoiceInput::Audio(tone(16_000, 64).into()))
        .expect("audio");
    assert!(conn.recv().await["realtimeInput"]["audio"].is_object());
    conn.send(
        json!({"serverContent": {"inputTranscription": {"text": "Tell me a joke", "finished": true}}}),
    )
    .await;
    conn.say("Why did the chicken cross the road?").await;
    assert_eq!(
        heard(&mut notices, "the spoken turn announced").await,
        "Tell me a joke"
    );

    // The turn's next step (its tool ran) comes before the spoken turn: it waits for the
    // answer's generation to end, then sends its own input.
    chat.results(vec![(
        &calls[0],
        Outcome::Output {
            output: json!({"temperature_c": 21}),
        },
    )]);
    let mut second = model.stream(chat.request());
    conn.silent_for(100).await;
    conn.turn_complete().await;
    let response = conn.recv().await;
    assert_eq!(
        response["toolResponse"]["functionResponses"][0]["id"], "fc-w",
        "{response}"
    );
    conn.say("Sunny in Tokyo.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut second).await;
    assert_eq!(text_of(&events), "Sunny in Tokyo.");
    chat.record(&events);

    // The spoken turn plays what the model said to the speech; nothing goes to the server.
    chat.user("Tell me a joke");
    let mut spoken = model.stream(chat.request());
    let events = until_finish(&mut spoken).await;
    assert_eq!(text_of(&events), "Why did the chicken cross the road?");
    conn.silent_for(200).await;
}

/// Words the runtime starts no turn for are declined: their answer goes, and words said after
/// them, held behind that answer, are announced in turn (they would wait behind it forever).
#[tokio::test]
async fn declined_words_lose_their_answer_and_the_words_after_them_are_announced() {
    let mut server = FakeLive::start().await;
    let (model, mut conn, mut notices) = listening(&mut server).await;
    for (words, answer) in [
        ("Pay Hanako", "Declined words."),
        ("Is it sunny?", "It is sunny."),
    ] {
        model
            .voice("chat-1", VoiceInput::Audio(tone(16_000, 64).into()))
            .expect("audio");
        assert!(conn.recv().await["realtimeInput"]["audio"].is_object());
        conn.send(
            json!({"serverContent": {"inputTranscription": {"text": words, "finished": true}}}),
        )
        .await;
        conn.say(answer).await;
        conn.turn_complete().await;
        if words == "Pay Hanako" {
            // Its answer began: the words said after it are held behind it.
            assert_eq!(
                heard(&mut notices, "the first words announced").await,
                words
            );
        }
    }
    notices_quiet(&mut notices).await;
    model.decline_spoken("chat-1", "Pay Hanako");
    assert_eq!(
        heard(&mut notices, "the next words announced").await,
        "Is it sunny?"
    );
    let mut spoken = Chat::new();
    spoken.user("Is it sunny?");
    let events = until_finish(&mut model.stream(spoken.request())).await;
    assert_eq!(text_of(&events), "It is sunny.");
    conn.silent_for(200).await;
}

/// No notice comes within 100 ms.
async fn notices_quiet(notices: &mut VoiceSubscription) {
    if let Ok(notice) = tokio::time::timeout(Duration::from_millis(100), notices.recv()).await {
        panic!("expected no notice yet, got {notice:?}");
    }
}

/// Hands-free, the person keeps talking after the words the model begins answering: the server
/// cuts that answer off (`interrupted`) and answers the rest, which is announced as the next
/// spoken turn. Before, the audio of the rest counted for the first words (it went before the
/// first answer began), and its answer was dropped as output nobody asked for.
#[tokio::test]
async fn words_said_on_after_the_answer_began_are_announced_when_it_is_cut_off() {
    let mut server = FakeLive::start().await;
    let (model, mut conn, mut notices) = listening(&mut server).await;
    for _ in 0..2 {
        model
            .voice("chat-1", VoiceInput::Audio(tone(16_000, 64).into()))
            .expect("audio");
        assert!(conn.recv().await["realtimeInput"]["audio"].is_object());
    }
    conn.send(json!({"serverContent": {"inputTranscription": {"text": "Tell me a joke"}}}))
        .await;
    conn.say("Why did").await;
    conn.send(json!({"serverContent": {"interrupted": true}}))
        .await;
    conn.send(json!({"serverContent": {"inputTranscription": {"text": "Actually, the weather"}}}))
        .await;
    conn.say("Sunny.").await;
    conn.turn_complete().await;
    assert_eq!(
        heard(&mut notices, "the first words").await,
        "Tell me a joke"
    );
    let mut spoken = Chat::new();
    spoken.user("Tell me a joke");
    let _ = until_finish(&mut model.stream(spoken.request())).await;
    assert_eq!(
        heard(&mut notices, "the words after them").await,
        "Actually, the weather"
    );
}
