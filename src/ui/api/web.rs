//! The page data in the browser: fetched from the JSON endpoints.

use super::{AUDIT_PAGE, AppInfo, AuditFilters, AuditPage, ChatSnapshot};
use crate::{
    protocol::audit::AuditRecord,
    ui::{platform, url::encode},
};

/// The model and tools: `GET /api/app`. With a split wasm (ADR 0030) reading the answer is a
/// part of its own (the tools' presentations are most of the JSON the page reads), fetched
/// after the page is interactive.
#[cfg_attr(wasm_split, leptos::lazy(app_info))]
pub async fn get_app_info() -> Result<AppInfo, String> {
    platform::get_json("/api/app")
        .await
        .map_err(|e| e.to_string())
}

/// A chat as the server holds it: `GET /api/chats/{id}` (404 `chat_not_found`: a new chat).
pub async fn load_chat(chat_id: String) -> Result<ChatSnapshot, String> {
    let url = format!("/api/chats/{}", encode(&chat_id));
    match platform::get_json(&url).await {
        Ok(snapshot) => Ok(snapshot),
        Err(platform::FetchError::Http {
            status: 404, code, ..
        }) if code == "chat_not_found" => Ok(ChatSnapshot::new_chat(chat_id, platform::now_ms())),
        Err(e) => Err(e.to_string()),
    }
}

/// One page of the audit log: `GET /api/audit` with the filters, and the tool names. (`Send`
/// for the page's `Resource`: the browser runs it on its one thread.)
pub fn list_audit(filters: AuditFilters) -> impl Future<Output = Result<AuditPage, String>> + Send {
    send_wrapper::SendWrapper::new(fetch_audit(filters))
}

async fn fetch_audit(filters: AuditFilters) -> Result<AuditPage, String> {
    let mut url = format!("/api/audit?limit={AUDIT_PAGE}");
    for (name, value) in [
        ("session", filters.session),
        ("tool", filters.tool),
        ("kind", filters.kind),
        ("before", filters.before.map(|b| b.to_string())),
    ] {
        if let Some(value) = value {
            url.push_str(&format!("&{name}={}", encode(&value)));
        }
    }
    let records: Vec<AuditRecord> = platform::get_json(&url).await.map_err(|e| e.to_string())?;
    let info = get_app_info().await?;
    // A server that signs no chain answers an error: the page then says nothing of it.
    let chain = platform::get_json("/api/audit/chain").await.ok();
    Ok(AuditPage {
        records,
        limit: AUDIT_PAGE,
        tools: info.tools.into_iter().map(|t| t.name).collect(),
        chain,
    })
}
