//! The store for several instances: one Postgres database (`postgres://…`) that every instance
//! reads and commits to.
//!
//! - Migrations live in `migrations/postgres/` and are compiled in; each applied version is a row
//!   of `countersign_schema`. Instances starting together take an advisory lock first, so one of
//!   them migrates and the others find it done; a binary older than the database refuses it
//!   instead of misreading it.
//! - The tables and their JSON are the SQLite store's ([`super::sqlite`]), encoded and decoded by
//!   the same code (the store's `encode`), so the two behave alike (the contract tests of [`super`]
//!   run against both).
//! - A pool of connections (deadpool, [`Connections::pool`] at most, `COUNTERSIGN_DB_POOL`), and
//!   one more that listens for the other instances' news (ADR 0033: the connection budget).
//!   Every commit is one transaction on one of them; Postgres shares an fsync between the commits in flight. Unlike the SQLite
//!   writer, no instance can know what the last commit of a session wrote (another instance may
//!   have made it), so every commit rewrites the session's pending views and inserts all of its
//!   ledger rows, which `ON CONFLICT DO NOTHING` makes idempotent.
//! - Reads take a connection of the pool each; statements are prepared once per connection.

use std::{collections::HashMap, sync::Arc};

use async_trait::async_trait;
use deadpool_postgres::{Client, GenericClient, Pool};
use tokio_postgres::{Row, types::ToSql};

use super::{
    AuditEvent, AuditQuery, AuditRecord, SessionStore, StoreError, StoreNews, StoredFile,
    StoredSession,
    encode::{
        List, ListTail, PaymentsRead, RecordColumns, TAIL, Write, decode_paused_log, decode_record,
        decode_turn_log,
    },
};
use crate::agent::{
    clock::Millis,
    inbox::{InboxQuery, Waiting, WaitingCounts},
    session::{SessionRecord, TurnEntry, TurnStatus},
};
use commit::write_one;
use connect::cannot_reach;
pub use connect::{Connections, POOL_SIZE};
pub use instances::LEASE_MS;
use instances::alive;

mod audit;
mod chain;
mod commit;
mod connect;
mod inbox;
mod instances;
mod migrate;
mod people;
mod policy;
mod sessions;
mod state;
#[cfg(test)]
mod tests;

/// Sessions, the audit log and the rest of the server's state in one Postgres database, shared
/// by every instance pointed at it.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// Where the database is (`host:port/dbname`, never the password), for messages.
    target: Arc<str>,
    /// The version of each session this instance last read or wrote.
    versions: Arc<Versions>,
    /// This instance's id (made at start-up): the owner of the turns it runs.
    instance: Arc<str>,
    /// What the other instances say ([`instances`]).
    news: tokio::sync::broadcast::Sender<StoreNews>,
    /// The channels of live text this instance listens to ([`instances::TextGroups`]).
    texts: Arc<instances::TextGroups>,
    /// This instance's reservations go one at a time ([`policy`]): they would wait for each
    /// other on the database's lock anyway, each holding a connection of the pool.
    reserving: Arc<tokio::sync::Mutex<()>>,
    /// Stops the heartbeat and the listener when the last clone of the store goes.
    _background: Arc<tokio_util::sync::DropGuard>,
}

/// Sessions' row versions as this instance knows them, and one commit at a time per session
/// (two commits of one instance must not refuse each other).
///
/// A commit expects the version known here (none known: the row must not exist yet) and makes
/// the next; a commit that finds another version was overtaken by another instance and is
/// refused as a conflict. Forgetting a version is safe: the next commit of that session is a
/// conflict and the runtime reads the session again.
#[derive(Default)]
struct Versions {
    known: std::sync::Mutex<HashMap<String, i64>>,
    gates: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Sessions whose versions are kept at most (then they are forgotten: see [`Versions`]).
const VERSIONS_KEPT: usize = 1_000_000;

impl Versions {
    fn get(&self, id: &str) -> Option<i64> {
        crate::agent::lock(&self.known).get(id).copied()
    }

    /// Remembers that `id`'s row is at `version` at least (a row's version only grows: a read
    /// that finishes after a newer one must not take it back).
    fn set(&self, id: &str, version: i64) {
        let mut known = crate::agent::lock(&self.known);
        if known.len() >= VERSIONS_KEPT && !known.contains_key(id) {
            known.clear();
        }
        let kept = known.entry(id.to_owned()).or_insert(version);
        *kept = (*kept).max(version);
    }

    /// The gate of `id`'s commits.
    fn gate(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut gates = crate::agent::lock(&self.gates);
        if gates.len() >= VERSIONS_KEPT {
            // Gates nobody is passing through can go.
            gates.retain(|_, gate| Arc::strong_count(gate) > 1);
        }
        gates.entry(id.to_owned()).or_default().clone()
    }
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish()
    }
}

fn err(context: &str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
    move |e| StoreError::caused_by(context, e)
}

impl PostgresStore {
    /// Tells the other instances `news` about a write that succeeded; a notification that
    /// cannot be sent is logged (the write stands; they see it when they read it again).
    async fn tell(&self, news: StoreNews) {
        if let Err(e) = SessionStore::announce(self, news).await {
            tracing::warn!(error = %e.report(), "cannot notify the other instances");
        }
    }

    /// This instance's id, as the database knows it.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Takes over `id`'s running turn from `from` (an instance that stopped answering, or none),
    /// if the row is still at `version` and still names `from`: true when this instance is its
    /// owner now. Of several instances trying at once, one is.
    async fn claim(&self, id: &str, from: Option<&str>, version: i64) -> Result<bool, StoreError> {
        let claimed = self
            .execute(
                "UPDATE sessions SET running_on = $2
                 WHERE id = $1 AND version = $3 AND running_on IS NOT DISTINCT FROM $4",
                &[&id, &&*self.instance, &version, &from],
                "cannot take over a turn",
            )
            .await?;
        if claimed == 1 {
            tracing::info!(session = %id, from = ?from, "took over a turn whose instance stopped answering");
        }
        Ok(claimed == 1)
    }

    /// Whether the database answers (`/healthz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.client()
            .await?
            .batch_execute("SELECT 1")
            .await
            .map_err(err("the database does not answer"))
    }

    /// A connection of the pool.
    async fn client(&self) -> Result<Client, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| cannot_reach(&self.target, e))
    }

    /// The rows of `sql` with `params`, on a connection of the pool.
    async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(err(context))?;
        client.query(&stmt, params).await.map_err(err(context))
    }

    /// The first column of every row of `sql` with `params`, as text (ids).
    async fn strings(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.rows(sql, params, context)
            .await?
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()
            .map_err(err(context))
    }

    /// The row of `sql` with `params`, if there is one.
    async fn row(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<Option<Row>, StoreError> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(err(context))?;
        client.query_opt(&stmt, params).await.map_err(err(context))
    }

    /// Runs the one statement `sql` with `params` (a transaction of its own): the rows it changed.
    async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        context: &str,
    ) -> Result<u64, StoreError> {
        execute_in(&self.client().await?, sql, params, context).await
    }

    /// Writes one commit in a transaction of its own, if the session's row is still at the
    /// version this instance knows (else a conflict, and nothing is written).
    async fn write(&self, write: Write) -> Result<(), StoreError> {
        let gate = self.versions.gate(&write.id);
        let _one_at_a_time = gate.lock().await;
        let expected = self.versions.get(&write.id).unwrap_or(0);
        let mut client = self.client().await?;
        // Dropped on an error before `commit`: rolled back, and the connection goes back to the
        // pool.
        let tx = client
            .transaction()
            .await
            .map_err(err("cannot begin a commit"))?;
        let running = write.status.as_deref() == Some(RUNNING);
        let version = write_one(&tx, &write, expected, running.then_some(&*self.instance)).await?;
        let changed = inbox::write(&tx, &write.id, &write.approvals).await?;
        let news = StoreNews::Chat {
            chat: write.id.clone(),
            waits: !write.approvals.is_empty(),
        };
        notify_in(&tx, &self.instance, &news).await?;
        if !changed.is_empty() {
            let news = StoreNews::Waiting {
                chat: write.id.clone(),
                approvals: changed,
            };
            notify_in(&tx, &self.instance, &news).await?;
        }
        tx.commit().await.map_err(err("cannot commit"))?;
        self.versions.set(&write.id, version);
        Ok(())
    }
}

/// The stored name of [`TurnStatus::Running`].
const RUNNING: &str = "running";

/// Tells the other instances `news` from instance `from` (when `tx` commits, if it is a
/// transaction), on its channel ([`instances::channel_of`]). News too long for a notification
/// (only live text can be: an entry past its limits) is not sent: readers elsewhere get it from
/// the stored log (ADR 0043).
async fn notify_in(
    tx: &impl GenericClient,
    from: &str,
    news: &StoreNews,
) -> Result<(), StoreError> {
    let payload = instances::encode(from, news);
    if payload.len() > instances::MAX_PAYLOAD {
        tracing::debug!(bytes = payload.len(), "news too long to send");
        return Ok(());
    }
    let stmt = tx
        .prepare_cached("SELECT pg_notify($1, $2)")
        .await
        .map_err(err("cannot notify the other instances"))?;
    tx.query(&stmt, &[&&*instances::channel_of(news), &payload])
        .await
        .map_err(err("cannot notify the other instances"))?;
    Ok(())
}

/// Runs `sql` with `params` inside `tx` (a transaction, or a connection of the pool on its own):
/// the rows it changed.
async fn execute_in(
    tx: &impl GenericClient,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    context: &str,
) -> Result<u64, StoreError> {
    let stmt = tx.prepare_cached(sql).await.map_err(err(context))?;
    tx.execute(&stmt, params).await.map_err(err(context))
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.load_session(id, false).await
    }

    async fn load_head(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.load_session(id, true).await
    }

    async fn read_entries(
        &self,
        id: &str,
        lens: [usize; 2],
    ) -> Result<[Vec<String>; 2], StoreError> {
        self.entries_before(id, lens).await
    }

    async fn read_resolutions(
        &self,
        id: &str,
        approvals: Option<&[String]>,
    ) -> Result<String, StoreError> {
        self.resolutions_of(id, approvals).await
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        self.write(Write::new(record, audit, None)?).await
    }

    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError> {
        self.write(Write::new(record, audit, Some(log))?).await
    }

    async fn chat_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        let context = "cannot look up whose chat this is";
        self.row("SELECT owner FROM sessions WHERE id = $1", &[&id], context)
            .await?
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(err(context))
    }

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        let context = "cannot look up an approval";
        self.row(
            "SELECT session_id FROM pending_approvals WHERE approval_id = $1",
            &[&approval_id],
            context,
        )
        .await?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(err(context))
    }

    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        self.inbox_page(query).await
    }

    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        self.waiting_one(approval_id).await
    }

    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError> {
        self.counts().await
    }

    async fn unindexed(&self) -> Result<Vec<String>, StoreError> {
        self.without_entries().await
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        self.execute(
            "INSERT INTO attachments (session_id, sha256, media_type, size, bytes, created_ms)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (session_id, sha256) DO NOTHING",
            &[&chat, &sha, &media_type, &size, &bytes, &at],
            "cannot keep an attachment",
        )
        .await?;
        Ok(())
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        let context = "cannot read an attachment";
        self.row(
            "SELECT media_type, bytes FROM attachments WHERE session_id = $1 AND sha256 = $2",
            &[&chat, &sha],
            context,
        )
        .await?
        .map(|row| {
            Ok(StoredFile {
                media_type: row.try_get(0)?,
                bytes: row.try_get(1)?,
            })
        })
        .transpose()
        .map_err(err(context))
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        let context = "cannot list sessions";
        self.strings(
            "SELECT id FROM sessions ORDER BY updated_at_ms DESC, id",
            &[],
            context,
        )
        .await
    }

    async fn resumable(&self) -> Result<Vec<String>, StoreError> {
        self.orphaned().await
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        let context = "cannot list unfinished turns";
        self.strings(
            &format!(
                "SELECT id FROM sessions s
                 WHERE s.turn_status = 'awaiting_person'
                    OR (s.turn_status = 'running' AND NOT {})
                 ORDER BY id",
                alive("s.running_on")
            ),
            &[],
            context,
        )
        .await
    }

    fn database(&self) -> &'static str {
        "postgres"
    }

    async fn chain_head(&self) -> Result<super::ChainHead, StoreError> {
        self.read_chain_head().await
    }

    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.read_chain(after, limit).await
    }

    async fn keep_checkpoint(&self, checkpoint: &super::Checkpoint) -> Result<(), StoreError> {
        self.write_checkpoint(checkpoint).await
    }

    async fn checkpoints(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<super::Checkpoint>, StoreError> {
        self.read_checkpoints(after, limit).await
    }

    async fn last_checkpoint(&self) -> Result<Option<super::Checkpoint>, StoreError> {
        self.read_last_checkpoint().await
    }

    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        self.checkpoint_seed().await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        PostgresStore::ping(self).await
    }

    async fn live_instances(&self) -> Result<u64, StoreError> {
        let context = "cannot count the live instances";
        let row = self
            .row(
                &format!(
                    "SELECT count(*) FROM countersign_instances WHERE seen_ms > {} - {LEASE_MS}",
                    instances::NOW_MS
                ),
                &[],
                context,
            )
            .await?;
        Ok(row
            .map(|r| r.get::<_, i64>(0))
            .and_then(|n| u64::try_from(n).ok())
            .unwrap_or(0))
    }

    fn shared(&self) -> bool {
        true
    }

    async fn overdue(&self, before: i64) -> Result<Vec<String>, StoreError> {
        let context = "cannot list overdue turns";
        self.strings(
            "SELECT session_id FROM pending_approvals WHERE deadline_ms <= $1
             UNION
             SELECT session_id FROM pending_browser_calls WHERE deadline_ms <= $1
             ORDER BY 1 LIMIT 100",
            &[&before],
            context,
        )
        .await
    }

    async fn orphaned(&self) -> Result<Vec<String>, StoreError> {
        self.strings(
            &format!(
                "SELECT id FROM sessions s
                 WHERE s.turn_status = 'running' AND s.running_on IS DISTINCT FROM $1
                   AND NOT {}
                 ORDER BY id LIMIT 100",
                alive("s.running_on")
            ),
            &[&&*self.instance],
            "cannot list turns whose instance stopped",
        )
        .await
    }

    fn news(&self) -> Option<tokio::sync::broadcast::Receiver<StoreNews>> {
        Some(self.news.subscribe())
    }

    async fn keep_log(&self, chat: &str, turn: &str, log: &[TurnEntry]) -> Result<(), StoreError> {
        let entries = super::encode::to_json(&log)?;
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(err("cannot begin writing a turn's log"))?;
        // Only the running turn's own row, and only longer: a commit may have written more
        // meanwhile, or the turn may be over.
        let kept = execute_in(
            &tx,
            "UPDATE paused_turn_logs SET entries = $3
             WHERE session_id = $1 AND turn_id = $2 AND length(entries) < length($3)",
            &[&chat, &turn, &entries],
            "cannot write a turn's log",
        )
        .await?;
        if kept == 1 {
            let news = StoreNews::Kept {
                chat: chat.to_owned(),
                turn: turn.to_owned(),
                len: log.len(),
            };
            notify_in(&tx, &self.instance, &news).await?;
        }
        tx.commit().await.map_err(err("cannot write a turn's log"))
    }

    async fn announce(&self, news: StoreNews) -> Result<(), StoreError> {
        notify_in(&self.client().await?, &self.instance, &news).await
    }

    fn hear_text(&self, chat: &str) -> super::TextInterest {
        self.texts.hold(chat)
    }

    async fn stale(&self, id: &str) -> Result<bool, StoreError> {
        let context = "cannot read a session's version";
        let stored: Option<i64> = self
            .row(
                "SELECT version FROM sessions WHERE id = $1",
                &[&id],
                context,
            )
            .await?
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(err(context))?;
        Ok(stored.unwrap_or(0) != self.versions.get(id).unwrap_or(0))
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        self.query_audit(query).await
    }
}
