//! How a turn ends, pauses and parks; its chunks handed to its output ([`super::TurnOutput`]),
//! and the commits of the session record.

use super::{StepOutput, TurnDriver, audit::audit_event};
use crate::agent::{
    clock::Millis,
    gate::{ApprovalResolution, CallPhase},
    history::Outcome,
    session::{Parked, SessionState, TurnEntry, TurnRecord, TurnStatus, lock},
    store::AuditKind,
};
use crate::protocol::{
    Chunk, FinishReason,
    chunk::{Abort, Finish},
};

/// What the client of a turn another instance overtook is told.
pub(crate) const OVERTAKEN: &str = "This chat was answered on another server first, so nothing more \
     happened here. Reload the chat to see where it is.";

impl TurnDriver {
    /// Ends the turn after an interrupt: open calls end as interrupted, held text is delivered,
    /// and the stream closes with `abort` + `finish`.
    pub(super) async fn finish_interrupted(&mut self, step: Option<StepOutput>) {
        // Questions of calls that were running closed when their calls were dropped.
        self.emit_question_parts();
        let reason = lock(&self.interrupt_reason)
            .clone()
            .unwrap_or_else(|| "interrupted".to_string());
        if let Some(mut step) = step {
            self.close_blocks(&mut step);
            self.record_step(&mut step);
            let calls = std::mem::take(&mut step.calls);
            self.with_turn(|t| t.calls = calls);
        }
        // A spoken message's reason goes on with what was said.
        let superseded = reason.starts_with(super::SUPERSEDED_BY_MESSAGE);
        let open: Vec<(String, String)> = {
            let mut state = self.session.state();
            let record = &mut state.record;
            let mut open = Vec::new();
            let now = self.rt.clock.now_ms();
            let crate::agent::session::SessionRecord {
                turn,
                resolved_approvals,
                ..
            } = &mut *record;
            if let Some(turn) = turn.as_mut() {
                for call in &mut turn.calls {
                    // A call that waited for the person when they wrote again was superseded;
                    // anything else the interrupt stopped was interrupted.
                    let mut outcome = Outcome::Interrupted;
                    if let CallPhase::AwaitingApproval { approval_id, .. } = &call.phase {
                        let kind = if superseded {
                            outcome = Outcome::Superseded;
                            resolved_approvals.insert(
                                approval_id.clone(),
                                ApprovalResolution::Superseded { at_ms: now },
                            );
                            AuditKind::Superseded
                        } else {
                            AuditKind::Interrupted
                        };
                        let mut event = audit_event(
                            kind,
                            &self.session.id,
                            &turn.id,
                            &call.call,
                            approval_id,
                            now,
                        );
                        event.reason = Some(reason.clone());
                        self.commits.record(event);
                    }
                    if !call.is_done() {
                        call.phase = CallPhase::Done {
                            outcome,
                            edited_args: None,
                        };
                    }
                    if !call.announced {
                        call.announced = true;
                        let text = match &call.phase {
                            CallPhase::Done {
                                outcome: Outcome::Interrupted,
                                ..
                            } => {
                                format!("Interrupted ({reason}) before it ran.")
                            }
                            CallPhase::Done {
                                outcome: Outcome::Superseded,
                                ..
                            } => format!(
                                "{}: a new message was sent before this was answered. Nothing \
                                 was done.",
                                crate::protocol::chunk::SUPERSEDED_PREFIX
                            ),
                            _ => String::new(),
                        };
                        open.push((call.call.id.clone(), text));
                    }
                }
            }
            open
        };
        for (id, text) in open {
            if !text.is_empty() {
                self.emit(Chunk::tool_output_error(id, text));
            }
        }
        self.commit_results();
        self.flush_held_text();
        if self.output.in_step() {
            self.emit(Chunk::finish_step());
        }
        self.emit(Chunk::Abort(Abort {
            reason: Some(reason),
        }));
        self.finish(FinishReason::Other, TurnStatus::Interrupted)
            .await;
    }

    /// Ends the turn with an `error` chunk.
    /// Ends a turn another instance overtook (ADR 0025): nothing it did since its last commit
    /// is on disk and nothing more runs here. This copy of the chat leaves memory and the
    /// database's is read: when the winner's log goes on from everything this one logged (two
    /// instances expired the same approval: neither logged anything past the pause before its
    /// commit), readers of this log simply follow the winner's output; otherwise they are told
    /// another server answered first and their turn ends here.
    pub(super) async fn end_overtaken(&mut self) {
        self.output.record_done();
        self.rt.forget_overtaken(&self.session).await;
        let followed = match self.rt.existing_session(&self.session.id).await {
            Ok(Some(session)) => session
                .current_log()
                .is_some_and(|log| self.output.writes(&log)),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(session = %self.session.id, error = %e.report(), "cannot read a chat another instance answered");
                false
            }
        };
        if !followed {
            self.emit(Chunk::error(OVERTAKEN.to_owned()));
            self.push(TurnEntry::End);
        }
        self.rt.followers.notify(&self.session.id);
    }

    pub(super) async fn fail(&mut self, message: String) {
        tracing::warn!(session = %self.session.id, %message, "turn failed");
        self.emit(Chunk::error(message));
        self.set_status(TurnStatus::Failed);
        self.sync_messages();
        self.output.record_done();
        self.end().await;
    }

    pub(super) async fn finish(&mut self, reason: FinishReason, status: TurnStatus) {
        let usage = self.with_turn(|t| t.usage).unwrap_or_default();
        self.keep_speech().await;
        let mut metadata = self.rt.models().finish_metadata(self.transport, usage);
        if let (Some(audio), Some(fields)) = (self.speech.metadata(), metadata.as_object_mut()) {
            fields.insert("audio".into(), audio);
        }
        self.emit(Chunk::Finish(Finish {
            finish_reason: Some(reason),
            message_metadata: Some(metadata),
        }));
        self.set_status(status);
        self.sync_messages();
        self.output.record_done();
        self.end().await;
    }

    /// Commits the ended turn, then logs its end (`[DONE]`): a client that saw the end finds
    /// the turn over after a crash or restart, and its next request does not queue behind this
    /// commit.
    async fn end(&mut self) {
        // What the person said while it waited will not be answered here any more.
        let unanswered = self.dismiss_asides();
        self.save().await;
        if !self.commits.overtaken() {
            // What its calls reserved and did not use goes back (their results are on disk).
            self.rt.policy().flush(self.rt.clock.now_ms()).await;
        }
        self.push(TurnEntry::End);
        self.readmit(unanswered);
    }

    /// Parks the turn when it can wait for the person without a task (ADR 0010): nothing
    /// uncommitted, no provider notices to listen to, no input or interrupt since `inputs` was
    /// read. The check and the mark happen under the session's locks, where input is applied
    /// and interrupts are raised, so nothing that should wake the turn can be missed.
    pub(super) fn park(&mut self, inputs: u64, deadline: Option<Millis>) -> bool {
        if self.notices.is_some() || self.commits.has_uncommitted() {
            return false;
        }
        {
            let mut state = self.session.state();
            let SessionState { record, live, .. } = &mut *state;
            let Some(turn) = live.as_mut().filter(|t| self.output.writes(&t.log)) else {
                return false;
            };
            if self.cancel.is_cancelled()
                || record.turn.as_ref().map(|t| t.inputs) != Some(inputs)
                || !turn.asides.is_empty()
            {
                return false;
            }
            turn.parked = Some(Parked { inputs });
            // This very task: dropping its handle lets its memory go as soon as it returns.
            turn.task = None;
        }
        if let Some(deadline) = deadline {
            self.rt.wake_at(deadline, &self.session.id);
        }
        true
    }

    /// The turn waits for the person: the record is committed with the turn's whole log up to
    /// this pause (so the turn can leave memory while it waits, ADR 0011), then the pause is
    /// logged (an SSE response ends there).
    pub(super) async fn pause(&mut self) {
        self.sync_messages();
        self.output.flush_chunk_log();
        let mut entries = self.output.entries();
        entries.push(TurnEntry::Pause);
        let stored = self.save_with(Some(&entries)).await;
        self.push(TurnEntry::Pause);
        if stored {
            let mut state = self.session.state();
            let live = &mut state.live;
            if let Some(turn) = live.as_mut().filter(|t| self.output.writes(&t.log)) {
                turn.saved = entries.len();
            }
        }
    }

    /// Appends to the turn's log (and tells other instances, ADR 0043). Output after a pause
    /// is news for the chat's follower, which stopped reading there.
    pub(super) fn push(&self, entry: TurnEntry) {
        if self.output.push(entry) {
            self.rt.followers.notify(&self.session.id);
        }
    }

    /// Puts `chunk` where every chunk goes ([`super::TurnOutput::emit`]).
    pub(super) fn emit(&mut self, chunk: Chunk) {
        if self.output.emit(chunk) {
            self.rt.followers.notify(&self.session.id);
        }
    }

    /// Writes the assistant message as the client now sees it into the session record.
    pub(super) fn sync_messages(&mut self) {
        let message = self.output.message().clone();
        let mut state = self.session.state();
        let record = &mut state.record;
        match record.messages.last_mut() {
            Ok(Some(last)) if last.id == message.id => *last = message,
            Ok(_) => record.messages.push(message),
            Err(e) => {
                // Kept as stored (never lost); the turn's message goes on after it.
                tracing::error!(session = %self.session.id, error = %e, "the chat's last stored message does not decode");
                record.messages.push(message);
            }
        }
        record.updated_at_ms = self.rt.clock.now_ms();
    }

    /// Commits the session record with the audit events gathered since the last commit.
    pub(super) async fn save(&mut self) {
        self.save_with(None).await;
    }

    /// [`TurnDriver::save`], with the turn's log when it pauses. True when it was committed.
    async fn save_with(&mut self, paused_log: Option<&[TurnEntry]>) -> bool {
        // On a shared database every commit carries the log so far: other instances follow
        // the turn from it (ADR 0025).
        let so_far;
        let log = match paused_log {
            Some(log) => Some(log),
            None if self.rt.store.shared() => {
                so_far = self.output.entries();
                Some(so_far.as_slice())
            }
            None => None,
        };
        self.commits.commit(&self.rt, &self.session, log).await
    }

    pub(super) fn set_status(&self, status: TurnStatus) {
        self.with_turn(|t| t.status = status);
    }

    pub(super) fn with_turn<R>(&self, f: impl FnOnce(&mut TurnRecord) -> R) -> Option<R> {
        self.session.state().record.turn.as_mut().map(f)
    }
}
