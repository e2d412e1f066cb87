//! What a change of people does to what the runtime holds (ADR 0024, issue #33). Removing
//! someone ends their power everywhere, at once: their sessions end and what they hold open
//! closes (the directory's [`crate::agent::people::Holds`]), their grants are revoked, their signatures
//! on approvals still waiting stop counting — the card and the inbox say whose and why — and
//! their turns stop. A role change drops the signatures that no longer qualify. Each is audited
//! with who did it.
//!
//! On a database several instances share, the instance where it happened does this for every
//! chat it can reach (the inbox's index knows every chat that waits, wherever it runs); the
//! others hear the news, read the people again, close what the removed held open there and
//! recheck the chats whose turns run there. Whatever news is late, an answer is judged — and a
//! countersigned call runs — only with who may sign as the store says at that moment.

use std::{collections::BTreeSet, sync::Arc};

use serde_json::{Value, json};

use super::Runtime;
use crate::agent::people::{Change, PeopleError, Person, Principal};
use crate::agent::{
    clock::Millis,
    gate::{
        InputError, StepCall,
        countersign::{self, Standing, Uncounted},
    },
    session::{Receipt, Session, SessionRecord, TurnEntry, TurnLog},
    store::{Actor, AuditEvent, AuditKind, audit},
};
use crate::protocol::{
    Chunk,
    countersign::{PROGRESS_PART, Progress},
};

/// How long a change of people waits, at most, for the chats it changed to show it (their
/// turns tell it at once; this only bounds a turn that cannot run).
const TOLD_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// A turn woken to tell a change: its log, where the news comes after, and the news: the
/// approvals whose `data-countersign` part it must write again — each with the signature it must
/// list as dropped (person, when), or any new part of it.
pub(crate) struct Telling {
    log: Arc<TurnLog>,
    from: usize,
    news: Vec<(String, Option<(String, Millis)>)>,
}

impl Telling {
    /// The turn of `receipt` (an answer just applied) telling where `approval_id` stands now.
    pub(crate) fn answer(receipt: &Receipt, approval_id: &str) -> Telling {
        Telling {
            log: receipt.log.clone(),
            from: receipt.from,
            news: vec![(approval_id.to_owned(), None)],
        }
    }

    /// Until the turn has told the news and committed it (it waits for the person again, and a
    /// chat read now shows it), or ended; at most [`TOLD_WITHIN`] (a turn that cannot run
    /// tells it when it does). False when that ran out.
    pub(crate) async fn told_soon(self) -> bool {
        tokio::time::timeout(TOLD_WITHIN, self.told()).await.is_ok()
    }

    async fn told(self) {
        let mut untold = self.news;
        let mut reader = self.log.subscribe(self.from);
        while let Some(entry) = reader.next().await {
            match entry {
                TurnEntry::Chunk(Chunk::Data(data)) if data.name == PROGRESS_PART => {
                    let Some(progress) = Progress::from_value(&data.data) else {
                        continue;
                    };
                    untold.retain(|(approval, dropped)| {
                        progress.approval_id != *approval
                            || dropped.as_ref().is_some_and(|(person, at)| {
                                !progress
                                    .dropped
                                    .iter()
                                    .any(|d| d.person == *person && d.at_ms == *at)
                            })
                    });
                }
                TurnEntry::Pause if untold.is_empty() => return,
                TurnEntry::End => return,
                _ => {}
            }
        }
    }
}

/// Which chats a recheck reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Every chat this instance can change: the inbox's (every chat that waits, wherever it
    /// runs) and those in memory here — where the change was made.
    Everywhere,
    /// The chats whose turns run here (no other instance may change them) — on news of a
    /// change made elsewhere.
    RunningHere,
}

impl Runtime {
    /// Removes `person`, as `by` (an admin or the API key; `actor`: how the audit log names
    /// them): they are signed out everywhere, their grants are revoked, their signatures on
    /// approvals still waiting no longer count and their turns stop.
    pub async fn remove_person(
        self: &Arc<Self>,
        by: &Principal,
        actor: &Actor,
        person: &str,
    ) -> Result<Person, PeopleError> {
        let now = self.clock.now_ms();
        let removed = self.people().revoke(by, person, now).await?;
        let mut event = people_event(AuditKind::Removed, now, &removed, json!({}));
        event.actor = Some(actor.clone());
        event.reason = Some(format!("{} removed {}", by.name(), removed.name));
        self.audit_people(event).await;
        let why = format!("{} was removed", removed.name);
        self.grants.read_again().await;
        let theirs: Vec<String> = self
            .policy()
            .grants()
            .into_iter()
            .filter(|g| g.owner() == removed.id && g.revoked_at_ms.is_none())
            .map(|g| g.id)
            .collect();
        for grant in theirs {
            if let Err(e) = self
                .grants
                .revoke_and_record(&grant, Some(actor), Some(&why))
                .await
            {
                tracing::error!(%grant, error = %e, "a removed person's grant was not revoked for good");
            }
        }
        self.recheck_signatures(Reach::Everywhere, Some(actor))
            .await;
        self.stop_turns_of(&removed, Reach::Everywhere).await;
        tracing::info!(by = %by.id(), person = %removed.id, "person removed");
        Ok(removed)
    }

    /// Gives `person` exactly `roles`, as `by`: signatures that needed a role they lost no
    /// longer count.
    pub async fn set_person_roles(
        self: &Arc<Self>,
        by: &Principal,
        actor: &Actor,
        person: &str,
        roles: BTreeSet<String>,
    ) -> Result<Person, PeopleError> {
        let was = self
            .people()
            .person(person)
            .map(|p| p.roles)
            .unwrap_or_default();
        let changed = self.people().set_roles(by, person, roles).await?;
        let now = self.clock.now_ms();
        let mut event = people_event(
            AuditKind::RolesChanged,
            now,
            &changed,
            json!({"roles": changed.roles, "was": was}),
        );
        event.actor = Some(actor.clone());
        event.reason = Some(format!(
            "{} gave {} the roles: {}",
            by.name(),
            changed.name,
            roles_words(&changed.roles)
        ));
        self.audit_people(event).await;
        if changed.roles != was {
            self.recheck_signatures(Reach::Everywhere, Some(actor))
                .await;
        }
        tracing::info!(by = %by.id(), person = %changed.id, roles = ?changed.roles, "roles changed");
        Ok(changed)
    }

    /// `id`, if they may act now. Someone this instance's directory has never heard of may
    /// have joined on another instance sharing the database a moment ago (its news not here
    /// yet): the people are read again first, as news of it would (never "removed" for that).
    pub async fn active_person(self: &Arc<Self>, id: &str) -> Option<Person> {
        if self.people().person(id).is_none() {
            self.people_news().await;
        }
        self.people().active(id)
    }

    /// Another instance changed people (or news was lost): the directory reads them again and
    /// ends what the removed held open here; the chats whose turns run here are rechecked and
    /// the removed's turns running here stop.
    pub(super) async fn people_news(self: &Arc<Self>) {
        let changes = self.people().reload().await;
        if changes.is_empty() {
            return;
        }
        self.recheck_signatures(Reach::RunningHere, None).await;
        for change in &changes {
            if let Change::Removed(person) = change {
                self.stop_turns_of(person, Reach::RunningHere).await;
            }
        }
    }

    /// The approvals waiting that someone signed already (whose signatures a change of people
    /// may void), as the store has them.
    async fn signed_waiting(&self) -> Vec<crate::agent::inbox::Waiting> {
        match self.inbox.waiting_under(crate::agent::inbox::SIGNED).await {
            Ok(waiting) => waiting,
            Err(e) => {
                // Each answer and each countersigned call rechecks with the store again.
                tracing::error!(error = %e.report(), "cannot list the signed approvals; their signatures are rechecked when they are next used");
                Vec::new()
            }
        }
    }

    /// Drops, in the chats `reach` reaches, the signatures of people who may no longer sign
    /// (removed, or without the role now) as the store says now; `actor`: who caused it.
    async fn recheck_signatures(self: &Arc<Self>, reach: Reach, actor: Option<&Actor>) {
        let standing = match self.people().standing().await {
            Ok(standing) => standing,
            Err(e) => {
                // Each answer and each countersigned call rechecks with the store again.
                tracing::error!(error = %e, "cannot read who may sign; waiting signatures are rechecked when they are next used");
                return;
            }
        };
        let mut chats: Vec<String> = match reach {
            Reach::Everywhere => self
                .signed_waiting()
                .await
                .into_iter()
                .filter(|w| {
                    w.signatures.iter().any(|s| {
                        countersign::no_longer_counts(&w.needs, s, &standing, &w.owner).is_some()
                    })
                })
                .map(|w| w.chat)
                .collect(),
            Reach::RunningHere => Vec::new(),
        };
        chats.extend(
            self.live_sessions_reached(reach)
                .into_iter()
                .filter(|s| uncounted_in(&s.state().record, &standing))
                .map(|s| s.id.clone()),
        );
        chats.sort();
        chats.dedup();
        let mut telling = Vec::new();
        for chat in chats {
            let session = match self.existing_session(&chat).await {
                Ok(Some(session)) => session,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(session = %chat, error = %e.report(), "cannot read a chat to recheck its signatures");
                    continue;
                }
            };
            match self.recheck_session(&session, &standing, actor).await {
                Ok(Some(told)) => telling.push(told),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(session = %chat, error = %e, "signatures that no longer count are dropped when the chat is next answered");
                }
            }
        }
        // Where the change was made, it is done when the chats show it: a page read after it
        // (the admin's, the requester's) no longer lists the signatures, as an answer's
        // response ends only once its turn has told it.
        if reach == Reach::Everywhere && !telling.is_empty() {
            let all = futures::future::join_all(telling.into_iter().map(Telling::told));
            if tokio::time::timeout(TOLD_WITHIN, all).await.is_err() {
                tracing::warn!(
                    "a chat's turn has not yet told the signatures a change of people dropped; it tells them when it runs"
                );
            }
        }
    }

    /// Drops from `session`'s turn the signatures that no longer count by `standing`
    /// ([`countersign::recheck`]); when there were some, the record is committed with their
    /// audit events (`actor`: who caused it) and the turn woken to tell the page: then the
    /// turn's log, to follow until it has told it. A chat whose turn runs on another instance
    /// is that instance's to recheck.
    pub(crate) async fn recheck_session(
        self: &Arc<Self>,
        session: &Arc<Session>,
        standing: &Standing,
        actor: Option<&Actor>,
    ) -> Result<Option<Telling>, InputError> {
        if session.runs_elsewhere() {
            return Ok(None);
        }
        let now = self.clock.now_ms();
        let (events, telling) = {
            // Not while an answer is in flight: it may still be taken back whole.
            let mut state = session.state_without_answer_in_flight().await;
            let log = state
                .live
                .as_ref()
                .map(|turn| (turn.log.clone(), turn.log.len()));
            let record = &mut state.record;
            let requester = record.owner().to_owned();
            let SessionRecord {
                id,
                turn,
                resolved_approvals,
                ..
            } = record;
            let Some(turn) = turn.as_mut().filter(|t| !t.status.is_over()) else {
                return Ok(None);
            };
            let uncounted = countersign::recheck(
                &mut turn.calls,
                resolved_approvals,
                standing,
                &requester,
                now,
                |call| now + self.approval_wait(call),
            );
            if uncounted.is_empty() {
                return Ok(None);
            }
            // News the turn has to tell: a task that read the chat before this may not park
            // on what it read (it parks only while the input count is the one it read).
            turn.inputs += 1;
            let events = dropped_events(id, &turn.id, &turn.calls, &uncounted, actor, now);
            let telling = log.map(|(log, from)| Telling {
                log,
                from,
                news: uncounted
                    .iter()
                    .map(|u| {
                        let d = &u.dropped;
                        (u.approval_id.clone(), Some((d.person.clone(), d.at_ms)))
                    })
                    .collect(),
            });
            (events, telling)
        };
        // Answers still waiting for their turn's commit go first.
        if let Err(failed) = self.commits.commit(session, events, None).await {
            if failed.is_conflict() {
                tracing::warn!(session = %session.id, "another instance changed the chat first; its signatures are rechecked when it is next answered");
                self.forget_overtaken(session).await;
                return Err(InputError::AnsweredElsewhere);
            }
            // The record here has them dropped: the turn's next commit carries the events.
            tracing::error!(session = %session.id, error = %failed.error.report(), "cannot record dropped signatures yet");
            session.give_back_audit(failed.all_events());
        }
        // The turn tells the page (a new `data-countersign` part), parked or not.
        self.wake(session);
        Ok(telling)
    }

    /// How long an approval of `call` waits when it is asked again.
    pub(crate) fn approval_wait(&self, call: &StepCall) -> Millis {
        self.tools
            .get(&call.call.name)
            .map_or(0, |t| t.spec.approval_timeout.as_millis() as Millis)
    }

    /// Stops the turns of `person`'s chats that `reach` reaches: what they started ends with
    /// them.
    async fn stop_turns_of(self: &Arc<Self>, person: &Person, reach: Reach) {
        let mut chats: Vec<String> = self
            .live_sessions_reached(reach)
            .into_iter()
            .filter(|s| s.owned_by(&person.id))
            .map(|s| s.id.clone())
            .collect();
        if reach == Reach::Everywhere {
            let key = format!("owner:{}", person.id);
            match self.inbox.waiting_under(&key).await {
                Ok(waiting) => chats.extend(waiting.into_iter().map(|w| w.chat)),
                Err(e) => {
                    // Their chats' turns still cannot run a call: an answer or a recheck
                    // before it asks who may sign again.
                    tracing::error!(person = %person.id, error = %e.report(), "cannot list a removed person's waiting approvals");
                }
            }
        }
        chats.sort();
        chats.dedup();
        let reason = format!("stopped: {} was removed", person.name);
        for chat in chats {
            if self.interrupt(&chat, &reason).await {
                tracing::info!(session = %chat, person = %person.id, "a removed person's turn stopped");
            }
        }
    }

    /// The sessions in memory here that `reach` reaches (taken out of the registry before any
    /// of them is looked into).
    fn live_sessions_reached(&self, reach: Reach) -> Vec<Arc<Session>> {
        let live = self.live.all();
        live.into_iter()
            .filter(|s| reach == Reach::Everywhere || s.has_task())
            .collect()
    }

    /// Appends an event about people (no chat) to the audit log.
    async fn audit_people(&self, event: AuditEvent) {
        if let Err(e) = self.policy().audit(&[event]).await {
            tracing::error!(
                error = &e as &dyn std::error::Error,
                "a change of people could not be audited"
            );
        }
    }
}

/// The audit events of signatures that stopped counting in `chat`'s turn `turn_id` (`actor`:
/// who removed them or changed their roles, when known).
pub(crate) fn dropped_events(
    chat: &str,
    turn_id: &str,
    calls: &[StepCall],
    uncounted: &[Uncounted],
    actor: Option<&Actor>,
    now: Millis,
) -> Vec<AuditEvent> {
    uncounted
        .iter()
        .filter_map(|u| {
            let call = calls.iter().find(|c| c.call.id == u.tool_call_id)?;
            let mut event = audit::event(
                AuditKind::Dropped,
                now,
                chat,
                turn_id,
                &call.call.id,
                &call.call.name,
                &call.call.args,
            );
            event.approval_id = Some(u.approval_id.clone());
            event.actor = actor.cloned();
            event.reason = Some(format!(
                "{}'s signature no longer counts: {}{}",
                u.dropped.name,
                u.dropped.words(),
                if u.reopened {
                    "; the call waits for approvals again"
                } else {
                    ""
                }
            ));
            Some(event)
        })
        .collect()
}

/// Whether `record`'s turn has a signature that no longer counts by `standing`.
fn uncounted_in(record: &SessionRecord, standing: &Standing) -> bool {
    let Some(turn) = record.turn.as_ref().filter(|t| !t.status.is_over()) else {
        return false;
    };
    turn.calls.iter().any(|call| {
        let needs = call.needs();
        !needs.is_plain()
            && call.signatures.iter().any(|s| {
                countersign::no_longer_counts(&needs, s, standing, record.owner()).is_some()
            })
    })
}

/// An audit event about `person` (no chat, no tool): `args` names them, with `more`.
fn people_event(kind: AuditKind, now: Millis, person: &Person, more: Value) -> AuditEvent {
    let mut args = json!({"person": person.id, "name": person.name});
    if let (Some(args), Value::Object(more)) = (args.as_object_mut(), more) {
        args.extend(more);
    }
    audit::event(kind, now, "", "", "", "", &args)
}

fn roles_words(roles: &BTreeSet<String>) -> String {
    if roles.is_empty() {
        "none".to_owned()
    } else {
        roles.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests;
