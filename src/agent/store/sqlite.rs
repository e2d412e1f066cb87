//! The embedded durable store: one SQLite file (`COUNTERSIGN_DB`, default `data/countersign.db`).
//!
//! - Migrations live in `migrations/` and are compiled in; the applied version is SQLite's
//!   `user_version`, so a newer binary upgrades an older file at start-up and an older binary
//!   refuses a newer file instead of misreading it.
//! - WAL journal with `synchronous=FULL` by default: a commit that returned is on disk, so
//!   "committed before acknowledged" holds across `kill -9` and power loss.
//!   `COUNTERSIGN_DB_SYNC=normal` ([`Durability::Normal`]) trades power-loss safety for
//!   sub-millisecond commits; it still survives `kill -9`.
//! - rusqlite is blocking: one writer thread owns the connection and takes every call from a
//!   queue, committing the commits that queued up together (group commit: one fsync for many
//!   sessions). Callers encode records to JSON themselves (the store's `encode`, which Postgres
//!   shares), so the thread only writes. Views that did not change are not rewritten, and only
//!   new ledger rows are inserted.
//! - Checkpoints run on a second thread (PASSIVE, never blocking the writer), not inside
//!   whichever commit happened to cross SQLite's automatic-checkpoint threshold: when commits
//!   pause, or after 32 MiB of WAL under a steady stream. The WAL then starts over at once, so
//!   the next commit (a person's approval, after a quiet moment) pays one fsync, not two.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Weak},
};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params, types::Value as SqlValue};
use tokio::sync::oneshot;

use super::{
    AuditEvent, AuditQuery, AuditRecord, SessionStore, SignIn, SignInStore, StoreError, StoredFile,
    StoredSession, ToolListStore,
    audit::AuditKind,
    encode::{
        RecordColumns, Write, decode_paused_log, decode_record, entries_json, resolutions_json,
        stored_event,
    },
};
use crate::agent::{
    clock::Millis,
    inbox::{InboxQuery, Waiting, WaitingCounts},
    session::{SessionRecord, TurnEntry, TurnStatus},
};

mod chain;
mod checkpoint;
mod inbox;
mod people;
mod policy;
mod writer;

use checkpoint::*;
use writer::*;

/// The migrations, in order: `(version, sql)`.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        include_str!("../../../migrations/0001_sessions_and_audit.sql"),
    ),
    (
        2,
        include_str!("../../../migrations/0002_audit_without_autoincrement.sql"),
    ),
    (
        3,
        include_str!("../../../migrations/0003_paused_turn_log.sql"),
    ),
    (4, include_str!("../../../migrations/0004_narrow_views.sql")),
    (5, include_str!("../../../migrations/0005_signins.sql")),
    (6, include_str!("../../../migrations/0006_tool_state.sql")),
    (
        7,
        include_str!("../../../migrations/0007_mcp_tool_lists.sql"),
    ),
    (
        8,
        include_str!("../../../migrations/0008_grants_and_ledger_time.sql"),
    ),
    (
        9,
        include_str!("../../../migrations/0009_people_and_passkeys.sql"),
    ),
    (
        10,
        include_str!("../../../migrations/0010_passkey_ceremonies.sql"),
    ),
    (11, include_str!("../../../migrations/0011_attachments.sql")),
    (
        12,
        include_str!("../../../migrations/0012_passkey_ceremony_owners.sql"),
    ),
    (
        13,
        include_str!("../../../migrations/0013_spending_reservations.sql"),
    ),
    (14, include_str!("../../../migrations/0014_audit_chain.sql")),
    (15, include_str!("../../../migrations/0015_inbox.sql")),
    (
        16,
        include_str!("../../../migrations/0016_append_only_chats.sql"),
    ),
];

/// The migration that makes the audit log a chain: the records already there are chained right
/// after it, in its transaction ([`chain::start`]).
const CHAIN_MIGRATION: i64 = 14;

/// How far a commit goes before it returns (`COUNTERSIGN_DB_SYNC`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: on disk — survives `kill -9`, an OS crash and power loss. Costs an
    /// fsync per commit (shared by the commits that queued up meanwhile).
    #[default]
    Full,
    /// `synchronous=NORMAL` (WAL): in the OS's hands — survives `kill -9` of the server, may lose
    /// the last commits on an OS crash or power loss. Sub-millisecond commits.
    Normal,
}

impl Durability {
    /// The `PRAGMA synchronous` value.
    fn synchronous(self) -> &'static str {
        match self {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        }
    }
}

/// Sessions and the audit log in one SQLite database.
///
/// One writer thread owns the connection; every call is a job on its queue. Commits that queue
/// up while a transaction is on disk go out together in the next one (group commit: one fsync
/// for all of them, each in its own savepoint so one bad record fails alone). A second thread
/// checkpoints the WAL into the database file in the background, so no commit waits for it.
///
/// Reads (loading a session, lookups, listings, the audit log) run on a third thread with a
/// connection of its own, so they never wait behind a commit's fsync: a parked session comes
/// back from the store on the path of an approval (ADR 0011). The point reads of that path (a
/// session by id, an approval's owner) run right where they are awaited when a fourth
/// connection is free and SQLite does not ask them to wait: two thread hand-offs less on the
/// approval's way, each a wake-up of an idle thread (bench/).
#[derive(Clone)]
pub struct SqliteStore {
    /// The writer's queue. The checkpointer holds it weakly: the writer stops with the last
    /// store handle.
    jobs: Arc<std::sync::mpsc::Sender<Job>>,
    /// The reader thread's queue; `None` for an in-memory database (only the writer's
    /// connection sees it), whose reads the writer runs.
    reads: Option<std::sync::mpsc::Sender<ConnJob>>,
    /// The connection for point reads in place (see [`SqliteStore::point_read`]); `None` in
    /// memory.
    inline: Option<Arc<std::sync::Mutex<Connection>>>,
    path: Option<PathBuf>,
    /// Reservations go one at a time: each reads the day's spending, decides and writes its
    /// claims before the next reads ([`PolicyStore::reserve`]).
    reserving: Arc<tokio::sync::Mutex<()>>,
}

/// Work for a thread that owns a connection (the reader's jobs, the writer's `Job::Run`).
type ConnJob = Box<dyn FnOnce(&mut Connection) + Send>;

/// SQLite's own page cache of the writer's connection, in KiB (SQLite's default is 2000). The
/// operating system caches the file as well; what SQLite keeps hot is the B-trees' upper pages
/// and the pages commits keep touching, and a few hundred KiB hold them. It is memory of the
/// process (bench/: at 1k sessions the default cache was ~2 KiB per session).
const PAGE_CACHE_KIB: i64 = 256;

/// The reader's page cache, in KiB: it looks sessions up by id, one at a time.
const READER_CACHE_KIB: i64 = 64;

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

/// Where the writer answers a commit.
type Reply = oneshot::Sender<Result<(), StoreError>>;

/// Work for the writer thread.
enum Job {
    Commit(Box<Commit>, Reply),
    Run(ConnJob),
}

/// How many sessions the writer remembers the views of (it forgets them all past this: memory
/// stays bounded however many sessions a server has seen).
const MAX_WRITTEN: usize = 1024;

/// How long an expired sign-in stays recorded (for the record; it verifies no more), in ms.
const EXPIRED_SIGNINS_KEPT_MS: i64 = 30 * 24 * 3600 * 1000;

/// Most commits one transaction takes (the rest wait for the next one).
const MAX_GROUP: usize = 256;

fn err(context: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::caused_by(context, e)
}

fn gone() -> StoreError {
    StoreError::new("the store's writer thread has stopped")
}

impl SqliteStore {
    /// Opens (creating it and its directory if needed) the database at `path` and migrates it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::Full)
    }

    /// [`SqliteStore::open`] with a chosen durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
        Self::open_checkpointing(path.as_ref(), durability, CHECKPOINTS)
    }

    fn open_checkpointing(
        path: &Path,
        durability: Durability,
        checkpoints: CheckpointPolicy,
    ) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::caused_by(format!("cannot create the directory {}", dir.display()), e)
            })?;
        }
        let conn = Connection::open(path)
            .map_err(|e| StoreError::caused_by(format!("cannot open {}", path.display()), e))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err("cannot switch to WAL"))?;
        // Checkpoints run on their own thread (see `checkpointer`), never inside a commit.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(err("cannot turn off automatic checkpoints"))?;
        // A WAL file that grew under a burst is cut back to this size once it is reset.
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)
            .map_err(err("cannot limit the WAL size"))?;
        // The writer learns the WAL's length from each commit and tells the checkpointer.
        conn.wal_hook(Some(note_wal_frames));
        Self::setup(conn, Some((path.to_path_buf(), checkpoints)), durability)
    }

    /// A private in-memory database (tests, `COUNTERSIGN_DB=:memory:` with audit queries).
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn =
            Connection::open_in_memory().map_err(err("cannot open an in-memory database"))?;
        Self::setup(conn, None, Durability::Full)
    }

    /// Starts the threads around `conn`; `file` is where it lives and how it is checkpointed
    /// (`None` in memory).
    fn setup(
        mut conn: Connection,
        file: Option<(PathBuf, CheckpointPolicy)>,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        let (path, policy) = file.unzip();
        conn.pragma_update(None, "synchronous", durability.synchronous())
            .map_err(err("cannot set synchronous"))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(err("cannot enable foreign keys"))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err("cannot set the busy timeout"))?;
        conn.set_prepared_statement_cache_capacity(32);
        conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)
            .map_err(err("cannot size the page cache"))?;
        // Each commit of a group runs in a savepoint, whose undo pages would otherwise go to a
        // temporary file (a write per page on the approval path).
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(err("cannot keep temporary data in memory"))?;
        migrate(&mut conn)?;
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(err("cannot mark the file as Countersign's"))?;
        let reads = path.as_deref().map(spawn_reader).transpose()?;
        let inline = path
            .as_deref()
            .map(|path| {
                let conn = read_connection(path, 0)?;
                Ok::<_, StoreError>(Arc::new(std::sync::Mutex::new(conn)))
            })
            .transpose()?;
        let (jobs, queue) = std::sync::mpsc::channel();
        let jobs = Arc::new(jobs);
        let checkpoints = path
            .as_deref()
            .zip(policy)
            .map(|(path, policy)| {
                spawn_checkpointer(path, durability, policy, Arc::downgrade(&jobs))
            })
            .transpose()?;
        std::thread::Builder::new()
            .name("countersign-store".into())
            .spawn(move || Writer::new(conn, checkpoints).run(queue))
            .map_err(|e| StoreError::caused_by("cannot start the store's writer thread", e))?;
        Ok(SqliteStore {
            jobs,
            reads,
            inline,
            path,
            reserving: Arc::default(),
        })
    }

    /// Where the database file is (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Queues a commit for the writer thread and waits for its outcome.
    async fn write(&self, write: Write) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Commit(Box::new(Commit::new(write)), reply))
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// Runs `f` on the reader's connection (the writer's for an in-memory database). It sees
    /// every commit that returned before it was queued.
    async fn read<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        match &self.reads {
            Some(reads) => ask(|job| reads.send(job).is_ok(), f).await,
            None => self.with(f).await,
        }
    }

    /// Runs a short read (a lookup by key, and decoding what it found) in place when the inline
    /// connection is free; otherwise, or when it fails there (its busy timeout is zero: it never
    /// sleeps on a lock), on the reader thread like [`SqliteStore::read`], whose answer counts
    /// (a failure that is not about locking is thus met twice; it is rare and the read is
    /// idempotent). Blocks the calling task for tens of microseconds with the pages in the OS's
    /// cache.
    async fn point_read<R: Send + 'static>(
        &self,
        f: impl Fn(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        if let Some(mut conn) = self.inline.as_ref().and_then(|c| c.try_lock().ok())
            && let Ok(done) = f(&mut conn)
        {
            return Ok(done);
        }
        self.read(f).await
    }

    /// Runs `f` with the connection on the writer thread, after every job queued before it.
    async fn with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        ask(|job| self.jobs.send(Job::Run(job)).is_ok(), f).await
    }
}

/// Hands `f` to a connection's thread through `send` (false: the thread is gone) and waits for
/// its answer.
async fn ask<R: Send + 'static>(
    send: impl FnOnce(ConnJob) -> bool,
    f: impl FnOnce(&mut Connection) -> Result<R, StoreError> + Send + 'static,
) -> Result<R, StoreError> {
    let (reply, answer) = oneshot::channel();
    if !send(Box::new(move |conn| {
        let _ = reply.send(f(conn));
    })) {
        return Err(gone());
    }
    answer.await.map_err(|_| gone())?
}

/// A read-only connection with the reader's page cache, waiting up to `busy_secs` for a lock.
fn read_connection(path: &Path, busy_secs: u64) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)
        .map_err(|e| StoreError::caused_by(format!("cannot open {}", path.display()), e))?;
    conn.pragma_update(None, "query_only", "ON")
        .map_err(err("cannot make the reader read-only"))?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)
        .map_err(err("cannot size the page cache"))?;
    conn.busy_timeout(std::time::Duration::from_secs(busy_secs))
        .map_err(err("cannot set the busy timeout"))?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}

/// Starts the reader thread: a read-only connection of its own (WAL lets it read while the
/// writer commits); it exits with the last store handle.
fn spawn_reader(path: &Path) -> Result<std::sync::mpsc::Sender<ConnJob>, StoreError> {
    let mut conn = read_connection(path, 5)?;
    let (reads, queue) = std::sync::mpsc::channel::<ConnJob>();
    std::thread::Builder::new()
        .name("countersign-store-reader".into())
        .spawn(move || {
            while let Ok(job) = queue.recv() {
                job(&mut conn);
            }
        })
        .map_err(|e| StoreError::caused_by("cannot start the store's reader thread", e))?;
    Ok(reads)
}

fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(err("cannot read the schema version"))?;
    let newest = MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0);
    if current > newest {
        return Err(StoreError::new(format!(
            "the database has schema version {current}, newer than this build knows ({newest}); \
             use a newer Countersign or another COUNTERSIGN_DB"
        )));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let tx = conn
            .transaction()
            .map_err(err("cannot begin a migration"))?;
        tx.execute_batch(sql)
            .map_err(|e| StoreError::caused_by(format!("migration {version} failed"), e))?;
        if *version == CHAIN_MIGRATION {
            chain::start(&tx)?;
        }
        tx.pragma_update(None, "user_version", version)
            .map_err(err("cannot record the schema version"))?;
        tx.commit().map_err(err("cannot commit a migration"))?;
        tracing::info!(version, "database migrated");
    }
    Ok(())
}

/// Reads session `id`'s lists and answered approvals into `columns` (ADR 0038).
fn read_entries(
    conn: &Connection,
    id: &str,
    columns: &mut RecordColumns,
) -> Result<(), StoreError> {
    let context = "cannot read the session's entries";
    let mut lists: [Vec<String>; 3] = Default::default();
    let mut stmt = conn
        .prepare_cached(
            "SELECT list, body FROM session_entries WHERE session_id = ?1 ORDER BY list, position",
        )
        .map_err(err(context))?;
    let mut rows = stmt.query([id]).map_err(err(context))?;
    while let Some(row) = rows.next().map_err(err(context))? {
        let list: i64 = row.get(0).map_err(err(context))?;
        let entries = usize::try_from(list)
            .ok()
            .and_then(|l| lists.get_mut(l))
            .ok_or_else(|| {
                StoreError::new(format!("session {id}: an entry of unknown list {list}"))
            })?;
        entries.push(row.get(1).map_err(err(context))?);
    }
    let [history, messages, payments] = lists.map(|l| entries_json(l.iter().map(String::as_str)));
    columns.history = history;
    columns.messages = messages;
    columns.payments = payments;
    let mut stmt = conn
        .prepare_cached(
            "SELECT approval_id, body FROM session_resolutions WHERE session_id = ?1
             ORDER BY approval_id",
        )
        .map_err(err(context))?;
    let resolved = stmt
        .query_map([id], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(err(context))?;
    columns.resolved = resolutions_json(resolved.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    Ok(())
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let id = id.to_owned();
        self.point_read(move |conn| {
            // One snapshot for the record and its paused log (dropping it ends the read).
            let conn = conn
                .transaction()
                .map_err(err("cannot begin reading the session"))?;
            let columns = conn
                .prepare_cached(
                    "SELECT wallet, turn, tool_state, created_at_ms, updated_at_ms, owner
                     FROM sessions WHERE id = ?1",
                )
                .and_then(|mut stmt| {
                    stmt.query_row([&id], |row| {
                        Ok(RecordColumns {
                            wallet: row.get(0)?,
                            // An empty text is no turn, as NULL is.
                            turn: row
                                .get::<_, Option<String>>(1)?
                                .filter(|turn| !turn.is_empty()),
                            tool_state: row.get(2)?,
                            created_at_ms: row.get(3)?,
                            updated_at_ms: row.get(4)?,
                            owner: row.get(5)?,
                            history: String::new(),
                            messages: String::new(),
                            payments: String::new(),
                            resolved: String::new(),
                        })
                    })
                    .optional()
                })
                .map_err(err("cannot read the session"))?;
            let Some(mut columns) = columns else {
                return Ok(None);
            };
            read_entries(&conn, &id, &mut columns)?;
            let record = decode_record(&id, columns)?;
            let waiting = record
                .turn
                .as_ref()
                .is_some_and(|t| t.status == TurnStatus::AwaitingPerson);
            let log = if waiting {
                conn.prepare_cached(
                    "SELECT turn_id, entries FROM paused_turn_logs WHERE session_id = ?1",
                )
                .and_then(|mut stmt| {
                    stmt.query_row([&id], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                    })
                    .optional()
                })
                .map_err(err("cannot read the paused turn's log"))?
            } else {
                None
            };
            let paused_log = match log {
                Some((turn_id, entries)) => decode_paused_log(&record, &turn_id, &entries)?,
                None => None,
            };
            Ok(Some(StoredSession::new(record, paused_log)))
        })
        .await
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

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        let approval_id = approval_id.to_owned();
        self.point_read(move |conn| {
            conn.prepare_cached("SELECT session_id FROM pending_approvals WHERE approval_id = ?1")
                .and_then(|mut stmt| stmt.query_row([&approval_id], |row| row.get(0)).optional())
                .map_err(err("cannot look up an approval"))
        })
        .await
    }

    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        let query = query.clone();
        self.read(move |conn| inbox::page(conn, &query)).await
    }

    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        let approval_id = approval_id.to_owned();
        self.point_read(move |conn| inbox::one(conn, &approval_id))
            .await
    }

    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError> {
        self.read(|conn| inbox::counts(conn)).await
    }

    async fn unindexed(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn| inbox::unindexed(conn)).await
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
        // Each file is kept once per chat by its SHA-256: the same file again changes nothing.
        let (chat, sha, media_type, bytes) = (
            chat.to_owned(),
            sha.to_owned(),
            media_type.to_owned(),
            bytes.to_vec(),
        );
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        self.with(move |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO attachments
                     (session_id, sha256, media_type, size, bytes, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![chat, sha, media_type, size, bytes, at])
            })
            .map(|_| ())
            .map_err(err("cannot keep an attachment"))
        })
        .await
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        let (chat, sha) = (chat.to_owned(), sha.to_owned());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT media_type, bytes FROM attachments WHERE session_id = ?1 AND sha256 = ?2",
            )
            .and_then(|mut stmt| {
                stmt.query_row([&chat, &sha], |row| {
                    Ok(StoredFile {
                        media_type: row.get(0)?,
                        bytes: row.get(1)?,
                    })
                })
                .optional()
            })
            .map_err(err("cannot read an attachment"))
        })
        .await
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn| {
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
        self.read(|conn| {
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

    fn database(&self) -> &'static str {
        "sqlite"
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

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let query = query.clone();
        self.read(move |conn| {
            let mut sql = String::from("SELECT seq, event, hash FROM audit WHERE 1 = 1");
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
            if let Some(approval) = &query.approval {
                sql.push_str(" AND approval_id = ?");
                args.push(SqlValue::Text(approval.clone()));
            }
            if let Some(person) = &query.visible_to {
                sql.push_str(
                    " AND (session_id IN (SELECT id FROM sessions WHERE coalesce(owner, 'local') = ?)
                           OR json_extract(event, '$.actor.person') = ?)",
                );
                args.push(SqlValue::Text(person.clone()));
                args.push(SqlValue::Text(person.clone()));
            }
            sql.push_str(" ORDER BY seq DESC LIMIT ?");
            args.push(SqlValue::Integer(query.limit() as i64));
            let mut stmt = conn
                .prepare(&sql)
                .map_err(err("cannot query the audit log"))?;
            let rows: Vec<(i64, String, Option<String>)> = stmt
                .query_map(rusqlite::params_from_iter(args), |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .and_then(|rows| rows.collect())
                .map_err(err("cannot query the audit log"))?;
            rows.into_iter()
                .map(|(seq, event, hash)| {
                    Ok(AuditRecord {
                        seq,
                        event: stored_event(seq, &event)?,
                        hash,
                    })
                })
                .collect()
        })
        .await
    }
}

#[async_trait]
impl ToolListStore for SqliteStore {
    async fn keep_tool_list(&self, server: &str, tools: &str, at: i64) -> Result<(), StoreError> {
        let (server, tools) = (server.to_owned(), tools.to_owned());
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO mcp_tool_lists (server, tools, listed_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (server) DO UPDATE SET tools = excluded.tools,
                 listed_ms = excluded.listed_ms",
                params![server, tools, at],
            )
            .map_err(err("cannot keep an MCP server's tool list"))?;
            Ok(())
        })
        .await
    }

    async fn kept_tool_list(&self, server: &str) -> Result<Option<String>, StoreError> {
        let server = server.to_owned();
        self.with(move |conn| {
            conn.query_row(
                "SELECT tools FROM mcp_tool_lists WHERE server = ?1",
                [server],
                |row| row.get(0),
            )
            .optional()
            .map_err(err("cannot read an MCP server's kept tool list"))
        })
        .await
    }
}

impl SqliteStore {
    /// The server's secret `name` (32 random bytes made at first use, then the same for good;
    /// `what` names it in errors): the sign-in secret, the audit key's seed.
    pub(super) async fn server_secret(
        &self,
        name: &'static str,
        what: &'static str,
    ) -> Result<[u8; 32], StoreError> {
        let fresh = super::fresh_secret()?;
        self.with(move |conn| {
            let (storing, reading) = (
                format!("cannot store the {what}"),
                format!("cannot read the {what}"),
            );
            conn.execute(
                "INSERT INTO server_secrets (name, value) VALUES (?1, ?2)
                 ON CONFLICT (name) DO NOTHING",
                params![name, &fresh[..]],
            )
            .map_err(err(&storing))?;
            let value: Vec<u8> = conn
                .query_row(
                    "SELECT value FROM server_secrets WHERE name = ?1",
                    [name],
                    |row| row.get(0),
                )
                .map_err(err(&reading))?;
            value
                .try_into()
                .map_err(|_| StoreError::new(format!("the stored {what} is not 32 bytes")))
        })
        .await
    }
}

#[async_trait]
impl SignInStore for SqliteStore {
    async fn signing_secret(&self) -> Result<[u8; 32], StoreError> {
        self.server_secret("signin", "sign-in secret").await
    }

    async fn record_signin(&self, signin: &SignIn) -> Result<(), StoreError> {
        let signin = signin.clone();
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO signins (id, created_ms, expires_ms, address, person_id)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    signin.id,
                    signin.created_ms,
                    signin.expires_ms,
                    signin.address,
                    signin.person
                ],
            )
            .map_err(err("cannot record a sign-in"))?;
            // Sessions long expired are of no use to anyone.
            conn.execute(
                "DELETE FROM signins WHERE expires_ms < ?1",
                [signin.created_ms - EXPIRED_SIGNINS_KEPT_MS],
            )
            .map_err(err("cannot forget expired sign-ins"))?;
            Ok(())
        })
        .await
    }

    async fn end_signin(&self, id: &str, at: i64) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.with(move |conn| {
            conn.execute(
                "UPDATE signins SET ended_ms = ?2 WHERE id = ?1 AND ended_ms IS NULL",
                params![id, at],
            )
            .map(|_| ())
            .map_err(err("cannot end a sign-in"))
        })
        .await
    }

    async fn ended_signins(&self, now: i64) -> Result<Vec<(String, i64)>, StoreError> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, expires_ms FROM signins
                     WHERE ended_ms IS NOT NULL AND expires_ms > ?1",
                )
                .map_err(err("cannot list ended sign-ins"))?;
            stmt.query_map([now], |row| Ok((row.get(0)?, row.get(1)?)))
                .and_then(|rows| rows.collect())
                .map_err(err("cannot list ended sign-ins"))
        })
        .await
    }
}

#[cfg(test)]
mod tests;
