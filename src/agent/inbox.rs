//! The approvals waiting for people, for the inbox (`/approvals`, ADR 0024, ADR 0039): who may
//! decide what is asked of people other than the chat's own — and their own, across chats —
//! without opening each chat.
//!
//! The store keeps them: every commit writes its chat's waiting approvals as rows of the
//! `pending_approvals` view (each with its [`Waiting`] entry) and the keys they are found by
//! ([`Waiting::keys`]: who asked, the role or every person an approval wants, whether someone
//! signed it). The inbox page asks the store for one page of what a person's keys find
//! ([`InboxQuery`]); nothing of the deployment's approvals is kept here.
//!
//! What is kept here is news: a version that grows whenever what waits changes — a commit of
//! this instance, or another instance's notification naming the approvals it changed — so a page
//! can wait for the next one (long polling) and never miss one between two looks; and, for the
//! chats this instance drives (in memory), what they waited for at their last commit, to tell a
//! change from none and to measure how long a decided approval waited.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;

use super::{
    clock::{Clock, Millis},
    gate::{
        CallPhase, Signer, StepCall,
        countersign::{self, audience_of},
    },
    lock,
    metrics::Metrics,
    session::SessionRecord,
    store::{SessionStore, StoreError},
};
use crate::protocol::{
    countersign::{Dropped, Requirement, Signature},
    grant::Ruling,
};

/// One approval waiting for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    pub chat: String,
    /// Whose chat it is (who asked).
    pub owner: String,
    pub approval_id: String,
    pub tool_call_id: String,
    pub tool: String,
    /// The arguments under signature (a signer's edit, or the call's own).
    pub args: Value,
    /// The rule that asks, if one does.
    pub rule: Option<String>,
    pub needs: Requirement,
    pub signatures: Vec<Signature>,
    /// Signatures that stopped counting (their person was removed or lost the role).
    pub dropped: Vec<Dropped>,
    pub requested_at_ms: Millis,
    pub deadline_ms: Millis,
}

/// The key of the approvals someone signed already (a change of people rechecks them).
pub const SIGNED: &str = "signed";

impl Waiting {
    /// The keys a store finds this approval by: its audience ([`countersign::audience`]), and
    /// [`SIGNED`] once someone signed it.
    pub fn keys(&self) -> Vec<String> {
        let mut keys = countersign::audience(&self.needs, &self.owner);
        if !self.signatures.is_empty() {
            keys.push(SIGNED.to_owned());
        }
        keys
    }

    /// Where it stands in every listing: the oldest first.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            requested_at_ms: self.requested_at_ms,
            approval_id: self.approval_id.clone(),
        }
    }
}

/// A place in a listing of waiting approvals (oldest first): the listing goes on after it. An
/// approval asked later never moves what came before, so pages stay stable as approvals come.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub requested_at_ms: Millis,
    pub approval_id: String,
}

/// One page of the waiting approvals a store finds under any of `keys`, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxQuery {
    pub keys: Vec<String>,
    /// Leaves out approvals whose deadline is at or before it (`None`: keeps them).
    pub now: Option<Millis>,
    /// Starts after it (`None`: from the oldest).
    pub after: Option<Cursor>,
    pub limit: usize,
}

impl InboxQuery {
    /// Whether `waiting` belongs in this query's listing, wherever its page: what every store
    /// selects (the memory store asks it of each approval; the databases' queries say the same
    /// in SQL, and the store contract tests hold them to it).
    pub fn admits(&self, waiting: &Waiting) -> bool {
        let keys = waiting.keys();
        self.keys.iter().any(|k| keys.contains(k))
            && self.now.is_none_or(|now| waiting.deadline_ms > now)
            && self
                .after
                .as_ref()
                .is_none_or(|after| waiting.cursor() > *after)
    }
}

/// What `record`'s turn waits for people for.
pub fn waiting_of(record: &SessionRecord) -> Vec<Waiting> {
    let Some(turn) = record.turn.as_ref().filter(|t| !t.status.is_over()) else {
        return Vec::new();
    };
    turn.calls
        .iter()
        .filter_map(|call| waiting_call(record, call))
        .collect()
}

/// `call` of `record`'s turn as it waits for people, if it does.
pub fn waiting_call(record: &SessionRecord, call: &StepCall) -> Option<Waiting> {
    let CallPhase::AwaitingApproval {
        approval_id,
        requested_at_ms,
        deadline_ms,
    } = &call.phase
    else {
        return None;
    };
    Some(Waiting {
        chat: record.id.clone(),
        owner: record.owner().to_owned(),
        approval_id: approval_id.clone(),
        tool_call_id: call.call.id.clone(),
        tool: call.call.name.clone(),
        args: call
            .signed_args
            .clone()
            .unwrap_or_else(|| call.call.args.clone()),
        rule: match &call.ruling {
            Some(Ruling::Asked { rule, .. }) => rule.clone(),
            _ => None,
        },
        needs: call.needs(),
        signatures: call.signatures.clone(),
        dropped: call.dropped.clone(),
        requested_at_ms: *requested_at_ms,
        deadline_ms: *deadline_ms,
    })
}

/// What waits, as the store finds it, and news of it for the pages that follow it (see the
/// module's documentation).
pub struct Inbox {
    /// Where what waits is kept (every commit writes its chat's).
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    news: News,
}

/// News of what waits.
#[derive(Debug, Default)]
struct News {
    /// What the chats this instance drives waited for at their last commit (or load).
    driven: Mutex<HashMap<String, Vec<Waiting>>>,
    /// Each chat's version (of `chat_changes`) at its last change, for the chats that waited
    /// for someone since this instance started: a change of what it waits for, and every commit
    /// after (a decision taken elsewhere is followed by the commit of what it ran, which a page
    /// that shows the chat must see too).
    chat_versions: Mutex<HashMap<String, u64>>,
    /// Changes of what waits, anywhere (the inbox pages follow it).
    version: AtomicU64,
    /// Changes of single chats (a chat page follows its own).
    chat_changes: AtomicU64,
    changed: Notify,
    /// Where the approvals that leave it after a commit of this instance are measured.
    metrics: Option<Arc<Metrics>>,
}

/// How many approvals a walk over every approval under one key reads at a time.
const WALK_PAGE: usize = 500;

impl Inbox {
    /// The inbox of what `store` keeps, its decided approvals measured in `metrics` (how long
    /// each waited) when given.
    pub fn new(
        store: Arc<dyn SessionStore>,
        clock: Arc<dyn Clock>,
        metrics: Option<Arc<Metrics>>,
    ) -> Inbox {
        Inbox {
            store,
            clock,
            news: News {
                metrics,
                ..News::default()
            },
        }
    }

    /// One page (at most `limit`) of the approvals waiting that `signer` may see — their own
    /// chats', and those asked of their roles or of every person — after `after`, oldest first,
    /// their deadline not yet passed. Whether they may sign each is still [`may_sign`]'s to say.
    ///
    /// [`may_sign`]: crate::agent::gate::countersign::may_sign
    pub async fn page(
        &self,
        signer: &Signer,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Vec<Waiting>, StoreError> {
        self.store
            .inbox(&InboxQuery {
                keys: audience_of(signer),
                now: Some(self.clock.now_ms()),
                after,
                limit,
            })
            .await
    }

    /// The approval `approval_id`, if it waits for people.
    pub async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        self.store.waiting(approval_id).await
    }

    /// Every approval waiting under `key` (expired or not), a page at a time (what a change of
    /// people rechecks).
    pub(crate) async fn waiting_under(&self, key: &str) -> Result<Vec<Waiting>, StoreError> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .store
                .inbox(&InboxQuery {
                    keys: vec![key.to_owned()],
                    now: None,
                    after,
                    limit: WALK_PAGE,
                })
                .await?;
            let full = page.len() == WALK_PAGE;
            after = page.last().map(Waiting::cursor);
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// `record` as this instance committed it: what it waits for now replaces what it waited
    /// for (an approval that goes is measured as decided here). Only ever after the store has
    /// it: the pages this wakes read the store.
    pub fn sync(&self, record: &SessionRecord) {
        self.replace(record, true);
    }

    /// [`Inbox::sync`] for a record read from the database: what it decided was measured where
    /// it was decided.
    pub fn sync_loaded(&self, record: &SessionRecord) {
        self.replace(record, false);
    }

    /// `chat` left this instance's memory: what it waited for is the store's alone.
    pub fn forget(&self, chat: &str) {
        lock(&self.news.driven).remove(chat);
    }

    fn replace(&self, record: &SessionRecord, decided_here: bool) {
        let now = waiting_of(record);
        let mut driven = lock(&self.news.driven);
        let before = driven
            .get(&record.id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if before == now.as_slice() {
            drop(driven);
            // Nothing waits differently; a chat that pages follow still moved on.
            self.chat_moved(&record.id, false);
            return;
        }
        if let (true, Some(metrics)) = (decided_here, &self.news.metrics) {
            for gone in before
                .iter()
                .filter(|b| !now.iter().any(|n| n.approval_id == b.approval_id))
            {
                if let Some(resolution) = record.resolved_approvals.get(&gone.approval_id) {
                    metrics.decided(resolution, gone.requested_at_ms);
                }
            }
        }
        if now.is_empty() {
            driven.remove(&record.id);
        } else {
            driven.insert(record.id.clone(), now);
        }
        drop(driven);
        self.news.version.fetch_add(1, Ordering::SeqCst);
        self.chat_moved(&record.id, true);
    }

    /// Another instance committed `chat`; `changed`: what waits in it changed (its
    /// notification named approvals that came, changed or went).
    pub fn heard(&self, chat: &str, changed: bool) {
        if changed {
            self.news.version.fetch_add(1, Ordering::SeqCst);
        }
        self.chat_moved(chat, changed);
    }

    /// News may have been lost: every page that follows something here looks again.
    pub fn everything_changed(&self) {
        self.news.version.fetch_add(1, Ordering::SeqCst);
        let mut versions = lock(&self.news.chat_versions);
        for version in versions.values_mut() {
            *version = self.news.chat_changes.fetch_add(1, Ordering::SeqCst) + 1;
        }
        drop(versions);
        self.news.changed.notify_waiters();
    }

    /// `chat` moved on (`waits`: what it waits for changed): its version moves if it waits or
    /// waited for someone, and every follower wakes.
    fn chat_moved(&self, chat: &str, waits: bool) {
        let mut versions = lock(&self.news.chat_versions);
        if waits || versions.contains_key(chat) {
            let version = self.news.chat_changes.fetch_add(1, Ordering::SeqCst) + 1;
            versions.insert(chat.to_owned(), version);
            drop(versions);
            self.news.changed.notify_waiters();
        }
    }

    /// Whether `chat` waits, or waited, for someone since this instance started.
    pub fn knows(&self, chat: &str) -> bool {
        lock(&self.news.chat_versions).contains_key(chat)
    }

    /// The version at `chat`'s last change (0: none since the server started).
    pub fn chat_version(&self, chat: &str) -> u64 {
        lock(&self.news.chat_versions)
            .get(chat)
            .copied()
            .unwrap_or(0)
    }

    /// Waits until `chat`'s version is no longer `known`, or `at_most` passed; its version then.
    pub async fn chat_changed_since(&self, chat: &str, known: u64, at_most: Duration) -> u64 {
        self.wait_until(at_most, || self.chat_version(chat) != known)
            .await;
        self.chat_version(chat)
    }

    /// How many approvals the chats driven here wait for (a test's view of this instance's
    /// memory).
    pub fn driven(&self) -> usize {
        lock(&self.news.driven).values().map(Vec::len).sum()
    }

    /// The version now: it grows with every change.
    pub fn version(&self) -> u64 {
        self.news.version.load(Ordering::SeqCst)
    }

    /// Waits until the version is no longer `known`, or `at_most` passed; the version then.
    pub async fn changed_since(&self, known: u64, at_most: Duration) -> u64 {
        self.wait_until(at_most, || self.version() != known).await;
        self.version()
    }

    /// Waits until `done` says so after a change, or `at_most` passed.
    async fn wait_until(&self, at_most: Duration, done: impl Fn() -> bool) {
        let wait = async {
            loop {
                let changed = self.news.changed.notified();
                let mut changed = std::pin::pin!(changed);
                // Registered before looking, so a change in between is not missed.
                changed.as_mut().enable();
                if done() {
                    return;
                }
                changed.await;
            }
        };
        let _ = tokio::time::timeout(at_most, wait).await;
    }
}

/// How many approvals wait, by tool and by the rule that asks (`/metrics`).
pub type WaitingCounts = Vec<((String, Option<String>), u64)>;

/// Counts `waiting` by tool and rule, as [`WaitingCounts`] (the memory store's).
pub fn count(waiting: impl IntoIterator<Item = Waiting>) -> WaitingCounts {
    let mut counts: BTreeMap<(String, Option<String>), u64> = BTreeMap::new();
    for w in waiting {
        *counts.entry((w.tool, w.rule)).or_default() += 1;
    }
    counts.into_iter().collect()
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Records that wait for people, for the inbox's tests and the stores' contract tests.

    use serde_json::json;

    use super::*;
    use crate::agent::{
        gate::{CallPhase, StepCall},
        history::ToolCall,
        session::{TurnRecord, TurnStatus},
        tools::ToolLocation,
    };

    /// One approval a fixture's turn waits for.
    #[derive(Clone)]
    pub(crate) struct Ask {
        pub(crate) id: String,
        pub(crate) needs: Requirement,
        pub(crate) requested_at_ms: Millis,
        pub(crate) deadline_ms: Millis,
        /// Who signed it already.
        pub(crate) signed_by: Vec<String>,
    }

    impl Ask {
        /// `id`, asked at `at`, needing two approvers (not the requester) by default.
        pub(crate) fn new(id: &str, at: Millis) -> Ask {
            Ask {
                id: id.into(),
                needs: Requirement {
                    approvers: 2,
                    role: Some("approver".into()),
                    not_requester: true,
                    step_up: false,
                },
                requested_at_ms: at,
                deadline_ms: at + 1_000_000,
                signed_by: Vec::new(),
            }
        }
    }

    /// A chat `chat` of `owner` (`None`: the local person) whose turn waits for `asks`.
    pub(crate) fn waiting_record(chat: &str, owner: Option<&str>, asks: &[Ask]) -> SessionRecord {
        let mut record = SessionRecord::new(chat, 0);
        record.owner = owner.map(str::to_owned);
        record.turn = Some(TurnRecord {
            id: "t".into(),
            message_id: "m".into(),
            status: TurnStatus::AwaitingPerson,
            steps: 1,
            calls: asks
                .iter()
                .enumerate()
                .map(|(i, ask)| StepCall {
                    call: ToolCall {
                        id: format!("{chat}-c{i}"),
                        name: "process_payment".into(),
                        args: json!({"amount": 150, "recipient": "Hanako"}),
                        provider_data: None,
                    },
                    location: ToolLocation::Server,
                    phase: CallPhase::AwaitingApproval {
                        approval_id: ask.id.clone(),
                        requested_at_ms: ask.requested_at_ms,
                        deadline_ms: ask.deadline_ms,
                    },
                    announced: false,
                    gated_by: Some(ask.id.clone()),
                    ruling: Some(Ruling::Asked {
                        rule: Some("two-people".into()),
                        grantable: false,
                        needs: Some(ask.needs.clone()),
                    }),
                    signatures: ask
                        .signed_by
                        .iter()
                        .map(|p| Signature {
                            person: p.clone(),
                            name: p.to_uppercase(),
                            at_ms: ask.requested_at_ms + 1,
                            step_up: false,
                        })
                        .collect(),
                    signed_args: None,
                    proposed_by: None,
                    denied_by: None,
                    revision: 0,
                    revision_shown: 0,
                    dropped: Vec::new(),
                    countersign_closed: false,
                })
                .collect(),
            held_text: Vec::new(),
            usage: Default::default(),
            inputs: 0,
            transport: Default::default(),
            timing: None,
        });
        record
    }

    /// `record` with its turn over (nothing waits any more).
    pub(crate) fn finished(mut record: SessionRecord) -> SessionRecord {
        if let Some(turn) = record.turn.as_mut() {
            turn.status = TurnStatus::Finished;
        }
        record
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{Ask, finished, waiting_record};
    use super::*;

    fn record(chat: &str, approvals: &[&str]) -> SessionRecord {
        let asks: Vec<Ask> = approvals
            .iter()
            .enumerate()
            .map(|(i, id)| Ask::new(id, i as i64))
            .collect();
        waiting_record(chat, Some("p-ana"), &asks)
    }

    /// An inbox of an empty store: what these tests look at is its news.
    fn unread() -> Inbox {
        Inbox::new(
            Arc::new(crate::agent::store::MemoryStore::default()),
            Arc::new(crate::agent::clock::SystemClock),
            None,
        )
    }

    #[tokio::test]
    async fn a_chats_approvals_are_replaced_whole_and_a_change_wakes_a_waiter() {
        let inbox = Arc::new(unread());
        inbox.sync(&record("chat-1", &["a1", "a2"]));
        inbox.sync(&record("chat-2", &["b1"]));
        assert_eq!(inbox.driven(), 3);
        let waiting = waiting_of(&record("chat-1", &["a1"])).remove(0);
        assert_eq!(waiting.owner, "p-ana");
        assert_eq!(waiting.rule.as_deref(), Some("two-people"));
        assert_eq!(waiting.needs.approvers, 2);
        assert_eq!(waiting.keys(), ["owner:p-ana", "role:approver"]);
        let version = inbox.version();
        inbox.sync(&record("chat-1", &["a1", "a2"]));
        assert_eq!(inbox.version(), version, "no change, no new version");
        let waiter = {
            let inbox = inbox.clone();
            tokio::spawn(async move { inbox.changed_since(version, Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        inbox.sync(&finished(record("chat-1", &[])));
        assert!(waiter.await.unwrap() > version);
        assert_eq!(inbox.driven(), 1);
        inbox.forget("chat-2");
        assert_eq!(
            inbox.driven(),
            0,
            "a chat that left memory is the store's alone"
        );
        // Nothing changes: the wait ends at its limit with the same version.
        let now = inbox.version();
        assert_eq!(
            inbox.changed_since(now, Duration::from_millis(20)).await,
            now
        );
    }

    #[tokio::test]
    async fn news_from_another_instance_wakes_the_pages_only_when_what_waits_changed() {
        let inbox = Arc::new(unread());
        let version = inbox.version();
        inbox.heard("elsewhere", false);
        assert_eq!(
            inbox.version(),
            version,
            "a commit that changed no approval"
        );
        assert_eq!(inbox.chat_version("elsewhere"), 0);
        inbox.heard("elsewhere", true);
        assert!(inbox.version() > version);
        let asked = inbox.chat_version("elsewhere");
        assert!(asked > 0);
        inbox.heard("elsewhere", false);
        assert!(
            inbox.chat_version("elsewhere") > asked,
            "a chat that waited moves on with every commit"
        );
        let before = (inbox.version(), inbox.chat_version("elsewhere"));
        inbox.everything_changed();
        assert!(inbox.version() > before.0 && inbox.chat_version("elsewhere") > before.1);
    }

    #[tokio::test]
    async fn a_chat_that_waited_moves_on_with_every_commit_and_others_do_not_count() {
        let inbox = Arc::new(unread());
        // A chat that never waited for anyone has no version to follow.
        inbox.sync(&record("quiet", &[]));
        assert_eq!(inbox.chat_version("quiet"), 0);
        inbox.sync(&record("chat-1", &["a1"]));
        let asked = inbox.chat_version("chat-1");
        let waiting = inbox.version();
        // The decision: nothing waits any more. Then the commit of what it ran: the chat's
        // version moves again (its page must see the result), the inbox's does not.
        let decided = record("chat-1", &[]);
        inbox.sync(&decided);
        let decided_at = inbox.chat_version("chat-1");
        assert!(decided_at != asked);
        let inbox_after_decision = inbox.version();
        assert!(inbox_after_decision > waiting);
        let follower = {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                inbox
                    .chat_changed_since("chat-1", decided_at, Duration::from_secs(5))
                    .await
            })
        };
        tokio::task::yield_now().await;
        inbox.sync(&finished(decided));
        assert_ne!(
            follower.await.unwrap(),
            decided_at,
            "the result's commit is news"
        );
        assert_eq!(
            inbox.version(),
            inbox_after_decision,
            "the inbox did not change"
        );
    }
}
