//! Phase A of the loop: the calls of a step until every one has its result — server tools run,
//! deadlines expire, the turn pauses (or parks) for the person, the model withdraws calls — and
//! the results committed to the history.

use std::time::Duration;

use futures::{FutureExt, StreamExt, future::BoxFuture, stream::FuturesUnordered};
use serde_json::Value;

use tracing::Instrument;

use super::audit::{audit_event, executed_event};
use super::{Flow, TurnDriver};
use crate::agent::{
    clock::{Millis, until},
    gate::{
        ApprovalResolution, CallPhase, Expiry, Gate, StepCall,
        countersign::{Standing, recheck},
        next_deadline,
    },
    history::{HistoryItem, Outcome, ToolCall, ToolResult},
    model::{CallNotice, CallSubscription},
    questions::{Asker, QuestionEvent},
    runtime::dropped_events,
    session::{SessionRecord, TurnRecord, TurnStatus},
    store::{AuditEvent, AuditKind},
    tools::{Executor, ToolContext, ToolEffects, ToolRegistry},
};
use crate::protocol::{Chunk, countersign::denial_words};

/// The server calls running, each to its (call id, outcome).
type Running = FuturesUnordered<BoxFuture<'static, (String, Outcome)>>;

/// A server call cleared to run: the call, the arguments that run, whether they were edited.
type ToRun = (ToolCall, Value, bool);

/// What one pass over the step's calls found ([`TurnDriver::advance`]).
struct Pass {
    /// What changed, to be announced.
    to_emit: Vec<Chunk>,
    /// The server calls it cleared to run (now marked running).
    to_run: Vec<ToRun>,
    /// A call waits for the person or the browser.
    waiting: bool,
    /// Every call has its result.
    all_done: bool,
    /// The turn's input count (a pause is announced once per count).
    inputs: u64,
    /// The earliest deadline among the calls still waiting.
    next_deadline: Option<Millis>,
}

impl TurnDriver {
    /// Phase A: waits until every call of the step has its result, running server tools,
    /// expiring deadlines and pausing for the person. `paused_at`: the input count at which
    /// the turn last paused, when it continues after being parked.
    pub(super) async fn resolve_calls(&mut self, paused_at: Option<u64>) -> Flow {
        let mut running: Running = FuturesUnordered::new();
        let mut last_pause_inputs: Option<u64> = paused_at;
        let mut emitted_since_pause = false;
        loop {
            // What the person said meanwhile is answered first, while its call still waits
            // (an aside: ADR 0035); a decision that came meanwhile is read right after. Every
            // aside queued, not one a pass: the wake-ups of a burst fold into one.
            while let Some(aside) = self.next_aside() {
                match self.run_aside(aside).await {
                    Ok(emitted) => emitted_since_pause |= emitted,
                    Err(flow) => return flow,
                }
            }
            // Who may sign as the store says now, when a countersigned call is about to run.
            let standing = self.standing_before_running().await;
            // Payments about to start are checked against the day's total and reserved first.
            self.clear_payments().await;
            let now = self.rt.clock.now_ms();
            let Some(step) = self.advance(standing.as_ref(), now, running.is_empty()) else {
                return Flow::Continue;
            };
            if self.announce(step.to_emit).await {
                emitted_since_pause = true;
            }
            if let Err(flow) = self.start(step.to_run, &mut running).await {
                return flow;
            }
            if step.all_done && running.is_empty() {
                return Flow::Continue;
            }
            let (inputs, next_deadline) = (step.inputs, step.next_deadline);
            let waiting = step.waiting && running.is_empty();
            if waiting && (emitted_since_pause || last_pause_inputs != Some(inputs)) {
                self.pause().await;
                last_pause_inputs = Some(inputs);
                emitted_since_pause = false;
            }
            if waiting && self.park(inputs, next_deadline) {
                return Flow::Parked;
            }
            let sleep = next_deadline.map(|d| until(self.rt.clock.now_ms(), d));
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Flow::Interrupted,
                Some((call_id, outcome)) = running.next(), if !running.is_empty() => {
                    if let Err(flow) = self.ran(call_id, outcome).await {
                        return flow;
                    }
                }
                () = self.session.woken() => {}
                () = tokio::time::sleep(sleep.unwrap_or(Duration::ZERO)), if sleep.is_some() => {}
                Some(notice) = next_notice(&mut self.notices), if self.notices.is_some() => {
                    self.withdraw(notice);
                }
                Some(event) = self.questions.rx.recv() => {
                    self.on_question(event);
                    self.emit_question_parts();
                }
            }
        }
    }

    /// One pass over the step's calls under the session's lock: signatures that no longer count
    /// dropped (`standing`: who may sign now, when a countersigned call is about to run),
    /// deadlines expired, what changed to be announced, the calls cleared to run marked
    /// running, and the turn's status (it waits for the person when nothing runs: `idle`).
    /// `None`: the chat has no turn any more.
    fn advance(&mut self, standing: Option<&Standing>, now: Millis, idle: bool) -> Option<Pass> {
        let mut state = self.session.state();
        // An answer applied but not yet recorded holds the calls as they are: none that is
        // ready starts, none expires or is rechecked, nothing is announced (its commit, or its
        // undo, wakes the turn), so a failed commit can take the answer back whole.
        let hold_back = state.answer_in_flight();
        let record = &mut state.record;
        let requester = record.owner().to_owned();
        let SessionRecord {
            turn,
            resolved_approvals,
            ..
        } = &mut *record;
        let turn = turn.as_mut()?;
        if let Some(standing) = standing.filter(|_| !hold_back) {
            // A signature of someone removed (or without the role) since the quorum was
            // met does not count: without it the call waits for approvals again.
            let uncounted = recheck(
                &mut turn.calls,
                resolved_approvals,
                standing,
                &requester,
                now,
                |call| now + self.rt.approval_wait(call),
            );
            self.commits.record_all(dropped_events(
                &self.session.id,
                &turn.id,
                &turn.calls,
                &uncounted,
                None,
                now,
            ));
        }
        let expiries = if hold_back {
            Vec::new()
        } else {
            Gate::new(&self.rt.tools).tick(&mut turn.calls, resolved_approvals, now)
        };
        self.commits
            .record_all(expired_events(&self.session.id, turn, expiries, now));
        let mut to_emit = Vec::new();
        let mut to_run = Vec::new();
        // Nothing of the calls is announced either: what the answer changed reaches a client
        // only once it is on disk.
        for call in turn.calls.iter_mut().filter(|_| !hold_back) {
            to_emit.extend(super::countersign::news(call));
            if let CallPhase::Ready { args, edited } = &call.phase {
                to_run.push((call.call.clone(), args.clone(), *edited));
                call.phase = CallPhase::Running {
                    args: args.clone(),
                    edited: *edited,
                };
            }
            if let CallPhase::Done { outcome, .. } = &call.phase
                && !call.announced
            {
                call.announced = true;
                to_emit.extend(denial_answer(call));
                to_emit.push(result_chunk(
                    &call.call.id,
                    outcome,
                    &self.rt.tools,
                    &call.call.name,
                ));
            }
        }
        // Held, the turn neither pauses nor finishes the step: it waits to be woken.
        let waiting = !hold_back && turn.calls.iter().any(StepCall::is_waiting);
        turn.status = if waiting && idle && to_run.is_empty() {
            TurnStatus::AwaitingPerson
        } else {
            TurnStatus::Running
        };
        Some(Pass {
            to_emit,
            to_run,
            waiting,
            all_done: !hold_back && turn.calls.iter().all(StepCall::is_done),
            inputs: turn.inputs,
            next_deadline: next_deadline(&turn.calls).filter(|_| !hold_back),
        })
    }

    /// Emits what a pass announced; whether there was anything.
    async fn announce(&mut self, chunks: Vec<Chunk>) -> bool {
        let announced = !chunks.is_empty();
        for chunk in chunks {
            self.emit(chunk);
        }
        if announced {
            // The sockets following this turn were woken on this thread, behind this task:
            // let them send the results before the model's next step takes the thread.
            tokio::task::yield_now().await;
        }
        announced
    }

    /// Starts the server calls a pass cleared to run. A call that must not run twice is on disk
    /// as running before it starts: after a crash it is reported as cut short, never repeated
    /// (nor asked of the model again). `Err`: another instance's commit came first.
    async fn start(&mut self, to_run: Vec<ToRun>, running: &mut Running) -> Result<(), Flow> {
        let once = |call: &ToolCall| {
            self.rt
                .tools
                .get(&call.name)
                .is_some_and(|t| t.spec.effects == ToolEffects::ExternalOnce)
        };
        if to_run.iter().any(|(call, ..)| once(call)) {
            self.sync_messages();
            self.save().await;
            if self.commits.overtaken() {
                // Not on disk as running: it must not run here (another instance has it).
                return Err(Flow::Overtaken);
            }
        }
        for (call, args, edited) in to_run {
            running.push(self.run_server_tool(call, args, edited));
        }
        Ok(())
    }

    /// A server call returned `outcome`: its result (and the payment it made) committed before
    /// it is announced, then what it paid settled. `Err`: another instance's commit came first.
    async fn ran(&mut self, call_id: String, outcome: Outcome) -> Result<(), Flow> {
        // The call's questions closed before it returned: their parts come first.
        self.emit_question_parts();
        let now = self.rt.clock.now_ms();
        let (executed, paid) = self.done(&call_id, outcome, now);
        self.commits.record_all(executed);
        // A tool's effect (a payment) is on disk before its output is announced.
        self.save().await;
        if self.commits.overtaken() {
            // Another instance's commit came first: this effect is not on disk
            // and is never announced (what it reserved keeps counting).
            return Err(Flow::Overtaken);
        }
        // What it paid is in the ledger now, in place of its reservation; a grant's
        // share of a payment that was not made goes back to it.
        self.rt.policy().settle(&call_id, true, paid);
        self.rt.policy().flush(now).await;
        Ok(())
    }

    /// The running call `call_id` ends with `outcome`: its audit event when an approval gated
    /// it, and what it paid (cents) when it succeeded.
    fn done(
        &self,
        call_id: &str,
        outcome: Outcome,
        now: Millis,
    ) -> (Option<AuditEvent>, Option<i64>) {
        let mut state = self.session.state();
        let record = &mut state.record;
        let turn_id = record
            .turn
            .as_ref()
            .map(|t| t.id.clone())
            .unwrap_or_default();
        let Some(call) = record
            .turn
            .as_mut()
            .and_then(|t| t.calls.iter_mut().find(|c| c.call.id == call_id))
        else {
            return (None, None);
        };
        let CallPhase::Running { args, edited } = &call.phase else {
            return (None, None);
        };
        let paid = outcome
            .is_success()
            .then(|| {
                self.rt
                    .tools
                    .get(&call.call.name)
                    .and_then(|t| t.spec.pays)
                    .and_then(|pays| pays(args))
                    .map(|payment| payment.money.wallet_cents())
            })
            .flatten();
        let edited_args = edited.then(|| args.clone());
        let event = call.gated_by.as_ref().map(|approval_id| {
            executed_event(
                &self.session.id,
                &turn_id,
                call,
                approval_id,
                &outcome,
                edited_args.clone(),
                now,
            )
        });
        call.phase = CallPhase::Done {
            outcome,
            edited_args,
        };
        call.announced = false;
        (event, paid)
    }

    /// Who may sign now, read from the store, when a countersigned call is cleared to run
    /// (`None`: none is). When the store cannot be read, the directory here says it.
    async fn standing_before_running(&self) -> Option<Standing> {
        let due = self.with_turn(|t| {
            t.calls.iter().any(|c| {
                matches!(c.phase, CallPhase::Ready { .. })
                    && !c.signatures.is_empty()
                    && !c.needs().is_plain()
            })
        });
        if due != Some(true) {
            return None;
        }
        let people = self.rt.people();
        match people.standing().await {
            Ok(standing) => Some(standing),
            Err(e) => {
                tracing::error!(session = %self.session.id, error = %e, "cannot read who may sign; the directory here decides");
                Some(people.standing_here())
            }
        }
    }

    /// Handles what running tools have told of their questions so far.
    pub(super) fn emit_question_parts(&mut self) {
        while let Ok(event) = self.questions.rx.try_recv() {
            self.on_question(event);
        }
    }

    /// A question's part is emitted; its opening and closing are audited (with the call's tool
    /// and arguments, the question's id where an approval's would be).
    fn on_question(&mut self, event: QuestionEvent) {
        let (call_id, question_id, kind, reason, outcome) = match event {
            QuestionEvent::Part(part) => return self.emit(part),
            QuestionEvent::Asked {
                tool_call_id,
                question_id,
                message,
            } => (tool_call_id, question_id, AuditKind::Asked, message, None),
            QuestionEvent::Closed {
                tool_call_id,
                question_id,
                state,
                answer,
            } => (
                tool_call_id,
                question_id,
                AuditKind::Answered,
                state.as_str().to_owned(),
                answer,
            ),
        };
        let call = self.with_turn(|t| {
            t.calls
                .iter()
                .find(|c| c.call.id == call_id)
                .map(|c| c.call.clone())
        });
        if let Some(Some(call)) = call {
            let mut event = self.audit_event(kind, &call, &question_id, self.rt.clock.now_ms());
            event.reason = Some(reason);
            event.outcome = outcome;
            self.commits.record(event);
        }
    }

    /// The model withdrew a call: if it still waits for the person or the browser, it ends
    /// (its approval can no longer be answered) and nothing runs.
    fn withdraw(&mut self, notice: CallNotice) {
        let CallNotice::Withdrawn {
            session_id,
            provider_call_id,
        } = notice;
        if session_id != self.session.id {
            return;
        }
        let now = self.rt.clock.now_ms();
        let mut events = Vec::new();
        {
            let mut state = self.session.state();
            let record = &mut state.record;
            let SessionRecord {
                turn,
                resolved_approvals,
                ..
            } = &mut *record;
            let Some(turn) = turn.as_mut() else {
                return;
            };
            for call in &mut turn.calls {
                if !is_provider_call(&call.call, &provider_call_id) || !call.is_waiting() {
                    continue;
                }
                if let CallPhase::AwaitingApproval { approval_id, .. } = &call.phase {
                    resolved_approvals.insert(
                        approval_id.clone(),
                        ApprovalResolution::Withdrawn { at_ms: now },
                    );
                    let mut event = audit_event(
                        AuditKind::Interrupted,
                        &self.session.id,
                        &turn.id,
                        &call.call,
                        approval_id,
                        now,
                    );
                    event.reason = Some("withdrawn by the model".into());
                    events.push(event);
                }
                tracing::info!(session = %self.session.id, call = %call.call.id, "the model withdrew a call");
                call.phase = CallPhase::Done {
                    outcome: Outcome::Error {
                        message: format!(
                            "{} before it was answered. Nothing was done.",
                            crate::protocol::chunk::WITHDRAWN_PREFIX
                        ),
                    },
                    edited_args: None,
                };
                call.announced = false;
            }
        }
        self.commits.record_all(events);
    }

    /// Runs a server tool; the future resolves to (call id, outcome).
    fn run_server_tool(
        &self,
        call: ToolCall,
        args: Value,
        _edited: bool,
    ) -> BoxFuture<'static, (String, Outcome)> {
        let tool = self.rt.tools.get(&call.name);
        let executor = tool.as_ref().map(|t| t.executor.clone());
        let ctx = ToolContext {
            session: self.session.clone(),
            tool: tool.map_or_else(
                || std::sync::Arc::from(""),
                |t| std::sync::Arc::from(&*t.spec.name),
            ),
            tool_call_id: call.id.clone(),
            clock: self.rt.clock.clone(),
            ids: self.rt.ids.clone(),
            asker: Some(Asker::new(
                self.rt.questions.clone(),
                self.session.id.clone(),
                call.id.clone(),
                self.questions.tx.clone(),
                self.rt.clock.clone(),
                self.rt.ids.clone(),
            )),
        };
        let span = tracing::info_span!("tool", tool = %call.name, call = %call.id);
        async move {
            let outcome = match executor {
                Some(Executor::Server(tool)) => match tool.call(args, ctx).instrument(span).await {
                    Ok(output) => Outcome::Output { output },
                    Err(e) => Outcome::Error { message: e.0 },
                },
                Some(Executor::Browser) | None => Outcome::Error {
                    message: format!("{} cannot run on the server", call.name),
                },
            };
            (call.id, outcome)
        }
        .boxed()
    }

    /// Moves the results of a finished step into the history (one result per call, in order).
    pub(super) fn commit_results(&mut self) {
        let mut state = self.session.state();
        let record = &mut state.record;
        let Some(turn) = record.turn.as_mut() else {
            return;
        };
        if turn.calls.is_empty() || !turn.calls.iter().all(StepCall::is_done) {
            return;
        }
        // Calls that ran in the browser keep their grant's use; calls that never ran give it
        // back (server calls were settled when they ran).
        for call in &turn.calls {
            let ran = matches!(
                &call.phase,
                CallPhase::Done {
                    outcome: Outcome::Output { .. } | Outcome::Error { .. },
                    ..
                }
            );
            self.rt.policy().settle(&call.call.id, ran, None);
        }
        let results: Vec<ToolResult> = std::mem::take(&mut turn.calls)
            .into_iter()
            .map(|c| match c.phase {
                CallPhase::Done {
                    outcome,
                    edited_args,
                } => ToolResult {
                    call_id: c.call.id,
                    name: c.call.name,
                    outcome,
                    edited_args,
                },
                _ => ToolResult {
                    call_id: c.call.id,
                    name: c.call.name,
                    outcome: Outcome::Interrupted,
                    edited_args: None,
                },
            })
            .collect();
        record.history.push(HistoryItem::ToolResults { results });
    }
}

/// The next notice, skipping any the receiver missed; `None` once the sender is gone.
/// The audit events of the approvals that ran out (`expiries`, from [`Gate::tick`]).
fn expired_events(
    chat: &str,
    turn: &TurnRecord,
    expiries: Vec<Expiry>,
    now: Millis,
) -> Vec<AuditEvent> {
    expiries
        .into_iter()
        .filter_map(|expiry| {
            let Expiry::Approval {
                tool_call_id,
                approval_id,
                deadline_ms,
            } = expiry
            else {
                return None;
            };
            let call = turn.calls.iter().find(|c| c.call.id == tool_call_id)?;
            let mut event = audit_event(
                AuditKind::Expired,
                chat,
                &turn.id,
                &call.call,
                &approval_id,
                now,
            );
            event.deadline_ms = Some(deadline_ms);
            Some(event)
        })
        .collect()
}

async fn next_notice(notices: &mut Option<CallSubscription>) -> Option<CallNotice> {
    let notice = notices.as_mut()?.recv().await;
    if notice.is_none() {
        // The model is gone: nothing more will come.
        *notices = None;
    }
    notice
}

/// Whether `call` is the provider's call `provider_call_id` (any provider namespace's `id`).
fn is_provider_call(call: &ToolCall, provider_call_id: &str) -> bool {
    call.provider_data
        .as_ref()
        .and_then(Value::as_object)
        .is_some_and(|namespaces| {
            namespaces
                .values()
                .any(|data| data.get("id").and_then(Value::as_str) == Some(provider_call_id))
        })
}

/// For a call a person denied, the approval's answer as AI SDK v7 carries it
/// (`tool-approval-response`, `approved: false`), with who said no and why in its `reason`
/// ([`denial_words`]): the requester's card and its part say it even when an approver denied it
/// elsewhere. Strict ai@6.0.0 clients get no such chunk (its `tool-output-denied` has only the
/// call's id); a countersigned approval's `data-countersign` part tells them.
fn denial_answer(call: &StepCall) -> Option<Chunk> {
    let CallPhase::Done {
        outcome: Outcome::Denied { reason, by },
        ..
    } = &call.phase
    else {
        return None;
    };
    let approval_id = call.gated_by.clone()?;
    Some(Chunk::tool_approval_response(
        approval_id,
        false,
        denial_words(by.as_deref(), reason.as_deref()),
    ))
}

/// The chunk that reports how a call ended.
fn result_chunk(call_id: &str, outcome: &Outcome, tools: &ToolRegistry, name: &str) -> Chunk {
    match outcome {
        Outcome::Output { output } => Chunk::tool_output_available(call_id, output.clone()),
        Outcome::Error { message } => Chunk::tool_output_error(call_id, message.clone()),
        Outcome::Denied { .. } => Chunk::tool_output_denied(call_id),
        Outcome::Expired => {
            let timeout = tools
                .get(name)
                .map(|t| humanize(t.spec.approval_timeout))
                .unwrap_or_else(|| "its deadline".into());
            Chunk::tool_output_error(
                call_id,
                format!(
                    "{}: nobody answered within {timeout}. Nothing was done.",
                    crate::protocol::chunk::APPROVAL_EXPIRED_PREFIX
                ),
            )
        }
        Outcome::Interrupted => Chunk::tool_output_error(call_id, "Interrupted before it ran."),
        // v7 clients read the rule's reason from the automatic approval's response.
        Outcome::DeniedByRule { .. } => Chunk::tool_output_denied(call_id),
        Outcome::Dismissed => Chunk::tool_output_error(
            call_id,
            format!(
                "{}: set aside without a decision. Nothing was done; it can be asked again.",
                crate::protocol::chunk::DISMISSED_PREFIX
            ),
        ),
        Outcome::Superseded => Chunk::tool_output_error(
            call_id,
            format!(
                "{}: a new message was sent before this was answered. Nothing was done.",
                crate::protocol::chunk::SUPERSEDED_PREFIX
            ),
        ),
    }
}

/// "5 minutes", "30 seconds".
fn humanize(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        let m = secs / 60;
        format!("{m} minute{}", if m == 1 { "" } else { "s" })
    } else {
        format!("{secs} second{}", if secs == 1 { "" } else { "s" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(humanize(Duration::from_secs(300)), "5 minutes");
        assert_eq!(humanize(Duration::from_secs(60)), "1 minute");
        assert_eq!(humanize(Duration::from_secs(30)), "30 seconds");
        assert_eq!(humanize(Duration::from_secs(1)), "1 second");
    }
}
