//! What the pages load besides the chat stream: `GET /api/app` (the model and its tools),
//! `GET /api/mcp` (the MCP servers' status), `GET /api/chats/{id}` (a chat's messages and
//! pending approvals, to show it again after a reload; 404 `chat_not_found` for one nobody
//! started or someone else's, the same answer) and `POST
//! /api/chats/{id}/questions/{question}` (the person's reply to a question a running tool asks).
//! The data and how it is read live in `pages.rs`, shared with server rendering.

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State, rejection::BytesRejection},
    http::StatusCode,
    routing::{get, post},
};

use super::{edge::Client, error::ApiError, pages as api};
use crate::{
    agent::questions::QuestionError,
    protocol::{
        message::inline_image_type,
        page::{AppInfo, ChatSnapshot},
        question::QuestionReply,
    },
    transport::state::AppState,
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/app", get(app))
        .route("/api/mcp", get(mcp))
        .route("/api/policy", get(policy))
        .route("/api/chats/{id}", get(chat))
        .route("/api/chats/{id}/files/{sha}", get(file))
        .route(
            "/api/chats/{id}/questions/{question}",
            post(answer_question),
        )
}

async fn app(State(state): State<AppState>, client: Client) -> Json<AppInfo> {
    Json(api::app_info(&state, &client.principal()))
}

/// The MCP servers: connected or not (and why), the tools each offers, the ones left out.
async fn mcp(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "servers": state.mcp.statuses() }))
}

/// The policy in force (its file, version, rules, warnings, the last reload that failed) and
/// the grants.
async fn policy(State(state): State<AppState>, client: Client) -> Json<serde_json::Value> {
    let policy = state.runtime.policy();
    // A person sees their own grants; admins and the operator see everyone's.
    let only = super::audit::visible_to(&client.principal());
    let grants: Vec<_> = policy
        .grants()
        .into_iter()
        .filter(|g| only.as_deref().is_none_or(|me| g.owner() == me))
        .collect();
    Json(serde_json::json!({
        "policy": policy.status(),
        "grants": grants,
    }))
}

async fn chat(
    State(state): State<AppState>,
    Path(id): Path<String>,
    client: Client,
) -> Result<Json<ChatSnapshot>, ApiError> {
    api::chat_snapshot(&state, id, &client.principal())
        .await
        .map_err(|message| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            )
        })?
        .map(Json)
        .ok_or_else(ApiError::not_your_chat)
}

/// A file attached in a chat (ADR 0026), to whoever may read the chat: cached for good (the
/// URL names the content), never sniffed, never run as a page. Only an image of exactly one of
/// the [`INLINE_IMAGE_TYPES`](crate::protocol::message::INLINE_IMAGE_TYPES) is served as
/// itself, `inline`; anything else — SVG, HTML, a type like `image/x, text/html` — is a
/// download of `application/octet-stream`. Someone else's chat, an unknown chat or file: 404.
async fn file(
    State(state): State<AppState>,
    Path((id, sha)): Path<(String, String)>,
    client: Client,
) -> Result<axum::response::Response, ApiError> {
    use axum::{
        http::{HeaderValue, header},
        response::IntoResponse,
    };
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "file_not_found",
            "this chat has no such file",
        )
    };
    if !crate::agent::attachments::is_sha(&sha) {
        return Err(not_found());
    }
    let session = super::access::own_chat(&state.runtime, client.principal().id(), &id)
        .await?
        .ok_or_else(not_found)?;
    let file = state
        .runtime
        .store
        .attachment(&id, &sha)
        .await?
        .ok_or_else(not_found)?;
    let url = crate::agent::attachments::file_url(&id, &sha);
    // An unreadable message names no file (the download goes on, unnamed).
    let name = session.state().record.messages.iter().find_map(|m| {
        m.ok()?.parts.iter().find_map(|part| match part {
            crate::protocol::UiPart::File(f) if f.url == url => f.filename.clone(),
            _ => None,
        })
    });
    let inline = inline_image_type(&file.media_type);
    let disposition = disposition(inline.is_some(), name.as_deref(), &sha);
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(inline.unwrap_or("application/octet-stream")),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition)
                    .unwrap_or(HeaderValue::from_static("attachment")),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'; sandbox"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=31536000, immutable"),
            ),
        ],
        file.bytes,
    )
        .into_response())
}

/// The `Content-Disposition` of a stored file: `inline` or `attachment`, with the name the
/// person gave it made safe — `filename` in plain ASCII (anything else, quotes, slashes and
/// control characters become `_`, no leading dot) and `filename*` with the name's own letters,
/// percent-encoded — or, without a usable name, `attachment-<first 12 digits of its digest>`.
fn disposition(inline: bool, name: Option<&str>, sha: &str) -> String {
    let kind = if inline { "inline" } else { "attachment" };
    let cleaned: String = name
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, '/' | '\\') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let cleaned = cleaned.trim().trim_start_matches('.').trim();
    let cleaned: String = cleaned.chars().take(120).collect();
    let fallback = format!("attachment-{}", &sha[..sha.len().min(12)]);
    if cleaned.is_empty() {
        return format!("{kind}; filename=\"{fallback}\"");
    }
    let ascii: String = cleaned
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '-' | '_' | '(' | ')') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{kind}; filename=\"{ascii}\"; filename*=UTF-8''{}",
        crate::common::url::encode(&cleaned)
    )
}

/// The person's reply to a question a running tool asks: `{"action": "accept", "content": {…}}`,
/// `{"action": "decline"}` or `{"action": "cancel"}`. 204 when it reached the tool; 404 when
/// the question is not open in this chat; 422 when the form's values do not match it (the
/// question stays open).
async fn answer_question(
    State(state): State<AppState>,
    Path((chat, question)): Path<(String, String)>,
    client: Client,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, ApiError> {
    let body = body.map_err(|r| ApiError::from_body_rejection(r.status(), &r))?;
    // Someone else's question is one that is not open (the same words).
    if super::access::may_touch_chat(&state.runtime, client.principal().id(), &chat)
        .await
        .is_err()
    {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "question_not_open",
            crate::agent::questions::QuestionError::NotOpen.to_string(),
        ));
    }
    let reply: QuestionReply = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "invalid_reply",
            format!(
                "the reply must be {{\"action\": \"accept\" | \"decline\" | \"cancel\", \
                 \"content\"?: {{…}}}}: {e}"
            ),
        )
    })?;
    match state.runtime.questions.answer(&chat, &question, reply) {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(e @ QuestionError::NotOpen) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "question_not_open",
            e.to_string(),
        )),
        Err(QuestionError::Invalid(message)) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_answer",
            message,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::disposition;

    const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_download_is_named_safely() {
        assert_eq!(
            disposition(true, Some("dot.png"), SHA),
            "inline; filename=\"dot.png\"; filename*=UTF-8''dot.png"
        );
        assert_eq!(
            disposition(false, Some("Rechnung März.pdf"), SHA),
            "attachment; filename=\"Rechnung M_rz.pdf\"; filename*=UTF-8''Rechnung%20M%C3%A4rz.pdf"
        );
        // Quotes, paths, line breaks and leading dots never reach the header as they were.
        assert_eq!(
            disposition(false, Some("../..\\\"evil\"\r\n.html"), SHA),
            "attachment; filename=\"_..__evil___.html\"; \
             filename*=UTF-8''_.._%22evil%22__.html"
        );
        assert_eq!(
            disposition(false, Some(".bashrc"), SHA),
            "attachment; filename=\"bashrc\"; filename*=UTF-8''bashrc"
        );
        for nameless in [None, Some(""), Some("  "), Some("...")] {
            assert_eq!(
                disposition(false, nameless, SHA),
                "attachment; filename=\"attachment-0123456789ab\"",
                "{nameless:?}"
            );
        }
        let long = "a".repeat(500);
        assert!(disposition(false, Some(&long), SHA).len() < 300);
        for name in ["x\u{7f}y", "a\"b", "\u{202e}gpj.exe"] {
            assert!(
                axum::http::HeaderValue::from_str(&disposition(false, Some(name), SHA)).is_ok(),
                "{name:?}"
            );
        }
    }
}
