//! The embedded durable store: one SQLite file (`COUNTERSIGN_DB`, default `data/countersign.db`).
//!
//! - Migrations live in `migrations/` and are compiled in (`sqlite/migrate.rs`); the applied
//!   version is SQLite's `user_version`, so a newer binary upgrades an older file at start-up and
//!   an older binary refuses a newer file instead of misreading it.
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
//!
//! This file opens the database and runs its threads (the writer, the reader, the checkpointer)
//! and the reads in place; what is kept, store trait by store trait, is in `sqlite/`: chats and
//! the audit log (`sessions.rs`, the chain in `chain.rs`), the inbox's index (`inbox.rs`), the
//! policy's grants and reservations (`policy.rs`), people (`people.rs`), sign-ins and the
//! server's secrets (`signins.rs`), MCP servers' tool lists (`tool_lists.rs`).

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Weak},
};

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use super::{StoreError, encode::Write};

mod chain;
mod checkpoint;
mod inbox;
mod migrate;
mod people;
mod policy;
mod sessions;
mod signins;
mod tool_lists;
mod writer;

use checkpoint::*;
use migrate::migrate;
use writer::*;

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

#[cfg(test)]
mod tests;
