//! A person's answer, from decoded input to committed result: the one home of an approval (or a
//! browser tool's output) on its way into a chat, whatever carried it (`POST /api/chat`, a
//! WebSocket frame, the inbox, the API).
//!
//! In order, on the chat the caller found (loaded once and handed down):
//! 1. what is new: a client's resent copy of the turn's message is judged by the gate
//!    ([`Resent::fresh`]): echoes are skipped, contradictions refused;
//! 2. who signs: the signer as the store says now (an approval drops signatures that no longer
//!    count first), with their passkey confirmations verified ([`signing`]);
//! 3. apply: the gate judges every input, all or nothing ([`Session::apply`]);
//! 4. audit: the events of what it did, with the confirmations' receipts ([`audit`]);
//! 5. grants: the ones the person asked for are kept, all or nothing with the answer;
//! 6. commit: the record with those events in one store transaction
//!    ([`crate::agent::commit`]) — or, for approvals of calls whose effects stay in the record,
//!    handed to the turn, which commits answer, effect and result together — and the turn is
//!    woken. Nothing an answer causes reaches a client before the answer is on disk.
//!
//! A grant lives only with the answer that asked for it: when the commit of step 6 fails, the
//! grants kept in step 5 are revoked (and the revocation written) before the error is returned,
//! so no call ever runs on a grant whose approval is not on record.
//!
//! When the chat's copy went out of date during steps 2–6 (another instance sharing the
//! database committed it: the commit is refused), steps 3–6 run once more on the chat as read
//! again, with the signer of step 2 (grants asked for are kept anew).

mod audit;
mod signing;
#[cfg(test)]
mod stored_tests;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use super::{
    Transport,
    clock::{IdKind, Millis},
    gate::{InputError, PersonInput, Resent},
    runtime::Runtime,
    session::{AppliedInput, Receipt, Session, SessionRecord, TurnStatus, Writing},
    store::{Actor, AuditEvent, AuditKind},
};
use crate::protocol::grant::Grant;

/// How long an answer waits for a turn running on another instance to come to wait for it.
const ELSEWHERE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// How often such an answer looks again.
const ELSEWHERE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// What a client sent as the person's answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answers {
    /// Answers given just now (the inbox, the API, a socket's `tool_result`).
    Given(Vec<PersonInput>),
    /// The client's copy of the turn's assistant message (AI SDK clients send the whole
    /// conversation with every request): only what the chat does not hold yet is new.
    Resent(Resent),
}

/// What an answer did.
#[derive(Debug)]
pub enum AnswerOutcome {
    /// It was applied and committed (or handed to its turn): read the turn from the receipt.
    Applied(Receipt),
    /// Everything the client sent, the chat holds already: nothing was done. The chat's turn
    /// status then (`None`: no turn).
    Nothing(Option<TurnStatus>),
}

impl Runtime {
    /// Applies the person's answers to `chat_id`'s waiting turn, as `actor`. `found`: the chat
    /// as the caller found it (`None`: it does not exist). An approval id that belongs to
    /// another chat is reported as such. Nothing an answer causes reaches any client before the
    /// answer and its audit entries are on disk (see the module's steps).
    #[tracing::instrument(name = "answer", skip_all, fields(chat = %chat_id, person = ?actor.person, via = %actor.transport))]
    pub async fn answer(
        self: &Arc<Self>,
        chat_id: &str,
        found: Option<Arc<Session>>,
        answers: Answers,
        actor: &Actor,
    ) -> Result<AnswerOutcome, InputError> {
        // How each approval named was resolved, if it was: what the gate judges against (a
        // copy loaded with its head only reads them by id, ADR 0045).
        let named = match &answers {
            Answers::Given(inputs) => inputs.as_slice(),
            Answers::Resent(resent) => resent.answers.as_slice(),
        };
        let found = match found {
            Some(session) => Some(with_resolutions(self, chat_id, session, named).await?),
            None => None,
        };
        let inputs = match answers {
            Answers::Given(inputs) => inputs,
            Answers::Resent(resent) => {
                let signer = actor
                    .person
                    .as_deref()
                    .unwrap_or(crate::agent::people::LOCAL);
                let empty;
                let (fresh, status) = match &found {
                    Some(session) => {
                        // An answer naming an earlier message than the turn's (or a call of
                        // one) is judged against the chat's messages: a copy loaded with its
                        // head only reads them first (ADR 0045).
                        let judged = {
                            let state = session.state();
                            let unread = state.record.messages.unread() > 0;
                            match resent.clone().fresh(state.record.held(), signer) {
                                Err(_) if unread => None,
                                judged => Some(judged),
                            }
                        };
                        let judged = match judged {
                            Some(judged) => judged,
                            None => {
                                self.read_entries(session).await.map_err(|e| {
                                    InputError::NotRecorded {
                                        message: e.to_string(),
                                    }
                                })?;
                                resent.fresh(session.state().record.held(), signer)
                            }
                        };
                        let state = session.state();
                        (judged?, state.record.turn.as_ref().map(|t| t.status))
                    }
                    None => {
                        empty = SessionRecord::new(chat_id, 0);
                        (resent.fresh(empty.held(), signer)?, None)
                    }
                };
                if fresh.is_empty() {
                    return Ok(AnswerOutcome::Nothing(status));
                }
                fresh
            }
        };
        // A turn running on another instance usually comes to wait for the person in a moment.
        let session = match found {
            Some(session) if session.runs_elsewhere() => {
                session_to_answer(self, chat_id).await.ok().flatten()
            }
            found => found,
        };
        let Some(session) = session else {
            return Err(explain_foreign(self, chat_id, &inputs, InputError::NoActiveTurn).await);
        };
        let answer = Answer {
            rt: self,
            chat_id,
            session,
            inputs: &inputs,
            actor,
        };
        answer.go().await.map(AnswerOutcome::Applied)
    }

    /// [`Runtime::answer`] for answers given just now, to the chat `chat_id` as the runtime
    /// finds it.
    pub async fn submit_as(
        self: &Arc<Self>,
        chat_id: &str,
        inputs: &[PersonInput],
        actor: &Actor,
    ) -> Result<Receipt, InputError> {
        let found = session_to_answer(self, chat_id).await.ok().flatten();
        match self
            .answer(chat_id, found, Answers::Given(inputs.to_vec()), actor)
            .await?
        {
            AnswerOutcome::Applied(receipt) => Ok(receipt),
            // Answers given are never judged echoes.
            AnswerOutcome::Nothing(_) => Err(InputError::NoActiveTurn),
        }
    }

    /// [`Runtime::submit_as`] for a caller the audit log knows only as the API.
    pub async fn submit(
        self: &Arc<Self>,
        chat_id: &str,
        inputs: &[PersonInput],
    ) -> Result<Receipt, InputError> {
        let actor = Actor {
            transport: Transport::Api.as_str().into(),
            ..Actor::default()
        };
        self.submit_as(chat_id, inputs, &actor).await
    }
}

/// `chat_id`'s session, to apply the person's input to. A turn running on another instance
/// sharing the database cannot take input here; it usually comes to wait for the person in
/// a moment (its input is for a call it waits for while it runs others), so this waits up
/// to [`ELSEWHERE_PATIENCE`] for that, then returns the copy that still runs elsewhere.
async fn session_to_answer(
    rt: &Arc<Runtime>,
    chat_id: &str,
) -> Result<Option<Arc<Session>>, crate::agent::store::StoreError> {
    let started = tokio::time::Instant::now();
    loop {
        let session = rt.session_head(chat_id).await?;
        match session {
            Some(session) if session.runs_elsewhere() && started.elapsed() < ELSEWHERE_PATIENCE => {
                drop(session);
                tokio::time::sleep(ELSEWHERE_POLL).await;
            }
            other => return Ok(other),
        }
    }
}

/// `session` once it knows how each approval `inputs` names was resolved, if it was
/// ([`Runtime::read_resolutions`]): a copy another instance committed since it was read is
/// read again, once (it has no task here to lose).
async fn with_resolutions(
    rt: &Arc<Runtime>,
    chat_id: &str,
    session: Arc<Session>,
    inputs: &[PersonInput],
) -> Result<Arc<Session>, InputError> {
    let ids: Vec<String> = inputs
        .iter()
        .filter_map(|input| match input {
            PersonInput::Approval { approval_id, .. } => Some(approval_id.clone()),
            PersonInput::BrowserResult { .. } => None,
        })
        .collect();
    let not_recorded = |e: crate::agent::store::StoreError| InputError::NotRecorded {
        message: e.to_string(),
    };
    match rt.read_resolutions(&session, Some(&ids)).await {
        Ok(()) => Ok(session),
        Err(e) if e.is_conflict() && !session.has_task() => {
            tracing::warn!(session = %chat_id, "an answer came to a chat another instance changed since it was read");
            rt.forget_overtaken(&session).await;
            let session = session_to_answer(rt, chat_id)
                .await
                .map_err(not_recorded)?
                .ok_or(InputError::NoActiveTurn)?;
            rt.read_resolutions(&session, Some(&ids))
                .await
                .map_err(not_recorded)?;
            Ok(session)
        }
        Err(e) => Err(not_recorded(e)),
    }
}

/// Turns "unknown approval" into "approval of another chat" when another chat has it.
async fn explain_foreign(
    rt: &Runtime,
    chat_id: &str,
    inputs: &[PersonInput],
    error: InputError,
) -> InputError {
    let approval_id = match &error {
        InputError::UnknownApproval { approval_id } => approval_id.clone(),
        InputError::NoActiveTurn => match inputs.iter().find_map(|i| match i {
            PersonInput::Approval { approval_id, .. } => Some(approval_id.clone()),
            _ => None,
        }) {
            Some(id) => id,
            None => return error,
        },
        _ => return error,
    };
    // The chat waiting for it may be in memory or only in the store (a parked turn).
    let foreign = rt.live_chat_waits_for(&approval_id, chat_id)
        || match rt.store.approval_owner(&approval_id).await {
            Ok(owner) => owner.is_some_and(|owner| owner != chat_id),
            Err(e) => {
                tracing::warn!(
                    error = &e as &dyn std::error::Error,
                    "cannot look up whose approval this is"
                );
                false
            }
        };
    if foreign {
        InputError::ApprovalOfOtherChat { approval_id }
    } else {
        error
    }
}

/// One answer on its way into its chat.
struct Answer<'a> {
    rt: &'a Arc<Runtime>,
    chat_id: &'a str,
    session: Arc<Session>,
    inputs: &'a [PersonInput],
    actor: &'a Actor,
}

impl Answer<'_> {
    /// The steps of the module's doc, in order.
    async fn go(mut self) -> Result<Receipt, InputError> {
        if self.session.runs_elsewhere() {
            return Err(InputError::RunningElsewhere);
        }
        let owner = self.session.state().record.owner().to_owned();
        let requester = self.rt.requester(&owner);
        let standing = self.standing().await?;
        let now = self.rt.clock.now_ms();
        let (signer, receipts) = self.signer(standing.as_ref(), now).await?;
        let mut again = true;
        loop {
            // A copy read again (or another instance's turn that came to wait) reads how the
            // approvals named were resolved, if it has not.
            self.session =
                with_resolutions(self.rt, self.chat_id, self.session.clone(), self.inputs).await?;
            // No other commit of the chat until this answer is committed or taken back.
            let writing = self.session.writes().await;
            let applied = match self.session.apply(
                self.inputs,
                &self.rt.tools,
                self.rt.policy(),
                now,
                &signer,
                &requester,
            ) {
                Ok(applied) => applied,
                Err(e) => {
                    return Err(explain_foreign(self.rt, self.chat_id, self.inputs, e).await);
                }
            };
            let mut events = self.events(&applied, &receipts, now);
            let (granted, kept) = match self.keep_grants(&applied, &owner, now).await {
                Ok(granted) => granted,
                Err(e) => {
                    self.take_back(applied, now);
                    return Err(e);
                }
            };
            events.extend(granted);
            let committed = self.commit(applied, events, &writing).await;
            drop(writing);
            if committed.is_err() {
                self.rt
                    .grants()
                    .withdraw(kept.into_iter().map(|g| g.id).collect())
                    .await;
            }
            match committed {
                // The copy this answer held went out of date while it was checked (another
                // instance committed the chat): the answer goes once more, to the chat as
                // read now, which decides whether it still applies — its signer is not checked
                // again.
                Err(InputError::AnsweredElsewhere) if again => {
                    again = false;
                    self.session = match session_to_answer(self.rt, self.chat_id).await {
                        Ok(Some(session)) if !session.runs_elsewhere() => session,
                        _ => return Err(InputError::AnsweredElsewhere),
                    };
                }
                result => return result,
            }
        }
    }

    /// Takes back `applied`, which is not recorded: the calls it changed wait as before, unless
    /// the turn ended them meanwhile (an interrupt, the model's withdrawal) — then, as the turn
    /// saw them cleared and recorded nothing of their approval, their approvals are recorded
    /// here as interrupted (with the turn's next commit). The turn, which held its calls while
    /// the answer was out, is woken: a deadline that passed meanwhile is its to see to now.
    fn take_back(&self, applied: AppliedInput, now: Millis) {
        let session = &self.session;
        let events: Vec<AuditEvent> = session
            .undo(applied.undo)
            .into_iter()
            .map(|ended| {
                let mut event = crate::agent::store::audit::event(
                    AuditKind::Interrupted,
                    now,
                    &session.id,
                    &ended.turn_id,
                    &ended.call.id,
                    &ended.call.name,
                    &ended.call.args,
                );
                event.approval_id = Some(ended.approval_id);
                event.reason =
                    Some("its call ended while an approval of it was not yet recorded".into());
                event
            })
            .collect();
        if !events.is_empty() {
            session.give_back_audit(events);
        }
        self.rt.wake(session);
    }

    /// The audit events of what `applied` did, with each passkey confirmation's receipt on
    /// the event of the approval it confirmed.
    fn events(
        &self,
        applied: &AppliedInput,
        receipts: &signing::Receipts,
        now: Millis,
    ) -> Vec<AuditEvent> {
        let (session, actor) = (&self.session, self.actor);
        let mut events =
            audit::answer_events(session, self.inputs, &applied.resolutions, actor, now);
        events.extend(audit::signature_events(
            session,
            &applied.signed,
            actor,
            now,
        ));
        events.extend(audit::proposal_events(
            session,
            &applied.proposed,
            actor,
            now,
        ));
        for event in &mut events {
            if let Some(approval) = &event.approval_id
                && let Some((passkey, receipt)) = receipts.get(approval)
                && matches!(
                    event.kind,
                    AuditKind::Approved | AuditKind::Edited | AuditKind::Countersigned
                )
            {
                event.step_up = Some(receipt.clone());
                if let Some(actor) = &mut event.actor {
                    actor.passkey = Some(passkey.clone());
                }
            }
        }
        events
    }

    /// Keeps the grants the person asked for before anything the answer causes happens (all or
    /// nothing: if one cannot be kept, those kept are withdrawn and the caller takes the
    /// answer back). Returns their `granted` audit events and the grants.
    async fn keep_grants(
        &self,
        applied: &AppliedInput,
        owner: &str,
        now: Millis,
    ) -> Result<(Vec<AuditEvent>, Vec<Grant>), InputError> {
        let policy = self.rt.policy();
        let mut events = Vec::new();
        let mut made: Vec<Grant> = Vec::new();
        for asked in &applied.grants {
            let Some(tool) = self.rt.tools.get(&asked.tool) else {
                continue;
            };
            let grant = crate::agent::policy::grants::grant(
                self.rt.ids.next_id(IdKind::Grant),
                &tool.spec,
                &asked.args,
                &asked.request,
                crate::agent::policy::grants::GrantedBy {
                    chat: self.chat_id,
                    person: owner,
                    approval_id: &asked.approval_id,
                    at_ms: now,
                },
            );
            if let Err(e) = policy.save_grant(&grant).await {
                tracing::error!(session = %self.chat_id, error = &e as &dyn std::error::Error, "cannot keep a grant");
                self.rt
                    .grants()
                    .withdraw(made.into_iter().map(|g| g.id).collect())
                    .await;
                return Err(InputError::NotRecorded {
                    message: e.to_string(),
                });
            }
            policy.add_grant(grant.clone());
            let record = self.session.snapshot();
            if let Some(turn) = record.turn.as_ref()
                && let Some(call) = turn.call(&asked.tool_call_id)
            {
                let mut event = crate::agent::store::audit::event(
                    AuditKind::Granted,
                    now,
                    self.chat_id,
                    &turn.id,
                    &call.call.id,
                    &call.call.name,
                    &call.call.args,
                );
                event.approval_id = Some(asked.approval_id.clone());
                event.grant = Some(grant.id.clone());
                event.reason = Some(grant.label.clone());
                event.actor = Some(self.actor.clone());
                events.push(event);
            }
            made.push(grant);
        }
        Ok((events, made))
    }

    /// Commits the answer with `events` and wakes the turn — or, when every input approved a
    /// call whose effects stay in this record (`ToolEffects::InRecord`, a payment), hands the
    /// events to the turn, which runs the calls at once and commits answer, effect and result
    /// together before it emits anything. A failed commit takes the answer back.
    async fn commit(
        &self,
        applied: AppliedInput,
        events: Vec<AuditEvent>,
        writing: &Writing,
    ) -> Result<Receipt, InputError> {
        let (rt, session) = (self.rt, &self.session);
        if applied.resolutions.len() == self.inputs.len()
            && session.runs_in_record(&applied.resolutions, &rt.tools)
        {
            session.hand_over_answer(events);
            // No inbox news here: the inbox is read from the store, which shows the decision
            // only once the turn commits it (that commit tells the inbox).
            rt.wake(session);
            return Ok(applied.receipt);
        }
        // Earlier answers still waiting for their turn's commit go with this one: the record
        // written here contains them.
        if let Err(failed) = rt.commits.commit_held(session, writing, events, None).await {
            if failed.is_conflict() {
                // Another instance changed the chat first: this copy is out of date and goes;
                // nothing of this answer was written.
                tracing::warn!(session = %self.chat_id, "an answer came to a chat another instance changed first");
                // Taken back from this copy too, so that nothing it cleared runs from it.
                session.undo(applied.undo);
                rt.forget_overtaken(session).await;
                // Earlier answers handed to the turn went with it (this answer's own grants
                // are the caller's).
                rt.grants().withdraw_of(&failed.waiting).await;
                return Err(InputError::AnsweredElsewhere);
            }
            tracing::error!(session = %self.chat_id, error = &failed.error as &dyn std::error::Error, "cannot record the person's answer");
            let message = failed.error.to_string();
            session.give_back_audit(failed.waiting);
            self.take_back(applied, self.rt.clock.now_ms());
            return Err(InputError::NotRecorded { message });
        }
        session.settle_answer();
        rt.wake(session);
        Ok(applied.receipt)
    }
}
