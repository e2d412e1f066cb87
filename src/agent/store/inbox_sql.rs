//! The inbox's queries, as SQLite and Postgres both run them (ADR 0039): one page of the waiting
//! approvals found under any of a person's keys, oldest first.
//!
//! Each key is read as its own range of `approval_keys`' primary key (key, requested_at_ms,
//! approval_id) after the cursor, at most a page of it; the ranges are merged, an approval found
//! under two keys once, and the page's entries read by their ids. The cost is a page per key,
//! whatever the number of approvals waiting.

use super::StoreError;
use crate::agent::{clock::Millis, inbox::InboxQuery};

/// How a database spells what the page query needs.
pub(crate) struct SqlSpelling {
    /// The n-th placeholder (`?n`, `$n`).
    pub(crate) mark: fn(usize) -> String,
    /// What makes an `approval_keys.approval_id` comparable with `pending_approvals`' key by
    /// its index: on Postgres the keys' ids sort byte-wise (`COLLATE "C"`) and the pending
    /// approvals' key has the database's collation, whose index an equality in "C" cannot use
    /// (measured: a sequential scan of every waiting approval per page).
    pub(crate) id_collation: &'static str,
}

/// The page query for `keys` keys in `dialect`. Its parameters: 1 the time deadlines must be
/// after, 2 and 3 the cursor (requested_at_ms, approval_id), 4 the page size, then the keys.
pub(crate) fn page_sql(keys: usize, dialect: &SqlSpelling) -> String {
    let mark = dialect.mark;
    let ranges: Vec<String> = (0..keys)
        .map(|i| {
            format!(
                "SELECT requested_at_ms, approval_id FROM (
                     SELECT requested_at_ms, approval_id FROM approval_keys
                     WHERE key = {key} AND deadline_ms > {now}
                       AND (requested_at_ms, approval_id) > ({at}, {id})
                     ORDER BY requested_at_ms, approval_id LIMIT {limit}) AS k{i}",
                key = mark(5 + i),
                now = mark(1),
                at = mark(2),
                id = mark(3),
                limit = mark(4),
            )
        })
        .collect();
    format!(
        "SELECT p.approval_id, p.entry
         FROM ({}) AS found
         JOIN pending_approvals p ON p.approval_id = found.approval_id{}
         ORDER BY found.requested_at_ms, found.approval_id LIMIT {}",
        ranges.join(" UNION "),
        dialect.id_collation,
        mark(4)
    )
}

/// A query's scalar parameters: (now, cursor's time, cursor's id, limit).
pub(crate) fn page_params(query: &InboxQuery) -> Result<(Millis, Millis, String, i64), StoreError> {
    let (at, id) = query
        .after
        .as_ref()
        .map_or((Millis::MIN, String::new()), |c| {
            (c.requested_at_ms, c.approval_id.clone())
        });
    let limit = i64::try_from(query.limit)
        .map_err(|_| StoreError::new("an inbox page of more rows than the database counts"))?;
    Ok((query.now.unwrap_or(Millis::MIN), at, id, limit))
}

/// `query` asks for nothing (no keys, or a page of none).
pub(crate) fn empty(query: &InboxQuery) -> bool {
    query.keys.is_empty() || query.limit == 0
}
