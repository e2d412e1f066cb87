//! What operators and load balancers ask (ADR 0033):
//!
//! * `GET /healthz` — liveness: the process answers. Never asks the database (an instance
//!   whose database is away is not restarted for it).
//! * `GET /readyz` — readiness: the database answers within [`READY_TIMEOUT`] (the store was
//!   migrated when it opened: an instance whose migrations fail never starts), and the instance
//!   is not shutting down. 503 otherwise, so a load balancer sends its work elsewhere — from the
//!   moment shutdown begins, while requests in flight finish.
//! * `GET /metrics` — Prometheus' text format (`agent::metrics`), for whoever sees the whole
//!   server (`Principal::sees_everything`: an admin, the API key, the local person of a server
//!   without sign-in); another person gets 403.

use axum::{
    Json, Router,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::Serialize;

use super::{edge::Client, error::ApiError, state::AppState};
use crate::agent::metrics::{CONTENT_TYPE, Gauges};

/// How long `/readyz` (and `/metrics`' count of live instances) waits for the database.
pub const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// The body of `GET /healthz` and `GET /readyz`.
#[derive(Debug, Serialize)]
pub struct Health {
    /// `ok`; for `/readyz` also `unavailable` (the database does not answer) or `draining`
    /// (shutting down), with status 503.
    pub status: &'static str,
    pub version: &'static str,
    pub model: String,
    pub database: DatabaseHealth,
}

/// The database's part of the health.
#[derive(Debug, Serialize)]
pub struct DatabaseHealth {
    /// `memory`, `sqlite` or `postgres`.
    pub kind: &'static str,
    /// Whether it answered (`/readyz` only: `/healthz` does not ask it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// Why it does not answer (the store's message: where, never credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn health(state: &AppState, status: &'static str, database: DatabaseHealth) -> Json<Health> {
    Json(Health {
        status,
        version: env!("CARGO_PKG_VERSION"),
        model: state.runtime.models().label(),
        database,
    })
}

async fn healthz(State(state): State<AppState>) -> Json<Health> {
    let database = DatabaseHealth {
        kind: state.runtime.store.database(),
        ok: None,
        error: None,
    };
    health(&state, "ok", database)
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let store = &state.runtime.store;
    let error = match tokio::time::timeout(READY_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.report()),
        Err(_) => Some(format!(
            "the database did not answer within {} s",
            READY_TIMEOUT.as_secs()
        )),
    };
    let draining = state.edge.draining.is_cancelled();
    let status = match (&error, draining) {
        (_, true) => "draining",
        (Some(_), false) => "unavailable",
        (None, false) => "ok",
    };
    let code = if status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let database = DatabaseHealth {
        kind: store.database(),
        ok: Some(error.is_none()),
        error,
    };
    (code, health(&state, status, database))
}

async fn metrics(State(state): State<AppState>, client: Client) -> Result<Response, ApiError> {
    if !client.principal().sees_everything() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_allowed",
            "Only an admin (or the API key) may read the server's metrics.",
        ));
    }
    let runtime = &state.runtime;
    let live_instances =
        match tokio::time::timeout(READY_TIMEOUT, runtime.store.live_instances()).await {
            Ok(Ok(n)) => Some(n),
            // Left out of this scrape: Prometheus shows the gap, `store_errors` the failure.
            Ok(Err(_)) | Err(_) => None,
        };
    // Counted by the database (ADR 0039); left out of this scrape (no series) when it does not
    // answer in time, as above.
    let waiting = match tokio::time::timeout(READY_TIMEOUT, runtime.store.waiting_counts()).await {
        Ok(Ok(counts)) => counts,
        Ok(Err(_)) | Err(_) => Vec::new(),
    };
    let gauges = Gauges {
        waiting,
        turns_running: runtime.turns_running() as u64,
        live_instances,
        websockets: state.edge.sockets.len() as u64,
    };
    let body = runtime.metrics.render(gauges);
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response())
}
