//! What the pages read from the runtime: the JSON endpoints (`app.rs`, `GET /api/app` and
//! `/api/chats/{id}`) answer with these, and a page rendered on the server (`ui::api`) reads the
//! same, so a page shows the same whichever way it loaded. The shapes are `protocol::page`'s.

use crate::{
    agent::people::Principal,
    agent::{
        TurnEntry,
        gate::CallPhase,
        tools::{ApprovalPolicy, ToolLocation},
    },
    protocol::{
        audit::{AuditKind, AuditQuery},
        page::{
            AUDIT_PAGE, AppInfo, AuditFilters, AuditPage, ChatSnapshot, PendingApprovalInfo,
            ToolInfo,
        },
    },
    transport::state::AppState,
};

/// The model in use and the tools it may call, and who is signed in.
pub fn app_info(state: &AppState, principal: &Principal) -> AppInfo {
    let runtime = &state.runtime;
    let tools = runtime
        .tools
        .snapshot()
        .iter()
        .map(|tool| ToolInfo {
            name: tool.spec.name.to_string(),
            description: tool.spec.description.to_string(),
            parameters: tool.spec.parameters.clone(),
            needs_approval: !matches!(tool.spec.approval, ApprovalPolicy::Never),
            runs_in_browser: tool.spec.location == ToolLocation::Browser,
            pays: tool.spec.pays.is_some(),
            approval_timeout_secs: tool.spec.approval_timeout.as_secs(),
            presentation: tool.spec.presentation.clone(),
        })
        .collect();
    AppInfo {
        model: runtime.models().label(),
        tools,
        me: principal.me(state.edge.mode),
    }
}

/// A chat with its pending approvals; `None` when `principal` has no such chat: nobody started
/// it, or it is someone else's (the same answer, so it tells nothing of other people's chats).
pub async fn chat_snapshot(
    state: &AppState,
    chat_id: String,
    principal: &Principal,
) -> Result<Option<ChatSnapshot>, String> {
    let runtime = &state.runtime;
    let now = runtime.clock.now_ms();
    // Read before the record: a change in between makes the page look once more, never miss it.
    let version = runtime.inbox.chat_version(&chat_id);
    let session = runtime
        .existing_session(&chat_id)
        .await
        .map_err(|e| e.to_string())?
        .filter(|s| {
            let state = s.state();
            !state.record.is_untouched() && state.record.owned_by(principal.id())
        });
    let Some(session) = session else {
        return Ok(None);
    };
    // The page reads every message: decoded once in the live record (ADR 0045).
    let mut record = {
        let mut state = session.state();
        state
            .record
            .messages
            .decoded()
            .map_err(|e| format!("this chat's stored messages cannot be read: {e}"))?;
        state.record.clone()
    };
    let pending = record
        .turn
        .iter()
        .flat_map(|t| t.calls.iter())
        .filter_map(|c| match &c.phase {
            CallPhase::AwaitingApproval {
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
    Ok(Some(ChatSnapshot {
        chat_id,
        messages: record
            .messages
            .decoded()
            .map_err(|e| format!("this chat's stored messages cannot be read: {e}"))?
            .to_vec(),
        pending,
        server_now_ms: now,
        streaming,
        version,
    }))
}

/// One page of the audit log, newest first (what `principal` may read).
pub async fn audit_page(
    state: &AppState,
    filters: AuditFilters,
    principal: &Principal,
) -> Result<AuditPage, String> {
    let clean = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let kind = match clean(filters.kind) {
        None => None,
        Some(k) => Some(AuditKind::parse(&k).ok_or_else(|| format!("unknown event kind {k:?}"))?),
    };
    let query = AuditQuery {
        session: clean(filters.session),
        tool: clean(filters.tool),
        kind,
        before: filters.before.filter(|b| *b > 0),
        approval: None,
        limit: Some(AUDIT_PAGE),
        visible_to: super::audit::visible_to(principal),
    };
    let records = state
        .runtime
        .store
        .audit(&query)
        .await
        .map_err(|e| format!("the audit log cannot be read: {e}"))?;
    let chain = match state.notary.get() {
        Some(notary) => Some(notary.status_now().await),
        None => None,
    };
    Ok(AuditPage {
        records,
        limit: query.limit(),
        tools: state.runtime.tools.names(),
        chain,
    })
}
