//! The audit log over HTTP: `GET /api/audit` (JSON, newest first, paged with `before`) and
//! `GET /api/audit/export` (JSONL, one record per line, oldest first — the form log tools
//! ingest). Both take the same filters: `session`, `tool`, `kind`, `before`, `limit`.
//!
//! The export of the whole log (no filter, by someone who may read all of it) is the verifiable
//! one (ADR 0029): a header, the policy texts, every record with its chain hash, every signed
//! checkpoint, up to a checkpoint signed for it. Beside it: `GET /api/audit/receipts/{approval}`
//! (the receipt of an executed call, JSON), `GET /api/audit/chain` (how far the server checked
//! its chain), `GET /api/audit/checkpoints` (JSONL, to publish elsewhere) and the public
//! `GET /.well-known/countersign-audit-key`.

use axum::{
    Json, Router,
    body::Body,
    extract::{Path, Query, State},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::Deserialize;

use super::{edge::Client, error::ApiError};
use crate::{
    agent::people::Principal,
    agent::store::{AuditKind, AuditQuery, AuditRecord},
    transport::state::AppState,
};

/// Where the checkpoints' public key is served (to anyone).
pub const KEY_PATH: &str = "/.well-known/countersign-audit-key";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/audit", get(list))
        .route("/api/audit/export", get(export))
        .route("/api/audit/chain", get(chain))
        .route("/api/audit/checkpoints", get(checkpoints))
        .route("/api/audit/receipts/{approval}", get(receipt))
        .route(KEY_PATH, get(key))
}

/// The query string, as typed by a person (empty fields mean "any").
#[derive(Debug, Default, Deserialize)]
pub struct AuditParams {
    session: Option<String>,
    tool: Option<String>,
    kind: Option<String>,
    before: Option<String>,
    limit: Option<String>,
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl AuditParams {
    /// The store query, or a 400 naming the bad parameter.
    pub fn query(self, default_limit: usize) -> Result<AuditQuery, ApiError> {
        let number = |name: &'static str, value: Option<String>| -> Result<Option<i64>, ApiError> {
            non_empty(value)
                .map(|v| {
                    v.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        ApiError::bad_request(
                            "invalid_query",
                            format!("`{name}` must be a positive whole number, not {v:?}"),
                        )
                    })
                })
                .transpose()
        };
        let kind = match non_empty(self.kind) {
            None => None,
            Some(k) => Some(AuditKind::parse(&k).ok_or_else(|| {
                let known: Vec<&str> = AuditKind::ALL.iter().map(|k| k.as_str()).collect();
                ApiError::bad_request(
                    "invalid_query",
                    format!("`kind` must be one of {}, not {k:?}", known.join(", ")),
                )
            })?),
        };
        Ok(AuditQuery {
            session: non_empty(self.session),
            tool: non_empty(self.tool),
            kind,
            before: number("before", self.before)?,
            approval: None,
            limit: Some(
                number("limit", self.limit)?
                    .map(|n| n as usize)
                    .unwrap_or(default_limit),
            ),
            visible_to: None,
        })
    }
}

async fn records(state: &AppState, query: &AuditQuery) -> Result<Vec<AuditRecord>, ApiError> {
    state.runtime.store.audit(query).await.map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the audit log cannot be read right now: {e}"),
        )
    })
}

async fn list(
    State(state): State<AppState>,
    Query(params): Query<AuditParams>,
    client: Client,
) -> Result<Json<Vec<AuditRecord>>, ApiError> {
    let mut query = params.query(AuditQuery::DEFAULT_LIMIT)?;
    query.visible_to = visible_to(&client.principal());
    Ok(Json(records(&state, &query).await?))
}

/// Whose events a principal may read: a person who is not an admin reads their own chats' and
/// their own answers; admins and the operator read everything.
pub fn visible_to(principal: &Principal) -> Option<String> {
    (!principal.sees_everything()).then(|| principal.id().to_owned())
}

async fn export(
    State(state): State<AppState>,
    Query(params): Query<AuditParams>,
    client: Client,
) -> Result<Response, ApiError> {
    let whole = params
        .session
        .iter()
        .chain(&params.tool)
        .chain(&params.kind)
        .chain(&params.before)
        .chain(&params.limit)
        .all(|v| v.trim().is_empty());
    let mut query = params.query(AuditQuery::MAX_LIMIT)?;
    query.visible_to = visible_to(&client.principal());
    if whole && query.visible_to.is_none() {
        return verifiable(&state).await;
    }
    let mut rows = records(&state, &query).await?;
    rows.reverse();
    let mut body = String::new();
    for row in &rows {
        if let Ok(line) = serde_json::to_string(row) {
            body.push_str(&line);
            body.push('\n');
        }
    }
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"countersign-audit.jsonl\""),
    );
    Ok(response)
}

fn not_signed() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "audit_not_signed",
        "the audit log is not being signed on this server",
    )
}

fn export_error(e: crate::agent::audit::export::ExportError) -> ApiError {
    use crate::agent::audit::export::ExportError;
    match e {
        ExportError::NoExecution(_) => {
            ApiError::new(StatusCode::NOT_FOUND, "no_receipt", e.to_string())
        }
        ExportError::Notary(_) => {
            ApiError::new(StatusCode::CONFLICT, "audit_chain_broken", e.to_string())
        }
        ExportError::Store(e) => {
            tracing::error!(error = %e.report(), "cannot read the audit chain");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "the audit log cannot be read right now",
            )
        }
    }
}

fn download(mut response: Response, content_type: &'static str, filename: String) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// The whole log, verifiable: streamed page by page.
async fn verifiable(state: &AppState) -> Result<Response, ApiError> {
    use crate::agent::audit::export::Export;
    let source = state.audit_source().ok_or_else(not_signed)?;
    let export = Export::start(source).await.map_err(export_error)?;
    let body = futures::stream::try_unfold(export, |mut export| async move {
        let lines = export.next().await?;
        Ok::<_, crate::agent::audit::export::ExportError>(
            (!lines.is_empty()).then_some((lines, export)),
        )
    });
    Ok(download(
        Body::from_stream(body).into_response(),
        "application/x-ndjson; charset=utf-8",
        "countersign-audit.jsonl".into(),
    ))
}

/// The receipt of approval `approval`'s executed call, for someone who may read its chat or
/// took part in it.
async fn receipt(
    State(state): State<AppState>,
    Path(approval): Path<String>,
    client: Client,
) -> Result<Response, ApiError> {
    let source = state.audit_source().ok_or_else(not_signed)?;
    // Whether the reader sees any of the call's records (their chat's, their own answers).
    let seen = records(
        &state,
        &AuditQuery {
            approval: Some(approval.clone()),
            limit: Some(1),
            visible_to: visible_to(&client.principal()),
            ..AuditQuery::default()
        },
    )
    .await?;
    if seen.is_empty() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_receipt",
            format!("no executed call of approval {approval} that you may read"),
        ));
    }
    let receipt = crate::agent::audit::export::receipt(&source, &approval)
        .await
        .map_err(export_error)?;
    let safe: String = approval
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(64)
        .collect();
    Ok(download(
        Json(receipt).into_response(),
        "application/json",
        format!("countersign-receipt-{safe}.json"),
    ))
}

/// How far the server checked its chain (the `/audit` page's line).
async fn chain(
    State(state): State<AppState>,
) -> Result<Json<crate::protocol::audit::ChainStatus>, ApiError> {
    let notary = state.notary.get().ok_or_else(not_signed)?;
    Ok(Json(notary.status_now().await))
}

/// Every checkpoint, oldest first (JSONL): what an operator copies elsewhere.
async fn checkpoints(State(state): State<AppState>) -> Result<Response, ApiError> {
    let mut body = String::new();
    let mut after = 0;
    loop {
        let page = state
            .runtime
            .store
            .checkpoints(after, 1_000)
            .await
            .map_err(|e| export_error(e.into()))?;
        let Some(last) = page.last().map(|c| c.seq) else {
            break;
        };
        for c in &page {
            if let Ok(line) = serde_json::to_string(c) {
                body.push_str(&line);
                body.push('\n');
            }
        }
        after = last;
    }
    Ok(download(
        body.into_response(),
        "application/x-ndjson; charset=utf-8",
        "countersign-checkpoints.jsonl".into(),
    ))
}

/// The checkpoints' public key: `{"algorithm": "Ed25519", "key": hex}`.
async fn key(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let notary = state.notary.get().ok_or_else(not_signed)?;
    Ok(Json(serde_json::json!({
        "algorithm": "Ed25519",
        "key": notary.public_key(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(kind: Option<&str>, limit: Option<&str>) -> AuditParams {
        AuditParams {
            session: Some("  ".into()),
            tool: Some("process_payment".into()),
            kind: kind.map(Into::into),
            before: None,
            limit: limit.map(Into::into),
        }
    }

    #[test]
    fn filters_are_read_and_bad_ones_named() {
        let q = params(Some("denied"), Some("5")).query(200).unwrap();
        assert_eq!(q.session, None, "blank means any");
        assert_eq!(q.tool.as_deref(), Some("process_payment"));
        assert_eq!(q.kind, Some(AuditKind::Denied));
        assert_eq!(q.limit, Some(5));
        let e = params(Some("nope"), None).query(200).unwrap_err();
        assert!(e.message.contains("`kind` must be one of"), "{e}");
        let e = params(None, Some("-3")).query(200).unwrap_err();
        assert!(e.message.contains("`limit`"), "{e}");
    }
}
