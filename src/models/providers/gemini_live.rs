//! Gemini Live: `BidiGenerateContent` over a WebSocket (protocols.md §C), as a [`Model`].
//!
//! The runner thinks in *steps*: it calls [`Model::stream`] with the whole history, reads events
//! until `Finish`, and between steps it may wait minutes for a person to approve a tool call. The
//! Live API thinks in one long-lived, stateful *session* per conversation. This module bridges
//! the two.
//!
//! # Shape
//!
//! * One **session actor** (a tokio task) per [`ModelRequest::session_id`], found through a map
//!   in [`GeminiLiveModel`]. It owns the socket; [`Model::stream`] hands it a step job over a
//!   channel and returns the receiving end of the job's event channel. Dropping the returned
//!   stream (the runner's cancellation) closes that channel, which the actor notices.
//! * The actor keeps **what the server session has seen**, as a prefix of the runner's history
//!   ("synced"; the model's own step counts once the next request shows how the runner recorded
//!   it). At each step it checks that the request's history still starts with that prefix
//!   (otherwise the history *diverged*, e.g. after a server restart: the socket is dropped and a
//!   fresh one is seeded) and sends only the tail the server lacks.
//! * Steps of one session run one after another; different sessions run in parallel.
//! * Between steps it keeps reading the socket (handles, `goAway`, late cancellations, the tail
//!   of a generation no step owns). After [`LiveTimeouts::idle_close`] without a step it closes
//!   the socket but keeps the resumption handle; after [`LiveTimeouts::resume_ttl`] it forgets the
//!   session entirely.
//!
//! # Connecting (§C.1, §C.2)
//!
//! The key travels in the `x-goog-api-key` header (never in the URL, so no log line carries it).
//! The first message is `setup`: `model: "models/NAME"`, `generationConfig.responseModalities:
//! ["AUDIO"]` (native-audio models close with 1007 on `TEXT`, §C.7) with
//! `outputAudioTranscription` and `inputAudioTranscription` on, the system instruction, the tools
//! as `functionDeclarations` (JSON Schema in `parametersJsonSchema`, plus `behavior`),
//! `sessionResumption` (empty, or the latest handle), a sliding-window
//! `contextWindowCompression`, and `historyConfig.initialHistoryInClientContent` when history is
//! seeded. Nothing else is sent before `setupComplete` ([`LiveTimeouts::setup`] bounds the wait).
//! A change of system prompt or tool list replaces the socket (resuming with the handle).
//!
//! # What a step sends
//!
//! The tail of the history the server lacks splits into *context* (everything up to the last
//! assistant item) and the *trigger* (the trailing tool results and/or user message):
//!
//! * fresh socket: the context goes as the initial history, `clientContent{turns, turnComplete:
//!   true}` right after `setupComplete` (with `historyConfig` this does not call the model); then
//!   the trigger;
//! * resumed socket whose handle predates some items: those items go as `clientContent` with
//!   `turnComplete: false`, then the trigger;
//! * trigger = a user message: `clientContent{turns: [user], turnComplete: true}`;
//! * trigger = results of calls *this socket* issued: `toolResponse{functionResponses: [{id, name,
//!   response}]}`, where `id` is the Live call id kept in [`ToolCall::provider_data`] as
//!   `{"google": {"id": …}}` and `response` is [`ToolResult::model_view`] (wrapped in
//!   `{"result": …}` when not an object). With `NON_BLOCKING` tools each response carries
//!   `scheduling: "WHEN_IDLE"`;
//! * results of calls an *earlier* socket issued (we reconnected meanwhile, so the Live ids mean
//!   nothing to this one) go as text in a user `clientContent` turn ("[Result of the tool …]");
//! * results followed by a new user message (the person wrote instead of answering an approval):
//!   with `NON_BLOCKING` tools the responses go with `scheduling: "SILENT"` (no generation), then
//!   the message; with `BLOCKING` tools the socket is replaced by a freshly seeded one, because
//!   answering a blocking call starts a generation nobody asked for and whose end cannot be told
//!   apart from the answer to the message.
//!
//! Live history is text: in seeded and replayed turns, function calls and results become text
//! descriptions and thought summaries are left out. Function calling in a bidi session happens
//! over `toolCall`/`toolResponse` with ids only that socket knows, and a `functionCall` part in
//! `clientContent` risks a 1007 that would kill the whole session; text is always accepted.
//! History conversion reuses the REST provider's (`gemini::contents`), so attachments map the
//! same way.
//!
//! # What a step reads (§C.3)
//!
//! Server frames are *binary* UTF-8 JSON (text frames are accepted too).
//!
//! * `outputTranscription.text` → [`ModelEvent::TextDelta`]. With `AUDIO` output the transcript
//!   is the text of the answer. Some models also send `modelTurn` text parts for the same words,
//!   so non-thought text parts are only kept aside: if a step ends without any transcript, they
//!   are emitted then (a model that only sends text parts loses streaming, never words).
//! * `modelTurn` parts with `thought: true` → [`ModelEvent::ReasoningDelta`]; `inlineData`
//!   `audio/pcm;rate=24000` → [`ModelEvent::Audio`] (the agent's speech, decoded);
//!   `interrupted` → [`ModelEvent::Interrupted`] before the step's `Finish`.
//! * `toolCall.functionCalls` → one [`ModelEvent::ToolCall`] each (empty `id`: the runner assigns
//!   its own), then `Finish{ToolCalls}`. A `BLOCKING` model waits for the response, so the step
//!   ends at the `toolCall`. A `NON_BLOCKING` model keeps talking, so the step goes on until
//!   `turnComplete` (at most [`LiveTimeouts::tool_turn_grace`] after the call), collecting further
//!   calls; a `toolCallCancellation` that arrives meanwhile removes the call before the runner
//!   sees it.
//! * `turnComplete` → `Finish` with `turnCompleteReason` mapped (`MALFORMED_FUNCTION_CALL` →
//!   error, `RESPONSE_REJECTED` → content-filter, none → stop); `interrupted` → `Finish{Other}`;
//!   `usageMetadata` (`promptTokenCount`, `responseTokenCount` + `thoughtsTokenCount`,
//!   `totalTokenCount`) → the finish's [`Usage`]; `generationComplete` is ignored.
//! * `sessionResumptionUpdate{newHandle, resumable: true}` → the latest handle, remembered with
//!   how much of the history it covers (`resumable: false` updates are ignored). `goAway` → the
//!   socket is kept for reading until it closes, and the next step opens a new one with the
//!   handle (a step under way finishes on the old socket first). If the socket closes mid-step
//!   (close 1000/1001, a reset, or after `goAway`), the actor reconnects with the handle and sends
//!   whatever part of the step's input the handle does not cover, then keeps reading the step (at
//!   most [`MAX_RECONNECTS_PER_STEP`] times).
//! * Close codes 1007/1008/1011 and the like fail the step with [`ModelError::Provider`] (`status`
//!   = the close code, `message` = the reason); a reason that says the quota is exhausted gives
//!   [`ModelError::RateLimited`]. A handshake refused with HTTP 429 is `RateLimited`, another HTTP
//!   status is `Provider`, anything else (refused, DNS, TLS, timeout) is `Transport`.
//! * [`LiveTimeouts::silence`] bounds the gap between server messages once a step's input is
//!   sent; when it passes the step fails and the socket is dropped (the handle is kept).
//!
//! # Generations that belong to no step
//!
//! When the runner drops a step's stream mid-generation, the rest of that generation must not
//! leak into the next step. The actor counts such in-flight generations and discards server
//! content until each ends (`turnComplete`, or `interrupted`). Content that arrives between steps
//! counts as such a generation too. Two end markers can follow an already-closed generation: some
//! models send a bare `turnComplete` after a blocking `toolCall`, and `interrupted` is usually
//! followed by `turnComplete`; one bare `turnComplete` (no content before it) is swallowed after
//! either.
//!
//! A `toolCall` that arrives when no step can take it (between steps, or while discarding) is
//! answered at once with an error response so a blocking model is not left waiting.
//!
//! # Cancellations
//!
//! A `toolCallCancellation` after the step ended (the runner may be waiting for the person) is
//! remembered: when the call's result comes, no `toolResponse` is sent for it (logged). If that
//! leaves nothing to send, the results go as text so the model still learns what ran. Each such
//! cancellation is also published on [`GeminiLiveModel::call_cancellations`] so the runner can
//! expire the pending approval.
//!
//! # Voice (ADR 0035)
//!
//! [`Model::voice`] hands the person's speech to the session actor: the first `start` (and one
//! in another mode) opens the socket with `realtimeInputConfig` for the mode (push-to-talk:
//! `automaticActivityDetection.disabled`, `activityStart`/`activityEnd`; hands-free: the
//! server's detection, `audioStreamEnd` when the microphone closes), resuming with the handle,
//! and brings the server session up to the runner's history ([`Model::voice_context`]); audio
//! goes as `realtimeInput.audio` (`audio/pcm;rate=16000`), also while a step reads the socket
//! (barge-in). Output that arrives between steps after the person spoke is the answer to them:
//! the actor publishes [`VoiceNotice::Heard`] with the input transcription so far, holds what
//! the server sends, and hands it to the runner's step for that turn (whose last history item
//! is the transcript as the person's message, which the server already heard and is not sent).
//!
//! A gated call of a voice chat on a `NON_BLOCKING` model ([`Model::awaiting_approval`], once
//! its card is shown) is answered at once on its Live id with `{"output": {"status":
//! "awaiting_countersignature", …}}`, `willContinue: true`, `scheduling: "WHEN_IDLE"`: the model
//! goes on talking and says the call waits. Its outcome follows on the same id with
//! `willContinue: false` (`WHEN_IDLE`, so the model says what happened), or, when a typed
//! message ended the turn that waited, `SILENT` before the message. A call the model cancelled
//! gets no response; a socket that did not issue the call hears its outcome as text. The talk
//! that follows the "awaiting" answer (output between steps while such a call waits, nobody
//! having spoken) is held the same way and announced as [`VoiceNotice::WhileWaiting`]: the
//! runtime streams it into the waiting turn as an aside without words. Speech while the call
//! waits is an aside ([`Model::aside`]): its held answer is read like a step that records
//! nothing in the synced history (so the outcome still goes on the call's id), and calls the
//! model makes in it are answered at once as not run.
//!
//! # Layout
//!
//! This file holds the configuration and the [`Model`] (the registry of session actors);
//! `actor` the session actor (its state, connecting and resuming, the socket between steps) and
//! `actor/step` one step on the socket; `history` the runner's history as Live turns; `wire`
//! the JSON messages of both directions and what closes and refused handshakes mean.

mod actor;
mod history;
mod wire;

/// What a refused WebSocket handshake means (also OpenAI Realtime's: the same `{error:
/// {message}}` body and `retry-after`).
pub(super) use wire::handshake_error;

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
use crate::agent::history::ToolCall;
use crate::agent::lock;
use crate::agent::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream};
#[cfg(doc)]
use crate::agent::voice::VoiceNotice;
use crate::agent::voice::{VoiceError, VoiceInput, VoiceNotices, VoiceSubscription};
use actor::SessionActor;

/// The Gemini API Live endpoint (§C.1). The key goes in the `x-goog-api-key` header.
pub const DEFAULT_LIVE_URL: &str = "wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent";
/// The Live model used when none is named: the stable one the docs recommend (§C.7).
pub const DEFAULT_LIVE_MODEL: &str = "gemini-3.8-live";
/// How often one step may reconnect (after `goAway` or a dropped socket) before it fails.
pub const MAX_RECONNECTS_PER_STEP: u32 = 2;

/// The response to a call no step can take (see "Generations that belong to no step").
const STRAY_CALL_ERROR: &str = "This call was not run: the conversation had moved on. Call it \
                                again if it is still needed.";

/// The `provider_data` namespace (shared with the REST provider: both call it `google`).
const NAMESPACE: &str = "google";

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// How the tools are declared (`FunctionDeclaration.behavior`, §C.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolBehavior {
    /// The model waits for the `toolResponse` before it goes on.
    Blocking,
    /// The model goes on talking; the response is handled when it arrives (sent with
    /// `scheduling: "WHEN_IDLE"`).
    NonBlocking,
}

impl ToolBehavior {
    /// What the model supports, per the Live tools doc and model pages (§C.5, §C.7):
    ///
    /// | model | function calling | declared as |
    /// |---|---|---|
    /// | `gemini-3.8-live*` | `NON_BLOCKING` by default, scheduling supported | `NON_BLOCKING` |
    /// | `gemini-2.5-flash-native-audio-*` (`-preview-12-2025`, `-09-2025`, `-latest`) | sync and async | `NON_BLOCKING` |
    /// | `gemini-live-2.5-flash*` (Vertex) | sync and async | `NON_BLOCKING` |
    /// | `gemini-3.1-flash-live-preview` | synchronous only | `BLOCKING` |
    /// | anything else | unknown | `BLOCKING` (what every Live model supports) |
    pub fn for_model(model: &str) -> Self {
        let model = model.strip_prefix("models/").unwrap_or(model);
        let non_blocking = [
            "gemini-3.8-live",
            "gemini-2.5-flash-native-audio",
            "gemini-live-2.5-flash",
        ];
        if non_blocking.iter().any(|prefix| model.starts_with(prefix)) {
            ToolBehavior::NonBlocking
        } else {
            ToolBehavior::Blocking
        }
    }

    fn wire(self) -> &'static str {
        match self {
            ToolBehavior::Blocking => "BLOCKING",
            ToolBehavior::NonBlocking => "NON_BLOCKING",
        }
    }
}

/// Which [`ToolBehavior`] to declare: the model table's, or a fixed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolBehaviorPolicy {
    /// [`ToolBehavior::for_model`].
    #[default]
    Auto,
    Fixed(ToolBehavior),
}

impl ToolBehaviorPolicy {
    pub fn resolve(self, model: &str) -> ToolBehavior {
        match self {
            ToolBehaviorPolicy::Auto => ToolBehavior::for_model(model),
            ToolBehaviorPolicy::Fixed(behavior) => behavior,
        }
    }
}

/// Every wait of the Live client is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveTimeouts {
    /// TCP + TLS + WebSocket handshake.
    pub connect: Duration,
    /// From sending `setup` to `setupComplete`.
    pub setup: Duration,
    /// The longest gap between server messages while a step waits for its answer.
    pub silence: Duration,
    /// With `NON_BLOCKING` tools: how long after a `toolCall` the step waits for `turnComplete`
    /// before it ends anyway.
    pub tool_turn_grace: Duration,
    /// A socket without a step for this long is closed (the resumption handle is kept).
    pub idle_close: Duration,
    /// How long a resumption handle is used (Google keeps them 2 hours after a session ends);
    /// a session idle for this long is forgotten.
    pub resume_ttl: Duration,
}

impl Default for LiveTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            setup: Duration::from_secs(15),
            silence: Duration::from_secs(30),
            tool_turn_grace: Duration::from_secs(10),
            idle_close: Duration::from_secs(5 * 60),
            resume_ttl: Duration::from_secs(110 * 60),
        }
    }
}

/// `contextWindowCompression.slidingWindow` (§C.6): lifts the 15-minute audio session limit.
/// `None` fields are left to the server (`targetTokens` defaults to half of `triggerTokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlidingWindow {
    pub trigger_tokens: Option<u64>,
    pub target_tokens: Option<u64>,
}

/// Settings of the Gemini Live provider.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiLiveConfig {
    pub api_key: ProviderKey,
    /// E.g. `gemini-3.8-live` (a leading `models/` is accepted).
    pub model: String,
    /// `wss://…BidiGenerateContent` ([`DEFAULT_LIVE_URL`]); `ws://` for a local fake. `http(s)://`
    /// is accepted and turned into `ws(s)://`.
    pub live_url: String,
    pub tool_behavior: ToolBehaviorPolicy,
    pub timeouts: LiveTimeouts,
    /// `None` leaves compression off (sessions are then limited to 15 minutes of audio).
    pub compression: Option<SlidingWindow>,
}

impl GeminiLiveConfig {
    /// The defaults: [`DEFAULT_LIVE_MODEL`] at [`DEFAULT_LIVE_URL`], tool behavior from the model
    /// table, default timeouts, sliding-window compression with server defaults.
    pub fn new(api_key: ProviderKey) -> Self {
        Self {
            api_key,
            model: DEFAULT_LIVE_MODEL.to_owned(),
            live_url: DEFAULT_LIVE_URL.to_owned(),
            tool_behavior: ToolBehaviorPolicy::Auto,
            timeouts: LiveTimeouts::default(),
            compression: Some(SlidingWindow::default()),
        }
    }
}

/// A call the server cancelled (`toolCallCancellation`) after the step that made it had ended
/// is published as [`CallNotice::Withdrawn`] (its `provider_call_id` is the Live call id, as in
/// the call's `provider_data.google.id`).
pub use crate::agent::model::CallNotice;
use crate::agent::model::{CallNotices, CallSubscription};

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type WsError = tungstenite::Error;
type EventSender = mpsc::UnboundedSender<Result<ModelEvent, ModelError>>;
type Registry = Mutex<HashMap<String, (u64, mpsc::UnboundedSender<Job>)>>;

/// A Gemini model behind the Live API: one WebSocket session per conversation.
///
/// Dropping the model ends every session actor and closes their sockets.
pub struct GeminiLiveModel {
    shared: Arc<Shared>,
    sessions: Arc<Registry>,
}

/// What every session actor of one model reads.
struct Shared {
    config: GeminiLiveConfig,
    /// The model name without `models/`.
    model: String,
    url: String,
    key: HeaderValue,
    behavior: ToolBehavior,
    /// Calls the server cancelled after their step ended (none lost).
    cancellations: CallNotices,
    /// Spoken turns the model began answering.
    voice_notices: VoiceNotices,
    /// Numbers actors and sockets, for logs.
    serial: AtomicU64,
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
    /// [`Model::awaiting_approval`]: a call of the last step waits for a countersignature.
    Awaiting(ToolCall),
    /// [`Model::aside`]: the held answer to speech, streamed into a waiting turn.
    Aside(EventSender),
    /// [`Model::decline_spoken`]: no turn takes the answer to these words.
    Decline(String),
}

impl GeminiLiveModel {
    pub fn new(config: GeminiLiveConfig) -> Result<Self, ProviderConfigError> {
        let url =
            live_url(&config.live_url).ok_or_else(|| ProviderConfigError::InvalidLiveUrl {
                value: config.live_url.clone(),
            })?;
        let mut key = HeaderValue::from_str(config.api_key.expose()).map_err(|_| {
            ProviderConfigError::Client(
                "the Gemini API key has characters an HTTP header cannot carry".into(),
            )
        })?;
        key.set_sensitive(true);
        let model = config
            .model
            .strip_prefix("models/")
            .unwrap_or(&config.model)
            .to_owned();
        let behavior = config.tool_behavior.resolve(&model);
        let cancellations = CallNotices::default();
        let voice_notices = VoiceNotices::default();
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                model,
                url,
                key,
                behavior,
                cancellations,
                voice_notices,
                serial: AtomicU64::new(1),
            }),
            sessions: Arc::default(),
        })
    }

    pub fn config(&self) -> &GeminiLiveConfig {
        &self.shared.config
    }

    /// The tool behavior declared to this model.
    pub fn tool_behavior(&self) -> ToolBehavior {
        self.shared.behavior
    }

    /// Calls the server cancelled after their step ended, in every session of this model. A
    /// runner that subscribes can expire the matching pending approval (match on
    /// `provider_data.google.id`); its result will not be sent to the model anyway.
    pub fn call_cancellations(&self) -> CallSubscription {
        self.shared.cancellations.subscribe()
    }

    /// Hands the job to the session's actor, starting one if needed.
    fn dispatch(&self, session_id: &str, job: Job) -> Result<(), ModelError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ModelError::Transport("the Gemini Live client needs a tokio runtime".into())
        })?;
        let mut sessions = lock(&self.sessions);
        let session_id = session_id.to_owned();
        let job = match sessions.get(&session_id) {
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
        sessions.insert(session_id.clone(), (actor_id, sender));
        let actor = SessionActor::new(
            self.shared.clone(),
            session_id,
            actor_id,
            Arc::downgrade(&self.sessions),
            receiver,
        );
        runtime.spawn(actor.run());
        Ok(())
    }
}

impl Model for GeminiLiveModel {
    fn label(&self) -> String {
        format!("gemini-live:{}", self.shared.model)
    }

    fn model_version(&self) -> String {
        self.shared.model.clone()
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
            tracing::warn!(session = %session_id, %error, "no Gemini Live session for voice");
        }
    }

    fn awaiting_approval(&self, session_id: &str, call: &ToolCall) {
        if let Err(error) = self.dispatch(session_id, Job::Awaiting(call.clone())) {
            tracing::warn!(session = %session_id, %error, "no Gemini Live session for the call");
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

/// `ws(s)://…` as is; `http(s)://…` turned into `ws(s)://…`; anything else is refused (also
/// OpenAI Realtime's URL).
pub(super) fn live_url(value: &str) -> Option<String> {
    let value = value.trim();
    let lower = value.to_ascii_lowercase();
    let (scheme, rest) = [
        ("wss://", "wss://"),
        ("ws://", "ws://"),
        ("https://", "wss://"),
        ("http://", "ws://"),
    ]
    .into_iter()
    .find_map(|(prefix, scheme)| {
        lower
            .starts_with(prefix)
            .then(|| (scheme, &value[prefix.len()..]))
    })?;
    (!rest.is_empty() && !rest.starts_with('/')).then(|| format!("{scheme}{rest}"))
}

#[cfg(test)]
mod tests;
