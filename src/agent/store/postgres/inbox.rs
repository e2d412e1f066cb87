//! The inbox's rows in Postgres (ADR 0039): a session's waiting approvals and their keys,
//! written in its commit's transaction (which then names the approvals that came, changed or
//! went to the other instances), and the reads of the inbox page, one approval and `/metrics`.

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use super::{PostgresStore, err, execute_in};
use crate::agent::{
    inbox::{InboxQuery, Waiting, WaitingCounts},
    store::{
        StoreError,
        encode::{PendingApprovalRow, decode_waiting},
        inbox_sql,
    },
};

/// Rewrites `session`'s waiting approvals and their keys; returns the ids of those that came,
/// changed (a signature, an edit) or went.
pub(super) async fn write(
    tx: &Transaction<'_>,
    session: &str,
    approvals: &[PendingApprovalRow],
) -> Result<Vec<String>, StoreError> {
    execute_in(
        tx,
        "DELETE FROM approval_keys WHERE session_id = $1",
        &[&session],
        "cannot clear the pending approvals' keys",
    )
    .await?;
    let context = "cannot clear the pending approvals";
    let stmt = tx
        .prepare_cached(
            "DELETE FROM pending_approvals WHERE session_id = $1 RETURNING approval_id, entry",
        )
        .await
        .map_err(err(context))?;
    let mut before: BTreeMap<String, Option<String>> = BTreeMap::new();
    for row in tx.query(&stmt, &[&session]).await.map_err(err(context))? {
        before.insert(
            row.try_get(0).map_err(err(context))?,
            row.try_get(1).map_err(err(context))?,
        );
    }
    let mut changed: Vec<String> = Vec::new();
    for a in approvals {
        if before.remove(&a.approval_id).flatten().as_deref() != Some(a.entry.as_str()) {
            changed.push(a.approval_id.clone());
        }
    }
    changed.extend(before.into_keys());
    if approvals.is_empty() {
        return Ok(changed);
    }
    let column =
        |f: fn(&PendingApprovalRow) -> &str| -> Vec<&str> { approvals.iter().map(f).collect() };
    let ids = column(|a| &a.approval_id);
    let calls = column(|a| &a.tool_call_id);
    let tools = column(|a| &a.tool);
    let args = column(|a| &a.args);
    let owners = column(|a| &a.owner);
    let entries = column(|a| &a.entry);
    let rules: Vec<Option<&str>> = approvals.iter().map(|a| a.rule.as_deref()).collect();
    let asked: Vec<i64> = approvals.iter().map(|a| a.requested_at_ms).collect();
    let deadlines: Vec<i64> = approvals.iter().map(|a| a.deadline_ms).collect();
    execute_in(
        tx,
        "INSERT INTO pending_approvals (approval_id, session_id, tool_call_id, tool, args,
             requested_at_ms, deadline_ms, owner, rule, entry)
         SELECT a.approval_id, $1::TEXT, a.tool_call_id, a.tool, a.args, a.requested_at_ms,
                a.deadline_ms, a.owner, a.rule, a.entry
         FROM UNNEST($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::BIGINT[], $7::BIGINT[],
                     $8::TEXT[], $9::TEXT[], $10::TEXT[])
              AS a (approval_id, tool_call_id, tool, args, requested_at_ms, deadline_ms, owner,
                    rule, entry)",
        &[
            &session, &ids, &calls, &tools, &args, &asked, &deadlines, &owners, &rules, &entries,
        ],
        "cannot write the pending approvals",
    )
    .await?;
    let (mut keys, mut key_asked, mut key_ids, mut key_deadlines) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for a in approvals {
        for key in &a.keys {
            keys.push(key.as_str());
            key_asked.push(a.requested_at_ms);
            key_ids.push(a.approval_id.as_str());
            key_deadlines.push(a.deadline_ms);
        }
    }
    execute_in(
        tx,
        "INSERT INTO approval_keys (key, requested_at_ms, approval_id, deadline_ms, session_id)
         SELECT k.key, k.requested_at_ms, k.approval_id, k.deadline_ms, $1::TEXT
         FROM UNNEST($2::TEXT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[])
              AS k (key, requested_at_ms, approval_id, deadline_ms)",
        &[&session, &keys, &key_asked, &key_ids, &key_deadlines],
        "cannot write the pending approvals' keys",
    )
    .await?;
    Ok(changed)
}

impl PostgresStore {
    /// One page of what `query` selects.
    pub(super) async fn inbox_page(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        if inbox_sql::empty(query) {
            return Ok(Vec::new());
        }
        let (now, at, id, limit) = inbox_sql::page_params(query)?;
        let sql = inbox_sql::page_sql(
            query.keys.len(),
            &inbox_sql::SqlSpelling {
                mark: |n| format!("${n}"),
                id_collation: " COLLATE \"default\"",
            },
        );
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&now, &at, &id, &limit];
        params.extend(query.keys.iter().map(|k| k as &(dyn ToSql + Sync)));
        let context = "cannot read the inbox";
        let mut found = Vec::new();
        for row in self.rows(&sql, &params, context).await? {
            let approval_id: String = row.try_get(0).map_err(err(context))?;
            // A row without an entry is found by no key: its keys are written with it.
            if let Some(entry) = row.try_get::<_, Option<String>>(1).map_err(err(context))? {
                found.push(decode_waiting(&approval_id, &entry)?);
            }
        }
        Ok(found)
    }

    /// The approval `approval_id`, if it waits (and was written with its entry).
    pub(super) async fn waiting_one(
        &self,
        approval_id: &str,
    ) -> Result<Option<Waiting>, StoreError> {
        let context = "cannot look up an approval";
        let Some(row) = self
            .row(
                "SELECT entry FROM pending_approvals WHERE approval_id = $1",
                &[&approval_id],
                context,
            )
            .await?
        else {
            return Ok(None);
        };
        row.try_get::<_, Option<String>>(0)
            .map_err(err(context))?
            .map(|entry| decode_waiting(approval_id, &entry))
            .transpose()
    }

    /// How many approvals wait, by tool and rule.
    pub(super) async fn counts(&self) -> Result<WaitingCounts, StoreError> {
        let context = "cannot count the waiting approvals";
        self.rows(
            "SELECT tool, rule, count(*) FROM pending_approvals GROUP BY tool, rule
             ORDER BY tool, rule",
            &[],
            context,
        )
        .await?
        .iter()
        .map(|row| {
            let n: i64 = row.try_get(2)?;
            Ok((
                (row.try_get(0)?, row.try_get(1)?),
                u64::try_from(n).unwrap_or(0),
            ))
        })
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(err(context))
    }

    /// Sessions with waiting approvals written before the inbox's columns.
    pub(super) async fn without_entries(&self) -> Result<Vec<String>, StoreError> {
        self.strings(
            "SELECT DISTINCT session_id FROM pending_approvals WHERE entry IS NULL
             ORDER BY session_id",
            &[],
            "cannot look for approvals the inbox does not find",
        )
        .await
    }
}
