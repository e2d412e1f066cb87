//! Speech on OpenAI Realtime through the runtime (ADR 0041): the push-to-talk wire, the
//! person's words becoming their message, the answer's audio in order at 24 kHz, barge-in and
//! the truncation of what the person did not hear of the answer.

use super::*;
use crate::agent::history::HistoryItem;
use crate::agent::people::LOCAL;
use crate::agent::voice::{VoiceInput, VoiceMode};
use crate::models::pcm;

/// The chat's first `start` in `mode`: the socket it opens and its session.
async fn open_voice(
    runtime: &Arc<Runtime>,
    server: &mut FakeRealtime,
    chat: &str,
    mode: VoiceMode,
) -> (FakeConn, Value) {
    let first = runtime.clone();
    let chat_id = chat.to_owned();
    let opening = tokio::spawn(async move {
        first
            .voice(&chat_id, LOCAL, VoiceInput::Start { mode })
            .await
    });
    let (conn, session) = server.next_session().await;
    within("start", opening).await.unwrap().expect("start");
    (conn, session)
}

/// Says `pcm` (16 kHz) push-to-talk in `chat` and checks the wire: the audio goes resampled to
/// 24 kHz in `input_audio_buffer.append`s, then `commit` and `response.create`.
async fn say_push_to_talk(runtime: &Arc<Runtime>, conn: &mut FakeConn, chat: &str, pcm: &[u8]) {
    for frame in pcm.chunks(3_200) {
        runtime
            .voice(chat, LOCAL, VoiceInput::Audio(Arc::from(frame)))
            .await
            .expect("audio");
    }
    runtime
        .voice(chat, LOCAL, VoiceInput::End)
        .await
        .expect("end");
    let mut sent = Vec::new();
    loop {
        let event = conn.recv().await;
        match event["type"].as_str() {
            Some("input_audio_buffer.append") => sent.extend(unb64(&event["audio"])),
            Some("input_audio_buffer.commit") => break,
            _ => panic!("expected audio or commit, got {event}"),
        }
    }
    conn.expect("response.create").await;
    let expected = pcm::resample_all(&pcm::samples_of(pcm), 16_000, 24_000).unwrap();
    assert_eq!(
        sent,
        pcm::bytes_of(&expected),
        "the whole utterance, resampled to 24 kHz, in order"
    );
}

#[tokio::test]
async fn push_to_talk_speech_becomes_the_persons_message_and_the_answer_is_heard() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, session) = open_voice(&runtime, &mut server, "c", VoiceMode::PushToTalk).await;
    assert_eq!(session["type"], "realtime");
    assert_eq!(session["output_modalities"], json!(["audio"]));
    assert_eq!(
        session["audio"]["input"]["turn_detection"],
        Value::Null,
        "push-to-talk: the server detects nothing, the client commits"
    );
    assert_eq!(
        session["audio"]["input"]["format"],
        json!({"type": "audio/pcm", "rate": 24_000})
    );
    assert_eq!(
        session["audio"]["output"]["format"],
        json!({"type": "audio/pcm", "rate": 24_000})
    );
    assert!(session["audio"]["input"]["transcription"]["model"].is_string());
    assert!(
        session["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "process_payment" && t["type"] == "function"),
        "{session}"
    );
    conn.expect("input_audio_buffer.clear").await;
    // Recorded speech, 1.73 s: not a multiple of the resampler's chunk, so the tail is flushed
    // at the end.
    let said = clip("pay.wav");
    say_push_to_talk(&runtime, &mut conn, "c", &said).await;

    // The answer is recorded speech too, in deltas of 100 ms as the server sends them.
    let answer = clip("agent.wav");
    let deltas: Vec<&[u8]> = answer.chunks(4_800).collect();
    let (a, b) = deltas.split_at(deltas.len() / 2);
    conn.send(json!({"type": "input_audio_buffer.committed", "item_id": "item_in"}))
        .await;
    let response = conn.response_created().await;
    conn.heard("Pay forty euros to Alice").await;
    for delta in a {
        conn.audio(&response, delta).await;
    }
    conn.say(&response, "Waiting for your").await;
    let mut reader = current_turn_log(&runtime, "c").await;
    for delta in b {
        conn.audio(&response, delta).await;
    }
    conn.say(&response, " countersignature.").await;
    conn.done(&response, "completed").await;

    let read = read_turn(&mut reader).await;
    assert_eq!(read.text, "Waiting for your countersignature.");
    assert_eq!(read.speech, answer, "every byte of the answer, in order");
    assert_eq!(
        read.finish["audio"],
        json!({"chunks": deltas.len(), "bytes": answer.len(), "sampleRate": 24_000,
            "duration": crate::agent::voice::duration_secs(answer.len(), 24_000)})
    );
    let record = runtime.session("c").await.unwrap().snapshot();
    assert_eq!(
        record.history.to_vec().unwrap()[0],
        HistoryItem::user("Pay forty euros to Alice")
    );
    // Nothing was sent for the spoken message: the model had heard it.
    conn.silent_for(200).await;
    server.no_new_conn(50).await;
}

/// The next client event is the truncation of `item_a` (the fake's answer item) at `ms`.
async fn expect_truncate(conn: &mut FakeConn, ms: u64) {
    let truncate = conn.expect("conversation.item.truncate").await;
    let event_id = truncate["event_id"]
        .as_str()
        .expect("an event id")
        .to_owned();
    assert!(event_id.starts_with("countersign_truncate_"), "{truncate}");
    assert_eq!(
        truncate,
        json!({"type": "conversation.item.truncate", "event_id": event_id,
            "item_id": "item_a", "content_index": 0, "audio_end_ms": ms}),
        "exactly the event OpenAI documents"
    );
}

/// Hands-free: the server hears the person over its answer 40 ms after the answer's first audio
/// went to the page: it is told the person heard 40 ms of the 100 ms it sent.
#[tokio::test]
async fn speaking_over_the_answer_hands_free_interrupts_it() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, session) = open_voice(&runtime, &mut server, "c", VoiceMode::HandsFree).await;
    assert_eq!(
        session["audio"]["input"]["turn_detection"],
        json!({"type": "server_vad", "create_response": true, "interrupt_response": true}),
        "hands-free leaves speech detection and barge-in to the server"
    );
    // 64 ms at 16 kHz is one resampler chunk: the audio goes at once.
    let said = tone(16_000, 64);
    runtime
        .voice("c", LOCAL, VoiceInput::Audio(Arc::from(said.as_slice())))
        .await
        .expect("audio");
    conn.expect("input_audio_buffer.append").await;
    conn.send(json!({"type": "input_audio_buffer.speech_started", "audio_start_ms": 0, "item_id": "item_in"}))
        .await;
    conn.send(json!({"type": "input_audio_buffer.committed", "item_id": "item_in"}))
        .await;
    conn.heard("Tell me a story").await;
    let response = conn.response_created().await;
    conn.audio(&response, &tone(24_000, 100)).await;
    conn.say(&response, "Once upon").await;
    let mut reader = current_turn_log(&runtime, "c").await;
    let mut read = Read::default();
    read_on(&mut reader, &mut read, |r| r.speech.len() == 4_800).await;
    // 40 ms of the 100 went by since the page got the first of the audio.
    server.clock.advance(40);
    // The person speaks over it: the server hears it and cancels its own response.
    runtime
        .voice("c", LOCAL, VoiceInput::Audio(Arc::from(said.as_slice())))
        .await
        .expect("audio during the answer");
    conn.expect("input_audio_buffer.append").await;
    conn.send(json!({"type": "input_audio_buffer.speech_started", "audio_start_ms": 900, "item_id": "item_in2"}))
        .await;
    expect_truncate(&mut conn, 40).await;
    conn.done(&response, "cancelled").await;
    read_on(&mut reader, &mut read, |_| false).await;
    assert_eq!(read.text, "Once upon");
    assert_eq!(read.speech.len(), 4_800);
    assert_eq!(
        read.states,
        vec!["heard", "interrupted"],
        "the browser stops playing at once"
    );
    let record = runtime.session("c").await.unwrap().snapshot();
    assert_eq!(
        record.history.to_vec().unwrap()[0],
        HistoryItem::user("Tell me a story")
    );
}

/// Push-to-talk over the answer: `response.cancel`, then the truncation of what was not heard
/// (here all 50 ms that went, the page had time to play, but the server had more); the next
/// turn goes on the same socket, and a barge-in after the person heard all of a complete
/// answer truncates nothing.
#[tokio::test]
async fn a_push_to_talk_start_over_the_answer_cancels_it_and_truncates_what_was_not_heard() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, _) = open_voice(&runtime, &mut server, "c", VoiceMode::PushToTalk).await;
    conn.expect("input_audio_buffer.clear").await;
    say_push_to_talk(&runtime, &mut conn, "c", &tone(16_000, 100)).await;
    let response = conn.response_created().await;
    conn.heard("Count to ten").await;
    conn.audio(&response, &tone(24_000, 50)).await;
    conn.say(&response, "One, two").await;
    let mut reader = current_turn_log(&runtime, "c").await;
    let mut read = Read::default();
    read_on(&mut reader, &mut read, |r| r.speech.len() == 2_400).await;
    server.clock.advance(500);
    let push_to_talk = VoiceInput::Start {
        mode: VoiceMode::PushToTalk,
    };
    runtime
        .voice("c", LOCAL, push_to_talk.clone())
        .await
        .expect("start over the answer");
    conn.expect("response.cancel").await;
    expect_truncate(&mut conn, 50).await;
    conn.expect("input_audio_buffer.clear").await;
    conn.done(&response, "cancelled").await;
    read_on(&mut reader, &mut read, |_| false).await;
    assert_eq!(read.text, "One, two");
    assert_eq!(read.states, vec!["heard", "interrupted"]);

    // The next turn, typed, on the same socket: only its message goes.
    let started = within(
        "the next turn",
        runtime.start_turn(
            "c",
            crate::agent::UserTurn {
                text: "Go on".into(),
                transport: crate::agent::Transport::Bidi,
                ..Default::default()
            },
            None,
        ),
    )
    .await
    .expect("the next turn starts");
    let mut reader = started.log.subscribe(0);
    let message = conn.expect("conversation.item.create").await;
    assert_eq!(message["item"]["content"][0]["text"], "Go on", "{message}");
    conn.expect("response.create").await;
    let response = conn.response_created().await;
    conn.audio(&response, &tone(24_000, 30)).await;
    conn.audio_done(&response).await;
    conn.say(&response, "Three, four").await;
    let mut read = Read::default();
    read_on(&mut reader, &mut read, |r| r.text == "Three, four").await;
    // All of it was played by now: nothing to truncate.
    server.clock.advance(1_000);
    runtime
        .voice("c", LOCAL, push_to_talk)
        .await
        .expect("start after the answer was heard");
    conn.expect("response.cancel").await;
    conn.expect("input_audio_buffer.clear").await;
    conn.done(&response, "cancelled").await;
    read_on(&mut reader, &mut read, |_| false).await;
    assert_eq!(read.speech, tone(24_000, 30));
    assert_eq!(read.states, vec!["interrupted"]);
    server.no_new_conn(50).await;
}

/// Push-to-talk over the answer, and the person lets go before the server acknowledged the
/// `response.cancel` (its `response.done`): the new speech is committed at once, its
/// `response.create` waits for that `response.done` (the server would refuse it before), and
/// the new answer is heard as the next spoken turn.
#[tokio::test]
async fn speech_ended_before_the_cancelled_answer_ended_asks_for_its_answer_after_it() {
    let mut server = FakeRealtime::start().await;
    let runtime = realtime_runtime(&server, Duration::from_secs(2));
    let (mut conn, _) = open_voice(&runtime, &mut server, "q", VoiceMode::PushToTalk).await;
    conn.expect("input_audio_buffer.clear").await;
    say_push_to_talk(&runtime, &mut conn, "q", &tone(16_000, 100)).await;
    let response = conn.response_created().await;
    conn.heard("Count to ten").await;
    conn.audio(&response, &tone(24_000, 50)).await;
    conn.say(&response, "One, two").await;
    let mut reader = current_turn_log(&runtime, "q").await;
    let session = runtime.session("q").await.unwrap();
    let (first_turn, _) = session.current_turn().expect("the spoken turn");
    let mut read = Read::default();
    read_on(&mut reader, &mut read, |r| r.speech.len() == 2_400).await;
    runtime
        .voice(
            "q",
            LOCAL,
            VoiceInput::Start {
                mode: VoiceMode::PushToTalk,
            },
        )
        .await
        .expect("start over the answer");
    conn.expect("response.cancel").await;
    let mut event = conn.recv().await;
    while event["type"] == "conversation.item.truncate" {
        event = conn.recv().await;
    }
    assert_eq!(event["type"], "input_audio_buffer.clear", "{event}");
    runtime
        .voice(
            "q",
            LOCAL,
            VoiceInput::Audio(Arc::from(tone(16_000, 60).as_slice())),
        )
        .await
        .expect("audio");
    runtime
        .voice("q", LOCAL, VoiceInput::End)
        .await
        .expect("end");
    while conn.recv().await["type"] != "input_audio_buffer.commit" {}
    // The cancelled answer has not ended: nothing more goes yet.
    conn.silent_for(150).await;
    conn.done(&response, "cancelled").await;
    conn.expect("response.create").await;
    read_on(&mut reader, &mut read, |_| false).await;
    assert_eq!(read.text, "One, two");
    assert!(read.errors.is_empty(), "{:?}", read.errors);

    let next = conn.response_created().await;
    conn.heard("Go on").await;
    conn.say(&next, "Three, four").await;
    conn.done(&next, "completed").await;
    let mut reader = within("the next spoken turn", async {
        loop {
            match session.current_turn() {
                Some((turn, log)) if turn != first_turn => return log.subscribe(0),
                _ => tokio::task::yield_now().await,
            }
        }
    })
    .await;
    let read = read_turn(&mut reader).await;
    assert_eq!(read.text, "Three, four", "{read:?}");
    let record = runtime.session("q").await.unwrap().snapshot();
    assert!(
        record
            .history
            .to_vec()
            .unwrap()
            .contains(&HistoryItem::user("Go on")),
        "the new speech is the person's message"
    );
}
