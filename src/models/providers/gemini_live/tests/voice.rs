//! Voice on Gemini Live through the runtime (ADR 0035): the fake speaks the wire of
//! `realtimeInput` and native-audio answers with real PCM (a deterministic tone, never
//! silence), and the spoken turn goes through the same turn path as a typed one.

mod approvals;
mod asides;
mod held;

use base64::Engine as _;

use super::*;
use crate::agent::{
    Runtime, TurnEntry,
    people::LOCAL,
    session::LogReader,
    voice::{VoiceInput, VoiceMode},
};
use crate::protocol::Chunk;

/// `ms` of a 440 Hz tone at `rate`, PCM16LE mono: real samples, different in every frame.
pub(in crate::models::providers::gemini_live) fn tone(rate: u32, ms: u32) -> Vec<u8> {
    let samples = rate * ms / 1000;
    (0..samples)
        .flat_map(|n| {
            let t = f64::from(n) / f64::from(rate);
            let value = (t * 440.0 * std::f64::consts::TAU).sin() * 8_000.0;
            (value as i16).to_le_bytes()
        })
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn runtime(server: &FakeLive) -> Arc<Runtime> {
    live_runtime(server, NON_BLOCKING_MODEL)
}

/// The log of the chat's turn, once the spoken turn has started.
async fn spoken_turn_log(runtime: &Arc<Runtime>, chat: &str) -> LogReader {
    let session = runtime.session(chat).await.expect("the chat");
    within("the spoken turn", async {
        loop {
            if let Some(log) = session.current_log() {
                return log.subscribe(0);
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}

/// The chat's first `start` in `mode`: the socket it opens and its setup.
async fn open_voice(
    runtime: &Arc<Runtime>,
    server: &mut FakeLive,
    mode: VoiceMode,
) -> (FakeConn, Value) {
    let first = runtime.clone();
    let opening =
        tokio::spawn(async move { first.voice("c", LOCAL, VoiceInput::Start { mode }).await });
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    within("start", opening).await.unwrap().expect("start");
    (conn, setup)
}

/// What a turn's log held up to its end: (text, speech, `data-voice` states, finish metadata).
async fn read_turn(reader: &mut LogReader) -> (String, Vec<u8>, Vec<String>, Value) {
    let (mut text, mut speech, mut states, mut finish) =
        (String::new(), Vec::new(), Vec::new(), Value::Null);
    loop {
        match within("the turn's log", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::TextDelta(d))) => text.push_str(&d.delta),
            Some(TurnEntry::Chunk(Chunk::Data(data))) if data.name == "pcm" => {
                assert_eq!(data.transient, Some(true));
                assert_eq!(data.data["sampleRate"], 24_000);
                let content = data.data["content"].as_str().expect("content");
                speech.extend(
                    base64::engine::general_purpose::STANDARD
                        .decode(content)
                        .expect("base64"),
                );
            }
            Some(TurnEntry::Chunk(Chunk::Data(data))) if data.name == "voice" => {
                states.push(data.data["state"].as_str().unwrap_or_default().to_owned())
            }
            Some(TurnEntry::Chunk(Chunk::Finish(f))) => {
                finish = f.message_metadata.unwrap_or_default()
            }
            Some(TurnEntry::End) | None => return (text, speech, states, finish),
            Some(_) => {}
        }
    }
}

#[tokio::test]
async fn push_to_talk_speech_becomes_the_persons_message_and_the_answer_is_heard() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, setup) = open_voice(&runtime, &mut server, VoiceMode::PushToTalk).await;
    assert_eq!(
        setup["realtimeInputConfig"]["automaticActivityDetection"],
        json!({"disabled": true}),
        "push-to-talk turns the server's detection off"
    );
    assert_eq!(
        setup["generationConfig"]["responseModalities"],
        json!(["AUDIO"])
    );
    assert_eq!(setup["inputAudioTranscription"], json!({}));
    assert_eq!(
        conn.recv().await,
        json!({"realtimeInput": {"activityStart": {}}})
    );
    let said = tone(16_000, 250);
    for frame in said.chunks(3_200) {
        runtime
            .voice("c", LOCAL, VoiceInput::Audio(Arc::from(frame)))
            .await
            .expect("audio");
        assert_eq!(
            conn.recv().await["realtimeInput"]["audio"]["data"],
            json!(b64(frame))
        );
    }
    runtime
        .voice("c", LOCAL, VoiceInput::End)
        .await
        .expect("end");
    assert_eq!(
        conn.recv().await,
        json!({"realtimeInput": {"activityEnd": {}}})
    );

    let answer = tone(24_000, 200);
    let (a, b) = answer.split_at(4_800);
    conn.send(json!({"serverContent": {"inputTranscription": {"text": "What is the "}}}))
        .await;
    conn.send(
        json!({"serverContent": {"inputTranscription": {"text": "weather?", "finished": true}}}),
    )
    .await;
    conn.send(json!({"serverContent": {
        "modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": b64(a)}}]},
        "outputTranscription": {"text": "It is sunny"}
    }}))
    .await;
    let mut reader = spoken_turn_log(&runtime, "c").await;
    conn.send(json!({"serverContent": {
        "modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": b64(b)}}]},
        "outputTranscription": {"text": " in Tokyo."}
    }}))
    .await;
    conn.send(json!({"serverContent": {"generationComplete": true}}))
        .await;
    conn.turn_complete().await;

    let (text, speech, _, finish) = read_turn(&mut reader).await;
    assert_eq!(text, "It is sunny in Tokyo.");
    assert_eq!(speech, answer, "every byte of the answer, in order");
    assert_eq!(
        finish["audio"],
        json!({"chunks": 2, "bytes": answer.len(), "sampleRate": 24_000, "duration": 0.2})
    );
    let record = runtime.session("c").await.unwrap().snapshot();
    assert_eq!(
        record.history.to_vec().unwrap()[0],
        HistoryItem::user("What is the weather?")
    );
    assert_eq!(
        record.messages.to_vec().unwrap()[0].role,
        crate::protocol::Role::User
    );
    // Nothing was sent for the spoken message: the model had heard it.
    conn.silent_for(200).await;

    // The next typed message goes on the same socket: the spoken turn is in sync.
    let started = runtime
        .start_turn(
            "c",
            crate::agent::UserTurn {
                text: "Thanks".into(),
                transport: crate::agent::Transport::Bidi,
                ..Default::default()
            },
            None,
        )
        .await
        .expect("typed turn");
    assert_eq!(conn.recv().await, user_turn("Thanks"));
    conn.say("You're welcome.").await;
    conn.turn_complete().await;
    let (text, speech, _, finish) = read_turn(&mut started.log.subscribe(0)).await;
    assert_eq!(text, "You're welcome.");
    assert!(speech.is_empty());
    assert!(
        finish.get("audio").is_none(),
        "no speech, no audio metadata"
    );
    server.no_new_conn(100).await;
}

#[tokio::test]
async fn speaking_over_the_answer_interrupts_it() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let (mut conn, setup) = open_voice(&runtime, &mut server, VoiceMode::HandsFree).await;
    assert_eq!(
        setup["realtimeInputConfig"]["automaticActivityDetection"],
        json!({"disabled": false}),
        "hands-free leaves speech detection to the server"
    );
    let said = tone(16_000, 100);
    runtime
        .voice("c", LOCAL, VoiceInput::Audio(Arc::from(said.as_slice())))
        .await
        .expect("audio");
    assert!(conn.recv().await["realtimeInput"]["audio"].is_object());
    conn.send(json!({"serverContent": {"inputTranscription": {"text": "Tell me a story"}}}))
        .await;
    conn.send(json!({"serverContent": {
        "modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": b64(&tone(24_000, 100))}}]},
        "outputTranscription": {"text": "Once upon"}
    }}))
    .await;
    let mut reader = spoken_turn_log(&runtime, "c").await;
    // The person speaks over it: the audio reaches the server while the answer streams.
    runtime
        .voice("c", LOCAL, VoiceInput::Audio(Arc::from(said.as_slice())))
        .await
        .expect("audio during the answer");
    assert!(conn.recv().await["realtimeInput"]["audio"].is_object());
    conn.send(json!({"serverContent": {"interrupted": true}}))
        .await;
    let (text, speech, states, finish) = read_turn(&mut reader).await;
    assert_eq!(text, "Once upon");
    assert_eq!(speech.len(), 4_800);
    assert_eq!(
        states,
        vec!["heard", "interrupted"],
        "the browser stops playing at once"
    );
    assert_eq!(finish["audio"]["bytes"], 4_800);
    runtime
        .voice("c", LOCAL, VoiceInput::End)
        .await
        .expect("end");
    assert_eq!(
        conn.recv().await,
        json!({"realtimeInput": {"audioStreamEnd": true}})
    );
}

#[tokio::test]
async fn a_spoken_payment_asks_for_approval_like_a_typed_one() {
    let mut server = FakeLive::start().await;
    let runtime = runtime(&server);
    let pcm = tone(16_000, 200);
    let (mut conn, _) = open_voice(&runtime, &mut server, VoiceMode::PushToTalk).await;
    assert_eq!(
        conn.recv().await,
        json!({"realtimeInput": {"activityStart": {}}})
    );
    runtime
        .voice("c", LOCAL, VoiceInput::Audio(Arc::from(pcm.as_slice())))
        .await
        .unwrap();
    conn.recv().await;
    runtime.voice("c", LOCAL, VoiceInput::End).await.unwrap();
    conn.recv().await;
    conn.send(json!({"serverContent": {"inputTranscription": {"text": "Pay Hanako 50 dollars"}}}))
        .await;
    conn.send(
        json!({"toolCall": {"functionCalls": [{"id": "fc-pay", "name": "process_payment",
        "args": {"amount": 50, "recipient": "Hanako", "currency": "USD"}}]}}),
    )
    .await;
    conn.turn_complete().await;
    let mut reader = spoken_turn_log(&runtime, "c").await;
    let request = loop {
        match within("approval request", reader.next()).await {
            Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(r))) => break r,
            Some(TurnEntry::End) | None => panic!("the spoken payment did not ask"),
            Some(_) => {}
        }
    };
    assert!(!request.approval_id.is_empty());
    let record = runtime.session("c").await.unwrap().snapshot();
    assert_eq!(
        record.history.to_vec().unwrap()[0],
        HistoryItem::user("Pay Hanako 50 dollars")
    );
}
