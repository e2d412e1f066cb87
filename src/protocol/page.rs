//! What the pages read besides the chat stream, as JSON: `GET /api/app` ([`AppInfo`]: the model,
//! its tools, who is signed in), `GET /api/chats/{id}` ([`ChatSnapshot`]: a chat and its pending
//! approvals) and `GET /api/audit` ([`AuditPage`] for [`AuditFilters`]). The server writes them
//! (`transport::app`) and the page reads them (`ui::api`), in both builds from these types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ToolPresentation, UiMessage};

/// The audit page's size: when a page holds this many records there may be older ones.
pub const AUDIT_PAGE: usize = 100;

/// The audit page's filters (each `None` means "any").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditFilters {
    pub session: Option<String>,
    pub tool: Option<String>,
    pub kind: Option<String>,
    pub before: Option<i64>,
}

/// A tool as the UI needs to know it: to word approval cards and build edit forms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (edit forms are generated from it).
    pub parameters: Value,
    pub needs_approval: bool,
    pub runs_in_browser: bool,
    /// Its calls pay (its `amount` and `currency` arguments): a grant of it is a budget.
    #[serde(default)]
    pub pays: bool,
    pub approval_timeout_secs: u64,
    /// How its card reads: title, the sentence the person countersigns, field labels.
    pub presentation: ToolPresentation,
}

/// What the page shows before the first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppInfo {
    pub model: String,
    pub tools: Vec<ToolInfo>,
    /// Who is signed in (the one local person on a server without sign-in).
    #[serde(default)]
    pub me: super::countersign::Me,
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
    /// The version of the chat's waiting approvals this shows (`chat_news` waits for the next).
    #[serde(default)]
    pub version: u64,
}

impl ChatSnapshot {
    /// A chat the server does not have for this person (`GET /api/chats/{id}` answers 404
    /// `chat_not_found`, as for one of someone else's): to the page, a new chat, empty.
    pub fn new_chat(chat_id: String, now_ms: i64) -> Self {
        ChatSnapshot {
            chat_id,
            messages: Vec::new(),
            pending: Vec::new(),
            server_now_ms: now_ms,
            streaming: false,
            version: 0,
        }
    }
}

/// One page of the audit log, with what the filters can choose from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    pub records: Vec<super::audit::AuditRecord>,
    /// The page size: when `records` is this long there may be older ones.
    pub limit: usize,
    /// The names of the tools (for the tool filter).
    pub tools: Vec<String>,
    /// How far the server checked and signed its audit chain (`None`: it signs none).
    #[serde(default)]
    pub chain: Option<super::audit::ChainStatus>,
}
