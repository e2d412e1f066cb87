//! One MCP server: its connection (rmcp's client over a child process or streamable HTTP), kept
//! up by a supervisor that lists its tools into the registry, follows `tools/list_changed`,
//! and reconnects with backoff when the server crashes or goes away. Its tools stay in the
//! registry while it is down (a pending approval of one must still be answerable): a call then
//! fails with a clear error and nothing runs.

use std::{
    collections::HashMap,
    process::Stdio,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServiceError,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
        ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
        FormElicitationCapability, Implementation, InputRequest, InputResponses, ProtocolVersion,
        Tool as McpTool, UrlElicitationCapability,
    },
    service::{
        ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, RequestContext,
        RunningService,
    },
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde::Serialize;
use serde_json::Map;
use tokio::{io::AsyncBufReadExt, sync::mpsc};
use tokio_util::sync::CancellationToken;

use super::{
    config::{McpServerConfig, McpTransport},
    tool::{RemoteTool, Skipped, spec_for},
    tool_prefix,
};
use crate::agent::{
    clock::{Clock, SystemClock},
    lock,
    questions::{Ask, AskForm, Asked, Asker},
    store::ToolListStore,
    tools::{Executor, Tool, ToolError, ToolRegistry},
};
use crate::protocol::question::QuestionReply;

/// How many times one call may come back asking for input (2026-07-28 `input_required`).
const MAX_INPUT_ROUNDS: usize = 8;

/// How a server is doing, for the logs and `/api/app`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    /// `connecting`, `connected`, `down` or `disabled`.
    pub state: &'static str,
    /// Why it is down (the last connection error), in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tools the model is offered.
    pub tools: Vec<String>,
    /// Tools left out, each with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// The tools are the list kept from the last time it was connected (it has not listed them
    /// since this start).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub remembered: bool,
}

/// Timeouts of a server's requests.
#[derive(Debug, Clone, Copy)]
pub struct McpTimeouts {
    /// Connecting and listing tools.
    pub connect: Duration,
    /// One tool call (the call is cancelled after it).
    pub call: Duration,
    /// How long an approval of its tools waits.
    pub approval: Duration,
}

/// A configured server and its live connection, if any.
pub struct McpServer {
    pub config: McpServerConfig,
    timeouts: McpTimeouts,
    /// Where its last tool list is kept across restarts.
    tool_lists: Arc<dyn ToolListStore>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    status: Mutex<ServerStatus>,
    /// Wakes the supervisor: the connection failed during a call.
    broken: tokio::sync::Notify,
    /// The calls in flight, oldest first, each with how its chat is asked.
    in_flight: Mutex<Vec<(u64, Option<Asker>)>>,
    next_call: AtomicU64,
    /// Questions of this server open right now, and when the last one closed: time spent with
    /// the person does not count against a call's timeout.
    asking: AtomicUsize,
    last_answer: Mutex<Option<Instant>>,
}

impl McpServer {
    pub fn new(
        config: McpServerConfig,
        timeouts: McpTimeouts,
        tool_lists: Arc<dyn ToolListStore>,
    ) -> Arc<Self> {
        let status = ServerStatus {
            name: config.name.clone(),
            state: if config.disabled {
                "disabled"
            } else {
                "connecting"
            },
            error: None,
            tools: Vec::new(),
            skipped: Vec::new(),
            remembered: false,
        };
        Arc::new(McpServer {
            config,
            timeouts,
            tool_lists,
            peer: Mutex::new(None),
            status: Mutex::new(status),
            broken: tokio::sync::Notify::new(),
            in_flight: Mutex::new(Vec::new()),
            next_call: AtomicU64::new(0),
            asking: AtomicUsize::new(0),
            last_answer: Mutex::new(None),
        })
    }

    pub fn status(&self) -> ServerStatus {
        lock(&self.status).clone()
    }

    fn set_state(&self, state: &'static str, error: Option<String>) {
        let mut status = lock(&self.status);
        status.state = state;
        status.error = error;
    }

    /// Calls `tool` on the server; questions the server asks meanwhile go to the person
    /// through `asker`. Nothing is retried: a call that timed out or lost its connection may or
    /// may not have taken effect, and the model is told so.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, serde_json::Value>,
        asker: Option<Asker>,
    ) -> Result<CallToolResult, ToolError> {
        let name = &self.config.name;
        let Some(peer) = lock(&self.peer).clone() else {
            return Err(ToolError(format!(
                "The MCP server {name} is not connected ({}); nothing was done.",
                self.status()
                    .error
                    .unwrap_or_else(|| "still connecting".into())
            )));
        };
        let _in_flight = InFlight::enter(self, asker.clone());
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        for _ in 0..MAX_INPUT_ROUNDS {
            let Some(answered) = self
                .within_timeout(peer.call_tool_once(params.clone()))
                .await
            else {
                let seconds = self.timeouts.call.as_secs();
                tracing::warn!(server = %name, tool, seconds, "MCP call timed out (cancelled)");
                return Err(ToolError(format!(
                    "The MCP server {name} did not answer {tool} within {seconds} s; the call \
                     was cancelled and may or may not have taken effect."
                )));
            };
            match answered {
                Ok(CallToolResponse::Complete(result)) => return Ok(result),
                // 2026-07-28: the server wants answers before it goes on; the state it keeps
                // between rounds travels with the call.
                Ok(CallToolResponse::InputRequired(input)) => {
                    let mut responses = InputResponses::new();
                    for (key, request) in input.input_requests.unwrap_or_default() {
                        let InputRequest::Elicitation(request) = request else {
                            return Err(ToolError(format!(
                                "The MCP server {name} asked for something other than the \
                                 person's input during {tool} (only questions are relayed); \
                                 nothing more was done."
                            )));
                        };
                        let result = match &asker {
                            Some(asker) => {
                                self.ask_person(asker, request.params, std::future::pending())
                                    .await
                            }
                            None => ElicitResult::new(ElicitationAction::Decline),
                        };
                        let value = serde_json::to_value(result).map_err(|e| {
                            ToolError(format!("the answer to {name} cannot be encoded: {e}"))
                        })?;
                        responses.insert(key, value);
                    }
                    params = params.with_input_responses(responses);
                    params.request_state = input.request_state;
                }
                Ok(_) => {
                    return Err(ToolError(format!(
                        "The MCP server {name} answered {tool} with a task, which Countersign \
                         does not follow yet; it may still run on the server."
                    )));
                }
                Err(ServiceError::McpError(e)) => {
                    return Err(ToolError(format!(
                        "The MCP server {name} refused {tool}: {}",
                        e.message
                    )));
                }
                Err(e) => {
                    tracing::warn!(server = %name, tool, error = %e, "MCP call failed; reconnecting");
                    self.broken.notify_one();
                    return Err(ToolError(format!(
                        "The connection to the MCP server {name} failed during {tool}; the call \
                         may or may not have taken effect."
                    )));
                }
            }
        }
        Err(ToolError(format!(
            "The MCP server {name} kept asking for more input during {tool} \
             ({MAX_INPUT_ROUNDS} rounds); Countersign stopped there."
        )))
    }

    /// Runs `request` under the call timeout, not counting time the person spends on this
    /// server's questions (`None`: timed out; the request is dropped, which cancels it).
    async fn within_timeout<F: Future>(&self, request: F) -> Option<F::Output> {
        let started = Instant::now();
        let mut request = std::pin::pin!(request);
        loop {
            let from = lock(&self.last_answer).map_or(started, |t| t.max(started));
            let deadline = from + self.timeouts.call;
            tokio::select! {
                out = &mut request => return Some(out),
                () = tokio::time::sleep_until(deadline.into()) => {
                    let answered_since = lock(&self.last_answer).is_some_and(|t| t > from);
                    if self.asking.load(Ordering::SeqCst) == 0 && !answered_since {
                        return None;
                    }
                    if self.asking.load(Ordering::SeqCst) > 0 {
                        // Waiting for the person: count again from now.
                        *lock(&self.last_answer) = Some(Instant::now());
                    }
                }
            }
        }
    }

    /// The chat a question of this server (a 2025 `elicitation/create`, which names no call)
    /// belongs to: the one whose calls are in flight. `None` when no call is in flight, or
    /// calls of several chats are (nobody can tell whose question it is; it is not shown to
    /// the wrong person).
    fn asker_of_question(&self) -> Option<Asker> {
        let in_flight = lock(&self.in_flight);
        let mut askers = in_flight.iter().filter_map(|(_, asker)| asker.as_ref());
        let first = askers.next()?;
        askers
            .all(|a| a.chat_id() == first.chat_id())
            .then(|| first.clone())
    }

    /// Shows the server's question to the person and waits for the reply.
    async fn ask_person(
        &self,
        asker: &Asker,
        request: ElicitRequestParams,
        withdrawn: impl Future<Output = ()>,
    ) -> ElicitResult {
        let name = &self.config.name;
        let (message, form) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => match serde_json::to_value(&requested_schema) {
                Ok(schema) => (message, AskForm::Form(schema)),
                Err(e) => {
                    tracing::warn!(server = %name, error = %e, "an elicitation form does not encode; declined");
                    return ElicitResult::new(ElicitationAction::Decline);
                }
            },
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                match reqwest::Url::parse(&url) {
                    Ok(parsed) if matches!(parsed.scheme(), "https" | "http") => {
                        (message, AskForm::Link(parsed.to_string()))
                    }
                    _ => {
                        tracing::warn!(server = %name, %url, "an elicitation link is not http(s); declined");
                        return ElicitResult::new(ElicitationAction::Decline);
                    }
                }
            }
            _ => return ElicitResult::new(ElicitationAction::Decline),
        };
        self.asking.fetch_add(1, Ordering::SeqCst);
        let asked = asker
            .ask(
                Ask {
                    source: format!("MCP server {name}"),
                    message,
                    form,
                    within: self.timeouts.approval,
                },
                withdrawn,
            )
            .await;
        *lock(&self.last_answer) = Some(Instant::now());
        self.asking.fetch_sub(1, Ordering::SeqCst);
        match asked {
            Asked::Reply(QuestionReply::Accept { content }) => {
                let result = ElicitResult::new(ElicitationAction::Accept);
                if content.is_empty() {
                    result
                } else {
                    result.with_content(serde_json::Value::Object(content))
                }
            }
            Asked::Reply(QuestionReply::Decline) => ElicitResult::new(ElicitationAction::Decline),
            Asked::Reply(QuestionReply::Cancel) | Asked::Expired | Asked::Withdrawn => {
                ElicitResult::new(ElicitationAction::Cancel)
            }
        }
    }

    /// Keeps the server connected until `shutdown`: connect, list its tools into `registry`,
    /// follow changes, reconnect with backoff (1 s doubling to 60 s) after a failure.
    pub async fn supervise(
        self: Arc<Self>,
        registry: Arc<ToolRegistry>,
        shutdown: CancellationToken,
    ) {
        if self.config.disabled {
            return;
        }
        self.restore(&registry).await;
        let mut backoff = Duration::from_secs(1);
        loop {
            let (changed_tx, mut changed) = mpsc::unbounded_channel();
            let handler = Handler {
                tools_changed: changed_tx,
                server: Arc::downgrade(&self),
            };
            let connected = tokio::select! {
                () = shutdown.cancelled() => return,
                r = tokio::time::timeout(self.timeouts.connect, self.connect(handler)) => r,
            };
            let client = match connected {
                Ok(Ok(client)) => client,
                Ok(Err(e)) => {
                    self.down(e, backoff);
                    if !sleep_or_stop(&shutdown, &mut backoff).await {
                        return;
                    }
                    continue;
                }
                Err(_) => {
                    self.down(
                        format!("no answer within {} s", self.timeouts.connect.as_secs()),
                        backoff,
                    );
                    if !sleep_or_stop(&shutdown, &mut backoff).await {
                        return;
                    }
                    continue;
                }
            };
            if let Err(e) = self.list_into(&client, &registry).await {
                self.down(e, backoff);
                let _ = client.cancel().await;
                if !sleep_or_stop(&shutdown, &mut backoff).await {
                    return;
                }
                continue;
            }
            backoff = Duration::from_secs(1);
            *lock(&self.peer) = Some(client.peer().clone());
            self.set_state("connected", None);
            tracing::info!(server = %self.config.name, tools = self.status().tools.len(), "MCP server connected");
            // Connected: follow list changes until the connection fails.
            let failure = loop {
                tokio::select! {
                    () = shutdown.cancelled() => {
                        *lock(&self.peer) = None;
                        let _ = client.cancel().await;
                        return;
                    }
                    Some(()) = changed.recv() => {
                        if let Err(e) = self.list_into(&client, &registry).await {
                            break e;
                        }
                        tracing::info!(server = %self.config.name, "MCP server's tools changed");
                    }
                    () = self.broken.notified() => {
                        if client.peer().is_transport_closed() || client.list_all_tools().await.is_err() {
                            break "the connection failed".to_owned();
                        }
                    }
                    () = tokio::time::sleep(Duration::from_secs(1)) => {
                        if client.peer().is_transport_closed() {
                            break "the server closed the connection".to_owned();
                        }
                    }
                }
            };
            *lock(&self.peer) = None;
            let _ = client.cancel().await;
            self.down(failure, backoff);
            if !sleep_or_stop(&shutdown, &mut backoff).await {
                return;
            }
        }
    }

    fn down(&self, error: impl Into<String>, retry_in: Duration) {
        let error = error.into();
        tracing::warn!(server = %self.config.name, %error, retry_in = ?retry_in, "MCP server unavailable");
        self.set_state("down", Some(error));
    }

    async fn connect(
        &self,
        handler: Handler,
    ) -> Result<RunningService<RoleClient, Handler>, String> {
        match &self.config.transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args);
                // The server gets what it needs to start and what the file gives it, not
                // Countersign's own secrets.
                cmd.env_clear();
                for key in ["PATH", "HOME", "LANG", "TMPDIR", "NODE_PATH"] {
                    if let Ok(value) = std::env::var(key) {
                        cmd.env(key, value);
                    }
                }
                cmd.envs(env);
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("cannot start {command}: {e}"))?;
                if let Some(stderr) = stderr {
                    let name = self.config.name.clone();
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::info!(server = %name, "{line}");
                        }
                    });
                }
                handler
                    .serve_with_lifecycle(transport, lifecycle())
                    .await
                    .map_err(|e| format!("the server did not start MCP: {e}"))
            }
            McpTransport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = axum::http::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|e| format!("header {name:?}: {e}"))?;
                    let value = axum::http::HeaderValue::from_str(value)
                        .map_err(|e| format!("header {name:?}: {e}"))?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom);
                handler
                    .serve_with_lifecycle(
                        StreamableHttpClientTransport::from_config(config),
                        lifecycle(),
                    )
                    .await
                    .map_err(|e| format!("cannot reach {url}: {e}"))
            }
        }
    }

    /// Lists the server's tools, puts them in the registry in place of the previous list, and
    /// keeps the list for the next start.
    async fn list_into(
        self: &Arc<Self>,
        client: &RunningService<RoleClient, Handler>,
        registry: &ToolRegistry,
    ) -> Result<(), String> {
        let listed: Vec<McpTool> =
            tokio::time::timeout(self.timeouts.connect, client.list_all_tools())
                .await
                .map_err(|_| "tools/list did not answer".to_owned())?
                .map_err(|e| format!("tools/list failed: {e}"))?;
        self.register(&listed, registry, false);
        match serde_json::to_string(&listed) {
            Ok(json) => {
                let now = SystemClock.now_ms();
                if let Err(e) = self
                    .tool_lists
                    .keep_tool_list(&self.config.name, &json, now)
                    .await
                {
                    tracing::warn!(server = %self.config.name, error = %e.report(), "cannot keep the MCP server's tool list");
                }
            }
            Err(e) => {
                tracing::warn!(server = %self.config.name, error = %e, "the MCP server's tool list does not encode")
            }
        }
        Ok(())
    }

    /// Offers the tools of the list kept at the last connection until the server lists them
    /// again: a pending approval of one stays answerable (the call says the server is down).
    async fn restore(self: &Arc<Self>, registry: &ToolRegistry) {
        let kept = match self.tool_lists.kept_tool_list(&self.config.name).await {
            Ok(Some(kept)) => kept,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(server = %self.config.name, error = %e.report(), "cannot read the MCP server's kept tool list");
                return;
            }
        };
        match serde_json::from_str::<Vec<McpTool>>(&kept) {
            Ok(listed) => {
                // Unless the server was quicker.
                if self.status().tools.is_empty() {
                    self.register(&listed, registry, true);
                }
            }
            Err(e) => {
                tracing::warn!(server = %self.config.name, error = %e, "the MCP server's kept tool list does not read; ignored")
            }
        }
    }

    /// Puts `listed` in the registry in place of the server's previous tools.
    fn register(self: &Arc<Self>, listed: &[McpTool], registry: &ToolRegistry, remembered: bool) {
        let mut tools = Vec::new();
        let mut offered = Vec::new();
        let mut skipped = Vec::new();
        for tool in listed {
            match spec_for(&self.config, tool, self.timeouts.approval) {
                Ok(spec) => {
                    offered.push(spec.name.to_string());
                    tools.push(Tool {
                        spec,
                        executor: Executor::Server(Arc::new(RemoteTool {
                            server: self.clone(),
                            remote_name: tool.name.to_string(),
                        })),
                    });
                }
                Err(Skipped::Disabled) => skipped.push(format!("{}: disabled", tool.name)),
                Err(Skipped::Schema(keywords)) => {
                    tracing::warn!(server = %self.config.name, tool = %tool.name, ?keywords, "MCP tool left out: its schema uses keywords Countersign does not check");
                    skipped.push(format!(
                        "{}: schema keywords not checked here ({})",
                        tool.name,
                        keywords.join(", ")
                    ));
                }
            }
        }
        registry.replace_prefixed(&tool_prefix(&self.config.name), tools);
        let mut status = lock(&self.status);
        status.tools = offered;
        status.skipped = skipped;
        status.remembered = remembered;
    }
}

/// Waits the backoff (then doubles it, up to a minute); false when shutting down.
async fn sleep_or_stop(shutdown: &CancellationToken, backoff: &mut Duration) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(Duration::from_secs(60));
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}

/// The 2026-07-28 protocol where the server speaks it (`server/discover`, questions as
/// `input_required` results), the 2025 handshake where it does not.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    }
}

/// A call in flight on a server, for as long as it is.
struct InFlight<'a> {
    server: &'a McpServer,
    seq: u64,
}

impl<'a> InFlight<'a> {
    fn enter(server: &'a McpServer, asker: Option<Asker>) -> Self {
        let seq = server.next_call.fetch_add(1, Ordering::Relaxed);
        lock(&server.in_flight).push((seq, asker));
        InFlight { server, seq }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(&self.server.in_flight).retain(|(seq, _)| *seq != self.seq);
    }
}

/// What the server may ask of us: to follow its tool list, and the person's input.
#[derive(Clone)]
struct Handler {
    tools_changed: mpsc::UnboundedSender<()>,
    server: Weak<McpServer>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.tools_changed.send(());
    }

    /// A 2025 `elicitation/create`: asked of the person whose call is in flight (the request
    /// does not say which call it belongs to). Withdrawn when the server cancels it.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(server) = self.server.upgrade() else {
            return Ok(ElicitResult::new(ElicitationAction::Cancel));
        };
        let Some(asker) = server.asker_of_question() else {
            tracing::warn!(server = %server.config.name, "a question arrived while no call, or calls of several chats, were in flight: cancelled, not shown");
            return Ok(ElicitResult::new(ElicitationAction::Cancel));
        };
        Ok(server
            .ask_person(&asker, request, context.ct.cancelled_owned())
            .await)
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::new().with_schema_validation(true))
                .with_url(UrlElicitationCapability::new()),
        );
        ClientConfig::new(
            capabilities,
            Implementation::new("countersign", env!("CARGO_PKG_VERSION")),
        )
    }
}
