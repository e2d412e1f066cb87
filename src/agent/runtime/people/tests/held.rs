//! A memory store whose next paused commit (a turn committing its record and log as it pauses)
//! waits until the test lets it go: the turn's task is then stopped between reading what it
//! has to tell and parking, so a test can change the chat in exactly that window. Its next
//! load can wait the same way, after it has read the chat and before the copy goes live.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::agent::{
    clock::Millis,
    inbox::{InboxQuery, Waiting, WaitingCounts},
    session::{SessionRecord, TurnEntry},
    store::{
        AuditEvent, AuditQuery, AuditRecord, ChainHead, Checkpoint, MemoryStore, SessionStore,
        StoreError, StoredFile, StoredSession,
    },
};

/// Passes everything to `inner`, except that an armed paused commit waits.
#[derive(Default)]
pub(super) struct HeldPause {
    pub(super) inner: Arc<MemoryStore>,
    armed: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
    armed_load: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
}

/// The armed commit's two ends: `reached` resolves when a turn's paused commit is waiting;
/// sending on `release` lets it go on.
pub(super) struct Hold {
    pub(super) reached: oneshot::Receiver<()>,
    pub(super) release: oneshot::Sender<()>,
}

impl HeldPause {
    /// Makes the next paused commit wait.
    pub(super) fn hold_next_pause(&self) -> Hold {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *self.armed.lock().unwrap() = Some((reached_tx, release_rx));
        Hold { reached, release }
    }

    /// Makes the next load wait once it has read the chat (`reached`: it has).
    pub(super) fn hold_next_load(&self) -> Hold {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *self.armed_load.lock().unwrap() = Some((reached_tx, release_rx));
        Hold { reached, release }
    }
}

/// Waits for the test's `release` once `reached` is told, if armed.
async fn hold(armed: &Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>) {
    let armed = armed.lock().unwrap().take();
    if let Some((reached, release)) = armed {
        let _ = reached.send(());
        let _ = release.await;
    }
}

#[async_trait]
impl SessionStore for HeldPause {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let read = self.inner.load(id).await;
        hold(&self.armed_load).await;
        read
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        self.inner.commit(record, audit).await
    }

    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError> {
        hold(&self.armed).await;
        self.inner.commit_paused(record, audit, log).await
    }

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        self.inner.approval_owner(approval_id).await
    }

    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        self.inner.inbox(query).await
    }

    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        self.inner.waiting(approval_id).await
    }

    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError> {
        self.inner.waiting_counts().await
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        self.inner.list().await
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
        self.inner
            .save_attachment(chat, sha, media_type, bytes, at)
            .await
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        self.inner.attachment(chat, sha).await
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        self.inner.unfinished().await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        self.inner.audit(query).await
    }

    async fn chain_head(&self) -> Result<ChainHead, StoreError> {
        self.inner.chain_head().await
    }

    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.inner.chain(after, limit).await
    }

    async fn keep_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.inner.keep_checkpoint(checkpoint).await
    }

    async fn checkpoints(&self, after: i64, limit: usize) -> Result<Vec<Checkpoint>, StoreError> {
        self.inner.checkpoints(after, limit).await
    }

    async fn last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.last_checkpoint().await
    }

    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        self.inner.audit_secret().await
    }

    fn database(&self) -> &'static str {
        self.inner.database()
    }
}
