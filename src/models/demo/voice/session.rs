//! The demo model's side of the voice interface (`agent::voice`): it keeps each chat's open
//! utterance, hears it at its end ([`VoiceNotice::Heard`] with the written transcript), and
//! speaks its replies in chats where someone has spoken.
//!
//! Push-to-talk: the utterance is what came between `start` and `stop`. Hands-free: the
//! microphone stays open and the demo's own voice activity detection ([`Detector`]) finds each
//! utterance in the stream; each is heard as it ends. Speech that starts while the demo answers
//! aloud is a barge-in: the answer stops there ([`ModelEvent::Interrupted`], then `Finish`
//! with [`FinishReason::Other`], as Gemini Live's `interrupted`). So that "while it answers"
//! means while its speech plays, a reply spoken to an open hands-free microphone is sent at
//! the pace it is played ([`LEAD`] ahead), not as fast as espeak-ng makes it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use futures::StreamExt as _;
use tokio::{
    sync::mpsc,
    time::{Duration, Instant},
};
use tokio_util::sync::CancellationToken;

use super::{
    detect::{Detected, Detector},
    listen::{MAX_UTTERANCE_BYTES, Recogniser},
    programs::Programs,
    speak::{Sentences, SpeakLimits, Synthesis},
};
use crate::agent::{
    model::{ModelEvent, ModelStream},
    voice::{
        OUTPUT_SAMPLE_RATE, VoiceError, VoiceInput, VoiceMode, VoiceNotice, VoiceNotices,
        VoiceSubscription,
    },
};
use crate::models::demo::{DEMO_LABEL, nlu};
use crate::protocol::FinishReason;

/// How far a paced reply's speech runs ahead of its playing: the page has this much queued, and
/// speech in the reply's last `LEAD` is stopped by the page alone (its own barge-in).
pub const LEAD: Duration = Duration::from_millis(500);
/// Utterances of one chat waiting to be recognised (each at most 60 s): more are dropped.
const QUEUED_UTTERANCES: usize = 4;

/// The demo's voice: shared by every clone of the model.
#[derive(Debug)]
pub struct DemoVoice {
    /// Found at the first voice (a model that never hears one never looks).
    ready: OnceLock<Ready>,
    lines: Mutex<HashMap<String, Line>>,
    notices: VoiceNotices,
}

#[derive(Debug)]
struct Ready {
    programs: Programs,
    recogniser: Option<Arc<Recogniser>>,
    /// Why voice is off here, in plain words (`None`: it is on).
    missing: Option<String>,
}

/// A chat someone has spoken in.
#[derive(Debug, Default)]
struct Line {
    open: bool,
    /// Push-to-talk: the utterance so far.
    utterance: Vec<u8>,
    /// Hands-free: the microphone's voice activity detection (`None` for push-to-talk).
    detector: Option<Box<Detector>>,
    /// The chat's utterances, heard one after another (so their notices keep their order).
    heard: Option<mpsc::Sender<Vec<u8>>>,
    /// The replies being spoken: speech detected over them stops them (barge-in). A reply
    /// cancels its own token when it ends.
    speaking: Vec<CancellationToken>,
    /// Whether the chat was told the demo cannot speak here.
    told: bool,
}

impl Line {
    /// Whether the microphone is open hands-free.
    fn hands_free(&self) -> bool {
        self.open && self.detector.is_some()
    }
}

impl Default for DemoVoice {
    fn default() -> Self {
        DemoVoice {
            ready: OnceLock::new(),
            lines: Mutex::default(),
            notices: VoiceNotices::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl DemoVoice {
    fn ready(&self) -> &Ready {
        self.ready.get_or_init(|| {
            let programs = Programs::find();
            let recogniser = programs.listener.clone().and_then(|listener| {
                Recogniser::new(listener)
                    .map_err(|e| tracing::warn!(error = %e, "the demo cannot listen"))
                    .ok()
                    .map(Arc::new)
            });
            let missing = programs.missing().or_else(|| {
                recogniser.is_none().then(|| {
                    "The offline demo's recogniser could not be prepared, so it answers in text."
                        .to_owned()
                })
            });
            if let Some(missing) = &missing {
                tracing::warn!("{missing}");
            }
            Ready {
                programs,
                recogniser,
                missing,
            }
        })
    }

    /// Notices of utterances heard.
    pub fn notices(&self) -> VoiceSubscription {
        self.notices.subscribe()
    }

    /// One piece of a person's voice in chat `chat`.
    pub fn take(&self, chat: &str, input: VoiceInput) -> Result<(), VoiceError> {
        match input {
            VoiceInput::Start { mode } => {
                let ready = self.ready();
                if ready.recogniser.is_none() {
                    return Err(VoiceError::Unsupported {
                        model: format!(
                            "{DEMO_LABEL}; {}",
                            ready.missing.clone().unwrap_or_default()
                        ),
                    });
                }
                let mut lines = lock(&self.lines);
                let line = lines.entry(chat.to_owned()).or_default();
                line.open = true;
                line.utterance.clear();
                line.detector = (mode == VoiceMode::HandsFree).then(Box::default);
                Ok(())
            }
            VoiceInput::Audio(pcm) => {
                let mut lines = lock(&self.lines);
                let line = lines
                    .get_mut(chat)
                    .filter(|l| l.open)
                    .ok_or(VoiceError::NotStarted)?;
                let Some(detector) = line.detector.as_mut() else {
                    let room = MAX_UTTERANCE_BYTES.saturating_sub(line.utterance.len());
                    line.utterance
                        .extend_from_slice(&pcm[..pcm.len().min(room)]);
                    return Ok(());
                };
                for found in detector.push(&pcm) {
                    match found {
                        Detected::Started => barge_in(chat, line),
                        Detected::Ended(utterance) => self.hear(chat, line, utterance),
                    }
                }
                Ok(())
            }
            VoiceInput::End => {
                let mut lines = lock(&self.lines);
                let line = lines
                    .get_mut(chat)
                    .filter(|l| l.open)
                    .ok_or(VoiceError::NotStarted)?;
                line.open = false;
                let utterance = match line.detector.take() {
                    // Hands-free: what was being said when the microphone closed, if anything.
                    Some(mut detector) => detector.finish(),
                    None => Some(std::mem::take(&mut line.utterance)),
                };
                if let Some(utterance) = utterance {
                    self.hear(chat, line, utterance);
                }
                Ok(())
            }
        }
    }

    /// Hands `utterance` of chat `chat` to the chat's listener, which recognises the chat's
    /// utterances in order and publishes what it heard.
    fn hear(&self, chat: &str, line: &mut Line, utterance: Vec<u8>) {
        let queue = line.heard.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel(QUEUED_UTTERANCES);
            let recogniser = self.ready().recogniser.clone();
            tokio::spawn(listen(
                chat.to_owned(),
                recogniser,
                rx,
                self.notices.clone(),
            ));
            tx
        });
        if queue.try_send(utterance).is_err() {
            tracing::warn!(session = %chat, "the demo is behind hearing this chat: an utterance was dropped");
        }
    }

    /// Whether the demo answers chat `chat` aloud (someone spoke in it).
    pub fn speaks_in(&self, chat: &str) -> bool {
        lock(&self.lines).contains_key(chat)
    }

    /// `events` with the reply's speech: each sentence of its text is spoken as soon as it is
    /// complete (`ModelEvent::Audio` after its words), the rest before `Finish`. Where the
    /// demo cannot speak, the chat is told once and the reply stays text. Speech detected while
    /// it answers stops it (barge-in); to an open hands-free microphone it is paced.
    pub fn spoken(&self, chat: &str, events: ModelStream) -> ModelStream {
        let espeak = self.ready().programs.espeak.clone();
        let Some(espeak) = espeak else {
            let first = {
                let mut lines = lock(&self.lines);
                lines
                    .get_mut(chat)
                    .is_some_and(|l| !std::mem::replace(&mut l.told, true))
            };
            let note = self.ready().missing.clone().filter(|_| first);
            return futures::stream::iter(
                note.map(|n| Ok(ModelEvent::TextDelta(format!("{n}\n")))),
            )
            .chain(events)
            .boxed();
        };
        let barge = CancellationToken::new();
        let mut pace = {
            let mut lines = lock(&self.lines);
            let line = lines.entry(chat.to_owned()).or_default();
            line.speaking.retain(|t| !t.is_cancelled());
            line.speaking.push(barge.clone());
            line.hands_free().then(Pace::default)
        };
        // A few chunks ahead at most: the reply waits for its listener, memory stays bounded.
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            tokio::select! {
                biased;
                () = barge.cancelled() => {
                    // What it said so far stays; the rest of the answer is not given.
                    let finish = ModelEvent::Finish {
                        reason: FinishReason::Other,
                        usage: Default::default(),
                    };
                    for event in [ModelEvent::Interrupted, finish] {
                        if tx.send(Ok(event)).await.is_err() {
                            break;
                        }
                    }
                }
                // Nobody listens any more (the step was dropped): nor does it speak.
                () = tx.closed() => {}
                () = reply(events, &espeak, &mut pace, &tx) => {}
            }
            // Over: no longer spoken over.
            barge.cancel();
        });
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
            .boxed()
    }
}

/// Speech started in chat `chat`: the replies it is speaking stop (barge-in).
fn barge_in(chat: &str, line: &mut Line) {
    for reply in line.speaking.drain(..) {
        if !reply.is_cancelled() {
            tracing::debug!(session = %chat, "speech over the demo's answer: it stops");
            reply.cancel();
        }
    }
}

/// Recognises chat `chat`'s utterances in the order they ended and publishes what was heard;
/// ends when the chat's queue goes.
async fn listen(
    chat: String,
    recogniser: Option<Arc<Recogniser>>,
    mut utterances: mpsc::Receiver<Vec<u8>>,
    notices: VoiceNotices,
) {
    while let Some(utterance) = utterances.recv().await {
        let seconds = utterance.len() as f64 / 2.0 / f64::from(crate::models::pcm::LISTEN_RATE);
        let heard = match &recogniser {
            Some(r) => r.recognise(&utterance).await.unwrap_or_else(|error| {
                tracing::warn!(%error, "the demo could not hear an utterance");
                String::new()
            }),
            None => String::new(),
        };
        match heard_notice(chat.clone(), &heard) {
            Some(notice) => {
                let _ = notices.send(notice);
            }
            // Said at INFO: a person who spoke and got no answer, or a test that waits for
            // one, can see that the utterance came and held nothing the demo knows.
            None => tracing::info!(
                session = %chat,
                seconds = format!("{seconds:.2}"),
                "the demo heard no words it knows in an utterance; nothing starts"
            ),
        }
    }
}

type Events = mpsc::Sender<Result<ModelEvent, crate::agent::model::ModelError>>;

/// Sends `events` into `tx` with their speech (see [`DemoVoice::spoken`]); returns when the
/// reply is over or nobody listens.
async fn reply(
    mut events: ModelStream,
    espeak: &std::path::Path,
    pace: &mut Option<Pace>,
    tx: &Events,
) {
    let mut sentences = Sentences::default();
    // The whole reply's speech is bounded too (a `/lorem` is shown, not read out whole).
    let mut budget = MAX_REPLY_SPEECH_BYTES;
    while let Some(event) = events.next().await {
        let said = match &event {
            Ok(ModelEvent::TextDelta(delta)) => sentences.push(delta),
            Ok(ModelEvent::Finish { .. }) | Err(_) => sentences.finish().into_iter().collect(),
            _ => Vec::new(),
        };
        // Words first, then their sound; anything else after the sound before it.
        let (now, later) = match event {
            text @ Ok(ModelEvent::TextDelta(_)) => (Some(text), None),
            other => (None, Some(other)),
        };
        if let Some(text) = now
            && tx.send(text).await.is_err()
        {
            return;
        }
        for sentence in said {
            if budget == 0 {
                break;
            }
            let Some(sent) = say(espeak, &sentence, budget, pace, tx).await else {
                return;
            };
            budget = budget.saturating_sub(sent);
        }
        if let Some(event) = later {
            // A call, the end: once the speech before it has (nearly) played.
            if let Some(pace) = pace {
                pace.wait(0).await;
            }
            if tx.send(event).await.is_err() {
                return;
            }
        }
    }
}

/// A reply's speech sent at the pace it plays, [`LEAD`] ahead.
#[derive(Debug, Default)]
struct Pace {
    /// When its first sound was sent.
    start: Option<Instant>,
    /// How much of it was sent.
    sent: Duration,
}

impl Pace {
    /// Waits until `bytes` more of speech may go, and counts them.
    async fn wait(&mut self, bytes: usize) {
        let start = *self.start.get_or_insert_with(Instant::now);
        tokio::time::sleep_until((start + self.sent).checked_sub(LEAD).unwrap_or(start)).await;
        self.sent += Duration::from_secs_f64(bytes as f64 / 2.0 / f64::from(OUTPUT_SAMPLE_RATE));
    }
}

/// The most speech one reply sends: 60 s at 24 kHz.
const MAX_REPLY_SPEECH_BYTES: usize = 60 * 2 * 24_000;

/// Speaks one sentence into `tx`, at most `budget` bytes, paced by `pace` if given; how many it
/// sent, `None` once nobody listens. A failure to speak leaves the words as text (logged).
async fn say(
    espeak: &std::path::Path,
    sentence: &str,
    budget: usize,
    pace: &mut Option<Pace>,
    tx: &Events,
) -> Option<usize> {
    let limits = SpeakLimits {
        max_bytes: budget.min(SpeakLimits::default().max_bytes),
        ..SpeakLimits::default()
    };
    let mut sent = 0;
    let mut synthesis = match Synthesis::start(espeak, sentence, limits).await {
        Ok(s) => s,
        Err(error) => {
            tracing::warn!(%error, "the demo could not speak");
            return (!tx.is_closed()).then_some(0);
        }
    };
    loop {
        match synthesis.next().await {
            Ok(Some(pcm)) => {
                sent += pcm.len();
                if let Some(pace) = pace.as_mut() {
                    pace.wait(pcm.len()).await;
                }
                if tx
                    .send(Ok(ModelEvent::Audio(Arc::from(pcm))))
                    .await
                    .is_err()
                {
                    return None;
                }
            }
            Ok(None) => return Some(sent),
            Err(error) => {
                tracing::warn!(%error, "the demo could not speak");
                return (!tx.is_closed()).then_some(sent);
            }
        }
    }
}

/// What the demo tells the runtime of an utterance it recognised as `heard`: nothing when it
/// heard no words (silence, noise, a recogniser that failed): an utterance without words asks
/// for nothing, so it starts no turn (before, it started one with no transcript, refused with
/// "a turn is already running" when it came while the demo answered).
fn heard_notice(chat: String, heard: &str) -> Option<VoiceNotice> {
    let transcript = nlu::written(heard);
    if transcript.trim().is_empty() {
        return None;
    }
    Some(VoiceNotice::Heard {
        session_id: chat,
        transcript,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::agent::{
        history::HistoryItem,
        model::{Model, ModelEvent, ModelRequest},
        voice::{MAX_AUDIO_FRAME_BYTES, VoiceError, VoiceInput, VoiceMode, VoiceNotice},
    };
    use crate::models::demo::DemoModel;
    use crate::models::pcm;
    use futures::StreamExt as _;

    /// A committed clip's PCM16 16 kHz bytes.
    pub(super) fn clip(name: &str) -> Vec<u8> {
        let path = format!("{}/tests/fixtures/voice/{name}", env!("CARGO_MANIFEST_DIR"));
        pcm::bytes_of(&pcm::read_wav(&std::fs::read(path).unwrap()).unwrap().1)
    }

    /// Says `file` into chat `chat` as the browser would (0.5 s frames) and returns what the
    /// demo heard.
    async fn speak_into(model: &DemoModel, chat: &str, file: &str) -> String {
        let mut notices = model.voice_notices().unwrap();
        let start = VoiceInput::Start {
            mode: VoiceMode::PushToTalk,
        };
        model.voice(chat, start).unwrap();
        for frame in clip(file).chunks(MAX_AUDIO_FRAME_BYTES) {
            model
                .voice(chat, VoiceInput::Audio(std::sync::Arc::from(frame)))
                .unwrap();
        }
        model.voice(chat, VoiceInput::End).unwrap();
        heard(&mut notices, chat).await
    }

    /// What the demo heard next in chat `chat`.
    pub(super) async fn heard(
        notices: &mut crate::agent::voice::VoiceSubscription,
        chat: &str,
    ) -> String {
        let notice = tokio::time::timeout(Duration::from_secs(30), notices.recv())
            .await
            .expect("an utterance was heard")
            .unwrap();
        let VoiceNotice::Heard {
            session_id,
            transcript,
        } = notice
        else {
            panic!("expected what was heard: {notice:?}")
        };
        assert_eq!(session_id, chat);
        transcript
    }

    async fn answer(model: &DemoModel, chat: &str, said: &str) -> Vec<ModelEvent> {
        let request = ModelRequest {
            session_id: chat.into(),
            system: String::new(),
            history: vec![HistoryItem::user(said)].into(),
            tools: Vec::new(),
        };
        model
            .stream(request)
            .map(|e| e.unwrap())
            .collect::<Vec<_>>()
            .await
    }

    fn speech(events: &[ModelEvent]) -> Vec<i16> {
        events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Audio(pcm) => Some(pcm::samples_of(pcm)),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[tokio::test]
    async fn a_spoken_payment_is_heard_asked_for_and_answered_aloud_and_a_spoken_yes_runs_nothing()
    {
        let model = DemoModel::new(Duration::ZERO);
        let heard = speak_into(&model, "c", "pay.wav").await;
        assert_eq!(heard, "Pay forty euros to Alice");
        let events = answer(&model, "c", &heard).await;
        let calls: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCall(call) => Some((call.name.clone(), call.args.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "process_payment");
        assert_eq!(
            (
                &calls[0].1["amount"],
                &calls[0].1["currency"],
                &calls[0].1["recipient"]
            ),
            (
                &serde_json::json!(40),
                &serde_json::json!("EUR"),
                &serde_json::json!("Alice")
            )
        );
        let words: String = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            words.contains("countersignature") && words.contains("does not approve"),
            "{words}"
        );
        // Its words are spoken: seconds of sound at 24 kHz, not silence, before the step ends.
        let sound = speech(&events);
        let seconds = sound.len() as f64 / f64::from(pcm::SPEAK_RATE);
        assert!(seconds > 3.0, "{seconds} s");
        assert!(sound.iter().any(|s| s.unsigned_abs() > 3000));
        assert!(matches!(events.last(), Some(ModelEvent::Finish { .. })));

        let yes = speak_into(&model, "c", "yes.wav").await;
        assert_eq!(yes, "Yes approve it");
        let events = answer(&model, "c", &yes).await;
        assert!(!events.iter().any(|e| matches!(e, ModelEvent::ToolCall(_))));
        assert!(!speech(&events).is_empty(), "it says it did not act, aloud");
    }

    #[test]
    fn an_utterance_without_words_tells_nothing() {
        for heard in ["", "   ", "\n"] {
            assert_eq!(super::heard_notice("c".into(), heard), None, "{heard:?}");
        }
        assert_eq!(
            super::heard_notice("c".into(), "yes approve it"),
            Some(VoiceNotice::Heard {
                session_id: "c".into(),
                transcript: "Yes approve it".into()
            })
        );
    }

    /// Silence said into the microphone, then a payment: the only notice is the payment's.
    #[tokio::test]
    async fn silence_is_heard_as_nothing() {
        let model = DemoModel::new(Duration::ZERO);
        let mut notices = model.voice_notices().unwrap();
        let start = VoiceInput::Start {
            mode: VoiceMode::PushToTalk,
        };
        model.voice("c", start.clone()).unwrap();
        let silence = vec![0u8; MAX_AUDIO_FRAME_BYTES];
        model
            .voice("c", VoiceInput::Audio(std::sync::Arc::from(silence)))
            .unwrap();
        model.voice("c", VoiceInput::End).unwrap();
        model.voice("c", start).unwrap();
        for frame in clip("pay.wav").chunks(MAX_AUDIO_FRAME_BYTES) {
            model
                .voice("c", VoiceInput::Audio(std::sync::Arc::from(frame)))
                .unwrap();
        }
        model.voice("c", VoiceInput::End).unwrap();
        let first = tokio::time::timeout(Duration::from_secs(30), notices.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            first,
            VoiceNotice::Heard {
                session_id: "c".into(),
                transcript: "Pay forty euros to Alice".into()
            },
            "the silence told nothing"
        );
    }

    #[tokio::test]
    async fn audio_outside_an_utterance_is_refused_and_a_typed_chat_stays_silent() {
        let model = DemoModel::new(Duration::ZERO);
        assert_eq!(
            model.voice("c", VoiceInput::Audio(std::sync::Arc::from(vec![0u8; 2]))),
            Err(VoiceError::NotStarted)
        );
        assert_eq!(
            model.voice("c", VoiceInput::End),
            Err(VoiceError::NotStarted)
        );
        let events = answer(&model, "typed", "hello").await;
        assert!(speech(&events).is_empty());
    }
}

#[cfg(test)]
#[path = "hands_free_tests.rs"]
mod hands_free_tests;
