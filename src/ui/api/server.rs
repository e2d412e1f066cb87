//! The page data on the server, for pages rendered here: the same reads as the JSON endpoints
//! (`transport::pages`), for the person of the request being served.

use leptos::prelude::use_context;

use super::{AppInfo, AuditFilters, AuditPage, ChatSnapshot};
use crate::{
    agent::people::Principal,
    transport::pages::{app_info, audit_page, chat_snapshot},
    transport::state::AppState,
};

/// Who calls, in the request being served (the local person on a server without sign-in).
pub fn principal() -> Principal {
    crate::transport::people::caller().unwrap_or_else(Principal::local)
}

fn state() -> Result<AppState, String> {
    use_context::<AppState>().ok_or_else(|| "the server state is missing".to_owned())
}

/// The model and tools (the page calls this; on the server it reads the runtime).
pub async fn get_app_info() -> Result<AppInfo, String> {
    Ok(app_info(&state()?, &principal()))
}

/// A chat as the server holds it (one it does not have for this person: a new chat).
pub async fn load_chat(chat_id: String) -> Result<ChatSnapshot, String> {
    let state = state()?;
    let now = state.runtime.clock.now_ms();
    let snapshot = chat_snapshot(&state, chat_id.clone(), &principal()).await?;
    Ok(snapshot.unwrap_or_else(|| ChatSnapshot::new_chat(chat_id, now)))
}

/// One page of the audit log.
pub async fn list_audit(filters: AuditFilters) -> Result<AuditPage, String> {
    audit_page(&state()?, filters, &principal()).await
}
