//! The demo's hands-free listening through `Model::voice`, with the committed clips: each
//! utterance of an open microphone is heard as it ends, silence is heard as nothing (the
//! recogniser is not even asked), and speech over the demo's spoken answer stops it (barge-in).

use std::{sync::Arc, time::Duration};

use futures::StreamExt as _;

use crate::agent::{
    history::HistoryItem,
    model::{Model, ModelEvent, ModelRequest, Usage},
    voice::{MAX_AUDIO_FRAME_BYTES, VoiceInput, VoiceMode},
};
use crate::models::{demo::DemoModel, pcm};
use crate::protocol::FinishReason;

use super::tests::{clip, heard};

fn silence(seconds: f64) -> Vec<u8> {
    vec![0; (seconds * 32_000.0) as usize & !1]
}

/// Quiet noise (a room, a fan): a fixed pseudo-random sequence at about 1% of full scale.
fn hiss(seconds: f64) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let samples: Vec<i16> = (0..(seconds * 16_000.0) as usize)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as i64 % 600 - 300) as i16
        })
        .collect();
    pcm::bytes_of(&samples)
}

fn hands_free(model: &DemoModel, chat: &str) {
    let start = VoiceInput::Start {
        mode: VoiceMode::HandsFree,
    };
    model.voice(chat, start).unwrap();
}

/// Sends `audio` as the browser does, in 100 ms frames.
fn say(model: &DemoModel, chat: &str, audio: &[u8]) {
    for frame in audio.chunks(3_200) {
        model
            .voice(chat, VoiceInput::Audio(Arc::from(frame)))
            .unwrap();
    }
}

/// How many utterances the demo's recogniser was asked to hear.
fn recognised(model: &DemoModel) -> u64 {
    model
        .voice
        .ready()
        .recogniser
        .as_ref()
        .expect("pocketsphinx is installed (scripts/setup.sh)")
        .asked()
}

#[tokio::test]
async fn an_open_microphone_s_utterances_are_each_heard_as_they_end() {
    let model = DemoModel::new(Duration::ZERO);
    let mut notices = model.voice_notices().unwrap();
    hands_free(&model, "c");
    say(&model, "c", &silence(0.5));
    say(&model, "c", &clip("yes.wav"));
    say(&model, "c", &silence(1.0));
    say(&model, "c", &clip("pay.wav"));
    say(&model, "c", &silence(1.0));
    // Both heard, in order, while the microphone is still open. (Framed by the detector, with
    // digital silence before it, PocketSphinx hears the payment's "euros" as "euro" and "no,
    // deny it" as "who are you": ADR 0036. The payment is the same to the parser.)
    assert_eq!(heard(&mut notices, "c").await, "Yes approve it");
    let payment = heard(&mut notices, "c").await;
    assert!(
        ["Pay forty euros to Alice", "Pay forty euro to Alice"].contains(&payment.as_str()),
        "{payment}"
    );
    assert_eq!(recognised(&model), 2);
    say(&model, "c", &silence(0.5));
    // Closing it with nothing under way hears nothing more.
    model.voice("c", VoiceInput::End).unwrap();
    say_push_to_talk(&model, "c", &clip("no.wav"));
    assert_eq!(heard(&mut notices, "c").await, "No deny it");
}

fn say_push_to_talk(model: &DemoModel, chat: &str, audio: &[u8]) {
    let start = VoiceInput::Start {
        mode: VoiceMode::PushToTalk,
    };
    model.voice(chat, start).unwrap();
    for frame in audio.chunks(MAX_AUDIO_FRAME_BYTES) {
        model
            .voice(chat, VoiceInput::Audio(Arc::from(frame)))
            .unwrap();
    }
    model.voice(chat, VoiceInput::End).unwrap();
}

#[tokio::test]
async fn an_open_microphone_s_silence_is_heard_as_nothing_and_never_reaches_the_recogniser() {
    let model = DemoModel::new(Duration::ZERO);
    let mut notices = model.voice_notices().unwrap();
    hands_free(&model, "c");
    say(&model, "c", &silence(5.0));
    say(&model, "c", &hiss(5.0));
    model.voice("c", VoiceInput::End).unwrap();
    // The next thing heard is a payment said push-to-talk; the recogniser heard only that.
    say_push_to_talk(&model, "c", &clip("pay.wav"));
    assert_eq!(heard(&mut notices, "c").await, "Pay forty euros to Alice");
    assert_eq!(recognised(&model), 1, "the silence was never recognised");
}

#[tokio::test]
async fn speech_over_the_spoken_answer_stops_it_and_is_heard() {
    let model = DemoModel::new(Duration::ZERO);
    let mut notices = model.voice_notices().unwrap();
    hands_free(&model, "c");
    let request = ModelRequest {
        session_id: "c".into(),
        system: String::new(),
        history: vec![HistoryItem::user("pay forty euros to alice")].into(),
        tools: Vec::new(),
    };
    let mut events = model.stream(request);
    // The answer is being spoken (seconds of it: where the card is, then the call).
    loop {
        match tokio::time::timeout(Duration::from_secs(30), events.next()).await {
            Ok(Some(Ok(ModelEvent::Audio(_)))) => break,
            Ok(Some(Ok(ModelEvent::TextDelta(_)))) => {}
            other => panic!("expected the answer's words and speech: {other:?}"),
        }
    }
    say(&model, "c", &clip("yes.wav"));
    let rest: Vec<ModelEvent> =
        tokio::time::timeout(Duration::from_secs(30), events.collect::<Vec<_>>())
            .await
            .expect("the answer ends")
            .into_iter()
            .map(Result::unwrap)
            .collect();
    // Stopped where it was, as Gemini Live's `interrupted`: the rest, the call included, is not
    // given.
    assert_eq!(
        rest[rest.len().saturating_sub(2)..],
        [
            ModelEvent::Interrupted,
            ModelEvent::Finish {
                reason: FinishReason::Other,
                usage: Usage::default()
            }
        ],
        "{rest:?}"
    );
    assert!(
        !rest.iter().any(|e| matches!(e, ModelEvent::ToolCall(_))),
        "{rest:?}"
    );
    // What was said over it is heard once it ends.
    say(&model, "c", &silence(1.0));
    assert_eq!(heard(&mut notices, "c").await, "Yes approve it");
}
