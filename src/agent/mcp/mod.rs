//! MCP servers under the gate: anyone's tools, countersigned like the built-in ones (ADR 0021).
//!
//! [`config`] reads `COUNTERSIGN_MCP_CONFIG` (the `mcpServers` file shape); [`server`] keeps each
//! server connected through rmcp (a child process or streamable HTTP) and its tools in the
//! registry; [`tool`] turns an MCP tool into a registry tool (the approval policy from the file
//! and, when trusted, the annotations; the card's words; results as outputs); [`tool_name`] gives
//! each server's tool the stable, provider-legal name the model sees. Once in the registry, an
//! MCP tool goes through the same gate as any other: asked, edited, denied, expired, audited,
//! durable across restarts.

pub mod config;
pub mod server;
pub mod tool;

use std::{sync::Arc, time::Duration};

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

pub use server::{McpServer, McpTimeouts, ServerStatus};

use super::{store::ToolListStore, tools::ToolRegistry};
use config::McpConfig;

/// Every configured MCP server.
#[derive(Default)]
pub struct McpHub {
    servers: Vec<Arc<McpServer>>,
}

impl McpHub {
    pub fn new(
        config: Option<&McpConfig>,
        timeouts: McpTimeouts,
        tool_lists: Arc<dyn ToolListStore>,
    ) -> Self {
        McpHub {
            servers: config
                .map(|c| {
                    c.servers
                        .iter()
                        .map(|s| McpServer::new(s.clone(), timeouts, tool_lists.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Starts each server's supervisor and waits (up to `wait`) until every server is connected
    /// with its tools in `registry`, or known to be down: the first turns then see the tools.
    /// A server that is down leaves the rest usable; its supervisor keeps trying.
    pub async fn start(
        &self,
        registry: Arc<ToolRegistry>,
        shutdown: CancellationToken,
        wait: Duration,
    ) {
        if self.servers.is_empty() {
            return;
        }
        // rmcp's HTTP client uses rustls without a provider of its own: ring, as the rest of
        // the server (already installed is fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        for server in &self.servers {
            tokio::spawn(server.clone().supervise(registry.clone(), shutdown.clone()));
        }
        let settled = async {
            while self
                .servers
                .iter()
                .any(|s| s.status().state == "connecting")
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let _ = tokio::time::timeout(wait, settled).await;
        for status in self.statuses() {
            tracing::info!(server = %status.name, state = status.state, tools = status.tools.len(), error = ?status.error, "MCP server");
        }
    }

    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.status()).collect()
    }
}

/// The longest function name every provider accepts (OpenAI `^[a-zA-Z0-9_-]{1,64}$`, Gemini
/// 64 characters starting with a letter or `_`).
pub const MAX_TOOL_NAME: usize = 64;

/// The name the model sees for `server`'s tool `tool`: `<server>__<tool>`, characters outside
/// `[A-Za-z0-9_-]` as `_`; past 64 characters, cut and made unique by a digest of the whole.
/// Stable across restarts (pending approvals name it), distinct per server (two servers may
/// both have `search`), never a built-in tool's name (those have no `__`).
pub fn tool_name(server: &str, tool: &str) -> String {
    let mut name = tool_prefix(server);
    name.push_str(&sanitise(tool));
    if name.len() <= MAX_TOOL_NAME && sanitise(tool) == tool {
        return name;
    }
    // Cut (or made distinct from another tool that sanitises the same): a digest of the exact
    // names keeps it unique and stable.
    let digest = Sha256::digest(format!("{server}\u{0}{tool}").as_bytes());
    let suffix: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    name.truncate(MAX_TOOL_NAME - 9);
    format!("{name}_{suffix}")
}

/// What every one of `server`'s tool names starts with: `<server>__`.
pub fn tool_prefix(server: &str) -> String {
    let mut prefix = sanitise(server);
    if !prefix.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        prefix.insert(0, '_');
    }
    prefix.push_str("__");
    prefix
}

fn sanitise(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_namespaced_legal_and_stable() {
        assert_eq!(tool_name("files", "read_file"), "files__read_file");
        assert_ne!(tool_name("a", "search"), tool_name("b", "search"));
        let odd = tool_name("files", "read.file");
        assert!(odd.starts_with("files__read_file_"), "{odd}");
        assert_ne!(
            odd,
            tool_name("files", "read_file"),
            "distinct from its look-alike"
        );
        let long = tool_name("server", &"x".repeat(100));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert_eq!(long, tool_name("server", &"x".repeat(100)), "stable");
        assert_ne!(long, tool_name("server", &"x".repeat(101)));
        assert!(tool_name("9lives", "t").starts_with('_'));
        for name in [odd, long] {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            );
        }
    }
}
