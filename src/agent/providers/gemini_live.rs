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
//!   (24 kHz PCM audio) is dropped (voice output comes later).
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

use crate::agent::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::{broadcast, mpsc};
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::gemini::{self, Content, Part};
use super::{ApiKey, ProviderConfigError, http};
use crate::agent::history::{AssistantPart, HistoryItem, ToolCall, ToolResult};
use crate::agent::model::{
    Model, ModelError, ModelEvent, ModelRequest, ModelStream, ToolDeclaration, Usage,
};
use crate::protocol::FinishReason;

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
    pub api_key: ApiKey,
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
    pub fn new(api_key: ApiKey) -> Self {
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

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
type WsError = tungstenite::Error;
type EventSender = mpsc::UnboundedSender<Result<ModelEvent, ModelError>>;
type Registry = Mutex<HashMap<String, (u64, mpsc::UnboundedSender<StepJob>)>>;

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
    cancellations: broadcast::Sender<CallNotice>,
    /// Numbers actors and sockets, for logs.
    serial: AtomicU64,
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
        let (cancellations, _) = broadcast::channel(64);
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                model,
                url,
                key,
                behavior,
                cancellations,
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
    pub fn call_cancellations(&self) -> broadcast::Receiver<CallNotice> {
        self.shared.cancellations.subscribe()
    }

    /// Hands the job to the session's actor, starting one if needed.
    fn dispatch(&self, job: StepJob) -> Result<(), ModelError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ModelError::Transport("the Gemini Live client needs a tokio runtime".into())
        })?;
        let mut sessions = lock(&self.sessions);
        let session_id = job.request.session_id.clone();
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
        );
        runtime.spawn(actor.run(receiver));
        Ok(())
    }
}

impl Model for GeminiLiveModel {
    fn label(&self) -> String {
        format!("gemini-live:{}", self.shared.model)
    }

    fn call_notices(&self) -> Option<broadcast::Receiver<CallNotice>> {
        Some(self.call_cancellations())
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let (events, receiver) = mpsc::unbounded_channel();
        if let Err(error) = self.dispatch(StepJob { request, events }) {
            return futures::stream::once(async move { Err(error) }).boxed();
        }
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|event| (event, receiver))
        })
        .boxed()
    }
}

/// `ws(s)://…` as is; `http(s)://…` turned into `ws(s)://…`; anything else is refused.
fn live_url(value: &str) -> Option<String> {
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

// ---------------------------------------------------------------------------------------------
// Session actor
// ---------------------------------------------------------------------------------------------

/// One [`Model::stream`] call.
struct StepJob {
    request: ModelRequest,
    events: EventSender,
}

/// One entry of what the server session has seen.
#[derive(Debug, Clone)]
enum Synced {
    /// A history item, sent or (once the runner recorded it) produced by the model.
    Item(HistoryItem),
    /// The model's output of the last step, until the next request shows how the runner
    /// recorded it: the Live ids of the calls it made.
    Own { calls: Vec<String> },
}

/// The latest resumable handle and how much of `synced` it covers.
#[derive(Debug, Clone)]
struct ResumePoint {
    handle: String,
    synced_len: usize,
    at: Instant,
}

/// One WebSocket and what only it knows.
struct Connection {
    ws: Ws,
    serial: u64,
    /// The setup minus handle and history (system + tools): a change needs a new socket.
    fingerprint: String,
    going_away: bool,
    /// Opened with `historyConfig`: the first `clientContent` is the initial history.
    seeding: bool,
    /// Calls this socket issued that have no response yet: Live id → tool name.
    issued: HashMap<String, String>,
    /// Generations in flight that no step owns; their content is discarded.
    discard: u32,
    /// One bare `turnComplete` may still come for a generation already closed.
    stray_turn_complete: bool,
}

/// A server frame, classified.
enum Incoming {
    Message(Box<ServerMessage>),
    Closed { code: Option<u16>, reason: String },
    Ignore,
    Broken(ModelError),
}

/// How a step's read loop ended.
enum StepEnd {
    /// `Finish` was sent.
    Finished,
    /// The runner dropped the stream.
    Dropped,
    /// The socket went away without an error: reconnect and go on.
    Lost(String),
    Failed(ModelError),
}

/// Why opening a socket failed.
enum ConnectError {
    /// The server closed the socket during setup: with a handle, retry fresh.
    Rejected(ModelError),
    Failed(ModelError),
}

impl ConnectError {
    fn into_inner(self) -> ModelError {
        match self {
            ConnectError::Rejected(e) | ConnectError::Failed(e) => e,
        }
    }
}

/// The running step.
struct Step {
    history: Vec<HistoryItem>,
    events: EventSender,
    /// The step's input has been sent (a generation is, or will be, in flight).
    input_sent: bool,
    last_heard: Instant,
    /// `NON_BLOCKING`: end the step at this instant even without `turnComplete`.
    grace: Option<Instant>,
    /// Non-thought `modelTurn` text, emitted only if no transcript comes.
    model_text: String,
    saw_transcript: bool,
    /// Any event was sent to the runner.
    emitted: bool,
    /// Calls not yet handed to the runner: (Live id, call).
    calls: Vec<(Option<String>, ToolCall)>,
    usage: Option<LiveUsage>,
}

impl Step {
    fn emit(&mut self, event: ModelEvent) {
        self.emitted = true;
        // A closed channel is noticed by the read loop (`events.closed()`).
        let _ = self.events.send(Ok(event));
    }
}

struct SessionActor {
    shared: Arc<Shared>,
    session_id: String,
    actor_id: u64,
    registry: Weak<Registry>,
    conn: Option<Connection>,
    synced: Vec<Synced>,
    resume: Option<ResumePoint>,
    /// Live ids the server cancelled after their step ended.
    cancelled: HashSet<String>,
    last_used: Instant,
}

/// What woke the idle actor.
enum Wake {
    Job(Option<StepJob>),
    Frame(Option<Result<Message, WsError>>),
    IdleClose,
    Forget,
}

async fn next_frame(conn: &mut Option<Connection>) -> Option<Result<Message, WsError>> {
    match conn {
        Some(conn) => conn.ws.next().await,
        None => std::future::pending().await,
    }
}

impl SessionActor {
    fn new(
        shared: Arc<Shared>,
        session_id: String,
        actor_id: u64,
        registry: Weak<Registry>,
    ) -> Self {
        Self {
            shared,
            session_id,
            actor_id,
            registry,
            conn: None,
            synced: Vec::new(),
            resume: None,
            cancelled: HashSet::new(),
            last_used: Instant::now(),
        }
    }

    fn timeouts(&self) -> LiveTimeouts {
        self.shared.config.timeouts
    }

    async fn run(mut self, mut jobs: mpsc::UnboundedReceiver<StepJob>) {
        tracing::debug!(
            session = %self.session_id, actor = self.actor_id,
            "Gemini Live session started"
        );
        loop {
            let idle_at = self.last_used + self.timeouts().idle_close;
            let forget_at = self.last_used + self.timeouts().resume_ttl;
            let connected = self.conn.is_some();
            // Server messages first: a step starts from the latest handle, `goAway` and
            // cancellations.
            let wake = tokio::select! {
                biased;
                frame = next_frame(&mut self.conn) => Wake::Frame(frame),
                job = jobs.recv() => Wake::Job(job),
                () = sleep_until(idle_at), if connected => Wake::IdleClose,
                () = sleep_until(forget_at), if !connected => Wake::Forget,
            };
            match wake {
                Wake::Job(Some(job)) => {
                    self.run_step(job).await;
                    self.last_used = Instant::now();
                }
                Wake::Job(None) => break,
                Wake::Frame(frame) => self.on_idle_frame(frame).await,
                Wake::IdleClose => {
                    tracing::debug!(
                        session = %self.session_id,
                        "closing the idle Gemini Live socket"
                    );
                    self.close_connection();
                }
                Wake::Forget => {
                    if self.retire(&jobs) {
                        break;
                    }
                }
            }
        }
        self.close_connection();
        tracing::debug!(
            session = %self.session_id, actor = self.actor_id,
            "Gemini Live session ended"
        );
    }

    /// Leaves the registry unless a job is queued (checked under the registry lock, which every
    /// sender holds while sending).
    fn retire(&self, jobs: &mpsc::UnboundedReceiver<StepJob>) -> bool {
        let Some(registry) = self.registry.upgrade() else {
            return true;
        };
        let mut sessions = lock(&registry);
        if !jobs.is_empty() {
            return false;
        }
        if sessions
            .get(&self.session_id)
            .is_some_and(|(id, _)| *id == self.actor_id)
        {
            sessions.remove(&self.session_id);
        }
        true
    }

    fn close_connection(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            tracing::debug!(
                session = %self.session_id, socket = conn.serial,
                "closing a Gemini Live socket"
            );
            tokio::spawn(async move {
                let _ = timeout(Duration::from_secs(2), conn.ws.close(None)).await;
            });
        }
    }

    /// Forgets everything the server session knew: the next step seeds a fresh socket.
    fn reset(&mut self, why: &str) {
        tracing::info!(session = %self.session_id, why, "starting a fresh Gemini Live session");
        self.close_connection();
        self.synced.clear();
        self.resume = None;
        self.cancelled.clear();
    }

    // -- between steps --------------------------------------------------------------------------

    async fn on_idle_frame(&mut self, frame: Option<Result<Message, WsError>>) {
        match classify(frame) {
            Incoming::Ignore => {}
            Incoming::Broken(error) => {
                tracing::warn!(
                    session = %self.session_id, %error,
                    "dropping the Gemini Live socket"
                );
                self.close_connection();
            }
            Incoming::Closed { code, reason } => {
                match code {
                    Some(code) if !is_normal_close(code) => tracing::warn!(
                        session = %self.session_id, code, %reason,
                        "Gemini Live closed the idle socket with an error"
                    ),
                    _ => {
                        tracing::debug!(
                            session = %self.session_id, ?code, %reason,
                            "Gemini Live closed the idle socket"
                        )
                    }
                }
                self.conn = None;
            }
            Incoming::Message(message) => {
                if let Err(reason) = self.on_idle_message(*message).await {
                    tracing::debug!(
                        session = %self.session_id, %reason,
                        "the idle Gemini Live socket broke"
                    );
                    self.conn = None;
                }
            }
        }
    }

    /// A server message with no step to take it.
    async fn on_idle_message(&mut self, message: ServerMessage) -> Result<(), String> {
        self.common(&message);
        if let Some(cancellation) = message.tool_call_cancellation {
            self.remember_cancelled(cancellation.ids);
        }
        if let Some(calls) = message.tool_call {
            self.answer_stray_calls(calls.function_calls, "arrived after the step ended")
                .await?;
        }
        if let Some(content) = message.server_content
            && let Some(conn) = self.conn.as_mut()
            && triage(conn, &content)
            && content.has_content()
        {
            // A generation no step asked for (or the talk after a non-blocking call that
            // outlasted the grace period): discard it to its end.
            tracing::info!(
                session = %self.session_id,
                "dropping Gemini Live output that arrived between steps"
            );
            conn.discard = 1;
            end_of_generation(conn, &content);
        }
        Ok(())
    }

    /// Messages handled the same in and out of a step: resumption handles and `goAway`.
    fn common(&mut self, message: &ServerMessage) {
        if let Some(update) = &message.session_resumption_update {
            match (&update.new_handle, update.resumable) {
                (Some(handle), resumable) if !handle.is_empty() && resumable != Some(false) => {
                    self.resume = Some(ResumePoint {
                        handle: handle.clone(),
                        synced_len: self.synced.len(),
                        at: Instant::now(),
                    });
                }
                _ => {}
            }
        }
        if let Some(go_away) = &message.go_away {
            tracing::info!(
                session = %self.session_id,
                time_left = go_away.time_left.as_deref().unwrap_or("?"),
                "Gemini Live will close this socket; the next step reconnects with the handle"
            );
            if let Some(conn) = self.conn.as_mut() {
                conn.going_away = true;
            }
        }
    }

    /// Cancellations of calls no step holds: remembered, published.
    fn remember_cancelled(&mut self, ids: Vec<String>) {
        for id in ids {
            tracing::info!(
                session = %self.session_id, call = %id,
                "Gemini Live cancelled a tool call; its result will not be sent"
            );
            let _ = self.shared.cancellations.send(CallNotice::Withdrawn {
                session_id: self.session_id.clone(),
                provider_call_id: id.clone(),
            });
            self.cancelled.insert(id);
        }
    }

    /// Answers calls no step can deliver, so a blocking model is not left waiting.
    async fn answer_stray_calls(
        &mut self,
        calls: Vec<gemini::FunctionCall>,
        why: &str,
    ) -> Result<(), String> {
        let behavior = self.shared.behavior;
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        let responses: Vec<LiveFunctionResponse> = calls
            .into_iter()
            .filter_map(|call| {
                tracing::warn!(
                    session = %self.session_id, tool = %call.name, why,
                    "answering a Gemini Live tool call that no step can take with an error"
                );
                Some(LiveFunctionResponse {
                    id: call.id?,
                    name: call.name,
                    response: json!({ "error": STRAY_CALL_ERROR }),
                    scheduling: (behavior == ToolBehavior::NonBlocking).then_some("SILENT"),
                })
            })
            .collect();
        if responses.is_empty() {
            return Ok(());
        }
        // The generation that made the calls goes on (or resumes, when blocking): discard it.
        conn.discard = conn.discard.max(1);
        if behavior == ToolBehavior::Blocking {
            conn.stray_turn_complete = true;
        }
        send(conn, &tool_response(responses)).await
    }

    // -- a step ---------------------------------------------------------------------------------

    async fn run_step(&mut self, job: StepJob) {
        let StepJob { request, events } = job;
        if events.is_closed() {
            return;
        }
        let setup = SetupSpec::new(&self.shared, &request);
        let mut step = Step {
            history: request.history,
            events,
            input_sent: false,
            last_heard: Instant::now(),
            grace: None,
            model_text: String::new(),
            saw_transcript: false,
            emitted: false,
            calls: Vec::new(),
            usage: None,
        };
        let setup = match setup {
            Ok(setup) => setup,
            Err(error) => {
                let _ = step.events.send(Err(error));
                return;
            }
        };
        if let Err(error) = self.drive(&setup, &mut step).await {
            tracing::warn!(session = %self.session_id, %error, "Gemini Live step failed");
            let _ = step.events.send(Err(error));
        }
    }

    async fn drive(&mut self, setup: &SetupSpec, step: &mut Step) -> Result<(), ModelError> {
        self.reconcile(&step.history);
        let mut reconnects = 0;
        loop {
            self.ensure_connection(setup, &step.history).await?;
            if step.events.is_closed() {
                return Ok(());
            }
            if let Err(reason) = self.send_pending(step).await {
                self.conn = None;
                reconnects += 1;
                if reconnects > MAX_RECONNECTS_PER_STEP {
                    return Err(ModelError::Transport(format!(
                        "the Gemini Live connection keeps dropping: {reason}"
                    )));
                }
                continue;
            }
            match self.read_step(step).await {
                StepEnd::Finished | StepEnd::Dropped => return Ok(()),
                StepEnd::Failed(error) => return Err(error),
                StepEnd::Lost(reason) => {
                    self.conn = None;
                    reconnects += 1;
                    if reconnects > MAX_RECONNECTS_PER_STEP {
                        return Err(ModelError::Transport(format!(
                            "the Gemini Live connection keeps dropping: {reason}"
                        )));
                    }
                    tracing::info!(
                        session = %self.session_id, %reason,
                        "Gemini Live socket lost mid-step; reconnecting"
                    );
                }
            }
        }
    }

    /// Matches the request's history against what the server session saw.
    fn reconcile(&mut self, history: &[HistoryItem]) {
        if let Some(Synced::Own { calls }) = self.synced.last() {
            let index = self.synced.len() - 1;
            match history.get(index) {
                Some(item @ HistoryItem::Assistant { parts }) => {
                    let mut recorded: Vec<String> = parts
                        .iter()
                        .filter_map(|p| match p {
                            AssistantPart::ToolCall { call } => google_id(&call.provider_data),
                            _ => None,
                        })
                        .collect();
                    let mut made = calls.clone();
                    recorded.sort();
                    made.sort();
                    if recorded == made {
                        self.synced[index] = Synced::Item(item.clone());
                    } else {
                        self.reset("the recorded step does not match what the model said");
                        return;
                    }
                }
                // The runner recorded nothing for that step (it said nothing).
                _ => {
                    self.synced.pop();
                    if let Some(point) = &mut self.resume {
                        point.synced_len = point.synced_len.min(self.synced.len());
                    }
                }
            }
        }
        let matches = self.synced.len() <= history.len()
            && self
                .synced
                .iter()
                .zip(history)
                .all(|(seen, item)| matches!(seen, Synced::Item(seen) if seen == item));
        if !matches {
            self.reset("the history differs from what this session saw");
        }
    }

    async fn ensure_connection(
        &mut self,
        setup: &SetupSpec,
        history: &[HistoryItem],
    ) -> Result<(), ModelError> {
        if let Some(conn) = &self.conn {
            if conn.going_away {
                tracing::debug!(
                    session = %self.session_id,
                    "replacing the Gemini Live socket after goAway"
                );
                self.close_connection();
            } else if conn.fingerprint != setup.fingerprint {
                tracing::info!(
                    session = %self.session_id,
                    "system prompt or tools changed; replacing the Gemini Live socket"
                );
                self.close_connection();
            }
        }
        if self.conn.is_some() && self.blocking_calls_need_fresh_session(history) {
            self.reset("a new message arrived while blocking tool calls were open");
        }
        if self.conn.is_some() {
            return Ok(());
        }
        let ttl = self.timeouts().resume_ttl;
        if let Some(point) = self.resume.clone().filter(|p| p.at.elapsed() < ttl) {
            match self.open(setup, Some(&point.handle), false).await {
                Ok(conn) => {
                    self.synced.truncate(point.synced_len);
                    self.conn = Some(conn);
                    return Ok(());
                }
                Err(ConnectError::Rejected(error)) => {
                    tracing::warn!(
                        session = %self.session_id, %error,
                        "Gemini Live refused the resumption handle; seeding a fresh session"
                    );
                }
                Err(ConnectError::Failed(error)) => return Err(error),
            }
        }
        self.synced.clear();
        self.resume = None;
        self.cancelled.clear();
        let seeding = !live_contents(split_tail(history).0).is_empty();
        let conn = self
            .open(setup, None, seeding)
            .await
            .map_err(ConnectError::into_inner)?;
        self.conn = Some(conn);
        Ok(())
    }

    /// With blocking tools, results for calls this socket issued followed by a new message
    /// cannot be answered cleanly on this socket (see the module docs).
    fn blocking_calls_need_fresh_session(&self, history: &[HistoryItem]) -> bool {
        let Some(conn) = &self.conn else {
            return false;
        };
        if self.shared.behavior != ToolBehavior::Blocking || conn.issued.is_empty() {
            return false;
        }
        let (_, trigger) = split_tail(&history[self.synced.len().min(history.len())..]);
        if !trigger
            .iter()
            .any(|item| matches!(item, HistoryItem::User { .. }))
        {
            return false;
        }
        let ids = live_ids(history);
        trigger.iter().any(|item| match item {
            HistoryItem::ToolResults { results } => results.iter().any(|result| {
                ids.get(result.call_id.as_str())
                    .is_some_and(|id| conn.issued.contains_key(id))
            }),
            _ => false,
        })
    }

    /// Opens a socket, sends `setup`, waits for `setupComplete`.
    async fn open(
        &self,
        setup: &SetupSpec,
        handle: Option<&str>,
        seeding: bool,
    ) -> Result<Connection, ConnectError> {
        let timeouts = self.timeouts();
        let serial = self.shared.serial.fetch_add(1, Ordering::Relaxed);
        let mut request = self
            .shared
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| {
                ConnectError::Failed(ModelError::Transport(format!("invalid Live URL: {e}")))
            })?;
        request
            .headers_mut()
            .insert("x-goog-api-key", self.shared.key.clone());
        let (mut ws, _) =
            match timeout(timeouts.connect, tokio_tungstenite::connect_async(request)).await {
                Ok(Ok(connected)) => connected,
                Ok(Err(error)) => return Err(ConnectError::Failed(handshake_error(error))),
                Err(_) => {
                    return Err(ConnectError::Failed(ModelError::Transport(format!(
                        "no WebSocket connection to Gemini Live within {} s",
                        timeouts.connect.as_secs_f32()
                    ))));
                }
            };
        let message = setup.message(handle, seeding);
        let text = serde_json::to_string(&message).map_err(|e| {
            ConnectError::Failed(ModelError::Protocol(format!(
                "cannot encode the setup: {e}"
            )))
        })?;
        tracing::debug!(
            session = %self.session_id, socket = serial, resumed = handle.is_some(), seeding,
            "Gemini Live setup"
        );
        if let Err(e) = ws.send(Message::text(text)).await {
            return Err(ConnectError::Failed(ModelError::Transport(format!(
                "cannot send the Gemini Live setup: {e}"
            ))));
        }
        let deadline = Instant::now() + timeouts.setup;
        loop {
            let frame = match timeout_at(deadline, ws.next()).await {
                Ok(frame) => frame,
                Err(_) => {
                    let _ = timeout(Duration::from_millis(500), ws.close(None)).await;
                    return Err(ConnectError::Failed(ModelError::Transport(format!(
                        "Gemini Live did not complete the setup within {} s",
                        timeouts.setup.as_secs_f32()
                    ))));
                }
            };
            match classify(frame) {
                Incoming::Message(message) if message.setup_complete.is_some() => break,
                Incoming::Message(_) | Incoming::Ignore => {
                    tracing::debug!(
                        session = %self.session_id,
                        "ignoring a Gemini Live message before setupComplete"
                    );
                }
                Incoming::Broken(error) => return Err(ConnectError::Failed(error)),
                Incoming::Closed {
                    code: Some(code),
                    reason,
                } if !is_normal_close(code) => {
                    return Err(ConnectError::Rejected(close_error(code, &reason)));
                }
                Incoming::Closed { code, reason } => {
                    return Err(ConnectError::Rejected(ModelError::Transport(format!(
                        "Gemini Live closed the connection during setup ({}{reason})",
                        code.map(|c| format!("{c} ")).unwrap_or_default()
                    ))));
                }
            }
        }
        Ok(Connection {
            ws,
            serial,
            fingerprint: setup.fingerprint.clone(),
            going_away: false,
            seeding,
            issued: HashMap::new(),
            discard: 0,
            stray_turn_complete: false,
        })
    }

    /// Sends the part of the history the server session lacks. `Err` = the socket broke.
    async fn send_pending(&mut self, step: &mut Step) -> Result<(), String> {
        let behavior = self.shared.behavior;
        let Some(conn) = self.conn.as_mut() else {
            return Err("no socket".into());
        };
        let start = self.synced.len().min(step.history.len());
        let tail = &step.history[start..];
        let (context, trigger) = split_tail(tail);
        if tail.is_empty() {
            if !step.input_sent {
                // Nothing new: ask the model to go on.
                send(conn, &json!({"clientContent": {"turnComplete": true}})).await?;
                step.input_sent = true;
                step.last_heard = Instant::now();
            }
            return Ok(());
        }
        if step.input_sent && step.emitted {
            tracing::warn!(
                session = %self.session_id,
                "re-sending the step's input after reconnecting; the answer may repeat"
            );
        }
        if !context.is_empty() {
            let turns = live_contents(context);
            if !turns.is_empty() {
                // On a seeded socket (historyConfig) this ends the initial history without
                // calling the model; otherwise it appends without asking for an answer.
                let turn_complete = conn.seeding;
                conn.seeding = false;
                send(
                    conn,
                    &json!({"clientContent": {"turns": turns, "turnComplete": turn_complete}}),
                )
                .await?;
            }
        }
        // The trigger: responses for calls this socket issued, text for everything else.
        let live_ids = live_ids(&step.history);
        let mut responses = Vec::new();
        let mut described: Vec<ToolResult> = Vec::new();
        let mut skipped: Vec<ToolResult> = Vec::new();
        let mut users: Vec<HistoryItem> = Vec::new();
        for item in trigger {
            match item {
                HistoryItem::ToolResults { results } => {
                    for result in results {
                        let live_id = live_ids.get(result.call_id.as_str()).cloned();
                        match live_id {
                            Some(id) if self.cancelled.remove(&id) => {
                                tracing::info!(
                                    session = %self.session_id, call = %id, tool = %result.name,
                                    "not sending the result of a call Gemini Live cancelled"
                                );
                                conn.issued.remove(&id);
                                skipped.push(result.clone());
                            }
                            Some(id) if conn.issued.contains_key(&id) => {
                                conn.issued.remove(&id);
                                responses.push(LiveFunctionResponse {
                                    id,
                                    name: result.name.clone(),
                                    response: gemini::as_object(result.model_view(), "result"),
                                    scheduling: None,
                                });
                            }
                            _ => described.push(result.clone()),
                        }
                    }
                }
                other => users.push(other.clone()),
            }
        }
        if responses.is_empty() && described.is_empty() && users.is_empty() {
            // Every result was for a cancelled call: tell the model in text what ran.
            described = skipped;
        }
        let mut turns = Vec::new();
        if !described.is_empty() {
            turns.extend(described_results(&described));
        }
        turns.extend(live_contents(&users));
        let turns = merge_adjacent(turns);
        if !responses.is_empty() {
            let scheduling = match behavior {
                ToolBehavior::Blocking => None,
                ToolBehavior::NonBlocking if turns.is_empty() => Some("WHEN_IDLE"),
                ToolBehavior::NonBlocking => Some("SILENT"),
            };
            for response in &mut responses {
                response.scheduling = scheduling;
            }
            send(conn, &tool_response(responses)).await?;
        }
        if !turns.is_empty() {
            send(
                conn,
                &json!({"clientContent": {"turns": turns, "turnComplete": true}}),
            )
            .await?;
        } else if trigger.is_empty() {
            send(conn, &json!({"clientContent": {"turnComplete": true}})).await?;
        }
        self.synced.extend(tail.iter().cloned().map(Synced::Item));
        step.input_sent = true;
        step.last_heard = Instant::now();
        Ok(())
    }

    /// Reads the socket until the step ends.
    async fn read_step(&mut self, step: &mut Step) -> StepEnd {
        enum Ev {
            Dropped,
            Frame(Option<Result<Message, WsError>>),
            Silence,
            Grace,
        }
        let silence = self.timeouts().silence;
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return StepEnd::Lost("no socket".into());
            };
            let silent_at = step.last_heard + silence;
            let grace = step.grace;
            let ev = tokio::select! {
                biased;
                () = step.events.closed() => Ev::Dropped,
                frame = conn.ws.next() => Ev::Frame(frame),
                () = sleep_until(grace.unwrap_or(silent_at)), if grace.is_some() => Ev::Grace,
                () = sleep_until(silent_at) => Ev::Silence,
            };
            match ev {
                Ev::Dropped => {
                    self.on_dropped(step).await;
                    return StepEnd::Dropped;
                }
                Ev::Silence => {
                    self.close_connection();
                    return StepEnd::Failed(ModelError::Transport(format!(
                        "Gemini Live sent nothing for {} s",
                        silence.as_secs_f32()
                    )));
                }
                Ev::Grace => {
                    tracing::info!(
                        session = %self.session_id,
                        "no turnComplete after a non-blocking tool call; ending the step"
                    );
                    if let Some(conn) = self.conn.as_mut() {
                        conn.stray_turn_complete = true;
                    }
                    self.finish(step, None);
                    return StepEnd::Finished;
                }
                Ev::Frame(frame) => {
                    step.last_heard = Instant::now();
                    match classify(frame) {
                        Incoming::Ignore => {}
                        Incoming::Broken(error) => {
                            self.close_connection();
                            return StepEnd::Failed(error);
                        }
                        Incoming::Closed { code, reason } => {
                            self.conn = None;
                            return match code {
                                Some(code) if !is_normal_close(code) => {
                                    if code != 1011 {
                                        // The session may be what the server objects to.
                                        self.reset("Gemini Live closed the socket with an error");
                                    }
                                    StepEnd::Failed(close_error(code, &reason))
                                }
                                _ => StepEnd::Lost(format!(
                                    "closed ({}{reason})",
                                    code.map(|c| format!("{c} ")).unwrap_or_default()
                                )),
                            };
                        }
                        Incoming::Message(message) => {
                            match self.on_step_message(step, *message).await {
                                Ok(true) => return StepEnd::Finished,
                                Ok(false) => {}
                                Err(reason) => return StepEnd::Lost(reason),
                            }
                        }
                    }
                }
            }
        }
    }

    /// One server message during a step. `Ok(true)` = the step ended; `Err` = the socket broke.
    async fn on_step_message(
        &mut self,
        step: &mut Step,
        message: ServerMessage,
    ) -> Result<bool, String> {
        self.common(&message);
        let behavior = self.shared.behavior;
        if let Some(usage) = message.usage_metadata {
            step.usage = Some(usage);
        }
        if let Some(cancellation) = message.tool_call_cancellation {
            let mut later = Vec::new();
            for id in cancellation.ids {
                let before = step.calls.len();
                step.calls
                    .retain(|(live, _)| live.as_deref() != Some(id.as_str()));
                if step.calls.len() < before {
                    tracing::info!(
                        session = %self.session_id, call = %id,
                        "Gemini Live cancelled a tool call before the step ended; dropped"
                    );
                    if let Some(conn) = self.conn.as_mut() {
                        conn.issued.remove(&id);
                    }
                } else {
                    later.push(id);
                }
            }
            self.remember_cancelled(later);
        }
        let discarding = self.conn.as_ref().is_some_and(|c| c.discard > 0);
        if let Some(tool_call) = message.tool_call {
            if discarding {
                self.answer_stray_calls(
                    tool_call.function_calls,
                    "belongs to a discarded generation",
                )
                .await?;
            } else {
                let Some(conn) = self.conn.as_mut() else {
                    return Err("no socket".into());
                };
                for call in tool_call.function_calls {
                    if let Some(id) = &call.id {
                        if self.cancelled.remove(id) {
                            continue;
                        }
                        conn.issued.insert(id.clone(), call.name.clone());
                    }
                    let live_id = call.id.clone();
                    step.calls.push((
                        live_id.clone(),
                        ToolCall {
                            id: String::new(),
                            name: call.name,
                            args: call.args.unwrap_or_else(|| json!({})),
                            provider_data: live_id.map(|id| json!({ NAMESPACE: { "id": id } })),
                        },
                    ));
                }
                conn.stray_turn_complete = false;
                match behavior {
                    ToolBehavior::Blocking => {
                        conn.stray_turn_complete = true;
                        self.finish(step, None);
                        return Ok(true);
                    }
                    ToolBehavior::NonBlocking => {
                        if step.grace.is_none() {
                            step.grace = Some(Instant::now() + self.timeouts().tool_turn_grace);
                        }
                    }
                }
            }
        }
        let Some(content) = message.server_content else {
            return Ok(false);
        };
        let Some(conn) = self.conn.as_mut() else {
            return Err("no socket".into());
        };
        if !triage(conn, &content) {
            return Ok(false);
        }
        if let Some(turn) = content.model_turn {
            for part in turn.parts {
                let text = part.text.unwrap_or_default();
                if part.thought == Some(true) {
                    if !text.is_empty() {
                        step.emit(ModelEvent::ReasoningDelta {
                            text,
                            provider_data: None,
                        });
                    }
                } else if !text.is_empty() {
                    step.model_text.push_str(&text);
                } else if part.function_call.is_some() {
                    tracing::debug!(
                        session = %self.session_id,
                        "ignoring a functionCall part in modelTurn (Live sends calls as toolCall)"
                    );
                }
            }
        }
        if let Some(text) = content.output_transcription.and_then(|t| t.text)
            && !text.is_empty()
        {
            step.saw_transcript = true;
            step.emit(ModelEvent::TextDelta(text));
        }
        if content.interrupted {
            conn.stray_turn_complete = !content.turn_complete;
            self.finish(step, Some(FinishReason::Other));
            return Ok(true);
        }
        if content.turn_complete {
            let reason = content
                .turn_complete_reason
                .as_deref()
                .map(map_turn_complete_reason)
                .unwrap_or(FinishReason::Stop);
            self.finish(step, Some(reason));
            return Ok(true);
        }
        Ok(false)
    }

    /// Emits the held-back text, the calls and `Finish`, and records the model's turn.
    fn finish(&mut self, step: &mut Step, reason: Option<FinishReason>) {
        if !step.saw_transcript && !step.model_text.is_empty() {
            let text = std::mem::take(&mut step.model_text);
            step.emit(ModelEvent::TextDelta(text));
        }
        let calls = std::mem::take(&mut step.calls);
        let live: Vec<String> = calls.iter().filter_map(|(id, _)| id.clone()).collect();
        let reason = if calls.is_empty() {
            reason.unwrap_or(FinishReason::Stop)
        } else {
            FinishReason::ToolCalls
        };
        for (_, call) in calls {
            step.emit(ModelEvent::ToolCall(call));
        }
        step.emit(ModelEvent::Finish {
            reason,
            usage: step.usage.map(usage).unwrap_or_default(),
        });
        self.synced.push(Synced::Own { calls: live });
    }

    /// The runner dropped the stream mid-step.
    async fn on_dropped(&mut self, step: &mut Step) {
        tracing::debug!(
            session = %self.session_id,
            "Gemini Live step cancelled; discarding the rest of its generation"
        );
        let calls: Vec<gemini::FunctionCall> = std::mem::take(&mut step.calls)
            .into_iter()
            .map(|(id, call)| gemini::FunctionCall {
                id,
                name: call.name,
                args: Some(call.args),
            })
            .collect();
        if let Some(conn) = self.conn.as_mut()
            && step.input_sent
        {
            conn.discard += 1;
        }
        if !calls.is_empty()
            && let Err(reason) = self
                .answer_stray_calls(calls, "its step was cancelled")
                .await
        {
            tracing::debug!(session = %self.session_id, %reason, "the Gemini Live socket broke");
            self.conn = None;
        }
        if step.input_sent {
            self.synced.push(Synced::Own { calls: Vec::new() });
        }
    }
}

/// Whether a `serverContent` belongs to the generation being read. It does not when it is the
/// bare end marker of a generation already closed (swallowed once), or part of a discarded
/// generation (counted down at its end).
fn triage(conn: &mut Connection, content: &ServerContent) -> bool {
    if conn.stray_turn_complete {
        if content.has_content() {
            conn.stray_turn_complete = false;
        } else if content.turn_complete {
            conn.stray_turn_complete = false;
            return false;
        }
    }
    if conn.discard > 0 {
        end_of_generation(conn, content);
        return false;
    }
    true
}

/// Counts down the discarded generations.
fn end_of_generation(conn: &mut Connection, content: &ServerContent) {
    if conn.discard == 0 {
        return;
    }
    if content.interrupted {
        conn.discard -= 1;
        // `interrupted` is usually followed by a bare `turnComplete` for the same generation.
        conn.stray_turn_complete = !content.turn_complete;
    } else if content.turn_complete {
        conn.discard -= 1;
    }
}

async fn send(conn: &mut Connection, message: &Value) -> Result<(), String> {
    let text = message.to_string();
    conn.ws
        .send(Message::text(text))
        .await
        .map_err(|e| format!("cannot send to Gemini Live: {e}"))
}

// ---------------------------------------------------------------------------------------------
// History → Live turns
// ---------------------------------------------------------------------------------------------

/// Splits a tail into context (up to and including the last assistant item) and trigger (the
/// trailing results and user messages).
fn split_tail(tail: &[HistoryItem]) -> (&[HistoryItem], &[HistoryItem]) {
    let at = tail
        .iter()
        .rposition(|item| matches!(item, HistoryItem::Assistant { .. }))
        .map_or(0, |i| i + 1);
    tail.split_at(at)
}

/// Runner call id → Live call id, from the calls in `history`.
fn live_ids(history: &[HistoryItem]) -> HashMap<&str, String> {
    let mut ids = HashMap::new();
    for item in history {
        if let HistoryItem::Assistant { parts } = item {
            for part in parts {
                if let AssistantPart::ToolCall { call } = part
                    && let Some(id) = google_id(&call.provider_data)
                {
                    ids.insert(call.id.as_str(), id);
                }
            }
        }
    }
    ids
}

fn google_id(provider_data: &Option<Value>) -> Option<String> {
    provider_data
        .as_ref()?
        .get(NAMESPACE)?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

/// History as Live `clientContent` turns: the REST conversion, with function calls and results
/// as text and thought summaries left out (see the module docs).
fn live_contents(items: &[HistoryItem]) -> Vec<Content> {
    let contents = gemini::contents(items, false)
        .into_iter()
        .map(|content| Content {
            role: content.role,
            parts: content.parts.into_iter().filter_map(live_part).collect(),
        })
        .filter(|content| !content.parts.is_empty())
        .collect();
    merge_adjacent(contents)
}

fn live_part(mut part: Part) -> Option<Part> {
    part.thought_signature = None;
    if part.thought == Some(true) {
        return None;
    }
    if let Some(call) = part.function_call.take() {
        let args = call.args.unwrap_or_else(|| json!({}));
        return Some(text_part(format!(
            "[Called the tool {} with arguments {args}]",
            call.name
        )));
    }
    if let Some(response) = part.function_response.take() {
        return Some(text_part(format!(
            "[Result of the tool {}: {}]",
            response.name, response.response
        )));
    }
    (part.text.as_ref().is_some_and(|t| !t.is_empty())
        || part.inline_data.is_some()
        || part.file_data.is_some())
    .then_some(part)
}

fn text_part(text: String) -> Part {
    Part {
        text: Some(text),
        ..Part::default()
    }
}

/// Results that cannot go as a `toolResponse` (their socket was replaced, or the server
/// cancelled the calls), as a user turn that says what they are.
fn described_results(results: &[ToolResult]) -> Vec<Content> {
    let mut contents = live_contents(&[HistoryItem::ToolResults {
        results: results.to_vec(),
    }]);
    if let Some(first) = contents.first_mut() {
        first.parts.insert(
            0,
            text_part(
                "[The tool calls you made earlier have finished. Their results, delivered as \
                 text:]"
                    .into(),
            ),
        );
    }
    contents
}

/// Joins consecutive contents of the same role (Live, like REST, wants turns to alternate).
fn merge_adjacent(contents: Vec<Content>) -> Vec<Content> {
    let mut out: Vec<Content> = Vec::with_capacity(contents.len());
    for content in contents {
        match out.last_mut() {
            Some(last) if last.role == content.role => last.parts.extend(content.parts),
            _ => out.push(content),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Client wire types (§C.2)
// ---------------------------------------------------------------------------------------------

/// The parts of `setup` fixed for a socket's life, and its fingerprint.
struct SetupSpec {
    model: String,
    system: Option<Content>,
    tools: Vec<LiveTool>,
    compression: Option<SlidingWindow>,
    fingerprint: String,
}

impl SetupSpec {
    fn new(shared: &Shared, request: &ModelRequest) -> Result<Self, ModelError> {
        let system = (!request.system.is_empty()).then(|| Content {
            role: None,
            parts: vec![text_part(request.system.clone())],
        });
        let tools = if request.tools.is_empty() {
            Vec::new()
        } else {
            vec![LiveTool {
                function_declarations: request
                    .tools
                    .iter()
                    .map(|tool| live_declaration(tool, shared.behavior))
                    .collect(),
            }]
        };
        let mut spec = Self {
            model: format!("models/{}", shared.model),
            system,
            tools,
            compression: shared.config.compression,
            fingerprint: String::new(),
        };
        spec.fingerprint = serde_json::to_string(&spec.message(None, false))
            .map_err(|e| ModelError::Protocol(format!("cannot encode the setup: {e}")))?;
        Ok(spec)
    }

    fn message<'a>(&'a self, handle: Option<&'a str>, seeding: bool) -> SetupMessage<'a> {
        SetupMessage {
            setup: Setup {
                model: &self.model,
                generation_config: GenerationConfig {
                    response_modalities: ["AUDIO"],
                },
                system_instruction: self.system.as_ref(),
                tools: &self.tools,
                input_audio_transcription: Empty {},
                output_audio_transcription: Empty {},
                session_resumption: SessionResumption { handle },
                context_window_compression: self.compression.map(|c| Compression {
                    trigger_tokens: c.trigger_tokens,
                    sliding_window: SlidingWindowWire {
                        target_tokens: c.target_tokens,
                    },
                }),
                history_config: seeding.then_some(HistoryConfig {
                    initial_history_in_client_content: true,
                }),
            },
        }
    }
}

fn live_declaration(tool: &ToolDeclaration, behavior: ToolBehavior) -> LiveDeclaration {
    LiveDeclaration {
        base: gemini::declaration(tool),
        behavior: behavior.wire(),
    }
}

#[derive(Serialize)]
struct SetupMessage<'a> {
    setup: Setup<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Setup<'a> {
    model: &'a str,
    generation_config: GenerationConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<&'a Content>,
    #[serde(skip_serializing_if = "no_tools")]
    tools: &'a [LiveTool],
    input_audio_transcription: Empty,
    output_audio_transcription: Empty,
    session_resumption: SessionResumption<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_window_compression: Option<Compression>,
    #[serde(skip_serializing_if = "Option::is_none")]
    history_config: Option<HistoryConfig>,
}

fn no_tools(tools: &&[LiveTool]) -> bool {
    tools.is_empty()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    response_modalities: [&'static str; 1],
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct SessionResumption<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    handle: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Compression {
    #[serde(skip_serializing_if = "Option::is_none")]
    trigger_tokens: Option<u64>,
    sliding_window: SlidingWindowWire,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SlidingWindowWire {
    #[serde(skip_serializing_if = "Option::is_none")]
    target_tokens: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HistoryConfig {
    initial_history_in_client_content: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveTool {
    function_declarations: Vec<LiveDeclaration>,
}

#[derive(Serialize)]
struct LiveDeclaration {
    #[serde(flatten)]
    base: gemini::FunctionDeclaration,
    behavior: &'static str,
}

#[derive(Debug, Serialize)]
struct LiveFunctionResponse {
    id: String,
    name: String,
    response: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduling: Option<&'static str>,
}

fn tool_response(responses: Vec<LiveFunctionResponse>) -> Value {
    json!({"toolResponse": {"functionResponses": responses}})
}

// ---------------------------------------------------------------------------------------------
// Server wire types (§C.3)
// ---------------------------------------------------------------------------------------------

/// One server message. Unknown keys are ignored; proto3 JSON's snake_case spellings of the keys
/// we read are accepted too.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerMessage {
    #[serde(default, alias = "setup_complete")]
    setup_complete: Option<Value>,
    #[serde(default, alias = "server_content")]
    server_content: Option<ServerContent>,
    #[serde(default, alias = "tool_call")]
    tool_call: Option<ToolCallMessage>,
    #[serde(default, alias = "tool_call_cancellation")]
    tool_call_cancellation: Option<Cancellation>,
    #[serde(default, alias = "go_away")]
    go_away: Option<GoAway>,
    #[serde(default, alias = "session_resumption_update")]
    session_resumption_update: Option<ResumptionUpdate>,
    #[serde(default, alias = "usage_metadata")]
    usage_metadata: Option<LiveUsage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerContent {
    #[serde(default, alias = "model_turn")]
    model_turn: Option<Content>,
    #[serde(default, alias = "turn_complete")]
    turn_complete: bool,
    #[serde(default, alias = "turn_complete_reason")]
    turn_complete_reason: Option<String>,
    #[serde(default)]
    interrupted: bool,
    #[serde(default, alias = "output_transcription")]
    output_transcription: Option<Transcription>,
}

impl ServerContent {
    /// Whether this message carries any of the model's output (not just end markers).
    fn has_content(&self) -> bool {
        let parts = self.model_turn.as_ref().is_some_and(|turn| {
            turn.parts.iter().any(|p| {
                p.text.as_ref().is_some_and(|t| !t.is_empty())
                    || p.inline_data.is_some()
                    || p.function_call.is_some()
            })
        });
        let transcript = self
            .output_transcription
            .as_ref()
            .and_then(|t| t.text.as_ref())
            .is_some_and(|t| !t.is_empty());
        parts || transcript
    }
}

#[derive(Debug, Default, Deserialize)]
struct Transcription {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolCallMessage {
    #[serde(default, alias = "function_calls")]
    function_calls: Vec<gemini::FunctionCall>,
}

#[derive(Debug, Default, Deserialize)]
struct Cancellation {
    #[serde(default)]
    ids: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GoAway {
    #[serde(default, alias = "time_left")]
    time_left: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResumptionUpdate {
    #[serde(default, alias = "new_handle")]
    new_handle: Option<String>,
    #[serde(default)]
    resumable: Option<bool>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LiveUsage {
    #[serde(default, alias = "prompt_token_count")]
    prompt_token_count: Option<u64>,
    #[serde(default, alias = "response_token_count")]
    response_token_count: Option<u64>,
    #[serde(default, alias = "thoughts_token_count")]
    thoughts_token_count: Option<u64>,
    #[serde(default, alias = "total_token_count")]
    total_token_count: Option<u64>,
}

/// Live says `responseTokenCount` where REST says `candidatesTokenCount`.
fn usage(meta: LiveUsage) -> Usage {
    super::gemini::gemini_usage(
        meta.prompt_token_count,
        meta.response_token_count,
        meta.thoughts_token_count,
        meta.total_token_count,
    )
}

fn map_turn_complete_reason(reason: &str) -> FinishReason {
    match reason {
        "TURN_COMPLETE_REASON_UNSPECIFIED" | "NEED_MORE_INPUT" => FinishReason::Stop,
        "MALFORMED_FUNCTION_CALL" => FinishReason::Error,
        "RESPONSE_REJECTED" | "SAFETY" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" => {
            FinishReason::ContentFilter
        }
        "MAX_TOKENS" => FinishReason::Length,
        _ => FinishReason::Other,
    }
}

fn classify(frame: Option<Result<Message, WsError>>) -> Incoming {
    let parsed = match frame {
        Some(Ok(Message::Binary(bytes))) => serde_json::from_slice::<ServerMessage>(&bytes),
        Some(Ok(Message::Text(text))) => serde_json::from_str::<ServerMessage>(text.as_str()),
        Some(Ok(Message::Close(Some(frame)))) => {
            return Incoming::Closed {
                code: Some(u16::from(frame.code)),
                reason: frame.reason.to_string(),
            };
        }
        Some(Ok(Message::Close(None))) => {
            return Incoming::Closed {
                code: None,
                reason: String::new(),
            };
        }
        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {
            return Incoming::Ignore;
        }
        Some(Err(error)) => {
            return Incoming::Closed {
                code: None,
                reason: error.to_string(),
            };
        }
        None => {
            return Incoming::Closed {
                code: None,
                reason: "the connection ended".into(),
            };
        }
    };
    match parsed {
        Ok(message) => Incoming::Message(Box::new(message)),
        Err(e) => Incoming::Broken(ModelError::Protocol(format!(
            "invalid Gemini Live message: {e}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// 1000 (normal) and 1001 (going away) end a socket, not a step.
fn is_normal_close(code: u16) -> bool {
    matches!(code, 1000 | 1001)
}

/// A close with an error code: the reason is what the server has to say (for example 1007
/// "Request contains an invalid argument.", 1008 "… is not found for API version v1beta, or is
/// not supported for bidiGenerateContent", 1011 "Internal error" or "Resource has been exhausted
/// (e.g. check quota).").
fn close_error(code: u16, reason: &str) -> ModelError {
    let message = if reason.trim().is_empty() {
        format!("Gemini Live closed the connection with code {code}")
    } else {
        http::short_message(reason)
    };
    let lower = reason.to_ascii_lowercase();
    if lower.contains("resource_exhausted")
        || lower.contains("resource has been exhausted")
        || lower.contains("quota")
        || lower.contains("rate limit")
    {
        ModelError::RateLimited {
            retry_after: None,
            message,
        }
    } else {
        ModelError::Provider {
            status: code,
            message,
        }
    }
}

fn handshake_error(error: WsError) -> ModelError {
    match error {
        WsError::Http(response) => {
            let status = response.status().as_u16();
            let body = response
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let message = match serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.pointer("/error/message")?.as_str().map(str::to_owned))
            {
                Some(message) => http::short_message(&message),
                None if body.trim().is_empty() => response
                    .status()
                    .canonical_reason()
                    .unwrap_or("no message")
                    .to_owned(),
                None => http::short_message(&body),
            };
            if status == 429 {
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                ModelError::RateLimited {
                    retry_after,
                    message,
                }
            } else {
                ModelError::Provider { status, message }
            }
        }
        other => ModelError::Transport(format!("cannot connect to Gemini Live: {other}")),
    }
}

#[cfg(test)]
mod tests;
