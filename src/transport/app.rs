//! What the pages load besides the chat stream: `GET /api/app` (the model and its tools),
//! `GET /api/mcp` (the MCP servers' status), `GET /api/chats/{id}` (a chat's messages and
//! pending approvals, to show it again after a reload; 404 `chat_not_found` for one nobody
//! started or someone else's, the same answer) and `POST
//! /api/chats/{id}/questions/{question}` (the person's reply to a question a running tool asks).
//! The data and how it is read live in `ui::api`, shared with server rendering.

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State, rejection::BytesRejection},
    http::StatusCode,
    routing::{get, post},
};

use super::{edge::Client, error::ApiError};
use crate::{
    agent::questions::QuestionError,
    protocol::question::QuestionReply,
    state::AppState,
    ui::api::{self, AppInfo, ChatSnapshot},
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

/// A file attached in a chat (ADR 0026), to whoever may read the chat: the bytes as kept, under
/// their own media type, never sniffed or run as a page (an SVG or HTML file stays inert), and
/// cached for good (the URL names the content). Someone else's chat, an unknown chat or file:
/// 404.
async fn file(
    State(state): State<AppState>,
    Path((id, sha)): Path<(String, String)>,
    client: Client,
) -> Result<axum::response::Response, ApiError> {
    use axum::{http::header, response::IntoResponse};
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
    super::access::own_chat_of(&state, &client.principal(), &id)
        .await?
        .ok_or_else(not_found)?;
    let file = state
        .runtime
        .store
        .attachment(&id, &sha)
        .await?
        .ok_or_else(not_found)?;
    let media_type = axum::http::HeaderValue::from_str(&file.media_type)
        .ok()
        .filter(|_| file.media_type.contains('/'))
        .unwrap_or(axum::http::HeaderValue::from_static(
            "application/octet-stream",
        ));
    let disposition = if file.media_type.starts_with("image/") {
        "inline"
    } else {
        "attachment"
    };
    Ok((
        [
            (header::CONTENT_TYPE, media_type),
            (
                header::CONTENT_DISPOSITION,
                axum::http::HeaderValue::from_static(disposition),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                axum::http::HeaderValue::from_static("nosniff"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                axum::http::HeaderValue::from_static("default-src 'none'; sandbox"),
            ),
            (
                header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("private, max-age=31536000, immutable"),
            ),
        ],
        file.bytes,
    )
        .into_response())
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
    if super::access::own_chat_of(&state, &client.principal(), &chat)
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
