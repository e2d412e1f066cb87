//! Server functions the page calls, and the data they return (shared by both builds).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::UiMessage;

/// A tool as the UI needs to know it: to word approval cards and build edit forms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (edit forms are generated from it).
    pub parameters: Value,
    pub needs_approval: bool,
    pub runs_in_browser: bool,
    pub approval_timeout_secs: u64,
}

/// What the page shows before the first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppInfo {
    pub model: String,
    pub tools: Vec<ToolInfo>,
}

/// An approval still waiting, with its deadline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApprovalInfo {
    pub approval_id: String,
    pub tool_call_id: String,
    pub deadline_ms: i64,
}

/// A chat as the server holds it: enough to show it again after a reload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatSnapshot {
    pub chat_id: String,
    pub messages: Vec<UiMessage>,
    pub pending: Vec<PendingApprovalInfo>,
    /// The server's clock when the snapshot was taken (deadlines are in its time).
    pub server_now_ms: i64,
    /// A turn is generating right now (the page should re-attach to it).
    pub streaming: bool,
}

/// The model in use and the tools it may call.
#[server]
pub async fn get_app_info() -> Result<AppInfo, ServerFnError> {
    use crate::agent::tools::{ApprovalPolicy, ToolLocation};
    let state = use_context::<crate::server::AppState>()
        .ok_or_else(|| ServerFnError::new("the server state is missing"))?;
    let runtime = &state.runtime;
    let tools = runtime
        .tools
        .names()
        .into_iter()
        .filter_map(|name| runtime.tools.get(name))
        .map(|tool| ToolInfo {
            name: tool.spec.name.to_string(),
            description: tool.spec.description.to_string(),
            parameters: tool.spec.parameters.clone(),
            needs_approval: !matches!(tool.spec.approval, ApprovalPolicy::Never),
            runs_in_browser: tool.spec.location == ToolLocation::Browser,
            approval_timeout_secs: tool.spec.approval_timeout.as_secs(),
        })
        .collect();
    Ok(AppInfo {
        model: runtime.models_label(),
        tools,
    })
}

/// Loads a chat with its pending approvals (an unknown chat is empty).
#[server]
pub async fn load_chat(chat_id: String) -> Result<ChatSnapshot, ServerFnError> {
    use crate::agent::TurnEntry;
    let state = use_context::<crate::server::AppState>()
        .ok_or_else(|| ServerFnError::new("the server state is missing"))?;
    let runtime = &state.runtime;
    let now = runtime.clock.now_ms();
    let session = runtime
        .existing_session(&chat_id)
        .await
        .map_err(|e| ServerFnError::new(e.to_string()))?;
    let Some(session) = session else {
        return Ok(ChatSnapshot {
            chat_id,
            messages: Vec::new(),
            pending: Vec::new(),
            server_now_ms: now,
            streaming: false,
        });
    };
    let record = session.snapshot();
    let pending = record
        .turn
        .iter()
        .flat_map(|t| t.calls.iter())
        .filter_map(|c| match &c.phase {
            crate::agent::gate::CallPhase::AwaitingApproval {
                approval_id,
                deadline_ms,
                ..
            } => Some(PendingApprovalInfo {
                approval_id: approval_id.clone(),
                tool_call_id: c.call.id.clone(),
                deadline_ms: *deadline_ms,
            }),
            _ => None,
        })
        .collect();
    let streaming = session.current_log().is_some_and(|log| {
        !matches!(
            log.entries_from(log.len().saturating_sub(1)).last(),
            None | Some(TurnEntry::End) | Some(TurnEntry::Pause)
        )
    });
    Ok(ChatSnapshot {
        chat_id,
        messages: record.messages,
        pending,
        server_now_ms: now,
        streaming,
    })
}

/// One page of the audit log, with what the filters can choose from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    pub records: Vec<crate::protocol::audit::AuditRecord>,
    /// The page size: when `records` is this long there may be older ones.
    pub limit: usize,
    /// The names of the tools (for the tool filter).
    pub tools: Vec<String>,
}

/// The audit log, newest first, filtered like `GET /api/audit`.
#[server]
pub async fn list_audit(
    session: Option<String>,
    tool: Option<String>,
    kind: Option<String>,
    before: Option<i64>,
) -> Result<AuditPage, ServerFnError> {
    use crate::protocol::audit::{AuditKind, AuditQuery};
    let state = use_context::<crate::server::AppState>()
        .ok_or_else(|| ServerFnError::new("the server state is missing"))?;
    let clean = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let kind = match clean(kind) {
        None => None,
        Some(k) => Some(
            AuditKind::parse(&k)
                .ok_or_else(|| ServerFnError::new(format!("unknown event kind {k:?}")))?,
        ),
    };
    let query = AuditQuery {
        session: clean(session),
        tool: clean(tool),
        kind,
        before: before.filter(|b| *b > 0),
        limit: Some(100),
    };
    let records = state
        .runtime
        .store
        .audit(&query)
        .await
        .map_err(|e| ServerFnError::new(format!("the audit log cannot be read: {e}")))?;
    Ok(AuditPage {
        records,
        limit: query.limit(),
        tools: state
            .runtime
            .tools
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect(),
    })
}
