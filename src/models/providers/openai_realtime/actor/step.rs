//! One step on the socket: bring the server's conversation up to the request's history, ask for
//! a response (or take the spoken answer already under way), and read it to its
//! `response.done` (see the module docs of [`super::super`]).

use tokio::time::{Instant, sleep_until};

use super::heard::Heard;
use super::voice::HeldAnswer;
use super::{Ask, Incoming, SessionActor, classify, next_frame, send};
use crate::agent::history::ToolCall;
use crate::agent::model::{ModelError, ModelEvent, Usage};
use crate::agent::voice::{VoiceInput, VoiceMode};
use crate::models::providers::openai_realtime::wire::{
    self, Ending, ResponseBody, ServerEvent, SessionSpec, arguments, decode_audio, provider_data,
};
use crate::models::providers::openai_realtime::{EventSender, Job, StepJob};
use crate::protocol::FinishReason;

/// A step being read.
pub(super) struct Step {
    events: EventSender,
    /// The response this step reads (from its `response.created`).
    response: Option<String>,
    /// Calls made so far, handed to the runner at `response.done`: (Realtime id, call).
    calls: Vec<(String, ToolCall)>,
    /// When the step ends with its calls if `response.done` has not come.
    grace: Option<Instant>,
    /// `Interrupted` was emitted.
    interrupted: bool,
    /// What of the step's speech went to the person, and when.
    heard: Heard,
    /// The step has said or played something.
    spoke: bool,
    last_heard: Instant,
    /// An aside of a waiting turn ([`crate::agent::model::Model::aside`]): it makes no calls
    /// and adds nothing to what the server's conversation is known to have seen.
    aside: bool,
}

/// What the model is told of a call it made in an aside (ADR 0035): the aside runs nothing.
const ASIDE_CALL: &str = "This call was not run: it was asked for while another call waits for \
                          its countersignature, and nothing new runs until that one is decided. \
                          Do not say it was done; tell the person to ask again once the waiting \
                          call is decided.";

/// How reading a step ended.
enum StepEnd {
    Done,
    Failed(ModelError),
    /// The runner dropped the stream.
    Dropped,
}

impl Step {
    /// A step (or, `aside`, an aside) that has read nothing yet.
    fn new(events: EventSender, aside: bool) -> Self {
        Step {
            events,
            response: None,
            calls: Vec::new(),
            grace: None,
            interrupted: false,
            heard: Heard::default(),
            spoke: false,
            last_heard: Instant::now(),
            aside,
        }
    }

    fn emit(&mut self, event: ModelEvent) -> bool {
        self.events.send(Ok(event)).is_ok()
    }
}

impl SessionActor {
    pub(in crate::models::providers::openai_realtime) async fn run_step(&mut self, job: StepJob) {
        let StepJob { request, events } = job;
        let mut step = Step::new(events, false);
        self.in_step = true;
        let end = match self.begin(&request, &mut step).await {
            Ok(Some(end)) => end,
            Ok(None) => self.read_step(&mut step).await,
            Err(error) => StepEnd::Failed(error),
        };
        self.in_step = false;
        match end {
            StepEnd::Done => {}
            StepEnd::Failed(error) => {
                let _ = step.events.send(Err(error));
            }
            StepEnd::Dropped => self.on_dropped(&step).await,
        }
    }

    /// [`Model::aside`]: the answer held for the speech last announced streams to `events` as
    /// an aside of the turn that waits for the person, not as a step: nothing is sent (the
    /// server heard the speech and is answering it), nothing is added to what the server's
    /// conversation is known to have seen (the waiting call's output still goes on its id,
    /// after the decision), and a call the model makes in it gets at once an output saying it
    /// was not run. A closed `events` (the runtime declined the answer) discards it.
    ///
    /// [`Model::aside`]: crate::agent::model::Model::aside
    pub(in crate::models::providers::openai_realtime) async fn run_aside(
        &mut self,
        events: EventSender,
    ) {
        // The tail of a grace-ended step is announced as soon as its step ends, before any
        // speech of the person's can be answered: it is taken first.
        let held = match self.take_tail() {
            Some((tail, response, done)) => HeldAnswer {
                events: tail,
                response: Some(response),
                done,
            },
            None => match self.take_spoken() {
                Some(held) => held,
                None => return,
            },
        };
        let mut step = Step::new(events, true);
        // The response is known (a tail's `response.created` was read by its step; an
        // utterance's may have come before anything asked for it).
        step.response = held.response.clone();
        if step.events.is_closed() {
            self.drop_answer(held);
            return;
        }
        self.in_step = true;
        let mut end = None;
        for event in held.events {
            if let Some(ended) = self.on_step_event(&mut step, event).await {
                end = Some(ended);
                break;
            }
        }
        let end = match end {
            Some(end) => end,
            None => self.read_step(&mut step).await,
        };
        self.in_step = false;
        match end {
            StepEnd::Done => {}
            StepEnd::Failed(error) => {
                let _ = step.events.send(Err(error));
            }
            StepEnd::Dropped => self.on_dropped(&step).await,
        }
    }

    /// Sends what the step needs (nothing for the spoken turn, whose answer is under way).
    /// `Some`: the step already ended in what was held.
    async fn begin(
        &mut self,
        request: &crate::agent::model::ModelRequest,
        step: &mut Step,
    ) -> Result<Option<StepEnd>, ModelError> {
        let spec = SessionSpec::new(request, self.voice.mode);
        if let Some(held) = self.attach_spoken(&request.history).await {
            // Its `response.created` is among what was held, or came before: the response is
            // known.
            step.response = held.response;
            for event in held.events {
                if let Some(end) = self.on_step_event(step, event).await {
                    return Ok(Some(end));
                }
            }
            return Ok(None);
        }
        self.reconcile(&request.history);
        self.ensure_connection(&spec).await?;
        let sent = self.send_tail(&request.history).await;
        let sent = match sent {
            Ok(()) => self.create_response(Ask::Step).await,
            Err(reason) => Err(reason),
        };
        if let Err(reason) = sent {
            self.reset(&reason);
            return Err(ModelError::Transport(reason));
        }
        Ok(None)
    }

    async fn read_step(&mut self, step: &mut Step) -> StepEnd {
        loop {
            let silence = step.last_heard + self.shared.config.timeouts.silence;
            let deadline = step.grace.map_or(silence, |grace| grace.min(silence));
            let events = step.events.clone();
            tokio::select! {
                frame = next_frame(&mut self.conn) => match classify(frame) {
                    Incoming::Event(event) => {
                        step.last_heard = Instant::now();
                        if let Err(reason) = self.observe(&event).await {
                            self.reset(&reason);
                            return StepEnd::Failed(ModelError::Transport(reason));
                        }
                        if let Some(end) = self.on_step_event(step, event).await {
                            return end;
                        }
                    }
                    Incoming::Closed(error) => {
                        self.conn = None;
                        self.synced.clear();
                        self.voice.socket_gone();
                        return StepEnd::Failed(error);
                    }
                    Incoming::Ignore => {}
                },
                job = self.jobs.recv() => match job {
                    Some(Job::Voice(input)) => self.voice_during_step(step, input).await,
                    Some(other) => self.queued.push_back(other),
                    None => return StepEnd::Dropped,
                },
                _ = sleep_until(deadline) => {
                    if step.grace.is_some_and(|grace| grace <= Instant::now()) {
                        self.end_with_calls_pending(step);
                        return StepEnd::Done;
                    }
                    self.reset("no answer in time");
                    return StepEnd::Failed(ModelError::Transport(format!(
                        "OpenAI Realtime sent nothing for {} s",
                        self.shared.config.timeouts.silence.as_secs()
                    )));
                }
                _ = events.closed() => return StepEnd::Dropped,
            }
        }
    }

    /// The person's voice while the model answers: a push-to-talk `start` cuts the answer off
    /// (`response.cancel`, barge-in); the speech itself goes to the server as usual.
    async fn voice_during_step(&mut self, step: &mut Step, input: VoiceInput) {
        if matches!(
            input,
            VoiceInput::Start {
                mode: VoiceMode::PushToTalk
            }
        ) && step.response.is_some()
        {
            if let Some(conn) = self.conn.as_mut()
                && let Err(reason) = send(conn, &wire::bare("response.cancel")).await
            {
                tracing::warn!(session = %self.session_id, %reason, "cannot cancel the answer");
            }
            self.interrupt(step).await;
        }
        self.on_voice(input).await;
    }

    /// The person spoke over the answer (or it was cancelled): the page stops playing it now,
    /// and the server is told what of its audio the person did not hear.
    async fn interrupt(&mut self, step: &mut Step) {
        if step.interrupted {
            return;
        }
        step.interrupted = true;
        step.emit(ModelEvent::Interrupted);
        self.truncate_unheard(step).await;
    }

    /// `conversation.item.truncate` for each item of the step's speech the person did not hear
    /// all of (ADR 0041): the server drops the rest of its audio and the item's transcript from
    /// its context, so the model does not take for said what was never heard.
    async fn truncate_unheard(&mut self, step: &Step) {
        let cuts = step.heard.cut_at(self.shared.clock.now_ms());
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        for cut in cuts {
            let serial = self
                .shared
                .serial
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let event = wire::truncate(serial, &cut.item_id, cut.content_index, cut.audio_end_ms);
            tracing::debug!(session = %self.session_id, item = %cut.item_id, audio_end_ms = cut.audio_end_ms, "OpenAI Realtime: the rest of the answer was not heard");
            if let Err(reason) = send(conn, &event).await {
                tracing::warn!(session = %self.session_id, %reason, "cannot truncate the answer");
                return;
            }
        }
    }

    /// One server event for this step; `Some` when the step ends.
    async fn on_step_event(&mut self, step: &mut Step, event: ServerEvent) -> Option<StepEnd> {
        if !Self::belongs_to(step, &event, self.voice.awaits_answer()) {
            // Another response (the answer to speech that began after this one).
            self.on_idle_event(event).await;
            return None;
        }
        match event {
            ServerEvent::Error { error } => return self.on_step_error(step, error),
            ServerEvent::SpeechStarted => {
                if step.response.is_some() && step.spoke {
                    // The server cancels its own response (`interrupt_response`).
                    self.interrupt(step).await;
                }
            }
            ServerEvent::AudioDelta {
                delta,
                item_id,
                content_index,
                ..
            } => return self.on_audio_delta(step, &delta, item_id, content_index),
            ServerEvent::TextDelta { delta, .. } => {
                step.spoke = true;
                if !step.emit(ModelEvent::TextDelta(delta)) {
                    return Some(StepEnd::Dropped);
                }
            }
            ServerEvent::CallDone {
                call_id,
                name,
                arguments: args,
                ..
            } => return self.on_call_done(step, call_id, name, &args).await,
            ServerEvent::AudioDone {
                item_id: Some(item),
                content_index,
                ..
            } => step.heard.complete(&item, content_index),
            ServerEvent::ResponseDone { response } => {
                self.settle_open_calls(&response);
                return Some(self.on_response_done(step, response).await);
            }
            ServerEvent::Committed { item_id } => self.voice.committed(item_id),
            ServerEvent::TranscriptionCompleted { .. }
            | ServerEvent::TranscriptionFailed { .. } => {
                self.on_idle_event(event).await;
            }
            ServerEvent::SessionCreated
            | ServerEvent::ResponseCreated { .. }
            | ServerEvent::AudioDone { item_id: None, .. }
            | ServerEvent::Other => {}
        }
        None
    }

    /// Whether `event` is about this step's response (the first `response.created` makes it
    /// the step's), or about no response at all.
    /// A `response.created` is the step's if our `response.create` asked it for a step; one the
    /// server started on its own (no `metadata` of ours) answers the person's speech, unless no
    /// utterance awaits an answer (`speech_waits`: false) — for a server that does not echo
    /// `metadata`.
    fn belongs_to(step: &mut Step, event: &ServerEvent, speech_waits: bool) -> bool {
        let Some(id) = event.response_id() else {
            return true;
        };
        match (&step.response, event) {
            (None, ServerEvent::ResponseCreated { response }) => {
                let ours = match response.asked_for() {
                    Some(whom) => whom == Ask::Step.tag(),
                    None => !speech_waits,
                };
                if ours {
                    step.response = Some(id.to_owned());
                }
                ours
            }
            (Some(mine), _) => mine == id,
            (None, _) => false,
        }
    }

    /// An `error` event during the step: a few are harmless; any other ends the step, and what
    /// is left of its response is discarded.
    fn on_step_error(&mut self, step: &mut Step, error: wire::ErrorBody) -> Option<StepEnd> {
        if error.code.as_deref() == Some("response_cancel_not_active") {
            return None;
        }
        if error.code.as_deref() == Some("conversation_already_has_active_response")
            && step.response.is_none()
            && let Some(conn) = self.conn.as_mut()
            && conn.active.is_some()
        {
            // The server started answering the person's speech just before our
            // `response.create` arrived: it is asked again when that answer ends.
            tracing::debug!(session = %self.session_id, active = ?conn.active, "OpenAI Realtime: the step's response.create waits for the answer to speech");
            conn.deferred_create = Some(Ask::Step);
            return None;
        }
        if error.about_truncation() {
            // The context keeps more than was heard; the answer itself is unharmed.
            tracing::warn!(session = %self.session_id, message = %error.message, "OpenAI Realtime did not truncate the answer");
            return None;
        }
        tracing::warn!(session = %self.session_id, code = ?error.code, message = %error.message, "OpenAI Realtime error");
        if let Some(conn) = self.conn.as_mut()
            && let Some(response) = step.response.take()
        {
            conn.discard.insert(response);
        }
        Some(StepEnd::Failed(error.into_model_error()))
    }

    /// Audio of the answer: relayed, and (unless after a barge-in, which the page mutes) counted
    /// as played, for what a later barge-in truncates.
    fn on_audio_delta(
        &mut self,
        step: &mut Step,
        delta: &str,
        item_id: Option<String>,
        content_index: u32,
    ) -> Option<StepEnd> {
        match decode_audio(delta) {
            Ok(pcm) if !pcm.is_empty() => {
                step.spoke = true;
                let bytes = pcm.len();
                if !step.emit(ModelEvent::Audio(pcm.into())) {
                    return Some(StepEnd::Dropped);
                }
                if let (Some(item), false) = (item_id, step.interrupted) {
                    let now = self.shared.clock.now_ms();
                    step.heard.forwarded(&item, content_index, bytes, now);
                }
                None
            }
            Ok(_) => None,
            Err(error) => Some(StepEnd::Failed(error)),
        }
    }

    /// A function call the model finished: kept for the step's end (and its grace period
    /// started), or, in an aside, answered at once as not run.
    async fn on_call_done(
        &mut self,
        step: &mut Step,
        call_id: String,
        name: String,
        args: &str,
    ) -> Option<StepEnd> {
        let args = match arguments(args) {
            Ok(args) => args,
            Err(error) => return Some(StepEnd::Failed(error)),
        };
        if step.aside {
            tracing::info!(session = %self.session_id, tool = %name, "a call asked for in an aside is answered as not run");
            let refused = wire::refused_output(&call_id, ASIDE_CALL);
            if let Some(conn) = self.conn.as_mut()
                && let Err(reason) = send(conn, &refused).await
            {
                self.reset(&reason);
                return Some(StepEnd::Failed(ModelError::Transport(reason)));
            }
            return None;
        }
        step.grace
            .get_or_insert(Instant::now() + self.shared.config.timeouts.tool_turn_grace);
        let call = ToolCall {
            id: String::new(),
            name,
            args,
            provider_data: Some(provider_data(&call_id)),
        };
        step.calls.push((call_id, call));
        None
    }

    /// The step's response ended: its calls and `Finish`, or nothing of its calls if it was
    /// cancelled (barge-in), or its error.
    async fn on_response_done(&mut self, step: &mut Step, response: ResponseBody) -> StepEnd {
        let usage = response.usage.map(Usage::from).unwrap_or_default();
        match response.ending() {
            Ending::Finished(reason) => {
                let reason = if step.calls.is_empty() {
                    reason
                } else {
                    FinishReason::ToolCalls
                };
                self.hand_over_calls(step);
                step.emit(ModelEvent::Finish { reason, usage });
            }
            Ending::Cancelled => {
                // The calls go with their response: the runner never sees them.
                step.calls.clear();
                self.interrupt(step).await;
                if !step.aside {
                    self.synced.model_step(Vec::new());
                }
                step.emit(ModelEvent::Finish {
                    reason: FinishReason::Other,
                    usage,
                });
            }
            Ending::Failed(error) => return StepEnd::Failed(error),
        }
        StepEnd::Done
    }

    /// Emits the step's calls and records what the model did.
    fn hand_over_calls(&mut self, step: &mut Step) {
        let calls: Vec<(String, ToolCall)> = std::mem::take(&mut step.calls);
        let mut ids = Vec::with_capacity(calls.len());
        for (id, call) in calls {
            if let Some(conn) = self.conn.as_mut() {
                conn.issued.insert(id.clone(), call.name.clone());
            }
            ids.push(id);
            step.emit(ModelEvent::ToolCall(call));
        }
        if !step.aside {
            self.synced.model_step(ids);
        }
    }

    /// The grace after a call passed without `response.done`: the step ends with its calls and
    /// the response's end is watched (a cancellation withdraws them).
    fn end_with_calls_pending(&mut self, step: &mut Step) {
        let ids: Vec<String> = step.calls.iter().map(|(id, _)| id.clone()).collect();
        if let (Some(conn), Some(response)) = (self.conn.as_mut(), step.response.clone()) {
            conn.open_calls.insert(response.clone(), ids);
            // What it still says goes to the person as an aside of the waiting turn.
            conn.tail = Some(super::Tail {
                response,
                held: Vec::new(),
                announced: false,
                done: false,
            });
        }
        self.hand_over_calls(step);
        step.emit(ModelEvent::Finish {
            reason: FinishReason::ToolCalls,
            usage: Usage::default(),
        });
    }

    /// The runner dropped the stream (cancelled the turn): the response is cancelled and its
    /// rest ignored.
    async fn on_dropped(&mut self, step: &Step) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if let Some(response) = &step.response {
            conn.discard.insert(response.clone());
            if let Err(reason) = send(conn, &wire::bare("response.cancel")).await {
                self.reset(&reason);
            }
        }
    }
}
