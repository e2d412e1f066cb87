//! The audit log over HTTP: `GET /api/audit` (JSON, newest first, paged with `before`) and
//! `GET /api/audit/export` (JSONL, one record per line, oldest first — the form log tools
//! ingest). Both take the same filters: `session`, `tool`, `kind`, `before`, `limit`.

use axum::{
    Json, Router,
    extract::{Query, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde::Deserialize;

use super::{edge::Client, error::ApiError};
use crate::{
    agent::store::{AuditKind, AuditQuery, AuditRecord},
    people::Principal,
    state::AppState,
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/audit", get(list))
        .route("/api/audit/export", get(export))
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
    match principal {
        Principal::Person { id, roles, .. } if !roles.contains(crate::people::ADMIN) => {
            Some(id.clone())
        }
        _ => None,
    }
}

async fn export(
    State(state): State<AppState>,
    Query(params): Query<AuditParams>,
    client: Client,
) -> Result<Response, ApiError> {
    let mut query = params.query(AuditQuery::MAX_LIMIT)?;
    query.visible_to = visible_to(&client.principal());
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
