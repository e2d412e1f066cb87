//! The turn loop: model step → tool calls → approval gate → execution → results back to the
//! model → … until the model answers without calling a tool ([`TurnDriver`]). The runtime
//! ([`super::runtime`]) starts, parks and revives it; this module is what runs in between.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{FutureExt, StreamExt, future::BoxFuture, stream::FuturesUnordered};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{
    Transport,
    clock::{IdKind, Millis, until},
    gate::{ApprovalResolution, CallPhase, Expiry, Gate, PersonInput, StepCall, next_deadline},
    history::{AssistantPart, HistoryItem, Outcome, ToolCall, ToolResult},
    model::{CallNotice, ModelEvent},
    schema::validate,
    session::{
        HeldText, Parked, Session, SessionRecord, SessionState, TurnEntry, TurnLog, TurnRecord,
        TurnStatus, lock,
    },
    store::{Actor, AuditEvent, AuditKind},
    tools::{Executor, ToolContext, ToolLocation, ToolRegistry},
};
use crate::protocol::{
    Chunk, FinishReason, MessageReducer,
    chunk::{Abort, Finish},
};

use super::runtime::{Runtime, TextTiming};

/// How a phase of the loop ended.
enum Flow {
    Continue,
    Interrupted,
    /// The turn waits for the person and has no task any more (ADR 0010).
    Parked,
}

/// Where a driver enters its turn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DriveFrom {
    /// A new turn, or one picked up after a restart: a new log that begins with `start`.
    Start,
    /// A parked turn (unparked): its log goes on where it paused.
    Pause(Parked),
}

/// The running turn: owns the reducer that mirrors what the client sees.
pub(crate) struct TurnDriver {
    pub(crate) rt: Arc<Runtime>,
    pub(crate) session: Arc<Session>,
    pub(crate) log: Arc<TurnLog>,
    pub(crate) cancel: CancellationToken,
    pub(crate) interrupt_reason: Arc<Mutex<Option<String>>>,
    pub(crate) timing: TextTiming,
    pub(crate) reducer: MessageReducer,
    pub(crate) message_id: String,
    /// `sse` / `bidi`: recorded in the chunk log.
    pub(crate) transport: Transport,
    pub(crate) turn_id: String,
    /// Audit events not yet committed (they go with the next save).
    pub(crate) audit: Vec<AuditEvent>,
    /// Notices from the model about calls of earlier steps (Gemini Live withdraws calls).
    pub(crate) notices: Option<broadcast::Receiver<CallNotice>>,
}

/// The open text or reasoning block of a model step.
struct Block {
    id: String,
    text: String,
    /// Provider data attached to the block (e.g. a signed thought); kept in the history.
    provider_data: Option<Value>,
}

/// What a model step produced.
#[derive(Default)]
struct StepOutput {
    parts: Vec<AssistantPart>,
    calls: Vec<StepCall>,
    /// Text chunks not yet emitted (hold mode).
    text: Option<Block>,
    reasoning: Option<Block>,
    finish: Option<FinishReason>,
}

impl TurnDriver {
    /// Runs the turn on a task of its own. When the task parks the turn, its session may leave
    /// memory as soon as the task is gone (ADR 0011).
    pub(crate) fn spawn(self, from: DriveFrom) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let runtime = self.rt.clone();
            let chat = self.session.id.clone();
            if self.run(from).await {
                runtime.release_parked(&chat);
            }
        })
    }

    /// Drives the turn until it ends (false) or parks (true).
    async fn run(mut self, from: DriveFrom) -> bool {
        let mut paused_at = match from {
            DriveFrom::Start => {
                self.emit(Chunk::start(self.message_id.clone()));
                None
            }
            DriveFrom::Pause(parked) => Some(parked.inputs),
        };
        loop {
            // Phase A: the calls of the previous step, until every one has its result.
            match self.resolve_calls(paused_at.take()).await {
                Flow::Continue => {}
                Flow::Interrupted => {
                    self.finish_interrupted(None).await;
                    return false;
                }
                Flow::Parked => return true,
            }
            self.commit_results();

            let steps = self.with_turn(|t| t.steps).unwrap_or(0);
            if steps >= self.rt.settings.max_steps {
                let limit = self.rt.settings.max_steps;
                self.fail(format!(
                    "The model kept calling tools; the turn stopped after {limit} steps."
                ))
                .await;
                return false;
            }

            // Phase B: one model step.
            self.set_status(TurnStatus::Running);
            self.emit(Chunk::start_step());
            let (session_id, history) = {
                let state = self.session.state();
                let record = &state.record;
                (record.id.clone(), record.history.clone())
            };
            let mut stream = self
                .rt
                .model_for(self.transport)
                .stream(self.rt.model_request(&session_id, history));
            let mut step = StepOutput::default();
            let mut failure = None;
            loop {
                let event = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => None,
                    event = stream.next() => Some(event),
                };
                match event {
                    None => {
                        drop(stream);
                        self.finish_interrupted(Some(step)).await;
                        return false;
                    }
                    Some(None) => break,
                    Some(Some(Ok(event))) => {
                        if self.on_model_event(&mut step, event) {
                            break;
                        }
                    }
                    Some(Some(Err(e))) => {
                        failure = Some(e.to_string());
                        break;
                    }
                }
            }
            drop(stream);
            self.close_blocks(&mut step);
            self.with_turn(|t| t.steps += 1);

            if let Some(message) = failure {
                self.record_step(&mut step);
                self.fail_calls(&mut step, &message);
                self.flush_held_text();
                self.emit(Chunk::finish_step());
                self.fail(message).await;
                return false;
            }

            if step.calls.is_empty() {
                self.record_step(&mut step);
                self.flush_held_text();
                self.emit(Chunk::finish_step());
                let reason = step.finish.unwrap_or(FinishReason::Stop);
                self.finish(reason, TurnStatus::Finished).await;
                return false;
            }

            // The step called tools. In hold mode its text stays in `held_text` until the final
            // response (end_text put it there); in progressive mode it was already streamed.
            self.record_step(&mut step);
            self.gate_calls(&mut step);
            self.emit(Chunk::finish_step());
            let calls = std::mem::take(&mut step.calls);
            self.with_turn(|t| t.calls = calls);
            self.sync_messages();
        }
    }

    /// Handles one model event. Returns true when the step is over.
    fn on_model_event(&mut self, step: &mut StepOutput, event: ModelEvent) -> bool {
        match event {
            ModelEvent::TextDelta(delta) => {
                if delta.is_empty() {
                    return false;
                }
                if let Some(block) = step.reasoning.take() {
                    self.end_reasoning(step, block);
                }
                let progressive = self.timing == TextTiming::Progressive;
                let block = step.text.get_or_insert_with(|| {
                    let id = self.rt.ids.next_id(IdKind::Text);
                    Block {
                        id,
                        text: String::new(),
                        provider_data: None,
                    }
                });
                if progressive && block.text.is_empty() {
                    let id = block.id.clone();
                    self.emit(Chunk::text_start(id));
                }
                block.text.push_str(&delta);
                if progressive {
                    let id = step.text.as_ref().map(|b| b.id.clone()).unwrap_or_default();
                    self.emit(Chunk::text_delta(id, delta));
                }
            }
            ModelEvent::TextData(data) => {
                // The open text block's, or else the step's last text part's; a signature that
                // comes before any text (Gemini 3 may sign an empty last part) gets a part of
                // its own, so it still goes back.
                if let Some(block) = step.text.as_mut() {
                    block.provider_data = Some(data);
                } else if let Some(AssistantPart::Text { provider_data, .. }) = step
                    .parts
                    .iter_mut()
                    .rev()
                    .find(|p| matches!(p, AssistantPart::Text { .. }))
                {
                    *provider_data = Some(data);
                } else {
                    step.parts.push(AssistantPart::Text {
                        text: String::new(),
                        provider_data: Some(data),
                    });
                }
            }
            ModelEvent::ReasoningDelta {
                text,
                provider_data,
            } => {
                if text.is_empty() {
                    return false;
                }
                if let Some(block) = step.text.take() {
                    self.end_text(step, block);
                }
                if step.reasoning.is_none() {
                    let id = self.rt.ids.next_id(IdKind::Reasoning);
                    self.emit(Chunk::reasoning_start(id.clone()));
                    step.reasoning = Some(Block {
                        id,
                        text: String::new(),
                        provider_data: None,
                    });
                }
                if let Some(block) = step.reasoning.as_mut() {
                    block.text.push_str(&text);
                    if provider_data.is_some() {
                        block.provider_data = provider_data;
                    }
                    let id = block.id.clone();
                    self.emit(Chunk::reasoning_delta(id, text));
                }
            }
            ModelEvent::ToolCall(call) => {
                self.close_blocks(step);
                self.accept_call(step, call);
            }
            ModelEvent::Finish { reason, usage } => {
                self.with_turn(|t| t.usage.add(usage));
                step.finish = Some(reason);
                return true;
            }
        }
        false
    }

    /// Validates a call, gives it our id and emits its input chunks.
    fn accept_call(&mut self, step: &mut StepOutput, mut call: ToolCall) {
        call.id = self.rt.ids.next_id(IdKind::ToolCall);
        let rt = self.rt.clone();
        let tool = rt.tools.get(&call.name);
        let problem = match tool {
            None => Some(format!(
                "Unknown tool {:?}. Available tools: {}.",
                call.name,
                self.rt.tools.names().join(", ")
            )),
            Some(tool) => validate(&tool.spec.parameters, &call.args)
                .err()
                .map(|e| format!("Invalid arguments for {}: {e}", call.name)),
        };
        self.emit(Chunk::tool_input_start(call.id.clone(), call.name.clone()));
        let location = tool
            .map(|t| t.spec.location)
            .unwrap_or(ToolLocation::Server);
        let phase = match problem {
            Some(message) => {
                self.emit(Chunk::tool_input_error(
                    call.id.clone(),
                    call.name.clone(),
                    call.args.clone(),
                    message.clone(),
                ));
                CallPhase::Done {
                    outcome: Outcome::Error { message },
                    edited_args: None,
                }
            }
            None => {
                self.emit(Chunk::tool_input_available(
                    call.id.clone(),
                    call.name.clone(),
                    call.args.clone(),
                ));
                // Decided at the end of the step (gate_calls).
                CallPhase::Ready {
                    args: call.args.clone(),
                    edited: false,
                }
            }
        };
        let announced = matches!(phase, CallPhase::Done { .. });
        step.parts
            .push(AssistantPart::ToolCall { call: call.clone() });
        step.calls.push(StepCall {
            call,
            location,
            phase,
            announced,
            gated_by: None,
        });
    }

    /// At the end of a step: each valid call either waits for approval, waits for the browser,
    /// or is ready to run on the server.
    fn gate_calls(&mut self, step: &mut StepOutput) {
        let now = self.rt.clock.now_ms();
        let rt = self.rt.clone();
        let requests =
            Gate::new(&rt.tools).request(&mut step.calls, now, || rt.ids.next_id(IdKind::Approval));
        for request in requests {
            if let Some(call) = step
                .calls
                .iter()
                .find(|c| c.call.id == request.tool_call_id)
            {
                let mut event =
                    self.audit_event(AuditKind::Requested, &call.call, &request.approval_id, now);
                event.deadline_ms = Some(request.deadline_ms);
                self.audit.push(event);
            }
            self.emit(Chunk::tool_approval_request(
                request.approval_id,
                request.tool_call_id,
            ));
        }
    }

    /// Phase A: waits until every call of the step has its result, running server tools,
    /// expiring deadlines and pausing for the person. `paused_at`: the input count at which
    /// the turn last paused, when it continues after being parked.
    async fn resolve_calls(&mut self, paused_at: Option<u64>) -> Flow {
        let mut running: FuturesUnordered<BoxFuture<'static, (String, Outcome)>> =
            FuturesUnordered::new();
        let mut last_pause_inputs: Option<u64> = paused_at;
        let mut emitted_since_pause = false;
        loop {
            let now = self.rt.clock.now_ms();
            let mut to_emit = Vec::new();
            let mut to_run = Vec::new();
            let (waiting, next_deadline, all_done, inputs) = {
                let mut state = self.session.state();
                let record = &mut state.record;
                let SessionRecord {
                    turn,
                    resolved_approvals,
                    ..
                } = &mut *record;
                let Some(turn) = turn.as_mut() else {
                    return Flow::Continue;
                };
                let turn_id = turn.id.clone();
                for expiry in
                    Gate::new(&self.rt.tools).tick(&mut turn.calls, resolved_approvals, now)
                {
                    if let Expiry::Approval {
                        tool_call_id,
                        approval_id,
                        deadline_ms,
                    } = expiry
                        && let Some(call) = turn.calls.iter().find(|c| c.call.id == tool_call_id)
                    {
                        let mut event = audit_event(
                            AuditKind::Expired,
                            &self.session.id,
                            &turn_id,
                            &call.call,
                            &approval_id,
                            now,
                        );
                        event.deadline_ms = Some(deadline_ms);
                        self.audit.push(event);
                    }
                }
                for call in &mut turn.calls {
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
                        to_emit.push(result_chunk(
                            &call.call.id,
                            outcome,
                            &self.rt.tools,
                            &call.call.name,
                        ));
                    }
                }
                let waiting = turn.calls.iter().any(StepCall::is_waiting);
                let next_deadline = next_deadline(&turn.calls);
                let all_done = turn.calls.iter().all(StepCall::is_done);
                let inputs = turn.inputs;
                turn.status = if waiting && running.is_empty() && to_run.is_empty() {
                    TurnStatus::AwaitingPerson
                } else {
                    TurnStatus::Running
                };
                (waiting, next_deadline, all_done, inputs)
            };
            let announced = !to_emit.is_empty();
            if announced {
                emitted_since_pause = true;
            }
            for chunk in to_emit {
                self.emit(chunk);
            }
            if announced {
                // The sockets following this turn were woken on this thread, behind this task:
                // let them send the results before the model's next step takes the thread.
                tokio::task::yield_now().await;
            }
            for (call, args, edited) in to_run {
                running.push(self.run_server_tool(call, args, edited));
            }
            if all_done && running.is_empty() {
                return Flow::Continue;
            }
            if running.is_empty()
                && waiting
                && (emitted_since_pause || last_pause_inputs != Some(inputs))
            {
                self.pause().await;
                last_pause_inputs = Some(inputs);
                emitted_since_pause = false;
            }
            if running.is_empty() && waiting && self.park(inputs, next_deadline) {
                return Flow::Parked;
            }
            let sleep = next_deadline.map(|d| until(self.rt.clock.now_ms(), d));
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Flow::Interrupted,
                Some((call_id, outcome)) = running.next(), if !running.is_empty() => {
                    let executed = {
                        let mut state = self.session.state();
                        let record = &mut state.record;
                        let now = self.rt.clock.now_ms();
                        let turn_id = record.turn.as_ref().map(|t| t.id.clone()).unwrap_or_default();
                        match record
                            .turn
                            .as_mut()
                            .and_then(|t| t.calls.iter_mut().find(|c| c.call.id == call_id))
                        {
                            Some(call) => match &call.phase {
                                CallPhase::Running { args, edited } => {
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
                                    call.phase = CallPhase::Done { outcome, edited_args };
                                    call.announced = false;
                                    event
                                }
                                _ => None,
                            },
                            None => None,
                        }
                    };
                    self.audit.extend(executed);
                    // A tool's effect (a payment) is on disk before its output is announced.
                    self.save().await;
                }
                () = self.session.woken() => {}
                () = tokio::time::sleep(sleep.unwrap_or(Duration::ZERO)), if sleep.is_some() => {}
                Some(notice) = next_notice(&mut self.notices), if self.notices.is_some() => {
                    self.withdraw(notice);
                }
            }
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
                        message:
                            "The model withdrew this call before it was answered. Nothing was done."
                                .into(),
                    },
                    edited_args: None,
                };
                call.announced = false;
            }
        }
        self.audit.extend(events);
    }

    /// Runs a server tool; the future resolves to (call id, outcome).
    fn run_server_tool(
        &self,
        call: ToolCall,
        args: Value,
        _edited: bool,
    ) -> BoxFuture<'static, (String, Outcome)> {
        let executor = self.rt.tools.get(&call.name).map(|t| t.executor.clone());
        let ctx = ToolContext {
            session: self.session.clone(),
            tool_call_id: call.id.clone(),
            clock: self.rt.clock.clone(),
            ids: self.rt.ids.clone(),
        };
        async move {
            let outcome = match executor {
                Some(Executor::Server(tool)) => match tool.call(args, ctx).await {
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
    fn commit_results(&mut self) {
        let mut state = self.session.state();
        let record = &mut state.record;
        let Some(turn) = record.turn.as_mut() else {
            return;
        };
        if turn.calls.is_empty() || !turn.calls.iter().all(StepCall::is_done) {
            return;
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

    /// Adds the step's assistant item to the history.
    fn record_step(&mut self, step: &mut StepOutput) {
        let parts: Vec<AssistantPart> = std::mem::take(&mut step.parts)
            .into_iter()
            .filter(|p| {
                !matches!(p, AssistantPart::Text { text, provider_data: None } if text.is_empty())
            })
            .collect();
        if !parts.is_empty() {
            self.session
                .state()
                .record
                .history
                .push(HistoryItem::Assistant { parts });
        }
    }

    fn close_blocks(&mut self, step: &mut StepOutput) {
        if let Some(block) = step.reasoning.take() {
            self.end_reasoning(step, block);
        }
        if let Some(block) = step.text.take() {
            self.end_text(step, block);
        }
    }

    fn end_reasoning(&mut self, step: &mut StepOutput, block: Block) {
        self.emit(Chunk::reasoning_end(block.id));
        step.parts.push(AssistantPart::Reasoning {
            text: block.text,
            provider_data: block.provider_data,
        });
    }

    /// Ends a text block: emitted now in progressive mode, kept for the step's end in hold mode.
    fn end_text(&mut self, step: &mut StepOutput, block: Block) {
        if self.timing == TextTiming::Progressive {
            self.emit(Chunk::text_end(block.id));
        } else {
            self.with_turn(|t| {
                t.held_text.push(HeldText {
                    id: block.id.clone(),
                    text: block.text.clone(),
                })
            });
        }
        step.parts.push(AssistantPart::Text {
            text: block.text,
            provider_data: block.provider_data,
        });
    }

    /// Emits all held text (hold mode) as complete text blocks, in generation order.
    fn flush_held_text(&mut self) {
        let held = self
            .with_turn(|t| std::mem::take(&mut t.held_text))
            .unwrap_or_default();
        for block in held {
            self.emit(Chunk::text_start(block.id.clone()));
            self.emit(Chunk::text_delta(block.id.clone(), block.text));
            self.emit(Chunk::text_end(block.id));
        }
    }

    /// Ends every call of a failed step with the failure.
    fn fail_calls(&mut self, step: &mut StepOutput, message: &str) {
        if step.calls.is_empty() {
            return;
        }
        let mut results = Vec::new();
        for call in step.calls.drain(..) {
            let outcome = match call.phase {
                CallPhase::Done { outcome, .. } => outcome,
                _ => {
                    let text = format!("Not run: {message}");
                    self.emit(Chunk::tool_output_error(call.call.id.clone(), text.clone()));
                    Outcome::Error { message: text }
                }
            };
            results.push(ToolResult {
                call_id: call.call.id,
                name: call.call.name,
                outcome,
                edited_args: None,
            });
        }
        self.session
            .state()
            .record
            .history
            .push(HistoryItem::ToolResults { results });
    }

    /// Ends the turn after an interrupt: open calls end as interrupted, held text is delivered,
    /// and the stream closes with `abort` + `finish`.
    async fn finish_interrupted(&mut self, step: Option<StepOutput>) {
        let reason = lock(&self.interrupt_reason)
            .clone()
            .unwrap_or_else(|| "interrupted".to_string());
        if let Some(mut step) = step {
            self.close_blocks(&mut step);
            self.record_step(&mut step);
            let calls = std::mem::take(&mut step.calls);
            self.with_turn(|t| t.calls = calls);
        }
        let open: Vec<(String, String)> = {
            let mut state = self.session.state();
            let record = &mut state.record;
            let mut open = Vec::new();
            if let Some(turn) = record.turn.as_mut() {
                let now = self.rt.clock.now_ms();
                for call in &mut turn.calls {
                    if let CallPhase::AwaitingApproval { approval_id, .. } = &call.phase {
                        let mut event = audit_event(
                            AuditKind::Interrupted,
                            &self.session.id,
                            &turn.id,
                            &call.call,
                            approval_id,
                            now,
                        );
                        event.reason = Some(reason.clone());
                        self.audit.push(event);
                    }
                    if !call.is_done() {
                        call.phase = CallPhase::Done {
                            outcome: Outcome::Interrupted,
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
        if self.reducer_in_step() {
            self.emit(Chunk::finish_step());
        }
        self.emit(Chunk::Abort(Abort {
            reason: Some(reason),
        }));
        self.finish(FinishReason::Other, TurnStatus::Interrupted)
            .await;
    }

    /// Ends the turn with an `error` chunk.
    async fn fail(&mut self, message: String) {
        tracing::warn!(session = %self.session.id, %message, "turn failed");
        self.emit(Chunk::error(message));
        self.set_status(TurnStatus::Failed);
        self.sync_messages();
        self.record_done();
        self.end().await;
    }

    async fn finish(&mut self, reason: FinishReason, status: TurnStatus) {
        let usage = self.with_turn(|t| t.usage).unwrap_or_default();
        let metadata = json!({
            "model": self.rt.model_for(self.transport).label(),
            "usage": usage,
        });
        self.emit(Chunk::Finish(Finish {
            finish_reason: Some(reason),
            message_metadata: Some(metadata),
        }));
        self.set_status(status);
        self.sync_messages();
        self.record_done();
        self.end().await;
    }

    /// Commits the ended turn, then logs its end (`[DONE]`): a client that saw the end finds
    /// the turn over after a crash or restart, and its next request does not queue behind this
    /// commit.
    async fn end(&mut self) {
        self.save().await;
        self.push(TurnEntry::End);
    }

    /// Parks the turn when it can wait for the person without a task (ADR 0010): nothing
    /// uncommitted, no provider notices to listen to, no input or interrupt since `inputs` was
    /// read. The check and the mark happen under the session's locks, where input is applied
    /// and interrupts are raised, so nothing that should wake the turn can be missed.
    fn park(&mut self, inputs: u64, deadline: Option<Millis>) -> bool {
        if self.notices.is_some() || !self.audit.is_empty() {
            return false;
        }
        {
            let mut state = self.session.state();
            let SessionState { record, live, .. } = &mut *state;
            let Some(turn) = live.as_mut().filter(|t| Arc::ptr_eq(&t.log, &self.log)) else {
                return false;
            };
            if self.cancel.is_cancelled() || record.turn.as_ref().map(|t| t.inputs) != Some(inputs)
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
    async fn pause(&mut self) {
        self.sync_messages();
        if let Some(log) = self.rt.chunk_log() {
            log.flush(&self.session.id);
        }
        let mut entries = self.log.entries_from(0);
        entries.push(TurnEntry::Pause);
        let stored = self.save_with(Some(&entries)).await;
        self.push(TurnEntry::Pause);
        if stored {
            let mut state = self.session.state();
            let live = &mut state.live;
            if let Some(turn) = live.as_mut().filter(|t| Arc::ptr_eq(&t.log, &self.log)) {
                turn.saved = entries.len();
            }
        }
    }

    /// Appends to the turn's log. Output after a pause is news for the chat's follower, which
    /// stopped reading there.
    fn push(&self, entry: TurnEntry) {
        if self.log.push(entry) {
            self.rt.followers.notify(&self.session.id);
        }
    }

    /// Whether a step is open in what was emitted (start-step without its finish-step).
    fn reducer_in_step(&self) -> bool {
        let entries = self.log.entries_from(0);
        let mut open = false;
        for entry in entries {
            match entry {
                TurnEntry::Chunk(Chunk::StartStep) => open = true,
                TurnEntry::Chunk(Chunk::FinishStep) => open = false,
                _ => {}
            }
        }
        open
    }

    fn emit(&mut self, chunk: Chunk) {
        self.apply(&chunk);
        if let Some(log) = self.rt.chunk_log() {
            log.record(
                &self.session.id,
                self.transport.as_str(),
                &chunk,
                self.rt.clock.now_ms(),
            );
        }
        self.push(TurnEntry::Chunk(chunk));
    }

    /// Marks the end of the turn in the chunk log.
    fn record_done(&self) {
        if let Some(log) = self.rt.chunk_log() {
            log.record_done(
                &self.session.id,
                self.transport.as_str(),
                self.rt.clock.now_ms(),
            );
        }
    }

    /// Folds a chunk into the server's copy of the assistant message.
    fn apply(&mut self, chunk: &Chunk) {
        if let Err(e) = self.reducer.apply(chunk) {
            tracing::error!(session = %self.session.id, error = %e, ?chunk, "the runner emitted a chunk its own reducer rejects");
        }
    }

    /// Writes the assistant message as the client now sees it into the session record.
    fn sync_messages(&mut self) {
        let message = self.reducer.message().clone();
        let mut state = self.session.state();
        let record = &mut state.record;
        match record.messages.last_mut() {
            Some(last) if last.id == message.id => *last = message,
            _ => record.messages.push(message),
        }
        record.updated_at_ms = self.rt.clock.now_ms();
    }

    /// Commits the session record with the audit events gathered since the last commit.
    async fn save(&mut self) {
        self.save_with(None).await;
    }

    /// [`TurnDriver::save`], with the turn's log when it pauses. True when it was committed.
    async fn save_with(&mut self, paused_log: Option<&[TurnEntry]>) -> bool {
        // Answers applied but not committed yet come first: they precede what they caused.
        let mut audit = std::mem::take(&mut self.session.state().unsaved_audit);
        audit.append(&mut self.audit);
        let snapshot = self.session.snapshot();
        let result = match paused_log {
            Some(log) => self.rt.store.commit_paused(&snapshot, &audit, log).await,
            None => self.rt.store.commit(&snapshot, &audit).await,
        };
        self.session.set_dirty(result.is_err());
        match result {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(session = %self.session.id, error = &e as &dyn std::error::Error, "cannot save the session");
                // Keep the events for the next commit rather than lose them.
                self.audit.splice(0..0, audit);
                false
            }
        }
    }

    fn audit_event(
        &self,
        kind: AuditKind,
        call: &ToolCall,
        approval_id: &str,
        now: Millis,
    ) -> AuditEvent {
        audit_event(
            kind,
            &self.session.id,
            &self.turn_id,
            call,
            approval_id,
            now,
        )
    }

    fn set_status(&self, status: TurnStatus) {
        self.with_turn(|t| t.status = status);
    }

    fn with_turn<R>(&self, f: impl FnOnce(&mut TurnRecord) -> R) -> Option<R> {
        self.session.state().record.turn.as_mut().map(f)
    }
}

/// An audit event about `call`, gated by `approval_id`.
fn audit_event(
    kind: AuditKind,
    session_id: &str,
    turn_id: &str,
    call: &ToolCall,
    approval_id: &str,
    now: Millis,
) -> AuditEvent {
    let mut event = super::store::audit::event(
        kind, now, session_id, turn_id, &call.id, &call.name, &call.args,
    );
    event.approval_id = Some(approval_id.to_owned());
    event
}

/// The `executed` event of a gated call that just finished.
fn executed_event(
    session_id: &str,
    turn_id: &str,
    call: &StepCall,
    approval_id: &str,
    outcome: &Outcome,
    edited_args: Option<Value>,
    now: Millis,
) -> AuditEvent {
    let mut event = audit_event(
        AuditKind::Executed,
        session_id,
        turn_id,
        &call.call,
        approval_id,
        now,
    );
    event.edited_args = edited_args;
    event.outcome = Some(match outcome {
        Outcome::Output { output } => json!({ "ok": output }),
        Outcome::Error { message } => json!({ "error": message }),
        other => json!({ "error": other.model_view() }),
    });
    event
}

/// The audit events of accepted person input: each approval answer, and the execution of a
/// gated browser tool whose result came in.
pub(crate) fn answer_events(
    session: &Session,
    inputs: &[PersonInput],
    resolutions: &[(String, ApprovalResolution)],
    actor: &Actor,
    now: Millis,
) -> Vec<AuditEvent> {
    let state = session.state();
    let record = &state.record;
    let Some(turn) = record.turn.as_ref() else {
        return Vec::new();
    };
    let mut events = Vec::new();
    for (approval_id, resolution) in resolutions {
        let Some(call) = turn
            .calls
            .iter()
            .find(|c| c.gated_by.as_deref() == Some(approval_id.as_str()))
        else {
            continue;
        };
        let kind = match resolution {
            ApprovalResolution::Approved { edited: true, .. } => AuditKind::Edited,
            ApprovalResolution::Approved { .. } => AuditKind::Approved,
            ApprovalResolution::Denied { .. } => AuditKind::Denied,
            ApprovalResolution::Expired { .. } => AuditKind::Expired,
            ApprovalResolution::Withdrawn { .. } => AuditKind::Interrupted,
        };
        let mut event = audit_event(kind, &record.id, &turn.id, &call.call, approval_id, now);
        event.actor = Some(actor.clone());
        if let ApprovalResolution::Denied { reason, .. } = resolution {
            event.reason = reason.clone();
        }
        if kind == AuditKind::Edited {
            event.edited_args = match &call.phase {
                CallPhase::Ready { args, .. } | CallPhase::AwaitingBrowser { args, .. } => {
                    Some(args.clone())
                }
                _ => None,
            };
        }
        events.push(event);
    }
    for input in inputs {
        let PersonInput::BrowserResult { tool_call_id, .. } = input else {
            continue;
        };
        let Some(call) = turn.calls.iter().find(|c| &c.call.id == tool_call_id) else {
            continue;
        };
        if let (
            Some(approval_id),
            CallPhase::Done {
                outcome,
                edited_args,
            },
        ) = (&call.gated_by, &call.phase)
        {
            let mut event = executed_event(
                &record.id,
                &turn.id,
                call,
                approval_id,
                outcome,
                edited_args.clone(),
                now,
            );
            event.actor = Some(actor.clone());
            events.push(event);
        }
    }
    events
}

/// The next notice, skipping any the receiver missed; `None` once the sender is gone.
async fn next_notice(notices: &mut Option<broadcast::Receiver<CallNotice>>) -> Option<CallNotice> {
    let receiver = notices.as_mut()?;
    loop {
        match receiver.recv().await {
            Ok(notice) => return Some(notice),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "call notices were missed");
            }
            Err(broadcast::error::RecvError::Closed) => {
                *notices = None;
                return None;
            }
        }
    }
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
    use crate::agent::{
        model::{Model, ModelRequest, Usage},
        runtime::{RuntimeSettings, UserTurn},
    };

    /// A model that answers every step with the same events.
    struct Scripted(Vec<ModelEvent>);

    impl Model for Scripted {
        fn label(&self) -> String {
            "scripted".into()
        }

        fn stream(&self, _: ModelRequest) -> super::super::model::ModelStream {
            futures::stream::iter(self.0.clone().into_iter().map(Ok)).boxed()
        }
    }

    #[tokio::test]
    async fn text_provider_data_is_kept_with_the_text_in_history() {
        let signature = json!({"google": {"thoughtSignature": "sig"}});
        let runtime = Runtime::new(
            Arc::new(Scripted(vec![
                ModelEvent::TextDelta("Take ".into()),
                ModelEvent::TextDelta("the train.".into()),
                ModelEvent::TextData(signature.clone()),
                ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: Usage::default(),
                },
            ])),
            ToolRegistry::default(),
            Arc::new(super::super::clock::SystemClock),
            Arc::new(super::super::clock::SequentialIds::default()),
            Arc::new(super::super::store::MemoryStore::default()),
            RuntimeSettings::default(),
        );
        let started = runtime
            .start_turn(
                "c",
                UserTurn {
                    message_id: None,
                    text: "Train?".into(),
                    attachments: Vec::new(),
                    transport: Transport::Sse,
                },
                None,
            )
            .await
            .unwrap();
        let mut reader = started.log.subscribe(0);
        while reader.next().await.is_some() {}
        let record = runtime.session("c").await.unwrap().snapshot();
        assert_eq!(
            record.history[1],
            HistoryItem::Assistant {
                parts: vec![AssistantPart::Text {
                    text: "Take the train.".into(),
                    provider_data: Some(signature),
                }]
            }
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(humanize(Duration::from_secs(300)), "5 minutes");
        assert_eq!(humanize(Duration::from_secs(60)), "1 minute");
        assert_eq!(humanize(Duration::from_secs(30)), "30 seconds");
        assert_eq!(humanize(Duration::from_secs(1)), "1 second");
    }
}
