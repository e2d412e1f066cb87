//! The embedded durable store: one SQLite file (`COUNTERSIGN_DB`, default `data/countersign.db`).
//!
//! - Migrations live in `migrations/` and are compiled in; the applied version is SQLite's
//!   `user_version`, so a newer binary upgrades an older file at start-up and an older binary
//!   refuses a newer file instead of misreading it.
//! - WAL journal with `synchronous=FULL` by default: a commit that returned is on disk, so
//!   "committed before acknowledged" holds across `kill -9` and power loss.
//!   `COUNTERSIGN_DB_SYNC=normal` ([`Durability::Normal`]) trades power-loss safety for
//!   sub-millisecond commits; it still survives `kill -9`.
//! - rusqlite is blocking; every call runs on tokio's blocking pool behind one connection (the
//!   writes are small; SQLite serialises writers anyway).

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params, types::Value as SqlValue};

use super::{
    AuditEvent, AuditQuery, AuditRecord, SessionStore, StoreError, audit::AuditKind, lock,
};
use crate::agent::{
    gate::CallPhase,
    session::{SessionRecord, TurnStatus},
};

/// The migrations, in order: `(version, sql)`.
const MIGRATIONS: &[(i64, &str)] = &[(
    1,
    include_str!("../../../migrations/0001_sessions_and_audit.sql"),
)];

/// How far a commit goes before it returns (`COUNTERSIGN_DB_SYNC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: on disk — survives `kill -9`, an OS crash and power loss. Costs an
    /// fsync per commit (a few ms on a VM's disk).
    #[default]
    Full,
    /// `synchronous=NORMAL` (WAL): in the OS's hands — survives `kill -9` of the server, may lose
    /// the last commits on an OS crash or power loss. Sub-millisecond commits.
    Normal,
}

/// Sessions and the audit log in one SQLite database.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

fn err(context: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError(format!("{context}: {e}"))
}

fn json_err(context: &str) -> impl Fn(serde_json::Error) -> StoreError + '_ {
    move |e| StoreError(format!("{context}: {e}"))
}

impl SqliteStore {
    /// Opens (creating it and its directory if needed) the database at `path` and migrates it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::Full)
    }

    /// [`SqliteStore::open`] with a chosen durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError(format!(
                    "cannot create the directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        let conn = Connection::open(path)
            .map_err(|e| StoreError(format!("cannot open {}: {e}", path.display())))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err("cannot switch to WAL"))?;
        Self::setup(conn, Some(path.to_path_buf()), durability)
    }

    /// A private in-memory database (tests, `COUNTERSIGN_DB=:memory:` with audit queries).
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn =
            Connection::open_in_memory().map_err(err("cannot open an in-memory database"))?;
        Self::setup(conn, None, Durability::Full)
    }

    fn setup(
        mut conn: Connection,
        path: Option<PathBuf>,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        let synchronous = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        conn.pragma_update(None, "synchronous", synchronous)
            .map_err(err("cannot set synchronous"))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err("cannot enable foreign keys"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err("cannot set the busy timeout"))?;
        migrate(&mut conn)?;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// Where the database file is (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || f(&mut lock(&conn)))
            .await
            .map_err(|e| StoreError(format!("the store task failed: {e}")))?
    }
}

/// Brings the schema up to the newest migration.
fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(err("cannot read the schema version"))?;
    let newest = MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0);
    if current > newest {
        return Err(StoreError(format!(
            "the database has schema version {current}, newer than this build knows ({newest}); \
             use a newer Countersign or another COUNTERSIGN_DB"
        )));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let tx = conn
            .transaction()
            .map_err(err("cannot begin a migration"))?;
        tx.execute_batch(sql)
            .map_err(|e| StoreError(format!("migration {version} failed: {e}")))?;
        tx.pragma_update(None, "user_version", version)
            .map_err(err("cannot record the schema version"))?;
        tx.commit().map_err(err("cannot commit a migration"))?;
        tracing::info!(version, "database migrated");
    }
    Ok(())
}

fn status_name(status: TurnStatus) -> Result<String, StoreError> {
    match serde_json::to_value(status).map_err(json_err("turn status"))? {
        serde_json::Value::String(s) => Ok(s),
        other => Err(StoreError(format!("unexpected turn status {other}"))),
    }
}

fn write_record(tx: &rusqlite::Transaction<'_>, record: &SessionRecord) -> Result<(), StoreError> {
    let status = record
        .turn
        .as_ref()
        .map(|t| status_name(t.status))
        .transpose()?;
    tx.execute(
        "INSERT INTO sessions (id, created_at_ms, updated_at_ms, turn_status, history, messages,
                               wallet, turn, resolved_approvals)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (id) DO UPDATE SET
             updated_at_ms = excluded.updated_at_ms, turn_status = excluded.turn_status,
             history = excluded.history, messages = excluded.messages, wallet = excluded.wallet,
             turn = excluded.turn, resolved_approvals = excluded.resolved_approvals",
        params![
            record.id,
            record.created_at_ms,
            record.updated_at_ms,
            status,
            to_json(&record.history)?,
            to_json(&record.messages)?,
            to_json(&record.wallet)?,
            record.turn.as_ref().map(to_json).transpose()?,
            to_json(&record.resolved_approvals)?,
        ],
    )
    .map_err(err("cannot write the session"))?;

    // The indexed views of the record.
    for table in ["pending_approvals", "pending_browser_calls"] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE session_id = ?1"),
            [&record.id],
        )
        .map_err(err("cannot clear the pending calls"))?;
    }
    for call in record.turn.iter().flat_map(|t| &t.calls) {
        match &call.phase {
            CallPhase::AwaitingApproval {
                approval_id,
                requested_at_ms,
                deadline_ms,
            } => {
                tx.execute(
                    "INSERT INTO pending_approvals (approval_id, session_id, tool_call_id, tool,
                         args, requested_at_ms, deadline_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        approval_id,
                        record.id,
                        call.call.id,
                        call.call.name,
                        call.call.args.to_string(),
                        *requested_at_ms,
                        *deadline_ms,
                    ],
                )
                .map_err(err("cannot write a pending approval"))?;
            }
            CallPhase::AwaitingBrowser {
                args, deadline_ms, ..
            } => {
                tx.execute(
                    "INSERT INTO pending_browser_calls (tool_call_id, session_id, tool, args,
                         deadline_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        call.call.id,
                        record.id,
                        call.call.name,
                        args.to_string(),
                        *deadline_ms,
                    ],
                )
                .map_err(err("cannot write a pending browser call"))?;
            }
            _ => {}
        }
    }
    // The ledger only grows: payments are never undone.
    for t in &record.wallet.transactions {
        tx.execute(
            "INSERT INTO ledger (transaction_id, session_id, tool_call_id, amount_cents, currency,
                 recipient, description, balance_after_cents, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (transaction_id) DO NOTHING",
            params![
                t.id,
                record.id,
                t.tool_call_id,
                t.amount_cents,
                t.currency,
                t.recipient,
                t.description,
                t.balance_after_cents,
                t.timestamp_ms,
            ],
        )
        .map_err(err("cannot write the ledger"))?;
    }
    Ok(())
}

fn append_audit(tx: &rusqlite::Transaction<'_>, event: &AuditEvent) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO audit (at_ms, kind, session_id, turn_id, tool_call_id, approval_id, tool,
             args_digest, event)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            event.at_ms,
            event.kind.as_str(),
            event.session_id,
            event.turn_id,
            event.tool_call_id,
            event.approval_id,
            event.tool,
            event.args_digest,
            serde_json::to_string(event).map_err(json_err("audit event"))?,
        ],
    )
    .map_err(err("cannot append to the audit log"))?;
    Ok(())
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(json_err("cannot encode the session"))
}

fn read_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<[String; 5]> {
    Ok([
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get::<_, Option<String>>(3)?.unwrap_or_default(),
        row.get(4)?,
    ])
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let id = id.to_owned();
        self.with(move |conn| {
            let row = conn
                .query_row(
                    "SELECT history, messages, wallet, turn, resolved_approvals, created_at_ms,
                            updated_at_ms
                     FROM sessions WHERE id = ?1",
                    [&id],
                    |row| {
                        Ok((
                            read_record(row)?,
                            row.get::<_, i64>(5)?,
                            row.get::<_, i64>(6)?,
                        ))
                    },
                )
                .optional()
                .map_err(err("cannot read the session"))?;
            let Some(([history, messages, wallet, turn, resolved], created, updated)) = row else {
                return Ok(None);
            };
            let context = |what: &'static str| {
                let id = id.clone();
                move |e: serde_json::Error| {
                    StoreError(format!(
                        "session {id}: the stored {what} is unreadable: {e}"
                    ))
                }
            };
            Ok(Some(SessionRecord {
                id: id.clone(),
                created_at_ms: created,
                updated_at_ms: updated,
                history: serde_json::from_str(&history).map_err(context("history"))?,
                messages: serde_json::from_str(&messages).map_err(context("messages"))?,
                wallet: serde_json::from_str(&wallet).map_err(context("wallet"))?,
                turn: if turn.is_empty() {
                    None
                } else {
                    Some(serde_json::from_str(&turn).map_err(context("turn"))?)
                },
                resolved_approvals: serde_json::from_str(&resolved)
                    .map_err(context("resolved approvals"))?,
            }))
        })
        .await
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        let record = record.clone();
        let audit = audit.to_vec();
        self.with(move |conn| {
            let tx = conn.transaction().map_err(err("cannot begin a commit"))?;
            write_record(&tx, &record)?;
            for event in &audit {
                append_audit(&tx, event)?;
            }
            tx.commit().map_err(err("cannot commit"))
        })
        .await
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare("SELECT id FROM sessions ORDER BY updated_at_ms DESC, id")
                .map_err(err("cannot list sessions"))?;
            stmt.query_map([], |row| row.get(0))
                .and_then(|rows| rows.collect())
                .map_err(err("cannot list sessions"))
        })
        .await
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id FROM sessions WHERE turn_status IN ('running', 'awaiting_person')
                     ORDER BY id",
                )
                .map_err(err("cannot list unfinished turns"))?;
            stmt.query_map([], |row| row.get(0))
                .and_then(|rows| rows.collect())
                .map_err(err("cannot list unfinished turns"))
        })
        .await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let query = query.clone();
        self.with(move |conn| {
            let mut sql = String::from("SELECT seq, event FROM audit WHERE 1 = 1");
            let mut args: Vec<SqlValue> = Vec::new();
            if let Some(session) = &query.session {
                sql.push_str(" AND session_id = ?");
                args.push(SqlValue::Text(session.clone()));
            }
            if let Some(tool) = &query.tool {
                sql.push_str(" AND tool = ?");
                args.push(SqlValue::Text(tool.clone()));
            }
            if let Some(kind) = query.kind {
                sql.push_str(" AND kind = ?");
                args.push(SqlValue::Text(AuditKind::as_str(kind).to_owned()));
            }
            if let Some(before) = query.before {
                sql.push_str(" AND seq < ?");
                args.push(SqlValue::Integer(before));
            }
            sql.push_str(" ORDER BY seq DESC LIMIT ?");
            args.push(SqlValue::Integer(query.limit() as i64));
            let mut stmt = conn
                .prepare(&sql)
                .map_err(err("cannot query the audit log"))?;
            let rows: Vec<(i64, String)> = stmt
                .query_map(rusqlite::params_from_iter(args), |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .and_then(|rows| rows.collect())
                .map_err(err("cannot query the audit log"))?;
            rows.into_iter()
                .map(|(seq, event)| {
                    Ok(AuditRecord {
                        seq,
                        event: serde_json::from_str(&event).map_err(|e| {
                            StoreError(format!("audit entry {seq} is unreadable: {e}"))
                        })?,
                    })
                })
                .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::{
        gate::StepCall,
        history::ToolCall,
        store::tests::{store_contract, turn},
        tools::{ToolLocation, Wallet},
    };

    #[tokio::test]
    async fn the_sqlite_store_keeps_the_contract() {
        store_contract(&SqliteStore::in_memory().unwrap()).await;
    }

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!(
            "countersign-{name}-{}-{}.db",
            std::process::id(),
            uuid::Uuid::new_v4()
        ))
    }

    fn waiting_record() -> SessionRecord {
        let mut record = SessionRecord::new("chat", 5);
        let mut t = turn(TurnStatus::AwaitingPerson);
        t.calls.push(StepCall {
            call: ToolCall {
                id: "call-1".into(),
                name: "process_payment".into(),
                args: json!({"amount": 50, "recipient": "Hanako"}),
                provider_data: None,
            },
            location: ToolLocation::Server,
            phase: CallPhase::AwaitingApproval {
                approval_id: "approval-1".into(),
                requested_at_ms: 5,
                deadline_ms: 300_005,
            },
            announced: false,
            gated_by: Some("approval-1".into()),
        });
        record.turn = Some(t);
        let mut wallet = Wallet::default();
        wallet
            .pay("call-0", 10.0, "USD", "Bob", "", 4, || "txn-0".into())
            .unwrap();
        record.wallet = wallet;
        record
    }

    #[tokio::test]
    async fn a_record_survives_reopening_the_file_with_its_views() {
        let path = temp_path("reopen");
        let record = waiting_record();
        {
            let store = SqliteStore::open(&path).unwrap();
            store.save(&record).await.unwrap();
            store.save(&record).await.unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.load("chat").await.unwrap(), Some(record));
        assert_eq!(store.unfinished().await.unwrap(), ["chat"]);
        let (pending, ledger): (i64, i64) = store
            .with(|conn| {
                let count = |sql: &str| conn.query_row(sql, [], |r| r.get(0));
                Ok((
                    count("SELECT count(*) FROM pending_approvals WHERE deadline_ms = 300005")
                        .map_err(err("count"))?,
                    count("SELECT count(*) FROM ledger WHERE tool_call_id = 'call-0'")
                        .map_err(err("count"))?,
                ))
            })
            .await
            .unwrap();
        assert_eq!((pending, ledger), (1, 1));
        drop(store);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[tokio::test]
    async fn answered_approvals_leave_the_pending_view() {
        let store = SqliteStore::in_memory().unwrap();
        let mut record = waiting_record();
        store.save(&record).await.unwrap();
        record.turn.as_mut().unwrap().calls[0].phase = CallPhase::Ready {
            args: json!({}),
            edited: false,
        };
        store.save(&record).await.unwrap();
        let pending: i64 = store
            .with(|conn| {
                conn.query_row("SELECT count(*) FROM pending_approvals", [], |r| r.get(0))
                    .map_err(err("count"))
            })
            .await
            .unwrap();
        assert_eq!(pending, 0);
    }

    #[tokio::test]
    async fn a_database_from_a_newer_build_is_refused() {
        let path = temp_path("newer");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", 99).unwrap();
        }
        let e = SqliteStore::open(&path).unwrap_err();
        assert!(e.0.contains("schema version 99"), "{e}");
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn a_corrupt_row_is_an_error_naming_the_session_not_a_panic() {
        let store = SqliteStore::in_memory().unwrap();
        store.save(&SessionRecord::new("x", 1)).await.unwrap();
        store
            .with(|conn| {
                conn.execute("UPDATE sessions SET history = '{oops' WHERE id = 'x'", [])
                    .map_err(err("corrupt"))
            })
            .await
            .unwrap();
        let e = store.load("x").await.unwrap_err();
        assert!(e.0.contains("session x") && e.0.contains("history"), "{e}");
    }
}
