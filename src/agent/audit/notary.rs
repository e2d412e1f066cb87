//! The server's notary of its audit chain (ADR 0029): it checks the chain as the store has it
//! — every record's hash from the one before, every checkpoint's signature and hash — and signs
//! the head when it holds: every [`EVERY`] records, when a receipt or an export asks, and at
//! shutdown. A chain that no longer holds (a record changed, deleted or moved in the database)
//! is never signed again; the `/audit` page shows where it broke.
//!
//! On a database several instances share, each instance's notary checks and signs the one
//! chain with the one key (the store's); two checkpoints of the same record are one.

use std::sync::{Arc, Mutex};

use super::{
    chain::{Broken, Head, Walk, hex},
    checkpoint::{Checkpoint, CheckpointKey},
};
use crate::{
    agent::{
        clock::Clock,
        lock,
        store::{SessionStore, StoreError},
    },
    protocol::audit::{BrokenLink, ChainStatus},
};

/// A checkpoint is signed once this many records came after the last one.
pub const EVERY: i64 = 100;

/// Records read at once while checking the chain.
const PAGE: usize = 1_000;

/// Checkpoints read at once while checking the chain.
const CHECKPOINT_PAGE: usize = 1_000;

/// How often the notary looks whether a checkpoint is due.
pub const POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Why the notary did not sign.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotaryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain does not hold at a record: the notary signs nothing after it.
    #[error("the audit chain is broken at #{}: {}", .0.seq, .0.problem)]
    Broken(Broken),
}

/// How far the chain was checked.
#[derive(Debug, Clone, Copy, Default)]
struct Checked {
    /// The last record checked, and its hash.
    head: Head,
    since: i64,
}

/// Checks and signs the audit chain of one store.
pub struct Notary {
    store: Arc<dyn SessionStore>,
    key: CheckpointKey,
    clock: Arc<dyn Clock>,
    every: i64,
    /// One check at a time, from where the last one stopped.
    checked: tokio::sync::Mutex<Checked>,
    status: Mutex<ChainStatus>,
}

impl std::fmt::Debug for Notary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notary").field("key", &self.key).finish()
    }
}

impl Notary {
    /// The notary of `store`'s chain, with the store's checkpoint key (made on first start),
    /// signing every `every` records.
    pub async fn new(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        every: i64,
    ) -> Result<Arc<Notary>, StoreError> {
        let key = CheckpointKey::from_seed(&store.audit_secret().await?);
        let status = ChainStatus {
            key: key.public(),
            ..ChainStatus::default()
        };
        Ok(Arc::new(Notary {
            store,
            key,
            clock,
            every: every.max(1),
            checked: tokio::sync::Mutex::new(Checked::default()),
            status: Mutex::new(status),
        }))
    }

    /// The public key checkpoints are signed with (hex).
    pub fn public_key(&self) -> String {
        self.key.public()
    }

    /// How far the chain was checked and signed, and where it broke.
    pub fn status(&self) -> ChainStatus {
        lock(&self.status).clone()
    }

    /// [`Notary::status`], after checking the chain once if it never was (the page asked before
    /// the start's check ran).
    pub async fn status_now(&self) -> ChainStatus {
        let status = self.status();
        if status.verified.is_none()
            && status.broken.is_none()
            && let Err(e) = self.checkpoint().await
        {
            tracing::debug!(error = %e, "the audit chain was not signed for the page");
        }
        let mut status = self.status();
        if let Ok(head) = self.store.chain_head().await {
            status.head = head.head.seq;
        }
        status
    }

    /// Checks the chain up to its head and signs the head, unless a checkpoint signed it
    /// already: the checkpoint that covers the whole chain now.
    pub async fn checkpoint(&self) -> Result<Checkpoint, NotaryError> {
        let mut checked = self.checked.lock().await;
        let chain = self.store.chain_head().await?;
        let last = self.check(&mut checked, chain.since).await?;
        if let Some(last) = last.filter(|c| c.seq >= checked.head.seq) {
            self.signed(&last, checked.head.seq);
            return Ok(last);
        }
        let head = checked.head;
        let checkpoint = self
            .key
            .sign(head.seq, &head.hash, checked.since, self.clock.now_ms());
        self.store.keep_checkpoint(&checkpoint).await?;
        tracing::debug!(seq = head.seq, "audit chain checkpoint signed");
        self.signed(&checkpoint, head.seq);
        Ok(checkpoint)
    }

    /// [`Notary::checkpoint`] when [`EVERY`] records came after the last checkpoint.
    pub async fn checkpoint_if_due(&self) -> Result<Option<Checkpoint>, NotaryError> {
        let head = self.store.chain_head().await?.head.seq;
        let last = self.store.last_checkpoint().await?.map_or(0, |c| c.seq);
        if head - last < self.every {
            lock(&self.status).head = head;
            return Ok(None);
        }
        self.checkpoint().await.map(Some)
    }

    /// Checks the records after those checked already, and the checkpoints among them; returns
    /// the last checkpoint of the chain.
    async fn check(
        &self,
        checked: &mut Checked,
        since: i64,
    ) -> Result<Option<Checkpoint>, NotaryError> {
        if checked.since != since {
            *checked = Checked {
                head: Head::default(),
                since,
            };
        }
        let mut walk = if checked.head.seq == 0 {
            Walk::from_start(since)
        } else {
            Walk::from(checked.head, since)
        };
        let mut last = None;
        let mut pending = std::collections::VecDeque::new();
        let mut checkpoints_after = checked.head.seq;
        loop {
            if pending.is_empty() {
                let more = self
                    .store
                    .checkpoints(checkpoints_after, CHECKPOINT_PAGE)
                    .await?;
                if let Some(c) = more.last() {
                    checkpoints_after = c.seq;
                }
                pending.extend(more);
            }
            let records = self.store.chain(walk.head().seq, PAGE).await?;
            let Some(end) = records.last().map(|r| r.seq) else {
                break;
            };
            for record in &records {
                let head = walk.record(record).map_err(|b| self.broke(b))?;
                while let Some(c) = pending.front().filter(|c| c.seq <= head.seq) {
                    self.check_checkpoint(c, &head)?;
                    last = pending.pop_front();
                }
                if pending.is_empty() && head.seq < end {
                    let more = self
                        .store
                        .checkpoints(checkpoints_after, CHECKPOINT_PAGE)
                        .await?;
                    if let Some(c) = more.last() {
                        checkpoints_after = c.seq;
                    }
                    pending.extend(more);
                }
            }
            checked.head = walk.head();
        }
        if let Some(c) = pending.front() {
            return Err(self.broke(Broken {
                seq: c.seq,
                problem: format!(
                    "a checkpoint signed record #{} but the chain ends at #{}: records were deleted",
                    c.seq,
                    walk.head().seq
                ),
            }));
        }
        match last {
            Some(last) => Ok(Some(last)),
            None => Ok(self.store.last_checkpoint().await?),
        }
    }

    /// Whether checkpoint `c` is ours and signs the chain's hash at its record (`at`).
    fn check_checkpoint(&self, c: &Checkpoint, at: &Head) -> Result<(), NotaryError> {
        if c.seq != at.seq {
            return Err(self.broke(Broken {
                seq: c.seq,
                problem: format!("a checkpoint signed record #{}, which is missing", c.seq),
            }));
        }
        if let Err(e) = c.verify(Some(&self.key.public())) {
            return Err(self.broke(Broken {
                seq: c.seq,
                problem: format!("its checkpoint does not verify: {e}"),
            }));
        }
        if !c.hash.eq_ignore_ascii_case(&hex(&at.hash)) {
            return Err(self.broke(Broken {
                seq: c.seq,
                problem: format!(
                    "the chain no longer matches the checkpoint signed at {} ms: records up to \
                     here were rewritten",
                    c.at_ms
                ),
            }));
        }
        Ok(())
    }

    fn broke(&self, broken: Broken) -> NotaryError {
        tracing::error!(seq = broken.seq, problem = %broken.problem, "the audit chain does not hold; no checkpoint is signed");
        lock(&self.status).broken = Some(BrokenLink {
            seq: broken.seq,
            problem: broken.problem.clone(),
        });
        NotaryError::Broken(broken)
    }

    fn signed(&self, checkpoint: &Checkpoint, head: i64) {
        let mut status = lock(&self.status);
        status.head = head;
        status.verified = Some(checkpoint.seq);
        status.signed_at_ms = Some(checkpoint.at_ms);
        status.broken = None;
    }

    /// Checks the chain now and then signs it every [`EVERY`] records, until `stop`; then
    /// signs the head one last time (shutdown).
    pub fn spawn(
        self: &Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let notary = self.clone();
        tokio::spawn(async move {
            // The whole chain is checked once at start (the page's "verified up to").
            if let Err(e) = notary.checkpoint().await {
                tracing::warn!(error = %e, "the audit chain was not signed at start");
            }
            let mut ticks = tokio::time::interval(POLL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    () = stop.cancelled() => break,
                }
                if let Err(e) = notary.checkpoint_if_due().await
                    && !matches!(e, NotaryError::Broken(_))
                {
                    tracing::warn!(error = %e, "cannot sign the audit chain now");
                }
            }
            match notary.checkpoint().await {
                Ok(c) => tracing::info!(seq = c.seq, "audit chain signed at shutdown"),
                Err(e) => tracing::error!(error = %e, "the audit chain was not signed at shutdown"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::{
        clock::TokioClock,
        store::{AuditKind, MemoryStore, PolicyStore, audit::sample},
    };

    async fn append(store: &MemoryStore, n: usize) {
        let events: Vec<_> = (0..n)
            .map(|i| sample("c", AuditKind::Requested, json!({"i": i})))
            .collect();
        store.append_audit(&events).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_head_is_signed_every_so_many_records_and_at_shutdown() {
        let store = Arc::new(MemoryStore::default());
        let clock = Arc::new(TokioClock::starting_at(1_000));
        let notary = Notary::new(store.clone(), clock.clone(), 10).await.unwrap();
        append(&store, 9).await;
        assert_eq!(notary.checkpoint_if_due().await.unwrap(), None, "9 < 10");
        append(&store, 1).await;
        let first = notary
            .checkpoint_if_due()
            .await
            .unwrap()
            .expect("10 records");
        assert_eq!(first.seq, 10);
        assert!(first.verify(Some(&notary.public_key())).is_ok());
        let status = notary.status();
        assert_eq!(
            (status.verified, status.signed_at_ms),
            (Some(10), Some(1_000))
        );
        // Nothing new: the same checkpoint, not a second one.
        assert_eq!(notary.checkpoint().await.unwrap(), first);
        assert_eq!(store.checkpoints(0, 10).await.unwrap().len(), 1);

        // At shutdown the head is signed, however few records came after.
        let stop = tokio_util::sync::CancellationToken::new();
        let task = notary.spawn(stop.clone());
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        append(&store, 3).await;
        assert_eq!(store.last_checkpoint().await.unwrap().unwrap().seq, 10);
        stop.cancel();
        task.await.unwrap();
        assert_eq!(store.last_checkpoint().await.unwrap().unwrap().seq, 13);
        // The same key from the same store, after a restart.
        let again = Notary::new(store.clone(), clock, 10).await.unwrap();
        assert_eq!(again.public_key(), notary.public_key());
    }

    #[tokio::test]
    async fn a_checkpoint_that_no_longer_matches_the_chain_stops_the_signing() {
        let store = Arc::new(MemoryStore::default());
        let notary = Notary::new(store.clone(), Arc::new(TokioClock::starting_at(5)), 100)
            .await
            .unwrap();
        append(&store, 3).await;
        notary.checkpoint().await.unwrap();
        // A checkpoint of another chain (a rewrite re-signed elsewhere, or a forged one).
        let other = CheckpointKey::from_seed(&[9; 32]).sign(3, &[1; 32], 0, 6);
        store
            .keep_checkpoint(&Checkpoint { seq: 4, ..other })
            .await
            .unwrap();
        append(&store, 2).await;
        let fresh = Notary::new(store.clone(), Arc::new(TokioClock::starting_at(7)), 100)
            .await
            .unwrap();
        let Err(NotaryError::Broken(broken)) = fresh.checkpoint().await else {
            panic!("a foreign checkpoint must break the chain");
        };
        assert_eq!(broken.seq, 4);
        assert_eq!(fresh.status().broken.map(|b| b.seq), Some(4));
        assert_eq!(
            store.last_checkpoint().await.unwrap().unwrap().seq,
            4,
            "nothing new signed"
        );
    }
}
