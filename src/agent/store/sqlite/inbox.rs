//! The inbox's rows in SQLite (ADR 0039): a session's waiting approvals and their keys, written
//! with its views, and the reads of the inbox page, one approval and `/metrics`.

use rusqlite::{Connection, OptionalExtension, params, params_from_iter, types::Value as Sql};

use super::err;
use crate::agent::{
    inbox::{InboxQuery, Waiting, WaitingCounts},
    store::{
        StoreError,
        encode::{PendingApprovalRow, decode_waiting},
        inbox_sql,
    },
};

/// Clears `session`'s waiting approvals and their keys.
pub(super) fn clear(tx: &Connection, session: &str) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM approval_keys WHERE session_id = ?1",
        "DELETE FROM pending_approvals WHERE session_id = ?1",
    ] {
        tx.prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute([session]))
            .map_err(err("cannot clear the pending approvals"))?;
    }
    Ok(())
}

/// Writes `session`'s waiting approvals and their keys (after [`clear`]).
pub(super) fn write(
    tx: &Connection,
    session: &str,
    approvals: &[PendingApprovalRow],
) -> Result<(), StoreError> {
    for a in approvals {
        tx.prepare_cached(
            "INSERT INTO pending_approvals (approval_id, session_id, tool_call_id, tool, args,
                 requested_at_ms, deadline_ms, owner, rule, entry)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                a.approval_id,
                session,
                a.tool_call_id,
                a.tool,
                a.args,
                a.requested_at_ms,
                a.deadline_ms,
                a.owner,
                a.rule,
                a.entry,
            ])
        })
        .map_err(err("cannot write a pending approval"))?;
        for key in &a.keys {
            tx.prepare_cached(
                "INSERT INTO approval_keys (key, requested_at_ms, approval_id, deadline_ms,
                     session_id)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    key,
                    a.requested_at_ms,
                    a.approval_id,
                    a.deadline_ms,
                    session
                ])
            })
            .map_err(err("cannot write a pending approval's keys"))?;
        }
    }
    Ok(())
}

/// One page of what `query` selects.
pub(super) fn page(conn: &Connection, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
    if inbox_sql::empty(query) {
        return Ok(Vec::new());
    }
    let (now, at, id, limit) = inbox_sql::page_params(query)?;
    let sql = inbox_sql::page_sql(
        query.keys.len(),
        &inbox_sql::SqlSpelling {
            mark: |n| format!("?{n}"),
            id_collation: "",
        },
    );
    let mut values = vec![
        Sql::Integer(now),
        Sql::Integer(at),
        Sql::Text(id),
        Sql::Integer(limit),
    ];
    values.extend(query.keys.iter().cloned().map(Sql::Text));
    let context = "cannot read the inbox";
    let mut stmt = conn.prepare_cached(&sql).map_err(err(context))?;
    let rows = stmt
        .query_map(params_from_iter(values), |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
        })
        .map_err(err(context))?;
    let mut found = Vec::new();
    for row in rows {
        let (approval_id, entry) = row.map_err(err(context))?;
        // A row without an entry is found by no key: its keys are written with it.
        if let Some(entry) = entry {
            found.push(decode_waiting(&approval_id, &entry)?);
        }
    }
    Ok(found)
}

/// The approval `approval_id`, if it waits (and was written with its entry).
pub(super) fn one(conn: &Connection, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
    let entry: Option<Option<String>> = conn
        .prepare_cached("SELECT entry FROM pending_approvals WHERE approval_id = ?1")
        .and_then(|mut stmt| stmt.query_row([approval_id], |row| row.get(0)).optional())
        .map_err(err("cannot look up an approval"))?;
    entry
        .flatten()
        .map(|entry| decode_waiting(approval_id, &entry))
        .transpose()
}

/// How many approvals wait, by tool and rule.
pub(super) fn counts(conn: &Connection) -> Result<WaitingCounts, StoreError> {
    let context = "cannot count the waiting approvals";
    let mut stmt = conn
        .prepare_cached(
            "SELECT tool, rule, count(*) FROM pending_approvals GROUP BY tool, rule
             ORDER BY tool, rule",
        )
        .map_err(err(context))?;
    let rows = stmt
        .query_map([], |row| {
            Ok(((row.get(0)?, row.get(1)?), row.get::<_, i64>(2)?))
        })
        .map_err(err(context))?;
    rows.map(|row| {
        row.map(|(key, n)| (key, u64::try_from(n).unwrap_or(0)))
            .map_err(err(context))
    })
    .collect()
}

/// Sessions with waiting approvals written before the inbox's columns.
pub(super) fn unindexed(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let context = "cannot look for approvals the inbox does not find";
    let mut stmt = conn
        .prepare_cached(
            "SELECT DISTINCT session_id FROM pending_approvals WHERE entry IS NULL
             ORDER BY session_id",
        )
        .map_err(err(context))?;
    let rows = stmt.query_map([], |row| row.get(0)).map_err(err(context))?;
    rows.map(|row| row.map_err(err(context))).collect()
}
