//! One step on the socket: send what the server session lacks, read until the step ends,
//! reconnecting with the handle when the socket is lost (see "What a step sends" and "What a
//! step reads" in the module docs of [`crate::models::providers::gemini_live`]).

use futures::StreamExt;
use serde_json::json;
use tokio::time::{Instant, sleep_until};
use tokio_tungstenite::tungstenite::Message;

use super::{SessionActor, send, send_context, triage};
use crate::agent::history::{HistoryItem, ToolCall, ToolResult};
use crate::agent::model::{ModelError, ModelEvent};
use crate::models::providers::gemini;
use crate::models::providers::gemini_live::history::{
    described_results, live_contents, live_ids, merge_adjacent,
};
use crate::models::providers::gemini_live::wire::{
    Cancellation, Incoming, LiveFunctionResponse, LiveUsage, ServerContent, ServerMessage,
    SetupSpec, ToolCallMessage, classify, close_error, is_normal_close, map_turn_complete_reason,
    tool_response, usage,
};
use crate::models::providers::gemini_live::{
    EventSender, Job, MAX_RECONNECTS_PER_STEP, NAMESPACE, StepJob, ToolBehavior, WsError,
};
use crate::models::providers::live_sync::split_tail;
use crate::protocol::FinishReason;

/// How a step's read loop ended.
pub(super) enum StepEnd {
    /// `Finish` was sent.
    Finished,
    /// The runner dropped the stream.
    Dropped,
    /// The socket went away without an error: reconnect and go on.
    Lost(String),
    Failed(ModelError),
}

/// The running step.
pub(super) struct Step {
    pub(super) history: std::sync::Arc<Vec<HistoryItem>>,
    pub(super) events: EventSender,
    /// The step's input has been sent (a generation is, or will be, in flight).
    pub(super) input_sent: bool,
    pub(super) last_heard: Instant,
    /// `NON_BLOCKING`: end the step at this instant even without `turnComplete`.
    grace: Option<Instant>,
    /// Non-thought `modelTurn` text, emitted only if no transcript comes.
    model_text: String,
    saw_transcript: bool,
    /// Any event was sent to the runner.
    emitted: bool,
    /// Calls not yet handed to the runner: (Live id, call).
    calls: Vec<(Option<String>, ToolCall)>,
    usage: Option<LiveUsage>,
    /// An aside of a waiting turn ([`crate::agent::model::Model::aside`]): it makes no calls
    /// and adds nothing to what the server's conversation is known to have seen.
    pub(super) aside: bool,
}

impl Step {
    /// An aside's step: its input (the person's speech) is already with the server.
    pub(super) fn for_aside(events: EventSender) -> Self {
        Step {
            history: std::sync::Arc::default(),
            events,
            input_sent: true,
            last_heard: Instant::now(),
            grace: None,
            model_text: String::new(),
            saw_transcript: false,
            emitted: false,
            calls: Vec::new(),
            usage: None,
            aside: true,
        }
    }

    fn emit(&mut self, event: ModelEvent) {
        self.emitted = true;
        // A closed channel is noticed by the read loop (`events.closed()`).
        let _ = self.events.send(Ok(event));
    }
}

impl SessionActor {
    pub(super) async fn run_step(&mut self, job: StepJob) {
        let StepJob { request, events } = job;
        if events.is_closed() {
            return;
        }
        let setup = SetupSpec::new(&self.shared, &request, self.voice.mode);
        let mut step = Step {
            history: request.history,
            events,
            input_sent: false,
            last_heard: Instant::now(),
            grace: None,
            model_text: String::new(),
            saw_transcript: false,
            emitted: false,
            calls: Vec::new(),
            usage: None,
            aside: false,
        };
        let setup = match setup {
            Ok(setup) => setup,
            Err(error) => {
                let _ = step.events.send(Err(error));
                return;
            }
        };
        if let Err(error) = self.drive(&setup, &mut step).await {
            tracing::warn!(session = %self.session_id, %error, "Gemini Live step failed");
            let _ = step.events.send(Err(error));
        }
    }

    async fn drive(&mut self, setup: &SetupSpec, step: &mut Step) -> Result<(), ModelError> {
        self.reconcile(&step.history);
        if self.attach_spoken(step).await == Some(true) {
            return Ok(());
        }
        let mut reconnects = 0;
        loop {
            self.ensure_connection(setup, &step.history).await?;
            if step.events.is_closed() {
                return Ok(());
            }
            if let Err(reason) = self.send_pending(step).await {
                self.conn = None;
                reconnects += 1;
                if reconnects > MAX_RECONNECTS_PER_STEP {
                    return Err(ModelError::Transport(format!(
                        "the Gemini Live connection keeps dropping: {reason}"
                    )));
                }
                continue;
            }
            match self.read_step(step).await {
                StepEnd::Finished | StepEnd::Dropped => return Ok(()),
                StepEnd::Failed(error) => return Err(error),
                StepEnd::Lost(reason) => {
                    self.conn = None;
                    reconnects += 1;
                    if reconnects > MAX_RECONNECTS_PER_STEP {
                        return Err(ModelError::Transport(format!(
                            "the Gemini Live connection keeps dropping: {reason}"
                        )));
                    }
                    tracing::info!(
                        session = %self.session_id, %reason,
                        "Gemini Live socket lost mid-step; reconnecting"
                    );
                }
            }
        }
    }

    /// Sends the part of the history the server session lacks. `Err` = the socket broke.
    async fn send_pending(&mut self, step: &mut Step) -> Result<(), String> {
        let behavior = self.shared.behavior;
        let Some(conn) = self.conn.as_mut() else {
            return Err("no socket".into());
        };
        let tail = self.synced.unsent(&step.history);
        let (context, trigger) = split_tail(tail);
        if tail.is_empty() {
            if !step.input_sent {
                // Nothing new: ask the model to go on.
                send(conn, &json!({"clientContent": {"turnComplete": true}})).await?;
                step.input_sent = true;
                step.last_heard = Instant::now();
            }
            return Ok(());
        }
        if step.input_sent && step.emitted {
            tracing::warn!(
                session = %self.session_id,
                "re-sending the step's input after reconnecting; the answer may repeat"
            );
        }
        send_context(conn, context).await?;
        // The trigger: responses for calls this socket issued, text for everything else.
        let live_ids = live_ids(&step.history);
        let mut responses = Vec::new();
        let mut described: Vec<ToolResult> = Vec::new();
        let mut skipped: Vec<ToolResult> = Vec::new();
        let mut users: Vec<HistoryItem> = Vec::new();
        for item in trigger {
            match item {
                HistoryItem::ToolResults { results } => {
                    for result in results {
                        let live_id = live_ids.get(result.call_id.as_str()).cloned();
                        match live_id {
                            Some(id) if self.cancelled.remove(&id) => {
                                tracing::info!(
                                    session = %self.session_id, call = %id, tool = %result.name,
                                    "not sending the result of a call Gemini Live cancelled"
                                );
                                conn.issued.remove(&id);
                                conn.awaiting.remove(&id);
                                skipped.push(result.clone());
                            }
                            Some(id) if conn.issued.contains_key(&id) => {
                                conn.issued.remove(&id);
                                // The last response of a call told it waits (ADR 0035).
                                let will_continue = conn.awaiting.remove(&id).then_some(false);
                                responses.push(LiveFunctionResponse {
                                    id,
                                    name: result.name.clone(),
                                    response: gemini::as_object(result.model_view(), "result"),
                                    scheduling: None,
                                    will_continue,
                                });
                            }
                            _ => described.push(result.clone()),
                        }
                    }
                }
                other => users.push(other.clone()),
            }
        }
        if responses.is_empty() && described.is_empty() && users.is_empty() {
            // Every result was for a cancelled call: tell the model in text what ran.
            described = skipped;
        }
        let mut turns = Vec::new();
        if !described.is_empty() {
            turns.extend(described_results(&described));
        }
        turns.extend(live_contents(&users));
        let turns = merge_adjacent(turns);
        if !responses.is_empty() {
            let scheduling = match behavior {
                ToolBehavior::Blocking => None,
                ToolBehavior::NonBlocking if turns.is_empty() => Some("WHEN_IDLE"),
                ToolBehavior::NonBlocking => Some("SILENT"),
            };
            for response in &mut responses {
                response.scheduling = scheduling;
            }
            send(conn, &tool_response(responses)).await?;
        }
        if !turns.is_empty() {
            send(
                conn,
                &json!({"clientContent": {"turns": turns, "turnComplete": true}}),
            )
            .await?;
        } else if trigger.is_empty() {
            send(conn, &json!({"clientContent": {"turnComplete": true}})).await?;
        }
        self.synced.sent(tail);
        step.input_sent = true;
        step.last_heard = Instant::now();
        Ok(())
    }

    /// Reads the socket until the step ends.
    pub(super) async fn read_step(&mut self, step: &mut Step) -> StepEnd {
        enum Ev {
            Dropped,
            Frame(Option<Result<Message, WsError>>),
            Job(Option<Job>),
            Silence,
            Grace,
        }
        let silence = self.timeouts().silence;
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return StepEnd::Lost("no socket".into());
            };
            let silent_at = step.last_heard + silence;
            let grace = step.grace;
            let ev = tokio::select! {
                biased;
                () = step.events.closed() => Ev::Dropped,
                frame = conn.ws.next() => Ev::Frame(frame),
                // The person may speak while the model answers (barge-in).
                job = self.jobs.recv(), if !self.jobs_closed => Ev::Job(job),
                () = sleep_until(grace.unwrap_or(silent_at)), if grace.is_some() => Ev::Grace,
                () = sleep_until(silent_at) => Ev::Silence,
            };
            match ev {
                Ev::Dropped => {
                    self.on_dropped(step).await;
                    return StepEnd::Dropped;
                }
                Ev::Job(Some(Job::Voice(input))) => self.on_voice(input).await,
                Ev::Job(Some(job)) => self.deferred.push_back(job),
                Ev::Job(None) => self.jobs_closed = true,
                Ev::Silence => {
                    self.close_connection();
                    return StepEnd::Failed(ModelError::Transport(format!(
                        "Gemini Live sent nothing for {} s",
                        silence.as_secs_f32()
                    )));
                }
                Ev::Grace => {
                    tracing::info!(
                        session = %self.session_id,
                        "no turnComplete after a non-blocking tool call; ending the step"
                    );
                    if let Some(conn) = self.conn.as_mut() {
                        conn.stray_turn_complete = true;
                    }
                    self.finish(step, None);
                    return StepEnd::Finished;
                }
                Ev::Frame(frame) => {
                    step.last_heard = Instant::now();
                    match classify(frame) {
                        Incoming::Ignore => {}
                        Incoming::Broken(error) => {
                            self.close_connection();
                            return StepEnd::Failed(error);
                        }
                        Incoming::Closed { code, reason } => {
                            self.conn = None;
                            return match code {
                                Some(code) if !is_normal_close(code) => {
                                    if code != 1011 {
                                        // The session may be what the server objects to.
                                        self.reset("Gemini Live closed the socket with an error");
                                    }
                                    StepEnd::Failed(close_error(code, &reason))
                                }
                                _ => StepEnd::Lost(format!(
                                    "closed ({}{reason})",
                                    code.map(|c| format!("{c} ")).unwrap_or_default()
                                )),
                            };
                        }
                        Incoming::Message(message) => {
                            match self.on_step_message(step, *message).await {
                                Ok(true) => return StepEnd::Finished,
                                Ok(false) => {}
                                Err(reason) => return StepEnd::Lost(reason),
                            }
                        }
                    }
                }
            }
        }
    }

    /// One server message during a step. `Ok(true)` = the step ended; `Err` = the socket broke.
    pub(super) async fn on_step_message(
        &mut self,
        step: &mut Step,
        message: ServerMessage,
    ) -> Result<bool, String> {
        self.common(&message);
        if let Some(usage) = message.usage_metadata {
            step.usage = Some(usage);
        }
        if let Some(cancellation) = message.tool_call_cancellation {
            self.on_cancellation(step, cancellation);
        }
        if let Some(tool_call) = message.tool_call
            && self.on_tool_call(step, tool_call).await?
        {
            return Ok(true);
        }
        match message.server_content {
            Some(content) => self.on_server_content(step, content),
            None => Ok(false),
        }
    }

    /// Calls the server cancelled: those of this step are dropped; the others are remembered,
    /// for a call that arrives after its cancellation.
    fn on_cancellation(&mut self, step: &mut Step, cancellation: Cancellation) {
        let mut later = Vec::new();
        for id in cancellation.ids {
            let before = step.calls.len();
            step.calls
                .retain(|(live, _)| live.as_deref() != Some(id.as_str()));
            if step.calls.len() < before {
                tracing::info!(
                    session = %self.session_id, call = %id,
                    "Gemini Live cancelled a tool call before the step ended; dropped"
                );
                if let Some(conn) = self.conn.as_mut() {
                    conn.issued.remove(&id);
                }
            } else {
                later.push(id);
            }
        }
        self.remember_cancelled(later);
    }

    /// The model's tool calls: refused in an aside, answered as strays in a discarded
    /// generation, else the step's calls. `Ok(true)` = the step ended (blocking tools).
    async fn on_tool_call(
        &mut self,
        step: &mut Step,
        tool_call: ToolCallMessage,
    ) -> Result<bool, String> {
        let behavior = self.shared.behavior;
        let discarding = self.conn.as_ref().is_some_and(|c| c.discard > 0);
        if step.aside && !discarding {
            self.refuse_aside_calls(tool_call.function_calls).await?;
            return Ok(false);
        }
        if discarding {
            self.answer_stray_calls(
                tool_call.function_calls,
                "belongs to a discarded generation",
            )
            .await?;
            return Ok(false);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err("no socket".into());
        };
        for call in tool_call.function_calls {
            if let Some(id) = &call.id {
                if self.cancelled.remove(id) {
                    continue;
                }
                conn.issued.insert(id.clone(), call.name.clone());
            }
            let live_id = call.id.clone();
            step.calls.push((
                live_id.clone(),
                ToolCall {
                    id: String::new(),
                    name: call.name,
                    args: call.args.unwrap_or_else(|| json!({})),
                    provider_data: live_id.map(|id| json!({ NAMESPACE: { "id": id } })),
                },
            ));
        }
        conn.stray_turn_complete = false;
        match behavior {
            ToolBehavior::Blocking => {
                conn.stray_turn_complete = true;
                self.finish(step, None);
                return Ok(true);
            }
            ToolBehavior::NonBlocking => {
                if step.grace.is_none() {
                    step.grace = Some(Instant::now() + self.timeouts().tool_turn_grace);
                }
            }
        }
        Ok(false)
    }

    /// The model's answer (speech, thoughts, text, its transcript) and the generation's end
    /// (interrupted, or complete). `Ok(true)` = the step ended.
    fn on_server_content(
        &mut self,
        step: &mut Step,
        content: ServerContent,
    ) -> Result<bool, String> {
        let Some(conn) = self.conn.as_mut() else {
            return Err("no socket".into());
        };
        if !triage(conn, &content) {
            return Ok(false);
        }
        for pcm in content.speech() {
            step.emit(ModelEvent::Audio(pcm.into()));
        }
        if let Some(text) = content.heard()
            && self.voice.spoke()
        {
            // Speech over the answer (barge-in): what the next spoken turn heard.
            self.voice.note_heard(text);
        }
        if let Some(turn) = content.model_turn {
            for part in turn.parts {
                let text = part.text.unwrap_or_default();
                if part.thought == Some(true) {
                    if !text.is_empty() {
                        step.emit(ModelEvent::ReasoningDelta {
                            text,
                            provider_data: None,
                        });
                    }
                } else if !text.is_empty() {
                    step.model_text.push_str(&text);
                } else if part.function_call.is_some() {
                    tracing::debug!(
                        session = %self.session_id,
                        "ignoring a functionCall part in modelTurn (Live sends calls as toolCall)"
                    );
                }
            }
        }
        if let Some(text) = content.output_transcription.and_then(|t| t.text)
            && !text.is_empty()
        {
            step.saw_transcript = true;
            step.emit(ModelEvent::TextDelta(text));
        }
        if content.interrupted {
            conn.stray_turn_complete = !content.turn_complete;
            self.voice.spoken_over();
            step.emit(ModelEvent::Interrupted);
            self.finish(step, Some(FinishReason::Other));
            return Ok(true);
        }
        if content.turn_complete {
            let reason = content
                .turn_complete_reason
                .as_deref()
                .map(map_turn_complete_reason)
                .unwrap_or(FinishReason::Stop);
            self.finish(step, Some(reason));
            return Ok(true);
        }
        Ok(false)
    }

    /// Emits the held-back text, the calls and `Finish`, and records the model's turn.
    fn finish(&mut self, step: &mut Step, reason: Option<FinishReason>) {
        if !step.saw_transcript && !step.model_text.is_empty() {
            let text = std::mem::take(&mut step.model_text);
            step.emit(ModelEvent::TextDelta(text));
        }
        let calls = std::mem::take(&mut step.calls);
        let live: Vec<String> = calls.iter().filter_map(|(id, _)| id.clone()).collect();
        let reason = if calls.is_empty() {
            reason.unwrap_or(FinishReason::Stop)
        } else {
            FinishReason::ToolCalls
        };
        for (_, call) in calls {
            step.emit(ModelEvent::ToolCall(call));
        }
        step.emit(ModelEvent::Finish {
            reason,
            usage: step.usage.map(usage).unwrap_or_default(),
        });
        if !step.aside {
            self.synced.model_step(live);
        }
    }

    /// The runner dropped the stream mid-step.
    async fn on_dropped(&mut self, step: &mut Step) {
        tracing::debug!(
            session = %self.session_id,
            "Gemini Live step cancelled; discarding the rest of its generation"
        );
        let calls: Vec<gemini::FunctionCall> = std::mem::take(&mut step.calls)
            .into_iter()
            .map(|(id, call)| gemini::FunctionCall {
                id,
                name: call.name,
                args: Some(call.args),
            })
            .collect();
        if let Some(conn) = self.conn.as_mut()
            && step.input_sent
        {
            conn.discard += 1;
        }
        if !calls.is_empty()
            && let Err(reason) = self
                .answer_stray_calls(calls, "its step was cancelled")
                .await
        {
            tracing::debug!(session = %self.session_id, %reason, "the Gemini Live socket broke");
            self.conn = None;
        }
        if step.input_sent && !step.aside {
            self.synced.model_step(Vec::new());
        }
    }
}
