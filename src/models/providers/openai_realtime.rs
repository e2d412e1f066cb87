//! OpenAI Realtime (`gpt-realtime`) over a WebSocket, as a [`Model`] with voice (ADR 0035, ADR
//! 0041): the same trait as Gemini Live, so voice is not tied to one vendor.
//!
//! # Shape
//!
//! As in [`super::gemini_live`]: one **session actor** (a tokio task) per
//! [`ModelRequest::session_id`] owns the socket; [`Model::stream`] hands it a step job and
//! returns the receiving end of the step's events; [`Model::voice`] hands it the person's
//! speech, read during a step too (barge-in). The actor keeps what the server's conversation
//! has seen as a prefix of the runner's history and sends only the tail it lacks; a history that
//! no longer starts with that prefix (a server restart, an edit) gets a fresh socket, seeded.
//!
//! # Connecting
//!
//! `GET {url}?model=NAME` with `Authorization: Bearer KEY` (never in the URL). The server opens
//! with `session.created`; the actor answers `session.update {session: {type: "realtime",
//! output_modalities: ["audio"], instructions, tools, audio: {input: {format: audio/pcm 24 kHz,
//! transcription, turn_detection}, output: {format, voice}}}}` ([`wire::session`]). The session
//! *can* change on an open socket, so a new system prompt, tool list or voice mode is one more
//! `session.update` (unlike Gemini Live, no socket is replaced for it).
//!
//! # What a step sends
//!
//! The tail the server lacks splits into context (up to the last assistant item) and trigger.
//! Context goes as `conversation.item.create` messages (`input_text` for the person,
//! `output_text` for the model), the model's calls as `function_call` items on their Realtime
//! id (or ours), so a result can go as the call's `function_call_output` on any socket that
//! has seen the call: a new socket too. The trigger:
//!
//! * a user message: `conversation.item.create {type: "message", role: "user", content:
//!   [{type: "input_text", text}]}` then `response.create`;
//! * results of calls this socket issued: `conversation.item.create {type:
//!   "function_call_output", call_id, output}` (the output is [`ToolResult::model_view`] as a
//!   JSON string; the call id is kept in the call's `provider_data` as `{"openai_realtime":
//!   {"id"}}`) then `response.create`. **This is the only place a gated call's output goes,
//!   and a step with results exists only after the gate decided**: the adapter never decides;
//!   a denial goes out as the denial;
//! * results of calls a socket issued or was replayed: `function_call_output`s as above; a
//!   result whose call this socket has not seen (its response was cancelled): a user message
//!   that describes it.
//!
//! The server has one active response at a time and refuses a `response.create` over it
//! (`conversation_already_has_active_response`): the actor follows each response to its
//! `response.done`, and a `response.create` (a step's, or push-to-talk's) asked for meanwhile
//! goes at that `response.done` (the rest of a grace-ended step, a cancelled answer's end).
//!
//! # What a step reads
//!
//! `response.output_audio.delta` → [`ModelEvent::Audio`] (PCM16 24 kHz);
//! `response.output_audio_transcript.delta` (and `response.output_text.delta`) →
//! [`ModelEvent::TextDelta`]; `response.function_call_arguments.done` → a call, held until
//! `response.done` (a cancelled response takes its calls with it: the runner never sees them);
//! `response.done` → `Finish` (`completed` with calls: `ToolCalls`; `cancelled`: `Interrupted`
//! then `Other`; `incomplete` for tokens: `Length`, for content: `ContentFilter`; `failed`:
//! the error), with its usage; `error` → the error, with the server's message. If
//! `response.done` has not come [`RealtimeTimeouts::tool_turn_grace`] after a call, the step
//! ends with its calls; that response's `response.done` with `cancelled` arriving later is a
//! [`CallNotice::Withdrawn`] for each call (the pending approval ends and can never run).
//! What that response still says is held and announced as [`VoiceNotice::WhileWaiting`]: the
//! waiting turn takes it as an aside, so the person hears it in the message whose card waits.
//!
//! # Voice
//!
//! The microphone's PCM16 16 kHz is resampled to 24 kHz ([`crate::models::pcm::Resampler`],
//! one per utterance) and sent as `input_audio_buffer.append`. Push-to-talk: `turn_detection:
//! null`; `start` clears the buffer, `end` commits it and asks for `response.create`; a
//! `start` while the model speaks cancels its response (`response.cancel`: barge-in).
//! Hands-free: `turn_detection` is `server_vad` or `semantic_vad` ([`HandsFreeDetection`]),
//! the server commits and answers by itself and cancels its own response when the person
//! speaks over it (`input_audio_buffer.speech_started` → [`ModelEvent::Interrupted`]).
//! After either barge-in the server is told how much of the answer the person heard
//! (`conversation.item.truncate`, estimated from what was forwarded and when: `actor/heard`), so
//! its context does not keep words that were never heard.
//! A response that begins with no step after the person spoke is the answer to them: the actor
//! publishes [`VoiceNotice::Heard`] with
//! `conversation.item.input_audio_transcription.completed`'s transcript, holds what the server
//! sends, and hands it to the runner's step for that turn (whose last history item is the
//! transcript, already heard by the server, so not sent).
//!
//! # Layout
//!
//! This file: the configuration and the [`Model`] (the registry of session actors); `actor`
//! the session actor (socket, sync, the time between steps), `actor/step` one step,
//! `actor/voice` the person's speech; `wire` the JSON of both directions.

mod actor;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, http::HeaderValue};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::{ProviderConfigError, ProviderKey};
use crate::agent::clock::{Clock, SystemClock};
use crate::agent::lock;
use crate::agent::model::{
    CallNotice, CallNotices, CallSubscription, Model, ModelError, ModelEvent, ModelRequest,
    ModelStream,
};
#[cfg(doc)]
use crate::agent::voice::VoiceNotice;
use crate::agent::voice::{VoiceError, VoiceInput, VoiceNotices, VoiceSubscription};
use actor::SessionActor;

/// OpenAI's Realtime WebSocket; the model goes in the `model` query parameter.
pub const DEFAULT_REALTIME_URL: &str = "wss://api.openai.com/v1/realtime";
/// The Realtime model used when `COUNTERSIGN_LIVE_MODEL=openai:` names none.
pub const DEFAULT_REALTIME_MODEL: &str = "gpt-realtime";
/// The voice the model speaks with.
pub const DEFAULT_REALTIME_VOICE: &str = "marin";
/// The model that transcribes the person's speech (`audio.input.transcription`).
pub const DEFAULT_TRANSCRIPTION_MODEL: &str = "gpt-4o-mini-transcribe";
/// The only PCM rate Realtime takes and sends (`audio/pcm`).
pub const REALTIME_RATE: u32 = 24_000;

/// The `provider_data` namespace of a call: `{"openai_realtime": {"id": call_id}}` (not the
/// Chat Completions provider's `openai`: a Realtime call id means nothing to it).
const NAMESPACE: &str = "openai_realtime";

/// How hands-free speech is detected (`audio.input.turn_detection.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HandsFreeDetection {
    /// Silence-based: a pause ends the turn.
    #[default]
    ServerVad,
    /// The model judges whether the person has finished.
    SemanticVad,
}

impl HandsFreeDetection {
    fn wire(self) -> &'static str {
        match self {
            HandsFreeDetection::ServerVad => "server_vad",
            HandsFreeDetection::SemanticVad => "semantic_vad",
        }
    }
}

/// Every wait of the Realtime client is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealtimeTimeouts {
    /// TCP + TLS + WebSocket handshake, and the server's `session.created`.
    pub connect: Duration,
    /// The longest gap between server events while a step waits for its answer.
    pub silence: Duration,
    /// How long after a function call the step waits for its `response.done` before it ends
    /// with the call anyway (the model may keep talking).
    pub tool_turn_grace: Duration,
    /// A socket without a step or speech for this long is closed (the next step seeds a new
    /// one: a Realtime conversation does not outlive its socket).
    pub idle_close: Duration,
}

impl Default for RealtimeTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            silence: Duration::from_secs(30),
            tool_turn_grace: Duration::from_secs(10),
            idle_close: Duration::from_secs(5 * 60),
        }
    }
}

/// Settings of the OpenAI Realtime provider.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiRealtimeConfig {
    pub api_key: ProviderKey,
    /// E.g. `gpt-realtime`.
    pub model: String,
    /// [`DEFAULT_REALTIME_URL`]; `ws://` for a local fake; `http(s)://` becomes `ws(s)://`.
    pub url: String,
    pub voice: String,
    pub transcription_model: String,
    pub hands_free: HandsFreeDetection,
    pub timeouts: RealtimeTimeouts,
}

impl OpenAiRealtimeConfig {
    pub fn new(api_key: ProviderKey) -> Self {
        Self {
            api_key,
            model: DEFAULT_REALTIME_MODEL.to_owned(),
            url: DEFAULT_REALTIME_URL.to_owned(),
            voice: DEFAULT_REALTIME_VOICE.to_owned(),
            transcription_model: DEFAULT_TRANSCRIPTION_MODEL.to_owned(),
            hands_free: HandsFreeDetection::default(),
            timeouts: RealtimeTimeouts::default(),
        }
    }
}

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type WsError = tungstenite::Error;
type EventSender = mpsc::UnboundedSender<Result<crate::agent::model::ModelEvent, ModelError>>;
type Registry = Mutex<HashMap<String, (u64, mpsc::UnboundedSender<Job>)>>;

/// A Realtime model: one WebSocket session per conversation. Dropping the model ends every
/// session actor and closes their sockets.
pub struct OpenAiRealtimeModel {
    shared: Arc<Shared>,
    sessions: Arc<Registry>,
}

/// What every session actor of one model reads.
struct Shared {
    config: OpenAiRealtimeConfig,
    /// The URL with `?model=NAME`.
    url: String,
    /// `Bearer KEY`, marked sensitive.
    authorization: HeaderValue,
    /// Calls the server cancelled after their step ended (none lost).
    cancellations: CallNotices,
    voice_notices: VoiceNotices,
    serial: AtomicU64,
    /// Times what the person heard of an answer (a barge-in's truncation).
    clock: Arc<dyn Clock>,
}

/// One [`Model::stream`] call.
struct StepJob {
    request: ModelRequest,
    events: EventSender,
}

/// What a session actor is asked to do.
enum Job {
    Step(StepJob),
    /// [`Model::voice_context`]: what a voice session opens with.
    VoiceContext(ModelRequest),
    Voice(VoiceInput),
    /// [`Model::aside`]: the held answer to speech, streamed into a waiting turn.
    Aside(EventSender),
    /// [`Model::decline_spoken`]: no turn takes the answer to these words.
    Decline(String),
}

impl OpenAiRealtimeModel {
    pub fn new(config: OpenAiRealtimeConfig) -> Result<Self, ProviderConfigError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// A model whose estimate of how much of an interrupted answer was heard reads `clock`
    /// (tests move it by hand).
    pub fn with_clock(
        config: OpenAiRealtimeConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ProviderConfigError> {
        let base = super::gemini_live::live_url(&config.url).ok_or_else(|| {
            ProviderConfigError::InvalidRealtimeUrl {
                value: config.url.clone(),
            }
        })?;
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}model={}", config.model);
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", config.api_key.expose())).map_err(
                |_| {
                    ProviderConfigError::Client(
                        "the OpenAI API key has characters an HTTP header cannot carry".into(),
                    )
                },
            )?;
        authorization.set_sensitive(true);
        let cancellations = CallNotices::default();
        let voice_notices = VoiceNotices::default();
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                url,
                authorization,
                cancellations,
                voice_notices,
                serial: AtomicU64::new(1),
                clock,
            }),
            sessions: Arc::default(),
        })
    }

    pub fn config(&self) -> &OpenAiRealtimeConfig {
        &self.shared.config
    }

    /// Hands the job to the session's actor, starting one if needed.
    fn dispatch(&self, session_id: &str, job: Job) -> Result<(), ModelError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ModelError::Transport("the OpenAI Realtime client needs a tokio runtime".into())
        })?;
        let mut sessions = lock(&self.sessions);
        let job = match sessions.get(session_id) {
            Some((_, sender)) => match sender.send(job) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        // Cannot fail: the receiver is alive.
        let _ = sender.send(job);
        let actor_id = self.shared.serial.fetch_add(1, Ordering::Relaxed);
        sessions.insert(session_id.to_owned(), (actor_id, sender));
        let actor = SessionActor::new(
            self.shared.clone(),
            session_id.to_owned(),
            actor_id,
            Arc::downgrade(&self.sessions),
            receiver,
        );
        runtime.spawn(actor.run());
        Ok(())
    }
}

impl Model for OpenAiRealtimeModel {
    fn label(&self) -> String {
        format!("openai-realtime:{}", self.shared.config.model)
    }

    fn model_version(&self) -> String {
        self.shared.config.model.clone()
    }

    fn call_notices(&self, session_id: &str) -> Option<CallSubscription> {
        Some(self.shared.cancellations.subscribe_chat(session_id))
    }

    fn voice(&self, session_id: &str, input: VoiceInput) -> Result<(), VoiceError> {
        Ok(self.dispatch(session_id, Job::Voice(input))?)
    }

    fn voice_context(&self, request: ModelRequest) {
        let session_id = request.session_id.clone();
        if let Err(error) = self.dispatch(&session_id, Job::VoiceContext(request)) {
            tracing::warn!(session = %session_id, %error, "no OpenAI Realtime session for voice");
        }
    }

    fn voice_notices(&self) -> Option<VoiceSubscription> {
        Some(self.shared.voice_notices.subscribe())
    }

    fn decline_spoken(&self, session_id: &str, transcript: &str) {
        if let Err(error) = self.dispatch(session_id, Job::Decline(transcript.to_owned())) {
            tracing::debug!(session = %session_id, %error, "nothing to decline");
        }
    }

    fn aside(&self, session_id: &str) -> ModelStream {
        let (events, receiver) = mpsc::unbounded_channel();
        if let Err(error) = self.dispatch(session_id, Job::Aside(events)) {
            return futures::stream::once(async move { Err(error) }).boxed();
        }
        receive(receiver)
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let (events, receiver) = mpsc::unbounded_channel();
        let session_id = request.session_id.clone();
        if let Err(error) = self.dispatch(&session_id, Job::Step(StepJob { request, events })) {
            return futures::stream::once(async move { Err(error) }).boxed();
        }
        receive(receiver)
    }
}

/// The stream of a step's (or an aside's) events as the actor sends them.
fn receive(receiver: mpsc::UnboundedReceiver<Result<ModelEvent, ModelError>>) -> ModelStream {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (event, receiver))
    })
    .boxed()
}

#[cfg(test)]
mod tests;
