//! The WAL checkpointer of the SQLite store: a thread of its own copies the WAL into the
//! database file when commits pause or the WAL grows long, never inside a commit.

use super::*;

/// What the writer tells the checkpointer after a commit: how many frames the WAL holds.
pub(super) type WalFrames = std::sync::mpsc::SyncSender<i64>;

thread_local! {
    /// Frames in the WAL after the last commit of this thread's connection (SQLite's WAL hook;
    /// the writer thread owns exactly one connection).
    pub(super) static WAL_FRAMES: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

pub(super) fn note_wal_frames(
    _: &rusqlite::hooks::Wal,
    frames: std::os::raw::c_int,
) -> rusqlite::Result<()> {
    WAL_FRAMES.with(|f| f.set(i64::from(frames)));
    Ok(())
}

/// When the checkpointer copies the WAL into the database file. Each checkpoint ends with an
/// fsync of the database file that delays any commit whose own fsync overlaps it, so it waits
/// for a quiet moment.
#[derive(Debug, Clone, Copy)]
pub(super) struct CheckpointPolicy {
    /// No commit for this long: copy now.
    pub(super) quiet: std::time::Duration,
    /// This many frames appended since the last checkpoint: copy even while commits go on.
    pub(super) busy_frames: i64,
    /// The WAL holds this many frames (a checkpoint could never finish under a steady stream of
    /// commits): a RESTART checkpoint, which makes commits wait while it completes, so that the
    /// next commit starts the WAL over instead of growing it without bound.
    pub(super) restart_frames: i64,
}

pub(super) const CHECKPOINTS: CheckpointPolicy = CheckpointPolicy {
    quiet: std::time::Duration::from_millis(100),
    // 4 KiB pages: 32 MiB of WAL, a few thousand commits.
    busy_frames: 8192,
    restart_frames: 65536,
};

/// Starts the thread that copies the WAL into the database file while commits go on (a
/// PASSIVE checkpoint never blocks the writer), at the moments [`CHECKPOINTS`] picks. It exits
/// with the writer.
pub(super) fn spawn_checkpointer(
    path: &Path,
    durability: Durability,
    policy: CheckpointPolicy,
    writer: Weak<std::sync::mpsc::Sender<Job>>,
) -> Result<WalFrames, StoreError> {
    let conn = Connection::open(path)
        .map_err(|e| StoreError::caused_by(format!("cannot open {}", path.display()), e))?;
    conn.pragma_update(None, "synchronous", durability.synchronous())
        .map_err(err("cannot set synchronous"))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(err("cannot set the busy timeout"))?;
    let (notify, commits) = std::sync::mpsc::sync_channel::<i64>(64);
    std::thread::Builder::new()
        .name("countersign-checkpoint".into())
        .spawn(move || checkpointer(&conn, &commits, &writer, policy))
        .map_err(|e| StoreError::caused_by("cannot start the checkpoint thread", e))?;
    Ok(notify)
}

/// The checkpointer's loop: `commits` brings the WAL's length after each commit.
///
/// After a checkpoint that copied the whole WAL, the next commit starts the WAL over, and with
/// `synchronous=FULL` it first writes and fsyncs a new WAL header: a second fsync on the path
/// of whatever commit comes first after a quiet moment, typically a person's approval. So the
/// checkpointer has the writer start the WAL over right away, with a write of its own
/// ([`start_wal_over`]), while nobody waits.
pub(super) fn checkpointer(
    conn: &Connection,
    commits: &std::sync::mpsc::Receiver<i64>,
    writer: &Weak<std::sync::mpsc::Sender<Job>>,
    policy: CheckpointPolicy,
) {
    use std::sync::mpsc::RecvTimeoutError;
    // Frames of the WAL already in the database file (0 once the WAL started over).
    let mut copied = 0i64;
    while let Ok(mut frames) = commits.recv() {
        let mut open = true;
        loop {
            if frames < copied {
                copied = 0;
            }
            if frames - copied >= policy.busy_frames {
                break;
            }
            match commits.recv_timeout(policy.quiet) {
                Ok(now) => frames = now,
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        let mode = if frames >= policy.restart_frames {
            "RESTART"
        } else {
            "PASSIVE"
        };
        match conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        }) {
            Ok((busy, log, done)) => {
                copied = done.max(0);
                if busy == 0 && log > 0 && done == log {
                    // Not a commit: it does not wake this loop again.
                    if let Some(writer) = writer.upgrade() {
                        let _ = writer.send(Job::Run(Box::new(start_wal_over)));
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed; the next one retries"),
        }
        if !open {
            return;
        }
    }
}

/// The database file's `application_id` (the header field SQLite reserves for the application
/// that owns the file): "CSGN".
pub(super) const APPLICATION_ID: i64 = 0x4353_474e;

/// A write that starts a fully checkpointed WAL over (see [`checkpointer`]): the file header's
/// `application_id`, rewritten with the value it has.
pub(super) fn start_wal_over(conn: &mut Connection) {
    if let Err(e) = conn.pragma_update(None, "application_id", APPLICATION_ID) {
        tracing::warn!(error = %e, "cannot start the WAL over; the next commit will");
    }
}
