//! Voice over the BIDI sockets (ADR 0035), against a voice model that speaks the runtime's
//! voice interface (the Gemini Live wire itself is tested against its fake in the crate): the
//! microphone's PCM reaches the model byte for byte, the spoken turn is the person's message,
//! the agent's speech comes back as binary frames (`?audio=binary`) or the seed's `data-pcm`
//! chunks, with matching `finish.messageMetadata.audio` and a WAV a reload can play, and bad
//! audio closes the socket with a reason while the chat goes on.
#![cfg(feature = "ssr")]

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use countersign::agent::{
    model::{Model, ModelEvent, ModelRequest, ModelStream, Usage},
    voice::{VoiceError, VoiceInput, VoiceNotice, VoiceNotices, VoiceSubscription},
};
use countersign::protocol::FinishReason;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::{connect_async, tungstenite::Message};

use crate::common;
/// The same over OpenAI Realtime (ADR 0041).
#[path = "voice/realtime.rs"]
mod realtime;

use common::socket::{Frame, Socket, next};

/// `ms` of a 440 Hz tone at `rate`, PCM16LE mono (never silence).
fn tone(rate: u32, ms: u32) -> Vec<u8> {
    (0..rate * ms / 1000)
        .flat_map(|n| {
            let t = f64::from(n) / f64::from(rate);
            (((t * 440.0 * std::f64::consts::TAU).sin() * 8_000.0) as i16).to_le_bytes()
        })
        .collect()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A voice model: it keeps the audio it is sent, says at `End` that it heard "what time is it",
/// and answers every step with its speech in two chunks (`answer()`) and "It is noon.".
struct Listener {
    heard: Mutex<Vec<u8>>,
    notices: VoiceNotices,
}

fn answer() -> Vec<u8> {
    tone(24_000, 300)
}

impl Listener {
    fn new() -> Arc<Self> {
        Arc::new(Listener {
            heard: Mutex::default(),
            notices: VoiceNotices::default(),
        })
    }
}

impl Model for Listener {
    fn label(&self) -> String {
        "listener".into()
    }

    fn stream(&self, _: ModelRequest) -> ModelStream {
        let speech = answer();
        let (a, b) = speech.split_at(7_200);
        futures::stream::iter(
            [
                ModelEvent::Audio(Arc::from(a)),
                ModelEvent::TextDelta("It is noon.".into()),
                ModelEvent::Audio(Arc::from(b)),
                ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: Usage::default(),
                },
            ]
            .map(Ok),
        )
        .boxed()
    }

    fn voice(&self, session_id: &str, input: VoiceInput) -> Result<(), VoiceError> {
        match input {
            VoiceInput::Audio(pcm) => self.heard.lock().unwrap().extend_from_slice(&pcm),
            VoiceInput::End => {
                let _ = self.notices.send(VoiceNotice::Heard {
                    session_id: session_id.to_owned(),
                    transcript: "what time is it".into(),
                });
            }
            VoiceInput::Start { .. } => {}
        }
        Ok(())
    }

    fn voice_notices(&self) -> Option<VoiceSubscription> {
        Some(self.notices.subscribe())
    }
}

/// A model without voice.
struct Mute;

impl Model for Mute {
    fn label(&self) -> String {
        "mute".into()
    }

    fn stream(&self, _: ModelRequest) -> ModelStream {
        futures::stream::empty().boxed()
    }
}

async fn serve(model: Option<Arc<dyn Model>>, env: &[(&str, &str)]) -> common::Server {
    common::start(common::Opts {
        model,
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..common::Opts::default()
    })
    .await
}

async fn connect(server: &common::Server, path: &str) -> Socket {
    connect_async(format!("ws://{}{path}", server.addr))
        .await
        .expect("the socket opens")
        .0
}

async fn send(socket: &mut Socket, frame: Value) {
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

async fn send_binary(socket: &mut Socket, bytes: &[u8]) {
    socket
        .send(Message::Binary(bytes.to_vec().into()))
        .await
        .unwrap();
}

/// A turn read to its `[DONE]`: its chunks, and the binary frames' bytes.
async fn read_turn(socket: &mut Socket) -> (Vec<Value>, Vec<u8>) {
    let (mut chunks, mut binary) = (Vec::new(), Vec::new());
    loop {
        match next(socket).await {
            Frame::Chunk(chunk) => chunks.push(chunk),
            Frame::Binary(bytes) => {
                assert!(
                    chunks.iter().any(|c| c["type"] == "start")
                        && !chunks.iter().any(|c| c["type"] == "finish"),
                    "speech frames come between the message's start and finish"
                );
                binary.extend(bytes)
            }
            Frame::Done => return (chunks, binary),
            Frame::Control(control) => panic!("a control frame mid-turn: {control}"),
            Frame::Closed(code, reason) => panic!("closed ({code:?} {reason}) mid-turn"),
        }
    }
}

fn of_type<'a>(chunks: &'a [Value], kind: &str) -> Vec<&'a Value> {
    chunks.iter().filter(|c| c["type"] == kind).collect()
}

/// Push-to-talk on `/api/live`: start naming the chat, the audio as binary frames, stop.
async fn speak_binary(socket: &mut Socket, chat: &str, pcm: &[u8]) {
    send(
        socket,
        json!({"type": "audio_control", "action": "start", "id": chat, "mode": "push_to_talk"}),
    )
    .await;
    for frame in pcm.chunks(3_200) {
        send_binary(socket, frame).await;
    }
    send(socket, json!({"type": "audio_control", "action": "stop"})).await;
}

#[tokio::test]
async fn speech_in_binary_frames_is_answered_in_binary_frames_and_kept_for_replay() {
    let model = Listener::new();
    let server = serve(Some(model.clone()), &[]).await;
    let mut socket = connect(&server, "/api/live?audio=binary").await;
    let said = tone(16_000, 500);
    speak_binary(&mut socket, "talk", &said).await;
    let (chunks, speech) = read_turn(&mut socket).await;

    assert_eq!(
        *model.heard.lock().unwrap(),
        said,
        "the microphone's bytes, in order"
    );
    assert_eq!(
        speech,
        answer(),
        "the agent's speech, every byte, as binary frames"
    );
    assert!(of_type(&chunks, "data-pcm").is_empty(), "no base64 copy");
    let text: String = chunks.iter().filter_map(|c| c["delta"].as_str()).collect();
    assert_eq!(text, "It is noon.");
    let finish = of_type(&chunks, "finish")[0];
    assert_eq!(
        finish["messageMetadata"]["audio"],
        json!({"chunks": 2, "bytes": 14_400, "sampleRate": 24_000, "duration": 0.3})
    );

    // The answer keeps a WAV of its speech, served from the chat's files.
    let file = of_type(&chunks, "file")[0];
    assert_eq!(file["mediaType"], "audio/wav");
    let url = file["url"].as_str().unwrap();
    assert!(url.starts_with("/api/chats/talk/files/"), "{url}");
    let wav = reqwest::get(format!("http://{}{url}", server.addr))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&wav[0..4], b"RIFF");
    assert_eq!(&wav[44..], answer().as_slice());

    // A reload sees the person's words as their message and the answer with its recording.
    let page: Value = reqwest::get(format!("http://{}/api/chats/talk", server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = page.to_string();
    assert!(text.contains("what time is it"), "{text}");
    assert!(text.contains(url), "{text}");
}

#[tokio::test]
async fn without_binary_the_answer_comes_as_the_originals_data_pcm() {
    let server = serve(Some(Listener::new()), &[]).await;
    let mut socket = connect(&server, "/api/live").await;
    speak_binary(&mut socket, "plain", &tone(16_000, 200)).await;
    let (chunks, binary) = read_turn(&mut socket).await;
    assert!(binary.is_empty());
    let pcm: Vec<u8> = of_type(&chunks, "data-pcm")
        .iter()
        .flat_map(|c| {
            assert_eq!(c["transient"], true);
            assert_eq!(c["data"]["sampleRate"], 24_000);
            assert_eq!(c["data"]["channels"], 1);
            assert_eq!(c["data"]["bitDepth"], 16);
            base64::engine::general_purpose::STANDARD
                .decode(c["data"]["content"].as_str().unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(pcm, answer());
}

/// Push-to-talk as the seed's frontend does it on `/live`: base64 `audio_chunk` frames.
async fn speak_seed(socket: &mut Socket, pcm: &[u8]) {
    send(socket, json!({"type": "audio_control", "action": "start"})).await;
    for frame in pcm.chunks(3_200) {
        send(
            socket,
            json!({"type": "audio_chunk", "chunk": b64(frame), "sampleRate": 16_000, "channels": 1, "bitDepth": 16}),
        )
        .await;
    }
    send(socket, json!({"type": "audio_control", "action": "stop"})).await;
}

/// A stream's chunk types and ids, for a failure's message (the speech left out).
fn outline(chunks: &[Value]) -> String {
    let outline: Vec<String> = chunks
        .iter()
        .map(|c| format!("{} {}", c["type"], c["id"]))
        .collect();
    outline.join(", ")
}

/// The `text-start`…`text-end` block `id` of a stream: its position and its words.
fn text_block(chunks: &[Value], id: &str) -> Option<(usize, String)> {
    let start = chunks
        .iter()
        .position(|c| c["type"] == "text-start" && c["id"] == id)?;
    let end = chunks
        .iter()
        .position(|c| c["type"] == "text-end" && c["id"] == id)?;
    let words = chunks[start..end]
        .iter()
        .filter(|c| c["type"] == "text-delta" && c["id"] == id)
        .filter_map(|c| c["delta"].as_str())
        .collect();
    Some((start, words))
}

/// The original system's frontend shows what the person said as the `_input_text` block of the
/// assistant's message (its `input_transcription`), before the agent's own words; the same
/// utterance on `/api/live` keeps our form: the `data-voice` `heard` chunk and no such block.
#[tokio::test]
async fn the_seeds_live_shows_what_was_said_as_the_messages_input_text() {
    let server = serve(Some(Listener::new()), &[]).await;
    let mut socket = connect(&server, "/live").await;
    speak_seed(&mut socket, &tone(16_000, 200)).await;
    let (chunks, _) = read_turn(&mut socket).await;
    let message = of_type(&chunks, "start")[0]["messageId"]
        .as_str()
        .expect("the message's id")
        .to_owned();
    let (input_at, said) = text_block(&chunks, &format!("{message}_input_text"))
        .unwrap_or_else(|| panic!("no _input_text block: {}", outline(&chunks)));
    assert_eq!(said, "what time is it");
    let (output_at, answer) = text_block(&chunks, &format!("{message}_output_text"))
        .unwrap_or_else(|| panic!("no _output_text block: {}", outline(&chunks)));
    assert_eq!(answer, "It is noon.");
    assert!(
        input_at < output_at,
        "the words said come first: {}",
        outline(&chunks)
    );
    assert!(
        of_type(&chunks, "data-voice").is_empty(),
        "the seed's frontend gets no part it does not know: {}",
        outline(&chunks)
    );

    let mut socket = connect(&server, "/api/live").await;
    speak_binary(&mut socket, "ours", &tone(16_000, 200)).await;
    let (chunks, _) = read_turn(&mut socket).await;
    assert!(
        !chunks.iter().any(|c| c["id"]
            .as_str()
            .is_some_and(|id| id.ends_with("_input_text"))),
        "{}",
        outline(&chunks)
    );
    let heard = of_type(&chunks, "data-voice")[0];
    assert_eq!(heard["data"]["state"], "heard");
    assert_eq!(heard["data"]["text"], "what time is it");
}

#[tokio::test]
async fn the_seeds_live_takes_audio_chunks_and_gets_data_pcm() {
    let model = Listener::new();
    let server = serve(Some(model.clone()), &[]).await;
    let mut socket = connect(&server, "/live").await;
    let said = tone(16_000, 200);
    speak_seed(&mut socket, &said).await;
    let (chunks, _) = read_turn(&mut socket).await;
    assert_eq!(*model.heard.lock().unwrap(), said);
    let pcm: Vec<u8> = of_type(&chunks, "data-pcm")
        .iter()
        .flat_map(|c| {
            base64::engine::general_purpose::STANDARD
                .decode(c["data"]["content"].as_str().unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(pcm, answer(), "the seed's own frontend plays these");
}

/// Sends `frames` after a start on a fresh socket; the close that follows.
async fn closed_by(server: &common::Server, frames: &[Vec<u8>]) -> (Option<u16>, String) {
    let mut socket = connect(server, "/api/live").await;
    send(
        &mut socket,
        json!({"type": "audio_control", "action": "start", "id": "limits"}),
    )
    .await;
    for frame in frames {
        send_binary(&mut socket, frame).await;
    }
    loop {
        match next(&mut socket).await {
            Frame::Closed(code, reason) => return (code, reason),
            Frame::Chunk(chunk) => assert_ne!(chunk["type"], "error", "{chunk}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn bad_audio_closes_the_socket_with_a_reason_and_the_chat_goes_on() {
    let server = serve(Some(Listener::new()), &[]).await;
    let (code, reason) = closed_by(&server, &[vec![1; 3_201]]).await;
    assert_eq!(code, Some(1007));
    assert!(reason.contains("odd number of bytes"), "{reason}");
    let (code, reason) = closed_by(&server, &[vec![1; 16_002]]).await;
    assert_eq!(code, Some(1009));
    assert!(reason.contains("over the limit of 16000 bytes"), "{reason}");
    // Twice real time, in two-second bursts: the ninth half-second at once is too much.
    let (code, reason) = closed_by(&server, &vec![tone(16_000, 500); 9]).await;
    assert_eq!(code, Some(1008));
    assert!(reason.contains("twice real time"), "{reason}");

    // The chat is untouched: a new socket speaks in it.
    let mut socket = connect(&server, "/api/live?audio=binary").await;
    speak_binary(&mut socket, "limits", &tone(16_000, 100)).await;
    let (_, speech) = read_turn(&mut socket).await;
    assert_eq!(speech, answer());
}

#[tokio::test]
async fn an_utterance_is_limited_in_seconds() {
    let server = serve(
        Some(Listener::new()),
        &[("COUNTERSIGN_VOICE_MAX_UTTERANCE_SECS", "1")],
    )
    .await;
    let (code, reason) = closed_by(&server, &vec![tone(16_000, 500); 3]).await;
    assert_eq!(code, Some(1008));
    assert!(reason.contains("at most 1 s"), "{reason}");
}

#[tokio::test]
async fn audio_outside_an_utterance_or_to_a_model_without_voice_is_refused_nothing_lost() {
    let server = serve(Some(Listener::new()), &[]).await;
    let mut socket = connect(&server, "/api/live").await;
    send_binary(&mut socket, &tone(16_000, 100)).await;
    let Frame::Chunk(error) = next(&mut socket).await else {
        panic!("an error chunk");
    };
    assert_eq!(error["type"], "error");
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("outside an utterance"),
        "{error}"
    );

    // A model without voice says it takes no audio.
    let demo = serve(Some(Arc::new(Mute)), &[]).await;
    let mut socket = connect(&demo, "/api/live").await;
    send(
        &mut socket,
        json!({"type": "audio_control", "action": "start", "id": "mute"}),
    )
    .await;
    let Frame::Chunk(error) = next(&mut socket).await else {
        panic!("an error chunk");
    };
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("does not take audio"),
        "{error}"
    );
}

/// A committed clip's PCM (`tests/fixtures/voice/`, a plain 44-byte RIFF header).
fn clip(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/voice/{name}", env!("CARGO_MANIFEST_DIR"));
    let wav = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(&wav[36..40], b"data", "{path}: a plain WAV header");
    wav[44..].to_vec()
}

/// A spoken turn read until it pauses at its card (on `/api/live` a pause ends the step, not
/// the stream): its chunks, and how many bytes of speech came as binary frames.
async fn until_card(socket: &mut Socket) -> (Vec<Value>, usize) {
    let (mut chunks, mut speech) = (Vec::new(), 0);
    loop {
        match next(socket).await {
            Frame::Chunk(chunk) => {
                let paused = chunk["type"] == "finish-step"
                    && !of_type(&chunks, "tool-approval-request").is_empty();
                chunks.push(chunk);
                if paused {
                    return (chunks, speech);
                }
            }
            Frame::Binary(bytes) => speech += bytes.len(),
            other => panic!("{other:?} before the card: {chunks:?}"),
        }
    }
}

/// The offline demo model end to end over `/api/live`, as the page drives it: the words of
/// `pay.wav` are the person's message, and the payment waits for a countersignature while the
/// agent's speech comes as binary frames before the card.
#[tokio::test]
async fn the_demo_hears_a_spoken_payment_and_asks_for_its_countersignature() {
    let server = serve(None, &[]).await;
    let mut socket = connect(&server, "/api/live?audio=binary").await;
    speak_binary(&mut socket, "spoken", &clip("pay.wav")).await;
    let (chunks, speech) = until_card(&mut socket).await;
    assert!(of_type(&chunks, "error").is_empty(), "{chunks:?}");
    let request = of_type(&chunks, "tool-approval-request");
    assert_eq!(request.len(), 1, "{chunks:?}");
    let input = of_type(&chunks, "tool-input-available")[0];
    assert_eq!(input["toolName"], "process_payment");
    assert_eq!(input["input"]["amount"], 40);
    assert_eq!(input["input"]["currency"], "EUR");
    assert!(speech > 0, "the agent speaks before the card");

    // What the person said is their message.
    let page: Value = reqwest::get(format!("http://{}/api/chats/spoken", server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["messages"][0]["role"], "user", "{page}");
    assert_eq!(
        page["messages"][0]["parts"][0]["text"],
        "Pay forty euros to Alice"
    );
    assert_eq!(page["pending"].as_array().map(Vec::len), Some(1), "{page}");
    // The stream opened with what was said, before the reply's message (the page shows it).
    assert_eq!(chunks[0]["type"], "data-voice", "{chunks:?}");
    assert_eq!(chunks[0]["data"]["state"], "heard");
    assert_eq!(chunks[0]["data"]["text"], "Pay forty euros to Alice");
    assert_eq!(chunks[0]["data"]["messageId"], page["messages"][0]["id"]);
    assert_eq!(chunks[1]["type"], "start");

    // The card's click, as the page sends it after a reload: the payment runs.
    let mut socket = connect(&server, "/api/live?audio=binary").await;
    click_approve(&mut socket, &page, "spoken").await;
}

/// "Yes, approve it" said (`yes.wav`) while a spoken payment's card waits, over `/api/live`: an
/// aside of the waiting turn (ADR 0035). The demo's answer (it still waits; words do not sign
/// it) streams into that turn, words and speech; the words decide nothing and are kept in the
/// card's audit as what was said; the card stays pending, and only its click runs the payment.
#[tokio::test]
async fn a_spoken_yes_over_the_socket_is_an_aside_that_approves_nothing() {
    let server = serve(None, &[]).await;
    let mut socket = connect(&server, "/api/live?audio=binary").await;
    speak_binary(&mut socket, "yes", &clip("pay.wav")).await;
    let (chunks, _) = until_card(&mut socket).await;
    let approval = of_type(&chunks, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .expect("an approval id")
        .to_owned();

    speak_binary(&mut socket, "yes", &clip("yes.wav")).await;
    // The waiting turn goes on: what was said, then the answer, to the step's end.
    let (mut seen, mut speech) = (Vec::new(), 0);
    loop {
        match next(&mut socket).await {
            Frame::Chunk(chunk) => {
                let end = chunk["type"] == "finish-step";
                seen.push(chunk);
                if end {
                    break;
                }
            }
            Frame::Binary(bytes) => speech += bytes.len(),
            other => panic!("{other:?}: {seen:?}"),
        }
    }
    let aside = seen
        .iter()
        .find(|c| c["type"] == "data-voice" && c["data"]["state"] == "aside")
        .unwrap_or_else(|| panic!("the words were an aside: {seen:?}"));
    assert!(
        aside["data"]["text"]
            .as_str()
            .is_some_and(|t| t.to_lowercase().starts_with("yes")),
        "{aside}"
    );
    let text: String = of_type(&seen, "text-delta")
        .iter()
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert!(text.contains("still waiting"), "{text}");
    assert!(speech > 0, "the answer is spoken");
    assert!(
        of_type(&seen, "start").is_empty(),
        "no new message: {seen:?}"
    );
    assert!(
        of_type(&seen, "tool-output-available").is_empty()
            && of_type(&seen, "tool-output-error").is_empty(),
        "nothing ran, nothing ended: {seen:?}"
    );

    let page: Value = reqwest::get(format!("http://{}/api/chats/yes", server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["pending"].as_array().map(Vec::len), Some(1), "{page}");
    assert_eq!(
        page["messages"].as_array().map(Vec::len),
        Some(2),
        "no message of its own: {page}"
    );
    assert!(
        page["messages"][1].to_string().contains("still waiting"),
        "the waiting turn's message keeps the answer: {page}"
    );

    let audit: Vec<Value> = reqwest::get(format!("http://{}/api/audit?session=yes", server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let of_card: Vec<&Value> = audit
        .iter()
        .filter(|r| r["approval_id"] == approval.as_str())
        .collect();
    let kinds: Vec<&str> = of_card.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert!(kinds.contains(&"spoken"), "{kinds:?}");
    assert!(
        !kinds
            .iter()
            .any(|k| ["approved", "executed", "superseded"].contains(k)),
        "{kinds:?}"
    );
    let reason = of_card
        .iter()
        .find(|r| r["kind"] == "spoken")
        .and_then(|r| r["reason"].as_str())
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        reason.contains("\"yes") && reason.contains("decide nothing"),
        "the audit keeps the words as said: {reason}"
    );

    // The card's click, as the page sends it: the payment runs, once.
    click_approve(&mut socket, &page, "yes").await;
}

/// The card's click as the page sends it (the assistant message of `page` with its payment
/// part approved, as frame `id`): the payment runs, once, without an error.
async fn click_approve(socket: &mut Socket, page: &Value, id: &str) {
    let mut message = page["messages"][1].clone();
    let part = message["parts"]
        .as_array_mut()
        .and_then(|parts| {
            parts
                .iter_mut()
                .find(|p| p["type"] == "tool-process_payment")
        })
        .expect("the card's part");
    part["state"] = json!("approval-responded");
    part["approval"]["approved"] = json!(true);
    send(
        socket,
        json!({"type": "message", "id": id, "messages": [message]}),
    )
    .await;
    let mut seen = Vec::new();
    loop {
        match next(socket).await {
            Frame::Chunk(chunk) => seen.push(chunk),
            Frame::Binary(_) => {}
            Frame::Done => break,
            other => panic!("{other:?}: {seen:?}"),
        }
    }
    assert!(of_type(&seen, "error").is_empty(), "{seen:?}");
    assert_eq!(of_type(&seen, "tool-output-available").len(), 1, "{seen:?}");
}
