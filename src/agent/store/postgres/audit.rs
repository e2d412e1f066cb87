//! Reading the audit log by its filters (session, tool, kind, approval, who may see it), newest
//! first: one query built from the filters given, its values bound, never spliced in.

use tokio_postgres::{Row, types::ToSql};

use super::{PostgresStore, err};
use crate::agent::store::{AuditQuery, AuditRecord, StoreError, encode};

/// The columns an audit record is read from, in the order [`record`] reads them.
pub(super) const RECORD_COLUMNS: &str = "seq, event, hash";

/// One audit row (`SELECT` [`RECORD_COLUMNS`]) as its record: the one reader of an audit row,
/// for a page of the log and for the chain alike.
pub(super) fn record(row: &Row, context: &str) -> Result<AuditRecord, StoreError> {
    let seq: i64 = row.try_get(0).map_err(err(context))?;
    let event: &str = row.try_get(1).map_err(err(context))?;
    Ok(AuditRecord {
        seq,
        event: encode::stored_event(seq, event)?,
        hash: row.try_get(2).map_err(err(context))?,
    })
}

/// A bound parameter of a query built at run time (the audit log's filters).
enum Param {
    Text(String),
    Integer(i64),
}

impl Param {
    fn as_sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Param::Text(text) => text,
            Param::Integer(n) => n,
        }
    }
}

/// Adds `value` to `params`: its placeholder (`$3`).
fn bind(params: &mut Vec<Param>, value: Param) -> String {
    params.push(value);
    format!("${}", params.len())
}

impl PostgresStore {
    /// The audit log's records that match `query`, newest first (`/api/audit`).
    pub(super) async fn query_audit(
        &self,
        query: &AuditQuery,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let context = "cannot query the audit log";
        let mut sql = format!("SELECT {RECORD_COLUMNS} FROM audit WHERE TRUE");
        let mut params = Vec::new();
        if let Some(session) = &query.session {
            let p = bind(&mut params, Param::Text(session.clone()));
            sql.push_str(&format!(" AND session_id = {p}"));
        }
        if let Some(tool) = &query.tool {
            let p = bind(&mut params, Param::Text(tool.clone()));
            sql.push_str(&format!(" AND tool = {p}"));
        }
        if let Some(kind) = query.kind {
            let p = bind(&mut params, Param::Text(kind.as_str().to_owned()));
            sql.push_str(&format!(" AND kind = {p}"));
        }
        if let Some(before) = query.before {
            let p = bind(&mut params, Param::Integer(before));
            sql.push_str(&format!(" AND seq < {p}"));
        }
        if let Some(approval) = &query.approval {
            let p = bind(&mut params, Param::Text(approval.clone()));
            sql.push_str(&format!(" AND approval_id = {p}"));
        }
        if let Some(person) = &query.visible_to {
            let p = bind(&mut params, Param::Text(person.clone()));
            let local = bind(
                &mut params,
                Param::Text(crate::agent::people::LOCAL.to_owned()),
            );
            sql.push_str(&format!(
                " AND (session_id IN (SELECT id FROM sessions WHERE coalesce(owner, {local}) = {p})
                       OR (event::json -> 'actor' ->> 'person') = {p})"
            ));
        }
        let limit = i64::try_from(query.limit()).unwrap_or(i64::MAX);
        let p = bind(&mut params, Param::Integer(limit));
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT {p}"));
        let bound: Vec<&(dyn ToSql + Sync)> = params.iter().map(Param::as_sql).collect();
        // At most 64 shapes of this query: each is prepared once per connection.
        let rows = self.rows(&sql, &bound, context).await?;
        rows.iter().map(|row| record(row, context)).collect()
    }
}
