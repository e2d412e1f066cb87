//! Where sessions and the audit log live between requests and across restarts.
//!
//! [`SessionStore`] is the seam: the runtime only ever loads, commits and lists through it, so a
//! Postgres implementation for several instances can follow without touching the runner.
//!
//! - [`MemoryStore`]: everything in memory, lost on restart (`COUNTERSIGN_DB=:memory:`, tests);
//! - [`sqlite::SqliteStore`]: the embedded default (`COUNTERSIGN_DB`, default
//!   `data/countersign.db`), migrations in `migrations/`;
//! - [`postgres::PostgresStore`]: one database for several instances
//!   (`COUNTERSIGN_DB=postgres://…`), migrations in `migrations/postgres/`.
//!
//! # What "committed" means
//!
//! [`SessionStore::commit`] writes a session record and the audit events that explain the change
//! in one transaction. The runtime commits *before* it acknowledges anything that matters: an
//! approval answer is committed before the turn is woken (so before the client sees any of its
//! consequences), and a server tool's result (a payment) is committed before its output chunk is
//! emitted. Payments are idempotent by tool call id inside the record's wallet ledger, so a turn
//! resumed after a crash can never pay twice.

pub mod audit;
pub mod delegate;
pub(crate) mod encode;
pub(crate) mod inbox_sql;
mod memory;
pub mod postgres;
pub mod reservations;
#[cfg(test)]
pub mod shared;
pub mod sqlite;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use async_trait::async_trait;

pub use crate::agent::audit::{chain::ChainHead, checkpoint::Checkpoint};
pub use audit::{Actor, AuditEvent, AuditKind, AuditQuery, AuditRecord};
pub use memory::MemoryStore;
pub use reservations::{Claim, GrantUse, Reserved, Spent, Unused};

pub use super::attachments::StoredFile;
pub(crate) use super::lock;
use super::{
    clock::Millis,
    inbox::{InboxQuery, Waiting, WaitingCounts},
    session::{SessionRecord, TurnEntry},
};
use crate::{
    agent::people::{Invite, InviteKind, Person, StoredPasskey},
    protocol::grant::Grant,
};

/// A failure of the session store: what the store was doing, and the error underneath (the
/// database's, the file system's, a decoder's) as its [`source`](std::error::Error::source), so
/// a log line shows the whole chain.
///
/// Its message names only what failed (`session store: cannot open data/countersign.db`); the
/// underlying error is in the chain, for logs. Clients get a fixed text (the API error of
/// `transport::error`) or, in a few replies, this message without the chain.
#[derive(Debug, Clone, thiserror::Error)]
#[error("session store: {context}")]
pub struct StoreError {
    context: String,
    /// Shared so the error stays `Clone`.
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    /// The record changed in the database since this instance read it (another instance
    /// committed it): nothing was written.
    conflict: bool,
}

impl StoreError {
    /// A failure with nothing underneath (e.g. a database newer than this build).
    pub fn new(context: impl Into<String>) -> Self {
        StoreError {
            context: context.into(),
            source: None,
            conflict: false,
        }
    }

    /// A commit of a record another instance changed since this one read it.
    pub fn conflict(context: impl Into<String>) -> Self {
        StoreError {
            context: context.into(),
            source: None,
            conflict: true,
        }
    }

    /// Whether nothing was written because another instance changed the record first.
    pub fn is_conflict(&self) -> bool {
        self.conflict
    }

    /// `context` failed because of `source`.
    pub fn caused_by(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError {
            context: context.into(),
            source: Some(Arc::new(source)),
            conflict: false,
        }
    }

    /// The message followed by every error underneath, `: `-separated: the whole story, for a
    /// log or an operator (never for a client).
    pub fn report(&self) -> String {
        let mut text = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(error) = next {
            text.push_str(": ");
            text.push_str(&error.to_string());
            next = error.source();
        }
        text
    }
}

/// A session as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    pub record: SessionRecord,
    /// When the record's turn waits for the person: the output that turn emitted until it
    /// paused, so it can leave memory and come back exactly as it was (ADR 0011).
    pub paused_log: Option<Vec<TurnEntry>>,
    /// On a shared database: the record's turn is running on another instance that is alive
    /// (ADR 0025). This instance must not resume it: it follows it ([`StoredSession::followed_log`]).
    pub elsewhere: bool,
    /// On a shared database: what the record's turn emitted up to its last commit, when it runs
    /// on another instance or is over — so a reader here (a socket, an SSE resume) follows
    /// output produced elsewhere, by position.
    pub followed_log: Option<Vec<TurnEntry>>,
}

impl StoredSession {
    /// A session as an instance that is alone on its database stores it.
    pub fn new(record: SessionRecord, paused_log: Option<Vec<TurnEntry>>) -> Self {
        StoredSession {
            record,
            paused_log,
            elsewhere: false,
            followed_log: None,
        }
    }
}

/// What another instance sharing the database tells this one (Postgres' `LISTEN`/`NOTIFY`):
/// wake-ups only. The database stays the truth: whoever gets news reads it again, and news lost
/// (the listening connection dropped) is [`StoreNews::Missed`], after which everything a reader
/// here follows is read again.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreNews {
    /// Another instance committed `chat`; `waits`: its turn waits for people's decisions now.
    Chat { chat: String, waits: bool },
    /// Another instance's commit of `chat` changed what waits in it: `approvals` came, changed
    /// (a signature, an edit) or went (empty: which ones was too long to say). The inbox's pages
    /// look again; nothing needs to be read for it.
    Waiting {
        chat: String,
        approvals: Vec<String>,
    },
    /// Someone asked another instance to stop `chat`'s turn (which may run here).
    Stop { chat: String },
    /// People, passkeys or invites changed.
    People,
    /// Grants changed (made, used, revoked).
    Grants,
    /// A sign-in session ended.
    SignIns,
    /// News may have been lost: read again whatever is followed here.
    Missed,
    /// What the turn `turn` of `chat`, running on another instance, just logged: its entries
    /// from number `at` on, as stored (ADR 0043). The one news that carries data rather than
    /// waking a read: a reader here follows the turn by it, entry by entry, and whatever is lost
    /// or too large to say ([`LIVE_NEWS_BYTES`]) comes from the stored log
    /// ([`StoreNews::Kept`], [`StoreNews::Missed`]) — never twice, never out of order.
    Text {
        chat: String,
        turn: String,
        at: usize,
        entries: Vec<TurnEntry>,
    },
    /// Another instance stored the log of `chat`'s running turn `turn` so far: `len` entries
    /// ([`SessionStore::keep_log`]). A reader here that heard fewer reads it.
    Kept {
        chat: String,
        turn: String,
        len: usize,
    },
}

/// While held, this instance hears the [`StoreNews::Text`] of one chat (ADR 0043): an instance
/// hears the live text only of the chats its readers follow, not of every turn running in the
/// deployment. Dropping it says the chat is no longer followed here. A database only this
/// instance uses has no text news, and hands out [`TextInterest::none`].
#[must_use = "the text news of the chat is heard only while this is held"]
pub struct TextInterest(Option<Box<dyn FnOnce() + Send + Sync>>);

impl TextInterest {
    /// Nothing to stop hearing.
    pub fn none() -> Self {
        Self(None)
    }

    /// An interest that runs `end` when it is dropped.
    pub fn ending_with(end: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self(Some(Box::new(end)))
    }
}

impl Drop for TextInterest {
    fn drop(&mut self) {
        if let Some(end) = self.0.take() {
            end();
        }
    }
}

impl std::fmt::Debug for TextInterest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "TextInterest(held)"
        } else {
            "TextInterest(none)"
        })
    }
}

/// The most bytes of stored entries (JSON) one [`StoreNews::Text`] carries: a notification's
/// payload on Postgres is under 8,000 bytes, and the ids take the rest. An entry larger than
/// this on its own is not said: readers elsewhere get it from the stored log.
pub const LIVE_NEWS_BYTES: usize = 6_000;

/// A sign-in session of the edge (`transport::edge::auth`): its cookie is signed; the store
/// keeps when it was issued, until when it is valid, and whether it was ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    pub id: String,
    pub created_ms: Millis,
    pub expires_ms: Millis,
    /// The client address that signed in (for the record).
    pub address: Option<String>,
    /// The person who signed in with a passkey (`None`: the API key's sign-in form).
    pub person: Option<String>,
}

/// A store that keeps no audit chain (a test's).
fn no_chain() -> StoreError {
    StoreError::new("this store keeps no audit chain")
}

/// 32 random bytes from the operating system: a new signing secret.
pub(crate) fn fresh_secret() -> Result<[u8; 32], StoreError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|e| StoreError::caused_by("the operating system's random source failed", e))?;
    Ok(secret)
}

/// Where session records and the audit log live. (A method added here is forwarded by
/// [`delegate::Delegate`] too.)
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError>;

    /// [`SessionStore::load`] of the chat's head only (ADR 0045, amendments): its row, its
    /// payments, and of its history and messages only how many entries each has and the last
    /// ones ([`crate::agent::journal::Entries::on_disk`]); none of its answered approvals
    /// ([`crate::agent::journal::Keyed::by_key`]). So what it costs does not grow with the
    /// conversation. What a person's answer loads; a reader of a whole list reads the rest
    /// first ([`SessionStore::read_entries`]), an answer the approvals it names
    /// ([`SessionStore::read_resolutions`]).
    async fn load_head(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.load(id).await
    }

    /// The first `lens[0]` entries of chat `id`'s history and the first `lens[1]` of its
    /// messages (each one's JSON, in order), read in one snapshot: the entries a record loaded
    /// by [`SessionStore::load_head`] did not read. Rows this instance's commits never rewrite
    /// (a commit writes from the first entry that changed, never before one not read); on a
    /// shared database, read only if no other instance committed the chat since this one last
    /// read or wrote it (else a conflict, [`StoreError::is_conflict`]: the copy is out of date).
    /// Fewer rows than asked for mean the chat was shortened or removed meanwhile.
    async fn read_entries(
        &self,
        id: &str,
        lens: [usize; 2],
    ) -> Result<[Vec<String>; 2], StoreError> {
        let Some(stored) = self.load(id).await? else {
            return Err(StoreError::new(format!("chat {id} is no longer stored")));
        };
        let read = |bodies: Result<Vec<String>, crate::agent::journal::UnreadableEntry>,
                    len: usize| {
            bodies
                .map(|mut all: Vec<String>| {
                    all.truncate(len);
                    all
                })
                .map_err(|e| StoreError::caused_by("cannot read the session's entries", e))
        };
        Ok([
            read(stored.record.history.bodies_from(0), lens[0])?,
            read(stored.record.messages.bodies_from(0), lens[1])?,
        ])
    }

    /// Chat `id`'s answered approvals (a JSON object by approval id), of the ids `approvals`
    /// only (`None`: every one): what a record loaded by [`SessionStore::load_head`] did not
    /// read, looked up by the ids an answer names (ADR 0045, third amendment). An id without
    /// a row is not in the object. On a shared database, read only if no other instance
    /// committed the chat since this one last read or wrote it (else a conflict, as
    /// [`SessionStore::read_entries`]).
    async fn read_resolutions(
        &self,
        id: &str,
        approvals: Option<&[String]>,
    ) -> Result<String, StoreError> {
        let Some(stored) = self.load(id).await? else {
            return Err(StoreError::new(format!("chat {id} is no longer stored")));
        };
        let all = &stored.record.resolved_approvals;
        let rows = all
            .iter()
            .filter(|(k, _)| approvals.is_none_or(|ids| ids.contains(k)))
            .map(|(k, v)| Ok((k.as_str(), encode::to_json(v)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        encode::resolutions_json(rows.iter().map(|(k, v)| (*k, v.as_str())))
    }

    /// Writes `record` and appends `audit`, all or nothing. A log stored by an earlier
    /// [`SessionStore::commit_paused`] stays (it is only returned while it belongs to the
    /// record's turn).
    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError>;

    /// [`SessionStore::commit`], with `log`: everything the record's turn emitted, which now
    /// waits for the person — or, on a shared database, everything it emitted so far (every
    /// commit carries it there, so other instances can follow the turn).
    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError>;

    /// Writes `record`.
    async fn save(&self, record: &SessionRecord) -> Result<(), StoreError> {
        self.commit(record, &[]).await
    }

    /// Whether chat `id` is stored (`None`: it is not) and whose it is (`Some(None)`: nobody's
    /// yet, or from before chats had owners), read without its entries: what a route's
    /// ownership check needs (ADR 0024), at the cost of one indexed row whatever the chat's
    /// length (ADR 0038). Reading it changes nothing a later [`SessionStore::load`] sees.
    async fn chat_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        Ok(self.load(id).await?.map(|stored| stored.record.owner))
    }

    /// The session whose stored turn waits for the approval `approval_id`, if any.
    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError>;

    /// One page of the approvals waiting for people that `query` selects (ADR 0039):
    /// [`InboxQuery::admits`] says which, the oldest first, at most `query.limit`.
    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError>;

    /// The approval `approval_id`, if it waits for people.
    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError>;

    /// How many approvals wait, by tool and by the rule that asks (`/metrics`).
    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError>;

    /// Sessions whose waiting approvals were written before the inbox's columns existed (a
    /// migrated database): committed again once, at start-up, so the inbox finds them.
    async fn unindexed(&self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    /// Ids of the stored sessions, most recently updated first.
    async fn list(&self) -> Result<Vec<String>, StoreError>;

    /// Keeps a file attached in `chat` under the SHA-256 of its bytes (`sha`, hex); the same
    /// file kept again changes nothing.
    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError>;

    /// The file of `chat` whose SHA-256 is `sha`, if it was kept.
    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError>;

    /// Ids of the sessions whose turn is not over (running or waiting for the person): the
    /// turns a restarted server must pick up again.
    async fn unfinished(&self) -> Result<Vec<String>, StoreError>;

    /// The turns a starting instance takes up itself (ADR 0039): every unfinished one on a
    /// database only it uses; on a shared one, the running turns whose instance stopped
    /// answering — a turn waiting for people is any instance's to load when someone answers, and
    /// the overdue sweeper's when its deadline passes, so a start reads no more than that
    /// whatever the number of approvals waiting.
    async fn resumable(&self) -> Result<Vec<String>, StoreError> {
        self.unfinished().await
    }

    /// Audit records matching `query`, newest first.
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError>;

    /// The audit chain's head, and where it started (ADR 0029). Every audit event a store
    /// appends (a commit's, [`PolicyStore::append_audit`]'s, an enrolment's) extends it in the
    /// transaction that writes it, in commit order, whichever instance writes it.
    async fn chain_head(&self) -> Result<ChainHead, StoreError> {
        Err(no_chain())
    }

    /// Audit records after `after`, oldest first, at most `limit`, with their chain hashes.
    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let _ = (after, limit);
        Err(no_chain())
    }

    /// Keeps a signed checkpoint of the chain (one kept already at its `seq` stays).
    async fn keep_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let _ = checkpoint;
        Err(no_chain())
    }

    /// Checkpoints after record `after`, oldest first, at most `limit`.
    async fn checkpoints(&self, after: i64, limit: usize) -> Result<Vec<Checkpoint>, StoreError> {
        let _ = (after, limit);
        Err(no_chain())
    }

    /// The newest checkpoint, if any.
    async fn last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        Err(no_chain())
    }

    /// The seed the chain's checkpoints are signed with (Ed25519): made on first use, then
    /// always the same, kept like the sign-in secret.
    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        Err(no_chain())
    }

    /// What kind of database this is (`memory`, `sqlite`, `postgres`), for `/healthz`.
    fn database(&self) -> &'static str;

    /// Whether the database answers now (`/healthz`); an embedded one always does.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// How many instances use this database now (`/metrics`): on a shared one, those whose
    /// heartbeat is fresh; this one alone otherwise.
    async fn live_instances(&self) -> Result<u64, StoreError> {
        Ok(1)
    }

    /// Whether other instances may commit to this database too (Postgres): then a record in
    /// memory may be out of date, and a commit of an out-of-date record is refused
    /// ([`StoreError::is_conflict`]).
    fn shared(&self) -> bool {
        false
    }

    /// Whether `id`'s record changed in the database since this instance last read or wrote
    /// it (always false for a database only this instance writes).
    async fn stale(&self, id: &str) -> Result<bool, StoreError> {
        let _ = id;
        Ok(false)
    }

    /// On a shared database: sessions whose turn waits for the person with a deadline (an
    /// approval's, a browser call's) at or before `before` — turns another instance may have
    /// left behind. A database only this instance writes has none (its own timer fires them).
    async fn overdue(&self, before: Millis) -> Result<Vec<String>, StoreError> {
        let _ = before;
        Ok(Vec::new())
    }

    /// On a shared database: sessions whose turn is running on an instance that stopped
    /// answering (no heartbeat for [`postgres::LEASE_MS`]) — turns to take over. None elsewhere.
    async fn orphaned(&self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    /// On a shared database: writes the log of `chat`'s running turn `turn` so far (between
    /// commits, for other instances following it) and tells them ([`StoreNews::Kept`]); a log
    /// of that turn already stored and as long stays. Nothing to do for a database only this
    /// instance uses.
    async fn keep_log(&self, chat: &str, turn: &str, log: &[TurnEntry]) -> Result<(), StoreError> {
        let _ = (chat, turn, log);
        Ok(())
    }

    /// News from the other instances sharing the database, if it is shared.
    fn news(&self) -> Option<tokio::sync::broadcast::Receiver<StoreNews>> {
        None
    }

    /// On a shared database: from now on, and for as long as the result is held, [`news`]
    /// carries the [`StoreNews::Text`] of `chat` (which a reader here follows). Text of chats
    /// nobody here follows is not heard at all (ADR 0043). Hearing starts a moment after the
    /// call: what is said before comes from the stored log ([`StoreNews::Kept`]).
    ///
    /// [`news`]: SessionStore::news
    fn hear_text(&self, chat: &str) -> TextInterest {
        let _ = chat;
        TextInterest::none()
    }

    /// Tells the other instances sharing the database that `news` happened here (people,
    /// grants, sign-ins changed; a stop asked for a turn that may run on one of them). Nothing
    /// to do for a database only this instance writes. (Commits announce themselves.)
    async fn announce(&self, news: StoreNews) -> Result<(), StoreError> {
        let _ = news;
        Ok(())
    }
}

/// Where the edge's sign-in sessions live (in the same database as the sessions).
#[async_trait]
pub trait SignInStore: Send + Sync + 'static {
    /// The secret sign-in cookies are signed with: made on first use, then always the same (so
    /// sessions survive a restart).
    async fn signing_secret(&self) -> Result<[u8; 32], StoreError>;

    /// Records a sign-in session that was just issued.
    async fn record_signin(&self, signin: &SignIn) -> Result<(), StoreError>;

    /// Marks sign-in `id` as ended at `at` (signing out).
    async fn end_signin(&self, id: &str, at: Millis) -> Result<(), StoreError>;

    /// The ended sign-ins that would otherwise still be valid at `now`, with their expiry.
    async fn ended_signins(&self, now: Millis) -> Result<Vec<(String, Millis)>, StoreError>;
}

/// Where the last tool list of each MCP server is kept (in the sessions' database), so that a
/// server that is down at start still offers the tools its pending approvals name.
/// Where people, their passkeys and one-time links are kept (ADR 0024).
#[async_trait]
pub trait PeopleStore: Send + Sync + 'static {
    /// Everyone, revoked people included.
    async fn people(&self) -> Result<Vec<Person>, StoreError>;

    /// Inserts or updates a person (name, roles, revocation). A revocation is final: a person
    /// saved without one stays revoked if they were (an instance's copy made before it heard of
    /// the removal never brings them back, #33).
    async fn save_person(&self, person: &Person) -> Result<(), StoreError>;

    async fn passkeys(&self) -> Result<Vec<StoredPasskey>, StoreError>;

    /// Inserts or updates a passkey (its counter after a use).
    async fn save_passkey(&self, passkey: &StoredPasskey) -> Result<(), StoreError>;

    async fn save_invite(&self, invite: &Invite) -> Result<(), StoreError>;

    /// The invite stored under `digest`, used or not.
    async fn invite(&self, digest: &str) -> Result<Option<Invite>, StoreError>;

    /// Marks every open invite of `kind` used (a new start-up link replaces the last one's).
    async fn close_invites(&self, kind: InviteKind, at: Millis) -> Result<(), StoreError>;

    /// In one transaction: uses the open invite `digest` up (false, and nothing written, when it
    /// is used or expired), adds `person` when given, and adds `passkey`.
    async fn enrol(
        &self,
        digest: &str,
        person: Option<&Person>,
        passkey: &StoredPasskey,
        at: Millis,
    ) -> Result<bool, StoreError>;

    /// Keeps a passkey ceremony's `state` under its `challenge` until `expires` (so its answer
    /// may reach any instance), for `owner` (the one-time link or the person it is for).
    /// Ceremonies expired at `now` go, and so do `owner`'s oldest beyond `per_owner - 1`: an
    /// owner's newest ceremony is always kept, and no owner's crowd out another's.
    async fn keep_ceremony(
        &self,
        challenge: &str,
        owner: &str,
        state: &str,
        expires: Millis,
        now: Millis,
        per_owner: usize,
    ) -> Result<(), StoreError>;

    /// Takes the ceremony of `challenge`, once (of two answers at once, one gets it): its expiry
    /// and state.
    async fn take_ceremony(&self, challenge: &str) -> Result<Option<(Millis, String)>, StoreError>;

    /// Records that the (stateless) challenge `challenge` was answered, until it expires at
    /// `expires`: true the first time, false when it was already (of two answers at once, one
    /// gets true). Records expired at `now` go.
    async fn spend_challenge(
        &self,
        challenge: &str,
        expires: Millis,
        now: Millis,
    ) -> Result<bool, StoreError>;
}

#[async_trait]
pub trait ToolListStore: Send + Sync + 'static {
    /// Keeps `tools` (the server's `tools/list`, as JSON) as `server`'s last list.
    async fn keep_tool_list(&self, server: &str, tools: &str, at: Millis)
    -> Result<(), StoreError>;

    /// `server`'s last list, if one was kept.
    async fn kept_tool_list(&self, server: &str) -> Result<Option<String>, StoreError>;
}

/// Where the policy's state lives (in the sessions' database): the person's grants and their
/// use, what the wallets paid (the ledger the sessions' commits write) and what calls about to
/// run reserved ([`reservations`]): the running totals budgets and daily limits are held to.
#[async_trait]
pub trait PolicyStore: Send + Sync + 'static {
    /// Writes `grant`: a new one (with its first use), or its revocation. Its use is the
    /// store's from then on: only [`PolicyStore::reserve`] and [`PolicyStore::release`] change it.
    async fn save_grant(&self, grant: &Grant) -> Result<(), StoreError>;

    /// Every grant kept, oldest first, with its use as the store has it.
    async fn grants(&self) -> Result<Vec<Grant>, StoreError>;

    /// The day of `now`'s spending (paid, and reserved by calls that have not paid yet) and the
    /// grants' use.
    async fn spent(&self, now: Millis) -> Result<Spent, StoreError>;

    /// Decides and reserves in one step: `decide` is given the day's spending and the grants'
    /// use as they are now and returns what the calls it lets run claim; those claims are kept,
    /// all or nothing, before any other reservation is decided — by this instance or, on a
    /// shared database, by any other. A claim kept before (same chat and call) counts once.
    /// [`Reserved::Refused`], keeping nothing, when a grant claimed was revoked or expired
    /// meanwhile or has no room left: decide again.
    async fn reserve(
        &self,
        now: Millis,
        decide: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
    ) -> Result<Reserved, StoreError>;

    /// Calls that ended without using what they reserved: their reservations go and their
    /// grant shares go back; a call without a reservation changes nothing. (A payment that was
    /// made needs nothing: its ledger row counts it from its commit on, and a later reservation
    /// sweeps its reservation away.)
    async fn release(&self, unused: &[Unused]) -> Result<(), StoreError>;

    /// Appends audit events that belong to no session commit (a grant revoked).
    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError>;

    /// Keeps the text of a policy file whose rules decided audited calls, under the SHA-256 of
    /// the text (`digest`, hex): a receipt's verifier evaluates its rules again (ADR 0029).
    async fn keep_policy_text(
        &self,
        digest: &str,
        text: &str,
        at: Millis,
    ) -> Result<(), StoreError>;

    /// The policy text kept under `digest`.
    async fn policy_text(&self, digest: &str) -> Result<Option<String>, StoreError>;

    /// Every policy text kept, by digest.
    async fn policy_texts(&self) -> Result<Vec<(String, String)>, StoreError>;
}

/// The stored log of `record`'s turn, if the stored one belongs to it and it is not over.
pub(crate) fn log_of_turn(
    record: &SessionRecord,
    stored_turn: &str,
    entries: Vec<TurnEntry>,
) -> Option<Vec<TurnEntry>> {
    record
        .turn
        .as_ref()
        .filter(|t| t.id == stored_turn && !t.status.is_over())
        .map(|_| entries)
}

#[cfg(test)]
mod tests;
