//! The approvals waiting in every chat, for the inbox (`/approvals`, ADR 0024): who may decide
//! what is asked of people other than the chat's own — and their own, across chats — without
//! opening each chat.
//!
//! An index, not a second source of truth: the session records hold the approvals; every commit
//! of a record (and every record loaded, at start-up too) puts its chat's waiting approvals
//! here, replacing what the chat had. A version number grows with every change, so a page can
//! wait for the next one (long polling) and never miss one between two looks.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use serde_json::Value;
use tokio::sync::Notify;

use super::{
    clock::Millis,
    gate::{CallPhase, StepCall},
    lock,
    session::SessionRecord,
};
use crate::protocol::{
    countersign::{Dropped, Requirement, Signature},
    grant::Ruling,
};

/// One approval waiting for people.
#[derive(Debug, Clone, PartialEq)]
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

/// The waiting approvals of every chat, by approval id.
#[derive(Debug, Default)]
pub struct Inbox {
    waiting: Mutex<Index>,
    /// Changes of what waits, anywhere (the inbox pages follow it).
    version: AtomicU64,
    /// Changes of single chats (a chat page follows its own): see `Index::chat_versions`.
    chat_changes: AtomicU64,
    changed: Notify,
    /// Where the approvals that leave it after a commit of this instance are measured.
    metrics: Option<std::sync::Arc<super::metrics::Metrics>>,
}

#[derive(Debug, Default)]
struct Index {
    by_approval: BTreeMap<String, Waiting>,
    by_chat: HashMap<String, Vec<String>>,
    /// Each chat's version (of `Inbox::chat_changes`) at its last change: a change of what it waits for, and, for a
    /// chat that ever waited for someone, every commit after (a decision taken elsewhere is
    /// followed by the commit of what it ran, which a page that shows the chat must see too).
    chat_versions: HashMap<String, u64>,
}

/// What `record`'s turn waits for the person for.
fn waiting_of(record: &SessionRecord) -> Vec<Waiting> {
    let Some(turn) = record.turn.as_ref().filter(|t| !t.status.is_over()) else {
        return Vec::new();
    };
    turn.calls
        .iter()
        .filter_map(|call: &StepCall| match &call.phase {
            CallPhase::AwaitingApproval {
                approval_id,
                requested_at_ms,
                deadline_ms,
            } => Some(Waiting {
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
            }),
            _ => None,
        })
        .collect()
}

impl Inbox {
    /// An inbox whose decided approvals are measured in `metrics` (how long each waited).
    pub fn metered(metrics: std::sync::Arc<super::metrics::Metrics>) -> Inbox {
        Inbox {
            metrics: Some(metrics),
            ..Inbox::default()
        }
    }

    /// Puts `record`'s waiting approvals in place of what its chat had here: `record` as this
    /// instance commits it (an approval that goes is measured as decided here).
    pub fn sync(&self, record: &SessionRecord) {
        self.replace(record, true);
    }

    /// [`Inbox::sync`] for a record read from the database (loaded, or committed by another
    /// instance): what it decided was measured where it was decided.
    pub fn sync_loaded(&self, record: &SessionRecord) {
        self.replace(record, false);
    }

    fn replace(&self, record: &SessionRecord, decided_here: bool) {
        let now = waiting_of(record);
        let mut index = lock(&self.waiting);
        let before: Vec<Waiting> = index
            .by_chat
            .get(&record.id)
            .map(|ids| {
                ids.iter()
                    .filter_map(|id| index.by_approval.get(id).cloned())
                    .collect()
            })
            .unwrap_or_default();
        if before == now {
            // Nothing waits differently; a chat that pages follow still moved on.
            if index.chat_versions.contains_key(&record.id) {
                let version = self.chat_changes.fetch_add(1, Ordering::SeqCst) + 1;
                index.chat_versions.insert(record.id.clone(), version);
                drop(index);
                self.changed.notify_waiters();
            }
            return;
        }
        for id in index.by_chat.remove(&record.id).unwrap_or_default() {
            let gone = index.by_approval.remove(&id);
            if let (true, Some(metrics), Some(gone), Some(resolution)) = (
                decided_here,
                &self.metrics,
                gone,
                record.resolved_approvals.get(&id),
            ) {
                metrics.decided(resolution, gone.requested_at_ms);
            }
        }
        if !now.is_empty() {
            index.by_chat.insert(
                record.id.clone(),
                now.iter().map(|w| w.approval_id.clone()).collect(),
            );
            for waiting in now {
                index
                    .by_approval
                    .insert(waiting.approval_id.clone(), waiting);
            }
        }
        self.version.fetch_add(1, Ordering::SeqCst);
        let version = self.chat_changes.fetch_add(1, Ordering::SeqCst) + 1;
        index.chat_versions.insert(record.id.clone(), version);
        drop(index);
        self.changed.notify_waiters();
    }

    /// The version at `chat`'s last change (0: none since the server started).
    /// The chats that wait, or ever waited, for someone here.
    pub fn chats(&self) -> Vec<String> {
        let index = lock(&self.waiting);
        let mut chats: Vec<String> = index.by_chat.keys().cloned().collect();
        chats.extend(
            index
                .chat_versions
                .keys()
                .filter(|c| !index.by_chat.contains_key(*c))
                .cloned(),
        );
        chats
    }

    /// Whether `chat` waits, or ever waited, for someone here (its commits change the index).
    pub fn knows(&self, chat: &str) -> bool {
        let index = lock(&self.waiting);
        index.by_chat.contains_key(chat) || index.chat_versions.contains_key(chat)
    }

    pub fn chat_version(&self, chat: &str) -> u64 {
        lock(&self.waiting)
            .chat_versions
            .get(chat)
            .copied()
            .unwrap_or(0)
    }

    /// Waits until `chat`'s version is no longer `known`, or `at_most` passed; its version then.
    pub async fn chat_changed_since(&self, chat: &str, known: u64, at_most: Duration) -> u64 {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                let mut changed = std::pin::pin!(changed);
                changed.as_mut().enable();
                if self.chat_version(chat) != known {
                    return;
                }
                changed.await;
            }
        };
        let _ = tokio::time::timeout(at_most, wait).await;
        self.chat_version(chat)
    }

    /// Every waiting approval, the oldest first.
    pub fn all(&self) -> Vec<Waiting> {
        let mut all: Vec<Waiting> = lock(&self.waiting).by_approval.values().cloned().collect();
        all.sort_by(|a, b| {
            a.requested_at_ms
                .cmp(&b.requested_at_ms)
                .then(a.approval_id.cmp(&b.approval_id))
        });
        all
    }

    /// The waiting approval `approval_id`, if it waits.
    pub fn get(&self, approval_id: &str) -> Option<Waiting> {
        lock(&self.waiting).by_approval.get(approval_id).cloned()
    }

    /// How many approvals wait, by tool and by the rule that asks (`/metrics`).
    pub fn counts(&self) -> Vec<((String, Option<String>), u64)> {
        let mut counts: BTreeMap<(&str, Option<&str>), u64> = BTreeMap::new();
        let index = lock(&self.waiting);
        for waiting in index.by_approval.values() {
            *counts
                .entry((&waiting.tool, waiting.rule.as_deref()))
                .or_default() += 1;
        }
        counts
            .into_iter()
            .map(|((tool, rule), n)| ((tool.to_owned(), rule.map(str::to_owned)), n))
            .collect()
    }

    /// The version now: it grows with every change.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Waits until the version is no longer `known`, or `at_most` passed; the version then.
    pub async fn changed_since(&self, known: u64, at_most: Duration) -> u64 {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                let mut changed = std::pin::pin!(changed);
                // Registered before looking, so a change in between is not missed.
                changed.as_mut().enable();
                if self.version() != known {
                    return;
                }
                changed.await;
            }
        };
        let _ = tokio::time::timeout(at_most, wait).await;
        self.version()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{
        gate::{CallPhase, StepCall},
        history::ToolCall,
        session::{TurnRecord, TurnStatus},
        tools::ToolLocation,
    };
    use serde_json::json;

    fn record(chat: &str, approvals: &[&str]) -> SessionRecord {
        let mut record = SessionRecord::new(chat, 0);
        record.owner = Some("p-ana".into());
        record.turn = Some(TurnRecord {
            id: "t".into(),
            message_id: "m".into(),
            status: TurnStatus::AwaitingPerson,
            steps: 1,
            calls: approvals
                .iter()
                .enumerate()
                .map(|(i, id)| StepCall {
                    call: ToolCall {
                        id: format!("c{i}"),
                        name: "process_payment".into(),
                        args: json!({"amount": 150}),
                        provider_data: None,
                    },
                    location: ToolLocation::Server,
                    phase: CallPhase::AwaitingApproval {
                        approval_id: (*id).into(),
                        requested_at_ms: i as i64,
                        deadline_ms: 1_000,
                    },
                    announced: false,
                    gated_by: Some((*id).into()),
                    ruling: Some(Ruling::Asked {
                        rule: Some("two-people".into()),
                        grantable: false,
                        needs: Some(Requirement {
                            approvers: 2,
                            role: Some("approver".into()),
                            not_requester: true,
                            step_up: false,
                        }),
                    }),
                    signatures: Vec::new(),
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

    #[tokio::test]
    async fn a_chats_approvals_are_replaced_whole_and_a_change_wakes_a_waiter() {
        let inbox = std::sync::Arc::new(Inbox::default());
        inbox.sync(&record("chat-1", &["a1", "a2"]));
        inbox.sync(&record("chat-2", &["b1"]));
        assert_eq!(inbox.all().len(), 3);
        let waiting = inbox.get("a1").unwrap();
        assert_eq!(waiting.owner, "p-ana");
        assert_eq!(waiting.rule.as_deref(), Some("two-people"));
        assert_eq!(waiting.needs.approvers, 2);
        let version = inbox.version();
        inbox.sync(&record("chat-1", &["a1", "a2"]));
        assert_eq!(inbox.version(), version, "no change, no new version");
        let waiter = {
            let inbox = inbox.clone();
            tokio::spawn(async move { inbox.changed_since(version, Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        let mut done = record("chat-1", &[]);
        done.turn.as_mut().unwrap().status = TurnStatus::Finished;
        inbox.sync(&done);
        assert!(waiter.await.unwrap() > version);
        assert!(inbox.get("a1").is_none());
        assert_eq!(inbox.all().len(), 1);
        // Nothing changes: the wait ends at its limit with the same version.
        let now = inbox.version();
        assert_eq!(
            inbox.changed_since(now, Duration::from_millis(20)).await,
            now
        );
    }

    #[tokio::test]
    async fn a_chat_that_waited_moves_on_with_every_commit_and_others_do_not_count() {
        let inbox = std::sync::Arc::new(Inbox::default());
        // A chat that never waited for anyone has no version to follow.
        inbox.sync(&record("quiet", &[]));
        assert_eq!(inbox.chat_version("quiet"), 0);
        inbox.sync(&record("chat-1", &["a1"]));
        let asked = inbox.chat_version("chat-1");
        let waiting = inbox.version();
        // The decision: nothing waits any more. Then the commit of what it ran: the chat's
        // version moves again (its page must see the result), the inbox's does not.
        let mut decided = record("chat-1", &[]);
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
        decided.turn.as_mut().unwrap().status = TurnStatus::Finished;
        inbox.sync(&decided);
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
