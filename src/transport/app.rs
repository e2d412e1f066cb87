//! What the pages load besides the chat stream: `GET /api/app` (the model and its tools),
//! `GET /api/mcp` (the MCP servers' status) and `GET /api/chats/{id}` (a chat's messages and pending approvals, to show it again after a
//! reload). The data and how it is read live in `ui::api`, shared with server rendering.

use axum::{
    Json, Router,
    extract::{Path, State},
    http::StatusCode,
    routing::get,
};

use super::error::ApiError;
use crate::{
    state::AppState,
    ui::api::{self, AppInfo, ChatSnapshot},
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/app", get(app))
        .route("/api/mcp", get(mcp))
        .route("/api/chats/{id}", get(chat))
}

async fn app(State(state): State<AppState>) -> Json<AppInfo> {
    Json(api::app_info(&state))
}

/// The MCP servers: connected or not (and why), the tools each offers, the ones left out.
async fn mcp(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "servers": state.mcp.statuses() }))
}

async fn chat(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ChatSnapshot>, ApiError> {
    api::chat_snapshot(&state, id)
        .await
        .map(Json)
        .map_err(|message| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            )
        })
}
