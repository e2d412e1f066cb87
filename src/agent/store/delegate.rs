//! A store in front of another: [`Delegate`] passes every [`SessionStore`] call on to its inner
//! store, through a [`Hook`] that sees which call it is ([`Call`]) and runs it — as it is, timed
//! and counted (the metrics' `Metered`), or held until a test lets it go (a commit stopped in a
//! chosen window, to test a race deterministically).
//!
//! Every method of the trait is forwarded here, the ones with a default too, so a wrapped store
//! behaves exactly as its inner one (no default stands in for what the inner store does). A
//! method added to [`SessionStore`] must be added here as well. A store of people
//! ([`PeopleStore`]) is delegated the same way, its calls seen as [`Call::Read`] and
//! [`Call::Write`] by the method's name (a test has a person removed "on another instance" as
//! a read of the people returns). The policy's store is not: the window its tests need lies
//! inside one call ([`PolicyStore::reserve`](super::PolicyStore::reserve) between its read and
//! its write), where no hook around the call can reach.

use std::{future::Future, sync::Arc};

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::{
    AuditEvent, AuditQuery, AuditRecord, ChainHead, Checkpoint, PeopleStore, SessionStore,
    StoreError, StoreNews, StoredFile, StoredSession,
};
use crate::agent::{
    clock::Millis,
    inbox::{InboxQuery, Waiting, WaitingCounts},
    people::{Invite, InviteKind, Person, StoredPasskey},
    session::{SessionRecord, TurnEntry},
};

/// A call to the store, as a [`Hook`] sees it.
#[derive(Debug, Clone, Copy)]
pub enum Call<'a> {
    /// [`SessionStore::load`]: a whole chat read (`head`: [`SessionStore::load_head`], its
    /// head only).
    Load { id: &'a str, head: bool },
    /// [`SessionStore::chat_owner`]: whether a chat is stored, and whose it is.
    ChatOwner { id: &'a str },
    /// [`SessionStore::commit`], [`SessionStore::commit_paused`] (with its `log`) or
    /// [`SessionStore::save`] (no audit events).
    Commit {
        record: &'a SessionRecord,
        audit: &'a [AuditEvent],
        log: Option<&'a [TurnEntry]>,
    },
    /// Any other read, by the method's name (lists, the inbox, the audit log, attachments, the
    /// chain, versions, instances).
    Read(&'static str),
    /// Any other write, by the method's name (attachments, checkpoints, a running turn's log,
    /// news).
    Write(&'static str),
    /// [`SessionStore::ping`].
    Ping,
}

/// What a [`Delegate`] does with each call.
pub trait Hook: Send + Sync + 'static {
    /// Runs `call`, whose inner store's future is `run`, and returns its result: `run.await`
    /// for a hook that only looks, and whatever it likes before or after.
    fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'a;
}

/// A hook shared with whoever holds it too (a test that arms it, then reads what it saw).
impl<H: Hook> Hook for Arc<H> {
    fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'a {
        H::around(self, call, run)
    }
}

/// `inner`, every call of which goes through `hook`.
pub struct Delegate<H, S: ?Sized = dyn SessionStore> {
    inner: Arc<S>,
    hook: H,
}

impl<H: Hook, S: ?Sized> Delegate<H, S> {
    pub fn new(inner: Arc<S>, hook: H) -> Self {
        Delegate { inner, hook }
    }

    /// The store calls are passed on to.
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    pub fn hook(&self) -> &H {
        &self.hook
    }
}

#[async_trait]
impl<H: Hook, S: SessionStore + ?Sized> SessionStore for Delegate<H, S> {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.hook
            .around(Call::Load { id, head: false }, self.inner.load(id))
            .await
    }

    async fn load_head(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.hook
            .around(Call::Load { id, head: true }, self.inner.load_head(id))
            .await
    }

    async fn read_entries(
        &self,
        id: &str,
        lens: [usize; 2],
    ) -> Result<[Vec<String>; 2], StoreError> {
        self.hook
            .around(
                Call::Read("read_entries"),
                self.inner.read_entries(id, lens),
            )
            .await
    }

    async fn read_resolutions(
        &self,
        id: &str,
        approvals: Option<&[String]>,
    ) -> Result<String, StoreError> {
        self.hook
            .around(
                Call::Read("read_resolutions"),
                self.inner.read_resolutions(id, approvals),
            )
            .await
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        let call = Call::Commit {
            record,
            audit,
            log: None,
        };
        self.hook
            .around(call, self.inner.commit(record, audit))
            .await
    }

    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError> {
        let call = Call::Commit {
            record,
            audit,
            log: Some(log),
        };
        let run = self.inner.commit_paused(record, audit, log);
        self.hook.around(call, run).await
    }

    async fn save(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let call = Call::Commit {
            record,
            audit: &[],
            log: None,
        };
        self.hook.around(call, self.inner.save(record)).await
    }

    async fn chat_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        self.hook
            .around(Call::ChatOwner { id }, self.inner.chat_owner(id))
            .await
    }

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        let run = self.inner.approval_owner(approval_id);
        self.hook.around(Call::Read("approval_owner"), run).await
    }

    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        let run = self.inner.inbox(query);
        self.hook.around(Call::Read("inbox"), run).await
    }

    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        let run = self.inner.waiting(approval_id);
        self.hook.around(Call::Read("waiting"), run).await
    }

    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError> {
        let run = self.inner.waiting_counts();
        self.hook.around(Call::Read("waiting_counts"), run).await
    }

    async fn unindexed(&self) -> Result<Vec<String>, StoreError> {
        let run = self.inner.unindexed();
        self.hook.around(Call::Read("unindexed"), run).await
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        let run = self.inner.list();
        self.hook.around(Call::Read("list"), run).await
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
        let run = self.inner.save_attachment(chat, sha, media_type, bytes, at);
        self.hook.around(Call::Write("save_attachment"), run).await
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        let run = self.inner.attachment(chat, sha);
        self.hook.around(Call::Read("attachment"), run).await
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        let run = self.inner.unfinished();
        self.hook.around(Call::Read("unfinished"), run).await
    }

    async fn resumable(&self) -> Result<Vec<String>, StoreError> {
        let run = self.inner.resumable();
        self.hook.around(Call::Read("resumable"), run).await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let run = self.inner.audit(query);
        self.hook.around(Call::Read("audit"), run).await
    }

    async fn chain_head(&self) -> Result<ChainHead, StoreError> {
        let run = self.inner.chain_head();
        self.hook.around(Call::Read("chain_head"), run).await
    }

    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let run = self.inner.chain(after, limit);
        self.hook.around(Call::Read("chain"), run).await
    }

    async fn keep_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let run = self.inner.keep_checkpoint(checkpoint);
        self.hook.around(Call::Write("keep_checkpoint"), run).await
    }

    async fn checkpoints(&self, after: i64, limit: usize) -> Result<Vec<Checkpoint>, StoreError> {
        let run = self.inner.checkpoints(after, limit);
        self.hook.around(Call::Read("checkpoints"), run).await
    }

    async fn last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        let run = self.inner.last_checkpoint();
        self.hook.around(Call::Read("last_checkpoint"), run).await
    }

    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        let run = self.inner.audit_secret();
        self.hook.around(Call::Read("audit_secret"), run).await
    }

    fn database(&self) -> &'static str {
        self.inner.database()
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.hook.around(Call::Ping, self.inner.ping()).await
    }

    async fn live_instances(&self) -> Result<u64, StoreError> {
        let run = self.inner.live_instances();
        self.hook.around(Call::Read("live_instances"), run).await
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    async fn stale(&self, id: &str) -> Result<bool, StoreError> {
        let run = self.inner.stale(id);
        self.hook.around(Call::Read("stale"), run).await
    }

    async fn overdue(&self, before: Millis) -> Result<Vec<String>, StoreError> {
        let run = self.inner.overdue(before);
        self.hook.around(Call::Read("overdue"), run).await
    }

    async fn orphaned(&self) -> Result<Vec<String>, StoreError> {
        let run = self.inner.orphaned();
        self.hook.around(Call::Read("orphaned"), run).await
    }

    async fn keep_log(&self, chat: &str, turn: &str, log: &[TurnEntry]) -> Result<(), StoreError> {
        let run = self.inner.keep_log(chat, turn, log);
        self.hook.around(Call::Write("keep_log"), run).await
    }

    fn news(&self) -> Option<tokio::sync::broadcast::Receiver<StoreNews>> {
        self.inner.news()
    }

    fn hear_text(&self, chat: &str) -> super::TextInterest {
        self.inner.hear_text(chat)
    }

    async fn announce(&self, news: StoreNews) -> Result<(), StoreError> {
        let run = self.inner.announce(news);
        self.hook.around(Call::Write("announce"), run).await
    }
}

#[async_trait]
impl<H: Hook, S: PeopleStore + ?Sized> PeopleStore for Delegate<H, S> {
    async fn people(&self) -> Result<Vec<Person>, StoreError> {
        let run = self.inner.people();
        self.hook.around(Call::Read("people"), run).await
    }

    async fn save_person(&self, person: &Person) -> Result<(), StoreError> {
        let run = self.inner.save_person(person);
        self.hook.around(Call::Write("save_person"), run).await
    }

    async fn passkeys(&self) -> Result<Vec<StoredPasskey>, StoreError> {
        let run = self.inner.passkeys();
        self.hook.around(Call::Read("passkeys"), run).await
    }

    async fn save_passkey(&self, passkey: &StoredPasskey) -> Result<(), StoreError> {
        let run = self.inner.save_passkey(passkey);
        self.hook.around(Call::Write("save_passkey"), run).await
    }

    async fn save_invite(&self, invite: &Invite) -> Result<(), StoreError> {
        let run = self.inner.save_invite(invite);
        self.hook.around(Call::Write("save_invite"), run).await
    }

    async fn invite(&self, digest: &str) -> Result<Option<Invite>, StoreError> {
        let run = self.inner.invite(digest);
        self.hook.around(Call::Read("invite"), run).await
    }

    async fn close_invites(&self, kind: InviteKind, at: Millis) -> Result<(), StoreError> {
        let run = self.inner.close_invites(kind, at);
        self.hook.around(Call::Write("close_invites"), run).await
    }

    async fn enrol(
        &self,
        digest: &str,
        person: Option<&Person>,
        passkey: &StoredPasskey,
        at: Millis,
    ) -> Result<bool, StoreError> {
        let run = self.inner.enrol(digest, person, passkey, at);
        self.hook.around(Call::Write("enrol"), run).await
    }

    async fn keep_ceremony(
        &self,
        challenge: &str,
        owner: &str,
        state: &str,
        expires: Millis,
        now: Millis,
        per_owner: usize,
    ) -> Result<(), StoreError> {
        let run = self
            .inner
            .keep_ceremony(challenge, owner, state, expires, now, per_owner);
        self.hook.around(Call::Write("keep_ceremony"), run).await
    }

    async fn take_ceremony(&self, challenge: &str) -> Result<Option<(Millis, String)>, StoreError> {
        let run = self.inner.take_ceremony(challenge);
        self.hook.around(Call::Write("take_ceremony"), run).await
    }

    async fn spend_challenge(
        &self,
        challenge: &str,
        expires: Millis,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let run = self.inner.spend_challenge(challenge, expires, now);
        self.hook.around(Call::Write("spend_challenge"), run).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::agent::store::{
        MemoryStore,
        tests::{chain_contract, inbox_contract, journal_contract, store_contract},
    };

    /// Notes every call it sees, and lets it through.
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl Hook for Seen {
        fn around<'a, T: Send + 'a>(
            &'a self,
            call: Call<'a>,
            run: BoxFuture<'a, Result<T, StoreError>>,
        ) -> impl Future<Output = Result<T, StoreError>> + Send + 'a {
            let name = match call {
                Call::Load { .. } => "load".to_owned(),
                Call::ChatOwner { .. } => "chat_owner".to_owned(),
                Call::Commit { log, .. } => format!("commit (log: {})", log.is_some()),
                Call::Read(name) | Call::Write(name) => name.to_owned(),
                Call::Ping => "ping".to_owned(),
            };
            crate::agent::lock(&self.0).push(name);
            run
        }
    }

    fn delegated() -> Delegate<Arc<Seen>, MemoryStore> {
        Delegate::new(Arc::new(MemoryStore::default()), Arc::default())
    }

    #[tokio::test]
    async fn a_delegated_store_keeps_the_contract_of_its_inner_one() {
        store_contract(&delegated()).await;
        inbox_contract(&[&delegated()]).await;
        journal_contract(&delegated()).await;
        let chained = delegated();
        chain_contract(&chained, &**chained.inner()).await;
    }

    #[tokio::test]
    async fn a_hook_sees_each_call_with_what_a_commit_carries() {
        let store = delegated();
        let seen = store.hook().clone();
        store_contract(&store).await;
        let seen = crate::agent::lock(&seen.0).clone();
        for call in [
            "load",
            "chat_owner",
            "commit (log: false)",
            "commit (log: true)",
            "list",
        ] {
            assert!(seen.iter().any(|s| s == call), "{call} not in {seen:?}");
        }
    }
}
