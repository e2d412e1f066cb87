//! The policy's state in SQLite: grants and their use (migrations 8 and 13), the day's spending
//! and the reservations of calls about to run ([`crate::agent::store::reservations`]).
//!
//! One instance writes a SQLite file: a reservation reads the day's spending on the reader,
//! decides, and writes its claims on the writer, one reservation at a time (the store's
//! `reserving` lock); a grant's use still only moves by a conditional update that never passes
//! its budget.
//!
//! Reservations and releases are committed without waiting for the disk
//! (`synchronous=NORMAL` for their transactions): a WAL commit that waits for the disk makes
//! every commit before it durable, and whatever depends on a reservation having been kept — a
//! payment's commit, a call that must not run twice on disk as running — is such a commit. What
//! a power cut can lose is a reservation no commit followed: its call's effects were never on
//! disk either, and a release lost only counts a call that did not pay (never too little).

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStore, err};
use crate::{
    agent::{
        clock::Millis,
        policy::spending::day_of,
        store::{
            AuditEvent, Claim, GrantUse, PolicyStore, Reserved, Spent, StoreError, Unused,
            encode::{Chained, to_json},
        },
    },
    protocol::grant::Grant,
};

/// Runs `f` on the writer's connection with commits that do not wait for the disk (see the
/// module's documentation), then restores the connection's setting.
fn without_waiting<R>(
    conn: &mut Connection,
    f: impl FnOnce(&mut Connection) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let context = "cannot set how commits reach the disk";
    let was: i64 = conn
        .pragma_query_value(None, "synchronous", |row| row.get(0))
        .map_err(err(context))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(err(context))?;
    let done = f(conn);
    conn.pragma_update(None, "synchronous", was)
        .map_err(err(context))?;
    done
}

/// The day of `now`'s spending and every grant's use.
fn spent(conn: &Connection, now: Millis) -> Result<Spent, StoreError> {
    let context = "cannot add up the day's spending";
    let today_cents: i64 = conn
        .prepare_cached(
            "SELECT (SELECT COALESCE(SUM(cents), 0) FROM daily_spending WHERE day >= ?1)
                  + (SELECT COALESCE(SUM(r.cents), 0) FROM spending_reservations r
                     WHERE r.day = ?2 AND NOT EXISTS (
                         SELECT 1 FROM ledger l
                         WHERE l.session_id = r.session_id AND l.tool_call_id = r.tool_call_id))",
        )
        .and_then(|mut stmt| stmt.query_row(params![day_of(now), day_of(now)], |row| row.get(0)))
        .map_err(err(context))?;
    let grants = conn
        .prepare_cached("SELECT id, used_cents, uses, revoked_at_ms FROM grants")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| {
                Ok(GrantUse {
                    id: row.get(0)?,
                    used_cents: row.get(1)?,
                    uses: row.get::<_, i64>(2)?.max(0) as u64,
                    revoked_at_ms: row.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .map_err(err("cannot read the grants' use"))?;
    Ok(Spent {
        today_cents,
        grants,
    })
}

/// Keeps `claims` made at `now`, all or nothing.
fn keep(conn: &mut Connection, claims: &[Claim], now: Millis) -> Result<Reserved, StoreError> {
    let context = "cannot keep a reservation";
    let tx = conn.transaction().map_err(err(context))?;
    for claim in claims {
        let fresh = tx
            .prepare_cached(
                "INSERT INTO spending_reservations
                     (session_id, tool_call_id, day, cents, grant_id, at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (session_id, tool_call_id) DO NOTHING",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    claim.chat,
                    claim.call,
                    day_of(now),
                    claim.cents,
                    claim.grant,
                    now
                ])
            })
            .map_err(err(context))?
            == 1;
        let Some(grant) = claim.grant.as_ref().filter(|_| fresh) else {
            continue;
        };
        let taken = tx
            .prepare_cached(
                "UPDATE grants SET used_cents = used_cents + ?2, uses = uses + 1
                 WHERE id = ?1 AND revoked_at_ms IS NULL AND expires_at_ms > ?3
                     AND (max_cents IS NULL OR used_cents + ?2 <= max_cents)",
            )
            .and_then(|mut stmt| stmt.execute(params![grant, claim.cents, now]))
            .map_err(err(context))?;
        if taken == 0 {
            // Dropping the transaction rolls it back.
            return Ok(Reserved::Refused);
        }
    }
    // Reservations of payments made count no more (their ledger rows do), and those of calls
    // still in flight since the day before yesterday are of no use.
    tx.prepare_cached(
        "DELETE FROM spending_reservations
         WHERE day < ?1 OR EXISTS (
             SELECT 1 FROM ledger l
             WHERE l.session_id = spending_reservations.session_id
                 AND l.tool_call_id = spending_reservations.tool_call_id)",
    )
    .and_then(|mut stmt| stmt.execute([day_of(now) - 1]))
    .map_err(err(context))?;
    tx.commit().map_err(err(context))?;
    Ok(Reserved::Kept)
}

/// Lets the reservations of `unused` go, giving back their grant shares.
fn release(conn: &mut Connection, unused: &[Unused]) -> Result<(), StoreError> {
    let context = "cannot release a reservation";
    let tx = conn.transaction().map_err(err(context))?;
    for end in unused {
        let held: Option<(i64, Option<String>)> = tx
            .prepare_cached(
                "DELETE FROM spending_reservations WHERE session_id = ?1 AND tool_call_id = ?2
                 RETURNING cents, grant_id",
            )
            .and_then(|mut stmt| {
                stmt.query_row([&end.chat, &end.call], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(err(context))?;
        if let Some((cents, Some(grant))) = held {
            tx.prepare_cached(
                "UPDATE grants SET used_cents = MAX(used_cents - ?2, 0), uses = MAX(uses - 1, 0)
                 WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.execute(params![grant, cents]))
            .map_err(err(context))?;
        }
    }
    tx.commit().map_err(err(context))
}

#[async_trait]
impl PolicyStore for SqliteStore {
    async fn save_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        let body = to_json(grant)?;
        let grant = grant.clone();
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO grants (id, tool, chat, created_at_ms, expires_at_ms, revoked_at_ms,
                     body, max_cents, used_cents, uses)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT (id) DO UPDATE SET revoked_at_ms = excluded.revoked_at_ms,
                     body = excluded.body",
                params![
                    grant.id,
                    grant.tool,
                    grant.chat,
                    grant.created_at_ms,
                    grant.expires_at_ms,
                    grant.revoked_at_ms,
                    body,
                    grant.max_cents,
                    grant.used_cents,
                    i64::try_from(grant.uses).unwrap_or(i64::MAX),
                ],
            )
            .map_err(err("cannot write a grant"))?;
            Ok(())
        })
        .await
    }

    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.read(|conn| {
            let context = "cannot read the grants";
            let mut stmt = conn
                .prepare("SELECT id, body, used_cents, uses FROM grants ORDER BY created_at_ms, id")
                .map_err(err(context))?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, i64>(3)?,
                    ))
                })
                .map_err(err(context))?;
            let mut grants = Vec::new();
            for row in rows {
                let (id, body, used_cents, uses) = row.map_err(err(context))?;
                let grant: Grant = serde_json::from_str(&body)
                    .map_err(|e| StoreError::caused_by(format!("grant {id} is unreadable"), e))?;
                grants.push(Grant {
                    used_cents,
                    uses: uses.max(0) as u64,
                    ..grant
                });
            }
            Ok(grants)
        })
        .await
    }

    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        let events = Chained::all(events)?;
        self.with(move |conn| {
            let tx = conn
                .transaction()
                .map_err(err("cannot begin an audit append"))?;
            super::chain::append(&tx, &events)?;
            tx.commit().map_err(err("cannot commit an audit append"))
        })
        .await
    }

    async fn keep_policy_text(&self, digest: &str, text: &str, at: i64) -> Result<(), StoreError> {
        self.keep_policy(digest, text, at).await
    }

    async fn policy_text(&self, digest: &str) -> Result<Option<String>, StoreError> {
        self.policy(digest).await
    }

    async fn policy_texts(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.policies().await
    }

    async fn spent(&self, now: Millis) -> Result<Spent, StoreError> {
        self.read(move |conn| spent(conn, now)).await
    }

    async fn reserve(
        &self,
        now: Millis,
        decide: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
    ) -> Result<Reserved, StoreError> {
        let _one_at_a_time = self.reserving.lock().await;
        let spent = self.read(move |conn| spent(conn, now)).await?;
        let claims = decide(&spent);
        if claims.is_empty() {
            return Ok(Reserved::Kept);
        }
        self.with(move |conn| without_waiting(conn, |conn| keep(conn, &claims, now)))
            .await
    }

    async fn release(&self, unused: &[Unused]) -> Result<(), StoreError> {
        if unused.is_empty() {
            return Ok(());
        }
        let unused = unused.to_vec();
        self.with(move |conn| without_waiting(conn, |conn| release(conn, &unused)))
            .await
    }
}
