//! A commit in Postgres: the record encoded before a connection is taken ([`Write`]), then
//! written in one transaction with its views, its ledger rows and its audit rows.

use deadpool_postgres::Transaction;

use super::execute_in;
use crate::agent::{
    store::{StoreError, encode::Write},
    tools::Transaction as Payment,
};

/// Writes one record, its views, its ledger rows and its audit rows inside `tx`, if the
/// session's row is at version `expected` (0: not there yet); returns the row's new version. A
/// row at another version is a conflict: another instance committed it meanwhile.
pub(super) async fn write_one(
    tx: &Transaction<'_>,
    w: &Write,
    expected: i64,
    running_on: Option<&str>,
) -> Result<i64, StoreError> {
    let context = "cannot write the session";
    let stmt = tx
        .prepare_cached(
            "INSERT INTO sessions (id, created_at_ms, updated_at_ms, turn_status, wallet, turn,
                                   tool_state, owner, running_on, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $10, 1)
             ON CONFLICT (id) DO UPDATE SET
                 updated_at_ms = EXCLUDED.updated_at_ms, turn_status = EXCLUDED.turn_status,
                 wallet = EXCLUDED.wallet, turn = EXCLUDED.turn,
                 tool_state = EXCLUDED.tool_state, running_on = EXCLUDED.running_on,
                 owner = COALESCE(sessions.owner, EXCLUDED.owner),
                 version = sessions.version + 1
             WHERE sessions.version = $9
             RETURNING version",
        )
        .await
        .map_err(super::err(context))?;
    let written = tx
        .query_opt(
            &stmt,
            &[
                &w.id,
                &w.created_at_ms,
                &w.updated_at_ms,
                &w.status,
                &w.wallet,
                &w.turn,
                &w.tool_state,
                &w.owner,
                &expected,
                &running_on,
            ],
        )
        .await
        .map_err(super::err(context))?;
    let Some(row) = written else {
        return Err(StoreError::conflict(format!(
            "session {} changed in the database since this instance read it",
            w.id
        )));
    };
    let version: i64 = row.try_get(0).map_err(super::err(context))?;
    write_entries(tx, w).await?;

    // The turn's log: written when the turn pauses, and with every commit of an instance that
    // others may follow (a running or finished turn's too); gone when a turn ends without one.
    if let Some((turn_id, entries)) = &w.log {
        execute_in(
            tx,
            "INSERT INTO paused_turn_logs (session_id, turn_id, entries) VALUES ($1, $2, $3)
             ON CONFLICT (session_id) DO UPDATE SET
                 turn_id = EXCLUDED.turn_id, entries = EXCLUDED.entries",
            &[&w.id, turn_id, entries],
            "cannot write the paused turn's log",
        )
        .await?;
    } else if w.turn_over {
        execute_in(
            tx,
            "DELETE FROM paused_turn_logs WHERE session_id = $1",
            &[&w.id],
            "cannot drop the paused turn's log",
        )
        .await?;
    }

    // The indexed views of the record, rewritten every time (the waiting approvals by
    // `super::inbox::write`, after this).
    execute_in(
        tx,
        "DELETE FROM pending_browser_calls WHERE session_id = $1",
        &[&w.id],
        "cannot clear the pending calls",
    )
    .await?;
    for b in &w.browser_calls {
        execute_in(
            tx,
            "INSERT INTO pending_browser_calls (tool_call_id, session_id, tool, args, deadline_ms)
             VALUES ($1, $2, $3, $4, $5)",
            &[&b.tool_call_id, &w.id, &b.tool, &b.args, &b.deadline_ms],
            "cannot write a pending browser call",
        )
        .await?;
    }
    write_ledger(tx, &w.id, &w.ledger).await?;
    // Last: the chain's head stays locked from here until the commit (`chain`).
    super::chain::append(tx, &w.audit).await?;
    Ok(version)
}

/// Writes what changed in the record's lists and answered approvals (ADR 0038): each list's rows
/// from its first changed entry on are replaced (one statement each), the approvals' rows that
/// changed are upserted or deleted.
async fn write_entries(tx: &Transaction<'_>, w: &Write) -> Result<(), StoreError> {
    let context = "cannot write the session's entries";
    for change in &w.entries {
        let list = change.list.code() as i16;
        execute_in(
            tx,
            "DELETE FROM session_entries WHERE session_id = $1 AND list = $2 AND position >= $3",
            &[&w.id, &list, &change.from],
            context,
        )
        .await?;
        if change.bodies.is_empty() {
            continue;
        }
        execute_in(
            tx,
            "INSERT INTO session_entries (session_id, list, position, body)
             SELECT $1::TEXT, $2::SMALLINT, $3::BIGINT + t.i - 1, t.body
             FROM UNNEST($4::TEXT[]) WITH ORDINALITY AS t (body, i)",
            &[&w.id, &list, &change.from, &change.bodies],
            context,
        )
        .await?;
    }
    let r = &w.resolutions;
    if r.whole {
        execute_in(
            tx,
            "DELETE FROM session_resolutions WHERE session_id = $1",
            &[&w.id],
            context,
        )
        .await?;
    }
    if !r.removed.is_empty() {
        execute_in(
            tx,
            "DELETE FROM session_resolutions WHERE session_id = $1 AND approval_id = ANY($2)",
            &[&w.id, &r.removed],
            context,
        )
        .await?;
    }
    if !r.upserts.is_empty() {
        let (ids, bodies): (Vec<&str>, Vec<&str>) = r
            .upserts
            .iter()
            .map(|(id, body)| (id.as_str(), body.as_str()))
            .unzip();
        execute_in(
            tx,
            "INSERT INTO session_resolutions (session_id, approval_id, body)
             SELECT $1::TEXT, t.approval_id, t.body FROM UNNEST($2::TEXT[], $3::TEXT[])
                 AS t (approval_id, body)
             ON CONFLICT (session_id, approval_id) DO UPDATE SET body = EXCLUDED.body",
            &[&w.id, &ids, &bodies],
            context,
        )
        .await?;
    }
    Ok(())
}

/// Inserts the payments a commit carries (the new ones) in one statement; the ones already there
/// are skipped (payments are never undone, and a transaction id is written once, whichever instance
/// commits it).
async fn write_ledger(
    tx: &Transaction<'_>,
    session: &str,
    ledger: &[Payment],
) -> Result<(), StoreError> {
    if ledger.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = ledger.iter().map(|t| t.id.as_str()).collect();
    let calls: Vec<&str> = ledger.iter().map(|t| t.tool_call_id.as_str()).collect();
    let amounts: Vec<i64> = ledger.iter().map(|t| t.amount_cents).collect();
    let currencies: Vec<&str> = ledger.iter().map(|t| t.currency.as_str()).collect();
    let recipients: Vec<&str> = ledger.iter().map(|t| t.recipient.as_str()).collect();
    let descriptions: Vec<&str> = ledger.iter().map(|t| t.description.as_str()).collect();
    let balances: Vec<i64> = ledger.iter().map(|t| t.balance_after_cents).collect();
    let times: Vec<i64> = ledger.iter().map(|t| t.timestamp_ms).collect();
    let paid_minor: Vec<Option<i64>> = ledger
        .iter()
        .map(|t| t.paid.as_ref().map(|p| p.amount_minor))
        .collect();
    let paid_currency: Vec<Option<&str>> = ledger
        .iter()
        .map(|t| t.paid.as_ref().map(|p| p.currency.as_str()))
        .collect();
    execute_in(
        tx,
        "INSERT INTO ledger (transaction_id, session_id, tool_call_id, amount_cents, currency,
             recipient, description, balance_after_cents, at_ms, paid_minor, paid_currency)
         SELECT t.transaction_id, $1::TEXT, t.tool_call_id, t.amount_cents, t.currency,
                t.recipient, t.description, t.balance_after_cents, t.at_ms, t.paid_minor,
                t.paid_currency
         FROM UNNEST($2::TEXT[], $3::TEXT[], $4::BIGINT[], $5::TEXT[], $6::TEXT[], $7::TEXT[],
                     $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::TEXT[])
              AS t (transaction_id, tool_call_id, amount_cents, currency, recipient, description,
                    balance_after_cents, at_ms, paid_minor, paid_currency)
         ON CONFLICT (transaction_id) DO NOTHING",
        &[
            &session,
            &ids,
            &calls,
            &amounts,
            &currencies,
            &recipients,
            &descriptions,
            &balances,
            &times,
            &paid_minor,
            &paid_currency,
        ],
        "cannot write the ledger",
    )
    .await?;
    Ok(())
}
