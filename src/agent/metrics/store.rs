//! The store's boundary, metered: [`Metered`] wraps the runtime's [`SessionStore`] and counts
//! what passes through it: commits and their latency, and errors by operation. Every call is
//! passed on as it is; nothing else changes.

use std::{sync::Arc, time::Instant};

use async_trait::async_trait;

use super::{Metrics, StoreOp};
use crate::agent::{
    clock::Millis,
    inbox::{InboxQuery, Waiting, WaitingCounts},
    session::{SessionRecord, TurnEntry},
    store::{
        AuditEvent, AuditQuery, AuditRecord, ChainHead, Checkpoint, SessionStore, StoreError,
        StoreNews, StoredFile, StoredSession,
    },
};

/// A [`SessionStore`] whose calls are counted in [`Metrics`].
pub struct Metered {
    inner: Arc<dyn SessionStore>,
    metrics: Arc<Metrics>,
}

impl Metered {
    pub fn wrap(inner: Arc<dyn SessionStore>, metrics: Arc<Metrics>) -> Arc<dyn SessionStore> {
        Arc::new(Metered { inner, metrics })
    }

    /// `result`, with its error counted as `op`'s.
    fn count<T>(&self, op: StoreOp, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if result.is_err() {
            self.metrics.store_error(op);
        }
        result
    }

    /// Commits with `write`, timing it.
    async fn timed(
        &self,
        write: impl Future<Output = Result<(), StoreError>>,
    ) -> Result<(), StoreError> {
        let started = Instant::now();
        let result = write.await;
        self.metrics.committed(started.elapsed());
        self.count(StoreOp::Commit, result)
    }
}

#[async_trait]
impl SessionStore for Metered {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.count(StoreOp::Load, self.inner.load(id).await)
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        self.timed(self.inner.commit(record, audit)).await
    }

    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError> {
        self.timed(self.inner.commit_paused(record, audit, log))
            .await
    }

    async fn save(&self, record: &SessionRecord) -> Result<(), StoreError> {
        self.timed(self.inner.save(record)).await
    }

    async fn chat_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        self.count(StoreOp::Load, self.inner.chat_owner(id).await)
    }

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        self.count(StoreOp::Read, self.inner.approval_owner(approval_id).await)
    }

    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        self.count(StoreOp::Read, self.inner.inbox(query).await)
    }

    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        self.count(StoreOp::Read, self.inner.waiting(approval_id).await)
    }

    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError> {
        self.count(StoreOp::Read, self.inner.waiting_counts().await)
    }

    async fn unindexed(&self) -> Result<Vec<String>, StoreError> {
        self.count(StoreOp::Read, self.inner.unindexed().await)
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        self.count(StoreOp::Read, self.inner.list().await)
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
        let saved = self
            .inner
            .save_attachment(chat, sha, media_type, bytes, at)
            .await;
        self.count(StoreOp::Write, saved)
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        self.count(StoreOp::Read, self.inner.attachment(chat, sha).await)
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        self.count(StoreOp::Read, self.inner.unfinished().await)
    }

    async fn resumable(&self) -> Result<Vec<String>, StoreError> {
        self.count(StoreOp::Read, self.inner.resumable().await)
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        self.count(StoreOp::Read, self.inner.audit(query).await)
    }

    async fn chain_head(&self) -> Result<ChainHead, StoreError> {
        self.count(StoreOp::Read, self.inner.chain_head().await)
    }

    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.count(StoreOp::Read, self.inner.chain(after, limit).await)
    }

    async fn keep_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.count(StoreOp::Write, self.inner.keep_checkpoint(checkpoint).await)
    }

    async fn checkpoints(&self, after: i64, limit: usize) -> Result<Vec<Checkpoint>, StoreError> {
        self.count(StoreOp::Read, self.inner.checkpoints(after, limit).await)
    }

    async fn last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        self.count(StoreOp::Read, self.inner.last_checkpoint().await)
    }

    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        self.count(StoreOp::Read, self.inner.audit_secret().await)
    }

    fn database(&self) -> &'static str {
        self.inner.database()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.count(StoreOp::Ping, self.inner.ping().await)
    }

    async fn live_instances(&self) -> Result<u64, StoreError> {
        self.count(StoreOp::Read, self.inner.live_instances().await)
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    async fn stale(&self, id: &str) -> Result<bool, StoreError> {
        self.count(StoreOp::Read, self.inner.stale(id).await)
    }

    async fn overdue(&self, before: Millis) -> Result<Vec<String>, StoreError> {
        self.count(StoreOp::Read, self.inner.overdue(before).await)
    }

    async fn orphaned(&self) -> Result<Vec<String>, StoreError> {
        self.count(StoreOp::Read, self.inner.orphaned().await)
    }

    async fn keep_log(&self, chat: &str, turn: &str, log: &[TurnEntry]) -> Result<(), StoreError> {
        self.count(StoreOp::Write, self.inner.keep_log(chat, turn, log).await)
    }

    fn news(&self) -> Option<tokio::sync::broadcast::Receiver<StoreNews>> {
        self.inner.news()
    }

    async fn announce(&self, news: StoreNews) -> Result<(), StoreError> {
        self.count(StoreOp::Write, self.inner.announce(news).await)
    }
}
