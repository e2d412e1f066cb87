//! The SQLite store's writer thread: commits taken from a queue, grouped into one
//! transaction (each in its own savepoint), views rewritten only when they changed.

use super::*;

/// A commit on the writer's queue: the record as the caller encoded it (so the writer thread
/// only writes), with a fingerprint of its views.
pub(super) struct Commit {
    write: Write,
    /// A fingerprint of `write`'s approvals and browser calls: unchanged views are not rewritten.
    views: u64,
}

impl Commit {
    pub(super) fn new(write: Write) -> Self {
        let views = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            write.approvals.hash(&mut h);
            write.browser_calls.hash(&mut h);
            h.finish()
        };
        Commit { write, views }
    }
}

/// What the writer knows is on disk for a session, so it can skip unchanged views.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Written {
    views: u64,
}

/// The writer thread's state.
pub(super) struct Writer {
    conn: Connection,
    written: HashMap<String, Written>,
    checkpoints: Option<WalFrames>,
}

impl Writer {
    pub(super) fn new(conn: Connection, checkpoints: Option<WalFrames>) -> Self {
        Writer {
            conn,
            written: HashMap::new(),
            checkpoints,
        }
    }

    /// Takes jobs until every [`SqliteStore`] handle is gone. Jobs run in the order they were
    /// queued; commits next to each other in the queue share one transaction.
    pub(super) fn run(mut self, queue: std::sync::mpsc::Receiver<Job>) {
        let mut next = queue.recv().ok();
        while let Some(job) = next.take() {
            match job {
                Job::Run(f) => {
                    f(&mut self.conn);
                    next = queue.recv().ok();
                }
                Job::Commit(write, reply) => {
                    let mut group = vec![(write, reply)];
                    loop {
                        if group.len() >= MAX_GROUP {
                            break;
                        }
                        match queue.try_recv() {
                            Ok(Job::Commit(write, reply)) => group.push((write, reply)),
                            Ok(other) => {
                                next = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.commit_group(group);
                    if next.is_none() {
                        next = queue.recv().ok();
                    }
                }
            }
        }
    }

    fn commit_group(&mut self, group: Vec<(Box<Commit>, Reply)>) {
        let mut outcomes = Vec::with_capacity(group.len());
        let result = (|| {
            let mut tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err("cannot begin a commit"))?;
            for (commit, _) in &group {
                let id = &commit.write.id;
                let sp = tx.savepoint().map_err(err("cannot begin a commit"))?;
                let outcome = write_one(&sp, commit, self.written.get(id).copied());
                match outcome {
                    Ok(()) => {
                        sp.commit().map_err(err("cannot commit"))?;
                        if self.written.len() >= MAX_WRITTEN && !self.written.contains_key(id) {
                            // Forgetting only costs the next commit of a session its views.
                            self.written.clear();
                        }
                        self.written.insert(
                            id.clone(),
                            Written {
                                views: commit.views,
                            },
                        );
                        outcomes.push(Ok(()));
                    }
                    Err(e) => {
                        // Dropping the savepoint rolls this record back; the others go on.
                        drop(sp);
                        self.written.remove(id);
                        outcomes.push(Err(e));
                    }
                }
            }
            tx.commit().map_err(err("cannot commit"))
        })();
        match result {
            Ok(()) => {
                for ((_, reply), outcome) in group.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
                if let Some(checkpoints) = &self.checkpoints {
                    // A full queue means the checkpointer is busy; it hears the next commit.
                    let _ = checkpoints.try_send(WAL_FRAMES.with(std::cell::Cell::get));
                }
            }
            Err(e) => {
                // Nothing of this group is on disk: forget what we thought we knew.
                for (commit, reply) in group {
                    self.written.remove(&commit.write.id);
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Writes what changed in the record's lists and answered approvals (ADR 0038): each list's rows
/// from its first changed entry on are replaced, the approvals' rows that changed are upserted or
/// deleted.
fn write_entries(tx: &rusqlite::Connection, w: &Write) -> Result<(), StoreError> {
    let context = "cannot write the session's entries";
    for change in &w.entries {
        tx.prepare_cached(
            "DELETE FROM session_entries WHERE session_id = ?1 AND list = ?2 AND position >= ?3",
        )
        .and_then(|mut stmt| stmt.execute(params![w.id, change.list.code(), change.from]))
        .map_err(err(context))?;
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO session_entries (session_id, list, position, body)
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(err(context))?;
        for (position, body) in (change.from..).zip(&change.bodies) {
            insert
                .execute(params![w.id, change.list.code(), position, body])
                .map_err(err(context))?;
        }
    }
    let r = &w.resolutions;
    if r.whole {
        tx.prepare_cached("DELETE FROM session_resolutions WHERE session_id = ?1")
            .and_then(|mut stmt| stmt.execute([&w.id]))
            .map_err(err(context))?;
    }
    for approval in &r.removed {
        tx.prepare_cached(
            "DELETE FROM session_resolutions WHERE session_id = ?1 AND approval_id = ?2",
        )
        .and_then(|mut stmt| stmt.execute([&w.id, approval]))
        .map_err(err(context))?;
    }
    for (approval, body) in &r.upserts {
        tx.prepare_cached(
            "INSERT INTO session_resolutions (session_id, approval_id, body) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id, approval_id) DO UPDATE SET body = excluded.body",
        )
        .and_then(|mut stmt| stmt.execute([&w.id, approval, body]))
        .map_err(err(context))?;
    }
    Ok(())
}

/// Writes one record, its views and its audit rows. `known` is what the last commit of this
/// session put on disk (`None`: rewrite everything).
pub(super) fn write_one(
    tx: &rusqlite::Connection,
    commit: &Commit,
    known: Option<Written>,
) -> Result<(), StoreError> {
    let Commit { write: w, views } = commit;
    tx.prepare_cached(
        "INSERT INTO sessions (id, created_at_ms, updated_at_ms, turn_status, wallet, turn,
                               tool_state, owner)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (id) DO UPDATE SET
             updated_at_ms = excluded.updated_at_ms, turn_status = excluded.turn_status,
             wallet = excluded.wallet, turn = excluded.turn, tool_state = excluded.tool_state,
             owner = coalesce(sessions.owner, excluded.owner)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            w.id,
            w.created_at_ms,
            w.updated_at_ms,
            w.status,
            w.wallet,
            w.turn,
            w.tool_state,
            w.owner,
        ])
    })
    .map_err(err("cannot write the session"))?;
    write_entries(tx, w)?;

    // The paused turn's log: written when the turn pauses, gone when the turn is over.
    if let Some((turn_id, entries)) = &w.log {
        tx.prepare_cached(
            "INSERT INTO paused_turn_logs (session_id, turn_id, entries) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id) DO UPDATE SET
                 turn_id = excluded.turn_id, entries = excluded.entries",
        )
        .and_then(|mut stmt| stmt.execute(params![w.id, turn_id, entries]))
        .map_err(err("cannot write the paused turn's log"))?;
    } else if w.turn_over {
        tx.prepare_cached("DELETE FROM paused_turn_logs WHERE session_id = ?1")
            .and_then(|mut stmt| stmt.execute([&w.id]))
            .map_err(err("cannot drop the paused turn's log"))?;
    }

    // The indexed views of the record, rewritten only when they changed.
    if known.map(|k| k.views) != Some(*views) {
        super::inbox::clear(tx, &w.id)?;
        tx.prepare_cached("DELETE FROM pending_browser_calls WHERE session_id = ?1")
            .and_then(|mut stmt| stmt.execute([&w.id]))
            .map_err(err("cannot clear the pending calls"))?;
        super::inbox::write(tx, &w.id, &w.approvals)?;
        for b in &w.browser_calls {
            tx.prepare_cached(
                "INSERT INTO pending_browser_calls (tool_call_id, session_id, tool, args,
                     deadline_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![b.tool_call_id, w.id, b.tool, b.args, b.deadline_ms])
            })
            .map_err(err("cannot write a pending browser call"))?;
        }
    }
    // The ledger only grows (payments are never undone): the commit carries the new rows.
    for t in &w.ledger {
        tx.prepare_cached(
            "INSERT INTO ledger (transaction_id, session_id, tool_call_id, amount_cents, currency,
                 recipient, description, balance_after_cents, at_ms, paid_minor, paid_currency)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (transaction_id) DO NOTHING",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                t.id,
                w.id,
                t.tool_call_id,
                t.amount_cents,
                t.currency,
                t.recipient,
                t.description,
                t.balance_after_cents,
                t.timestamp_ms,
                t.paid.as_ref().map(|p| p.amount_minor),
                t.paid.as_ref().map(|p| p.currency.as_str()),
            ])
        })
        .map_err(err("cannot write the ledger"))?;
    }
    super::chain::append(tx, &w.audit)
}
