//! One in-memory database several instances share (ADR 0025's rules, for tests): what a Postgres
//! database is to the instances pointed at it, without a server.
//!
//! [`SharedMemory`] is the database (a [`MemoryStore`] and what Postgres keeps beside it: each
//! session row's version and the instance its running turn runs on, and which instances are
//! alive); [`SharedMemory::instance`] is one instance's handle to it, with what an instance of
//! [`super::postgres::PostgresStore`] keeps of its own: the versions it last read or wrote, its
//! id and its news. So, as on Postgres:
//! * a commit of a record another instance committed since this one read it is refused as a
//!   conflict ([`StoreError::is_conflict`]), and [`SessionStore::stale`] says so beforehand;
//! * a running turn belongs to the instance that committed it running: another one's load
//!   follows it ([`StoredSession::elsewhere`], with its log), and takes it over once its
//!   instance is gone (the handle dropped: its "heartbeat" stops at once);
//! * every commit, and every change of people, grants or sign-ins, is news to the other
//!   instances ([`SessionStore::news`]) — a wake-up only, as on Postgres;
//! * grants, the day's spending and reservations, people, sign-ins and the audit chain are one
//!   database's, whichever handle reads or writes them.
//!
//! Each commit, load and reservation is one step under the database's lock (a transaction);
//! news is sent after it, as `NOTIFY` is delivered after the commit.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::{
    AuditEvent, AuditQuery, AuditRecord, Checkpoint, Claim, MemoryStore, PeopleStore, PolicyStore,
    Reserved, SessionStore, SignIn, SignInStore, Spent, StoreError, StoreNews, StoredFile,
    StoredSession, ToolListStore, Unused, lock, log_of_turn,
};
use crate::{
    agent::people::{Invite, InviteKind, Person, StoredPasskey},
    agent::{
        clock::Millis,
        gate::CallPhase,
        session::{SessionRecord, TurnEntry, TurnStatus},
    },
    protocol::grant::Grant,
};

/// One database in memory that several instances share: make one handle per instance with
/// [`SharedMemory::instance`].
#[derive(Debug, Clone, Default)]
pub struct SharedMemory {
    db: Arc<Database>,
}

#[derive(Debug, Default)]
struct Database {
    /// The data, as one instance alone would keep it.
    store: MemoryStore,
    /// Each session row's version and the instance its running turn runs on.
    rows: Mutex<HashMap<String, Row>>,
    /// The instances alive now, each with where its news goes.
    instances: Mutex<HashMap<Arc<str>, Listener>>,
    /// Makes instance ids.
    started: AtomicU64,
    /// News held back ([`SharedMemory::hold_news`]): where each goes, in the order it was sent.
    held: Mutex<Option<Vec<HeldNews>>>,
}

/// News held back, and the instance it goes to.
type HeldNews = (broadcast::Sender<StoreNews>, StoreNews);

/// Where an instance's news goes, and the chats whose text it hears (as a `LISTEN` on
/// Postgres, ADR 0043): each with how many hold an interest in it.
#[derive(Debug, Clone)]
struct Listener {
    news: broadcast::Sender<StoreNews>,
    texts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Listener {
    /// Whether this instance hears `news` (another instance's turn's text only if someone here
    /// follows its chat).
    fn hears(&self, news: &StoreNews) -> bool {
        match news {
            StoreNews::Text { chat, .. } => lock(&self.texts).contains_key(chat),
            _ => true,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Row {
    /// 0: not there (yet).
    version: i64,
    running_on: Option<Arc<str>>,
}

impl SharedMemory {
    pub fn new() -> Self {
        Self::default()
    }

    /// A new instance's handle on the database (alive until its last clone goes).
    pub fn instance(&self) -> MemoryInstance {
        let n = self.db.started.fetch_add(1, Ordering::Relaxed) + 1;
        let id: Arc<str> = Arc::from(format!("memory-{n}"));
        let (news, _) = broadcast::channel(1024);
        let listener = Listener {
            news,
            texts: Arc::default(),
        };
        lock(&self.db.instances).insert(id.clone(), listener.clone());
        MemoryInstance {
            me: Arc::new(Instance {
                db: self.db.clone(),
                id,
                versions: Mutex::default(),
                listener,
            }),
        }
    }

    /// The database as it is, read without being an instance (a test's look at the truth).
    pub fn database(&self) -> &MemoryStore {
        &self.db.store
    }

    /// News is late from now on: what instances tell each other is held back until
    /// [`SharedMemory::deliver_news`] (as a slow or lost `LISTEN` connection would have it).
    pub fn hold_news(&self) {
        lock(&self.db.held).get_or_insert_with(Vec::new);
    }

    /// Sends the news held back, in order, and stops holding it.
    pub fn deliver_news(&self) {
        let held = lock(&self.db.held).take().unwrap_or_default();
        for (to, news) in held {
            // Nobody listening there (any more): nothing to wake.
            let _ = to.send(news);
        }
    }
}

/// One instance's handle on a [`SharedMemory`] database.
#[derive(Debug, Clone)]
pub struct MemoryInstance {
    me: Arc<Instance>,
}

#[derive(Debug)]
struct Instance {
    db: Arc<Database>,
    id: Arc<str>,
    /// The version of each session this instance last read or wrote.
    versions: Mutex<HashMap<String, i64>>,
    listener: Listener,
}

impl Drop for Instance {
    /// The instance stops: it is no longer alive (the turns it ran may be taken over).
    fn drop(&mut self) {
        lock(&self.db.instances).remove(&self.id);
    }
}

impl MemoryInstance {
    /// This instance's id.
    pub fn id(&self) -> &str {
        &self.me.id
    }

    /// Whether this instance hears the text of `chat`'s turns run elsewhere
    /// ([`SessionStore::hear_text`]).
    pub fn hears_text_of(&self, chat: &str) -> bool {
        lock(&self.me.listener.texts).contains_key(chat)
    }

    fn db(&self) -> &Database {
        &self.me.db
    }

    fn store(&self) -> &MemoryStore {
        &self.me.db.store
    }

    fn known(&self, id: &str) -> i64 {
        lock(&self.me.versions).get(id).copied().unwrap_or(0)
    }

    /// Remembers that `id`'s row is at `version` at least.
    fn saw(&self, id: &str, version: i64) {
        let mut versions = lock(&self.me.versions);
        let kept = versions.entry(id.to_owned()).or_insert(version);
        *kept = (*kept).max(version);
    }

    fn alive(&self, instance: Option<&Arc<str>>) -> bool {
        instance.is_some_and(|i| lock(&self.db().instances).contains_key(i))
    }

    /// Tells every other instance alive `news`.
    fn tell(&self, news: StoreNews) {
        let others: Vec<broadcast::Sender<StoreNews>> = lock(&self.db().instances)
            .iter()
            .filter(|(id, listener)| **id != self.me.id && listener.hears(&news))
            .map(|(_, listener)| listener.news.clone())
            .collect();
        if let Some(held) = lock(&self.db().held).as_mut() {
            held.extend(others.into_iter().map(|to| (to, news.clone())));
            return;
        }
        for other in others {
            // Nobody listening there: nothing to wake.
            let _ = other.send(news.clone());
        }
    }

    /// One commit: written only if the row is at the version this instance knows.
    fn write(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: Option<&[TurnEntry]>,
    ) -> Result<(), StoreError> {
        let store = self.store();
        let expected = self.known(&record.id);
        let version = {
            let mut rows = lock(&self.db().rows);
            let row = rows.entry(record.id.clone()).or_default();
            if row.version != expected {
                return Err(StoreError::conflict(format!(
                    "session {} changed in the database since this instance read it",
                    record.id
                )));
            }
            let running = record
                .turn
                .as_ref()
                .is_some_and(|t| t.status == TurnStatus::Running);
            row.version += 1;
            row.running_on = running.then(|| self.me.id.clone());
            // The log: written with every commit that carries it, gone when a turn ends
            // without one (as Postgres' `paused_turn_logs`).
            let over = record.turn.as_ref().is_some_and(|t| t.status.is_over());
            match (log, &record.turn) {
                (Some(entries), Some(turn)) => {
                    lock(&store.paused_logs)
                        .insert(record.id.clone(), (turn.id.clone(), entries.to_vec()));
                }
                _ if over => {
                    lock(&store.paused_logs).remove(&record.id);
                }
                _ => {}
            }
            store.keep(record, audit);
            row.version
        };
        self.saw(&record.id, version);
        self.tell(StoreNews::Chat {
            chat: record.id.clone(),
            waits: record
                .turn
                .as_ref()
                .is_some_and(|t| !t.pending_approvals().is_empty()),
        });
        Ok(())
    }

    /// Records whose turn matches `keep`, by id.
    fn sessions(&self, keep: impl Fn(&SessionRecord, &Row) -> bool) -> Vec<String> {
        let rows = lock(&self.db().rows);
        let mut ids: Vec<String> = lock(&self.store().records)
            .values()
            .filter(|r| keep(r, &rows.get(&r.id).cloned().unwrap_or_default()))
            .map(|r| r.id.clone())
            .collect();
        ids.sort();
        ids
    }
}

fn status(record: &SessionRecord) -> Option<TurnStatus> {
    record.turn.as_ref().map(|t| t.status)
}

#[async_trait]
impl SessionStore for MemoryInstance {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let store = self.store();
        // One step, so one snapshot, for the record, its log, its version and its owner; a turn
        // whose instance is gone is taken over in the same step.
        let (record, log, version, elsewhere) = {
            let mut rows = lock(&self.db().rows);
            let Some(record) = lock(&store.records).get(id).cloned() else {
                drop(rows);
                self.saw(id, 0);
                return Ok(None);
            };
            let row = rows.entry(id.to_owned()).or_default();
            let elsewhere = status(&record) == Some(TurnStatus::Running)
                && row.running_on.as_ref() != Some(&self.me.id)
                && self.alive(row.running_on.as_ref());
            if status(&record) == Some(TurnStatus::Running) && !elsewhere {
                row.running_on = Some(self.me.id.clone());
            }
            let log = lock(&store.paused_logs).get(id).cloned();
            (record, log, row.version, elsewhere)
        };
        self.saw(id, version);
        let status = status(&record);
        let (paused_log, followed_log) = match log {
            Some((turn, entries)) if status == Some(TurnStatus::AwaitingPerson) => {
                (log_of_turn(&record, &turn, entries), None)
            }
            Some((turn, entries))
                if (elsewhere || status.is_some_and(TurnStatus::is_over))
                    && record.turn.as_ref().is_some_and(|t| t.id == turn) =>
            {
                (None, Some(entries))
            }
            _ => (None, None),
        };
        Ok(Some(StoredSession {
            record,
            paused_log,
            elsewhere,
            followed_log,
        }))
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        self.write(record, audit, None)
    }

    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError> {
        self.write(record, audit, Some(log))
    }

    async fn chat_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        self.store().chat_owner(id).await
    }

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        self.store().approval_owner(approval_id).await
    }

    async fn inbox(
        &self,
        query: &crate::agent::inbox::InboxQuery,
    ) -> Result<Vec<crate::agent::inbox::Waiting>, StoreError> {
        self.store().inbox(query).await
    }

    async fn waiting(
        &self,
        approval_id: &str,
    ) -> Result<Option<crate::agent::inbox::Waiting>, StoreError> {
        self.store().waiting(approval_id).await
    }

    async fn waiting_counts(&self) -> Result<crate::agent::inbox::WaitingCounts, StoreError> {
        self.store().waiting_counts().await
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        self.store().list().await
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
        self.store()
            .save_attachment(chat, sha, media_type, bytes, at)
            .await
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        self.store().attachment(chat, sha).await
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.sessions(|record, row| match status(record) {
            Some(TurnStatus::AwaitingPerson) => true,
            Some(TurnStatus::Running) => !self.alive(row.running_on.as_ref()),
            _ => false,
        }))
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        self.store().audit(query).await
    }

    async fn chain_head(&self) -> Result<super::ChainHead, StoreError> {
        self.store().chain_head().await
    }

    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.store().chain(after, limit).await
    }

    async fn keep_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.store().keep_checkpoint(checkpoint).await
    }

    async fn checkpoints(&self, after: i64, limit: usize) -> Result<Vec<Checkpoint>, StoreError> {
        self.store().checkpoints(after, limit).await
    }

    async fn last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        self.store().last_checkpoint().await
    }

    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        self.store().audit_secret().await
    }

    fn database(&self) -> &'static str {
        "memory"
    }

    fn shared(&self) -> bool {
        true
    }

    async fn stale(&self, id: &str) -> Result<bool, StoreError> {
        let stored = lock(&self.db().rows).get(id).map_or(0, |r| r.version);
        Ok(stored != self.known(id))
    }

    async fn overdue(&self, before: Millis) -> Result<Vec<String>, StoreError> {
        Ok(self.sessions(|record, _| {
            record.turn.iter().flat_map(|t| &t.calls).any(|c| {
                matches!(
                    c.phase,
                    CallPhase::AwaitingApproval { deadline_ms, .. }
                        | CallPhase::AwaitingBrowser { deadline_ms, .. }
                        if deadline_ms <= before
                )
            })
        }))
    }

    async fn orphaned(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.sessions(|record, row| {
            status(record) == Some(TurnStatus::Running)
                && row.running_on.as_ref() != Some(&self.me.id)
                && !self.alive(row.running_on.as_ref())
        }))
    }

    async fn keep_log(&self, chat: &str, turn: &str, log: &[TurnEntry]) -> Result<(), StoreError> {
        let kept = {
            let mut logs = lock(&self.store().paused_logs);
            match logs.get_mut(chat) {
                // Only the running turn's own log, and only longer.
                Some((of, entries)) if of == turn && entries.len() < log.len() => {
                    *entries = log.to_vec();
                    true
                }
                _ => false,
            }
        };
        if kept {
            self.tell(StoreNews::Kept {
                chat: chat.to_owned(),
                turn: turn.to_owned(),
                len: log.len(),
            });
        }
        Ok(())
    }

    fn news(&self) -> Option<broadcast::Receiver<StoreNews>> {
        Some(self.me.listener.news.subscribe())
    }

    fn hear_text(&self, chat: &str) -> super::TextInterest {
        let texts = self.me.listener.texts.clone();
        *lock(&texts).entry(chat.to_owned()).or_default() += 1;
        let chat = chat.to_owned();
        super::TextInterest::ending_with(move || {
            let mut texts = lock(&texts);
            if let Some(held) = texts.get_mut(&chat) {
                *held -= 1;
                if *held == 0 {
                    texts.remove(&chat);
                }
            }
        })
    }

    async fn announce(&self, news: StoreNews) -> Result<(), StoreError> {
        self.tell(news);
        Ok(())
    }
}

#[async_trait]
impl SignInStore for MemoryInstance {
    async fn signing_secret(&self) -> Result<[u8; 32], StoreError> {
        self.store().signing_secret().await
    }

    async fn record_signin(&self, signin: &SignIn) -> Result<(), StoreError> {
        self.store().record_signin(signin).await
    }

    async fn end_signin(&self, id: &str, at: Millis) -> Result<(), StoreError> {
        self.store().end_signin(id, at).await?;
        self.tell(StoreNews::SignIns);
        Ok(())
    }

    async fn ended_signins(&self, now: Millis) -> Result<Vec<(String, Millis)>, StoreError> {
        self.store().ended_signins(now).await
    }
}

#[async_trait]
impl PeopleStore for MemoryInstance {
    async fn people(&self) -> Result<Vec<Person>, StoreError> {
        self.store().people().await
    }

    async fn save_person(&self, person: &Person) -> Result<(), StoreError> {
        self.store().save_person(person).await?;
        self.tell(StoreNews::People);
        Ok(())
    }

    async fn passkeys(&self) -> Result<Vec<StoredPasskey>, StoreError> {
        self.store().passkeys().await
    }

    async fn save_passkey(&self, passkey: &StoredPasskey) -> Result<(), StoreError> {
        self.store().save_passkey(passkey).await?;
        self.tell(StoreNews::People);
        Ok(())
    }

    async fn save_invite(&self, invite: &Invite) -> Result<(), StoreError> {
        self.store().save_invite(invite).await
    }

    async fn invite(&self, digest: &str) -> Result<Option<Invite>, StoreError> {
        self.store().invite(digest).await
    }

    async fn close_invites(&self, kind: InviteKind, at: Millis) -> Result<(), StoreError> {
        self.store().close_invites(kind, at).await
    }

    async fn enrol(
        &self,
        digest: &str,
        person: Option<&Person>,
        passkey: &StoredPasskey,
        at: Millis,
    ) -> Result<bool, StoreError> {
        let enrolled = self.store().enrol(digest, person, passkey, at).await?;
        if enrolled {
            self.tell(StoreNews::People);
        }
        Ok(enrolled)
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
        self.store()
            .keep_ceremony(challenge, owner, state, expires, now, per_owner)
            .await
    }

    async fn take_ceremony(&self, challenge: &str) -> Result<Option<(Millis, String)>, StoreError> {
        self.store().take_ceremony(challenge).await
    }

    async fn spend_challenge(
        &self,
        challenge: &str,
        expires: Millis,
        now: Millis,
    ) -> Result<bool, StoreError> {
        self.store().spend_challenge(challenge, expires, now).await
    }
}

#[async_trait]
impl ToolListStore for MemoryInstance {
    async fn keep_tool_list(
        &self,
        server: &str,
        tools: &str,
        at: Millis,
    ) -> Result<(), StoreError> {
        self.store().keep_tool_list(server, tools, at).await
    }

    async fn kept_tool_list(&self, server: &str) -> Result<Option<String>, StoreError> {
        self.store().kept_tool_list(server).await
    }
}

#[async_trait]
impl PolicyStore for MemoryInstance {
    async fn save_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        self.store().save_grant(grant).await?;
        self.tell(StoreNews::Grants);
        Ok(())
    }

    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        self.store().grants().await
    }

    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        self.store().append_audit(events).await
    }

    async fn spent(&self, now: Millis) -> Result<Spent, StoreError> {
        self.store().spent(now).await
    }

    async fn reserve(
        &self,
        now: Millis,
        decide: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
    ) -> Result<Reserved, StoreError> {
        let mut grants_used = false;
        let reserved = self
            .store()
            .reserve(now, &mut |spent| {
                let claims = decide(spent);
                grants_used = claims.iter().any(|c| c.grant.is_some());
                claims
            })
            .await?;
        if grants_used && reserved == Reserved::Kept {
            self.tell(StoreNews::Grants);
        }
        Ok(reserved)
    }

    async fn release(&self, unused: &[Unused]) -> Result<(), StoreError> {
        self.store().release(unused).await?;
        if !unused.is_empty() {
            self.tell(StoreNews::Grants);
        }
        Ok(())
    }

    async fn keep_policy_text(
        &self,
        digest: &str,
        text: &str,
        at: Millis,
    ) -> Result<(), StoreError> {
        self.store().keep_policy_text(digest, text, at).await
    }

    async fn policy_text(&self, digest: &str) -> Result<Option<String>, StoreError> {
        self.store().policy_text(digest).await
    }

    async fn policy_texts(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.store().policy_texts().await
    }
}

/// Handles of one [`SharedMemory`] are instances of one database: [`super::tests`]' contracts
/// hold through them, and a commit, a load and a turn's ownership behave as on Postgres.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::store::tests::{
        people_contract, policy_contract, reservation_race_contract, store_contract, turn,
    };

    #[tokio::test]
    async fn each_instance_keeps_the_contract() {
        store_contract(&SharedMemory::new().instance()).await;
        policy_contract(&SharedMemory::new().instance()).await;
        people_contract(&SharedMemory::new().instance()).await;
        let db = SharedMemory::new();
        let (a, b, c) = (db.instance(), db.instance(), db.instance());
        reservation_race_contract(&[&a, &b, &c]).await;
    }

    #[tokio::test]
    async fn a_commit_of_an_out_of_date_record_is_refused() {
        let db = SharedMemory::new();
        let (a, b) = (db.instance(), db.instance());
        let mut news = a.news().expect("news");
        let mut record = SessionRecord::new("chat", 10);
        a.commit(&record, &[]).await.unwrap();
        assert!(b.load("chat").await.unwrap().is_some());
        record.updated_at_ms = 20;
        b.commit(&record, &[]).await.unwrap();
        assert_eq!(
            news.try_recv().unwrap(),
            StoreNews::Chat {
                chat: "chat".into(),
                waits: false
            }
        );
        assert!(a.stale("chat").await.unwrap());
        let refused = a.commit(&record, &[]).await.unwrap_err();
        assert!(refused.is_conflict(), "{refused}");
        // Read again, it commits.
        a.load("chat").await.unwrap();
        assert!(!a.stale("chat").await.unwrap());
        a.commit(&record, &[]).await.unwrap();
        // Two instances that both found no record: the second to commit is refused.
        assert!(a.load("new").await.unwrap().is_none());
        assert!(b.load("new").await.unwrap().is_none());
        a.commit(&SessionRecord::new("new", 1), &[]).await.unwrap();
        assert!(
            b.commit(&SessionRecord::new("new", 1), &[])
                .await
                .unwrap_err()
                .is_conflict()
        );
    }

    #[tokio::test]
    async fn a_running_turn_is_followed_elsewhere_and_taken_over_when_its_instance_goes() {
        let db = SharedMemory::new();
        let (a, b) = (db.instance(), db.instance());
        let mut record = SessionRecord::new("chat", 10);
        record.turn = Some(turn(TurnStatus::Running));
        a.commit_paused(&record, &[], &[TurnEntry::Pause])
            .await
            .unwrap();
        let at_b = b.load("chat").await.unwrap().unwrap();
        assert!(at_b.elsewhere);
        assert_eq!(at_b.followed_log, Some(vec![TurnEntry::Pause]));
        assert!(!a.load("chat").await.unwrap().unwrap().elsewhere);
        assert!(b.unfinished().await.unwrap().is_empty());
        drop(a);
        assert_eq!(b.orphaned().await.unwrap(), ["chat"]);
        assert_eq!(b.unfinished().await.unwrap(), ["chat"]);
        let taken = b.load("chat").await.unwrap().unwrap();
        assert!(!taken.elsewhere, "B took the turn over");
        let c = db.instance();
        assert!(c.load("chat").await.unwrap().unwrap().elsewhere);
        assert!(b.orphaned().await.unwrap().is_empty());
    }
}
