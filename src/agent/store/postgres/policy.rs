//! The policy's state in Postgres, shared by every instance: grants and their use, audit events
//! of no session, the day's spending and the reservations of calls about to run
//! ([`crate::agent::store::reservations`], migration 7).
//!
//! A reservation is one transaction under [`SPENDING_LOCK`], which every instance takes: it
//! reads the day's spending and the grants' use, lets the policy decide on them, and writes the
//! claims, raising each grant's use by a conditional update that never passes its budget. Under
//! the lock nothing else can raise the day's total (payments are reserved before they run; a
//! payment's ledger row replaces its reservation in the total) or a grant's use, so what the
//! decision saw is what holds when it commits: two instances never both fit under a limit only
//! one fits under. What only lowers them (a call that ends without paying) needs no lock.
//!
//! Reservations and releases commit without waiting for the WAL to reach the disk
//! (`synchronous_commit = off` for their transactions; other instances see them at once): a
//! commit that waits makes every commit before it durable, and whatever depends on a reservation
//! — a payment's commit, a call that must not run twice on disk as running — is such a commit.
//! What a crash of the database can lose is a reservation no commit followed, whose call's
//! effects were never on disk either. So the lock is held for a few round trips, never an fsync.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;

use super::{PostgresStore, err, execute_in, notify_in};
use crate::{
    agent::{
        clock::Millis,
        policy::spending::day_of,
        store::{
            AuditEvent, Claim, GrantUse, PolicyStore, Reserved, Spent, StoreError, StoreNews,
            Unused,
            encode::{Chained, to_json},
        },
    },
    protocol::grant::Grant,
};

/// The advisory lock reservations are decided under ("CSGN", then 2 for spending).
const SPENDING_LOCK: i64 = 0x4353_474e_0000_0002;

/// The day of `now`'s spending and every grant's use, as `tx` sees them.
async fn spent_in(tx: &impl GenericClient, now: Millis) -> Result<Spent, StoreError> {
    let context = "cannot add up the day's spending";
    let total = tx
        .prepare_cached(
            "SELECT (SELECT COALESCE(SUM(cents), 0) FROM daily_spending WHERE day >= $1)::BIGINT
                  + (SELECT COALESCE(SUM(r.cents), 0) FROM spending_reservations r
                     WHERE r.day = $2 AND NOT EXISTS (
                         SELECT 1 FROM ledger l
                         WHERE l.session_id = r.session_id
                             AND l.tool_call_id = r.tool_call_id))::BIGINT",
        )
        .await
        .map_err(err(context))?;
    let uses = tx
        .prepare_cached("SELECT id, used_cents, uses, revoked_at_ms FROM grants")
        .await
        .map_err(err(context))?;
    let day = day_of(now);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&day, &day];
    let (total, uses) = tokio::try_join!(tx.query_one(&total, &params), tx.query(&uses, &[]))
        .map_err(err(context))?;
    let grants = uses
        .iter()
        .map(|row| -> Result<GrantUse, tokio_postgres::Error> {
            Ok(GrantUse {
                id: row.try_get(0)?,
                used_cents: row.try_get(1)?,
                uses: row.try_get::<_, i64>(2)?.max(0) as u64,
                revoked_at_ms: row.try_get(3)?,
            })
        })
        .collect::<Result<_, _>>()
        .map_err(err(context))?;
    Ok(Spent {
        today_cents: total.try_get(0).map_err(err(context))?,
        grants,
    })
}

/// Writes `claims` made at `now` in `tx`: false (the caller rolls back) when a grant claimed has
/// no room, was revoked or has expired. Whether a grant's use changed.
async fn keep_in(
    tx: &impl GenericClient,
    claims: &[Claim],
    now: Millis,
) -> Result<Option<bool>, StoreError> {
    let context = "cannot keep a reservation";
    let mut grants_used = false;
    for claim in claims {
        let fresh = execute_in(
            tx,
            "INSERT INTO spending_reservations
                 (session_id, tool_call_id, day, cents, grant_id, at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (session_id, tool_call_id) DO NOTHING",
            &[
                &claim.chat,
                &claim.call,
                &day_of(now),
                &claim.cents,
                &claim.grant,
                &now,
            ],
            context,
        )
        .await?
            == 1;
        let Some(grant) = claim.grant.as_ref().filter(|_| fresh) else {
            continue;
        };
        let taken = execute_in(
            tx,
            "UPDATE grants SET used_cents = used_cents + $2, uses = uses + 1
             WHERE id = $1 AND revoked_at_ms IS NULL AND expires_at_ms > $3
                 AND (max_cents IS NULL OR used_cents + $2 <= max_cents)",
            &[grant, &claim.cents, &now],
            context,
        )
        .await?;
        if taken == 0 {
            return Ok(None);
        }
        grants_used = true;
    }
    // Reservations of payments made count no more (their ledger rows do), and those of calls
    // still in flight since the day before yesterday are of no use.
    execute_in(
        tx,
        "DELETE FROM spending_reservations r
         WHERE r.day < $1 OR EXISTS (
             SELECT 1 FROM ledger l
             WHERE l.session_id = r.session_id AND l.tool_call_id = r.tool_call_id)",
        &[&(day_of(now) - 1)],
        context,
    )
    .await?;
    Ok(Some(grants_used))
}

#[async_trait]
impl PolicyStore for PostgresStore {
    async fn save_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        let body = to_json(grant)?;
        let uses = i64::try_from(grant.uses).unwrap_or(i64::MAX);
        self.execute(
            "INSERT INTO grants (id, tool, chat, created_at_ms, expires_at_ms, revoked_at_ms, body,
                 max_cents, used_cents, uses)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (id) DO UPDATE SET revoked_at_ms = EXCLUDED.revoked_at_ms,
                 body = EXCLUDED.body",
            &[
                &grant.id,
                &grant.tool,
                &grant.chat,
                &grant.created_at_ms,
                &grant.expires_at_ms,
                &grant.revoked_at_ms,
                &body,
                &grant.max_cents,
                &grant.used_cents,
                &uses,
            ],
            "cannot write a grant",
        )
        .await?;
        self.tell(StoreNews::Grants).await;
        Ok(())
    }

    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        let context = "cannot read the grants";
        let rows = self
            .rows(
                "SELECT id, body, used_cents, uses FROM grants ORDER BY created_at_ms, id",
                &[],
                context,
            )
            .await?;
        let mut grants = Vec::with_capacity(rows.len());
        for row in &rows {
            let id: &str = row.try_get(0).map_err(err(context))?;
            let body: &str = row.try_get(1).map_err(err(context))?;
            let grant: Grant = serde_json::from_str(body)
                .map_err(|e| StoreError::caused_by(format!("grant {id} is unreadable"), e))?;
            grants.push(Grant {
                used_cents: row.try_get(2).map_err(err(context))?,
                uses: row.try_get::<_, i64>(3).map_err(err(context))?.max(0) as u64,
                ..grant
            });
        }
        Ok(grants)
    }

    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        let events = Chained::all(events)?;
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(err("cannot begin an audit append"))?;
        super::chain::append(&tx, &events).await?;
        tx.commit()
            .await
            .map_err(err("cannot commit an audit append"))
    }

    async fn keep_policy_text(
        &self,
        digest: &str,
        text: &str,
        at: Millis,
    ) -> Result<(), StoreError> {
        self.keep_policy(digest, text, at).await
    }

    async fn policy_text(&self, digest: &str) -> Result<Option<String>, StoreError> {
        self.policy(digest).await
    }

    async fn policy_texts(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.policies().await
    }

    async fn spent(&self, now: Millis) -> Result<Spent, StoreError> {
        spent_in(&self.client().await?, now).await
    }

    async fn reserve(
        &self,
        now: Millis,
        decide: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
    ) -> Result<Reserved, StoreError> {
        let context = "cannot reserve what calls will spend";
        let _one_at_a_time = self.reserving.lock().await;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(err(context))?;
        tx.batch_execute(&format!(
            "SET LOCAL synchronous_commit = off; SELECT pg_advisory_xact_lock({SPENDING_LOCK})"
        ))
        .await
        .map_err(err(context))?;
        let spent = spent_in(&tx, now).await?;
        let claims = decide(&spent);
        if claims.is_empty() {
            tx.rollback().await.map_err(err(context))?;
            return Ok(Reserved::Kept);
        }
        let Some(grants_used) = keep_in(&tx, &claims, now).await? else {
            tx.rollback().await.map_err(err(context))?;
            return Ok(Reserved::Refused);
        };
        if grants_used {
            notify_in(&tx, &self.instance, &StoreNews::Grants).await?;
        }
        tx.commit().await.map_err(err(context))?;
        Ok(Reserved::Kept)
    }

    async fn release(&self, unused: &[Unused]) -> Result<(), StoreError> {
        if unused.is_empty() {
            return Ok(());
        }
        let context = "cannot release a reservation";
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(err(context))?;
        tx.batch_execute("SET LOCAL synchronous_commit = off")
            .await
            .map_err(err(context))?;
        let released = tx
            .prepare_cached(
                "DELETE FROM spending_reservations WHERE session_id = $1 AND tool_call_id = $2
                 RETURNING cents, grant_id",
            )
            .await
            .map_err(err(context))?;
        let mut refunded = false;
        for end in unused {
            let held = tx
                .query_opt(&released, &[&end.chat, &end.call])
                .await
                .map_err(err(context))?;
            let Some(row) = held else {
                continue;
            };
            let cents: i64 = row.try_get(0).map_err(err(context))?;
            let Some(grant) = row.try_get::<_, Option<String>>(1).map_err(err(context))? else {
                continue;
            };
            execute_in(
                &tx,
                "UPDATE grants SET used_cents = GREATEST(used_cents - $2, 0),
                     uses = GREATEST(uses - 1, 0)
                 WHERE id = $1",
                &[&grant, &cents],
                context,
            )
            .await?;
            refunded = true;
        }
        if refunded {
            notify_in(&tx, &self.instance, &StoreNews::Grants).await?;
        }
        tx.commit().await.map_err(err(context))
    }
}
