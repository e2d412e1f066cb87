//! One MCP server: its connection (rmcp's client over a child process or streamable HTTP), kept
//! up by a supervisor that lists its tools into the registry, follows `tools/list_changed`,
//! and reconnects with backoff when the server crashes or goes away. Its tools stay in the
//! registry while it is down (a pending approval of one must still be answerable): a call then
//! fails with a clear error and nothing runs.

use std::{
    collections::HashMap,
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    ClientHandler, RoleClient, ServiceError, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
        Implementation, Tool as McpTool,
    },
    service::{NotificationContext, Peer, RunningService},
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
    lock,
    tools::{Executor, Tool, ToolError, ToolRegistry},
};

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
    peer: Mutex<Option<Peer<RoleClient>>>,
    status: Mutex<ServerStatus>,
    /// Wakes the supervisor: the connection failed during a call.
    broken: tokio::sync::Notify,
}

impl McpServer {
    pub fn new(config: McpServerConfig, timeouts: McpTimeouts) -> Arc<Self> {
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
        };
        Arc::new(McpServer {
            config,
            timeouts,
            peer: Mutex::new(None),
            status: Mutex::new(status),
            broken: tokio::sync::Notify::new(),
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

    /// Calls `tool` on the server. Nothing is retried: a call that timed out or lost its
    /// connection may or may not have taken effect, and the model is told so.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, serde_json::Value>,
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
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let seconds = self.timeouts.call.as_secs();
        match tokio::time::timeout(self.timeouts.call, peer.call_tool_once(params)).await {
            Err(_) => {
                tracing::warn!(server = %name, tool, seconds, "MCP call timed out (cancelled)");
                Err(ToolError(format!(
                    "The MCP server {name} did not answer {tool} within {seconds} s; the call was \
                     cancelled and may or may not have taken effect."
                )))
            }
            Ok(Ok(CallToolResponse::Complete(result))) => Ok(result),
            Ok(Ok(CallToolResponse::InputRequired(_))) => Err(ToolError(format!(
                "The MCP server {name} asked for more input during {tool}, which Countersign \
                 does not relay yet; nothing was done."
            ))),
            Ok(Ok(_)) => Err(ToolError(format!(
                "The MCP server {name} answered {tool} with a task, which Countersign does not \
                 follow yet; it may still run on the server."
            ))),
            Ok(Err(ServiceError::McpError(e))) => Err(ToolError(format!(
                "The MCP server {name} refused {tool}: {}",
                e.message
            ))),
            Ok(Err(e)) => {
                tracing::warn!(server = %name, tool, error = %e, "MCP call failed; reconnecting");
                self.broken.notify_one();
                Err(ToolError(format!(
                    "The connection to the MCP server {name} failed during {tool}; the call may \
                     or may not have taken effect."
                )))
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
        let mut backoff = Duration::from_secs(1);
        loop {
            let (changed_tx, mut changed) = mpsc::unbounded_channel();
            let handler = Handler {
                tools_changed: changed_tx,
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
                    .serve(transport)
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
                    .serve(StreamableHttpClientTransport::from_config(config))
                    .await
                    .map_err(|e| format!("cannot reach {url}: {e}"))
            }
        }
    }

    /// Lists the server's tools and puts them in the registry in place of the previous list.
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
        let mut tools = Vec::new();
        let mut offered = Vec::new();
        let mut skipped = Vec::new();
        for tool in &listed {
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
        Ok(())
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

/// What the server may ask of us.
#[derive(Clone)]
struct Handler {
    tools_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.tools_changed.send(());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("countersign", env!("CARGO_PKG_VERSION")),
        )
    }
}
