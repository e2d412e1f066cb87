//! The turn loop: model step → tool calls → approval gate → execution → results back to the
//! model → … until the model answers without calling a tool ([`TurnDriver`]). The runtime
//! ([`super::runtime`]) starts, parks and revives it; this module is what runs in between.
//!
//! This file holds the driver and its loop; `step` reads one model step, `calls` resolves the
//! calls of a step (phase A), `emit` ends, pauses and parks the turn, `output` puts every chunk
//! where it goes, `audit` builds the audit events, `plan` is what the runtime makes a driver
//! from. Outside this module a driver is made ([`TurnDriver::new`]) and spawned, nothing more.

mod aside;
mod audit;
mod calls;
mod commits;
mod countersign;
mod emit;
mod output;
mod payments;
mod plan;
mod relay;
mod step;
mod voice;
pub(crate) use aside::Aside;
pub(crate) use plan::TurnPlan;

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::Value;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    Transport,
    gate::StepCall,
    history::{AssistantPart, HistoryItem},
    model::{CallSubscription, ModelStream},
    questions::QuestionEvent,
    session::{Parked, Session, TurnStatus},
};
use crate::protocol::{Chunk, FinishReason};

use super::runtime::{Runtime, TextTiming};

pub(crate) use audit::{audit_event, executed_event};
use commits::TurnCommits;
use output::TurnOutput;

/// The interrupt reason of a turn that waited for the person when they sent a new message: its
/// waiting calls end as superseded rather than interrupted.
pub(crate) const SUPERSEDED_BY_MESSAGE: &str = "superseded by a new message";

/// How a phase of the loop ended.
enum Flow {
    Continue,
    Interrupted,
    /// The turn waits for the person and has no task any more (ADR 0010).
    Parked,
    /// Another instance committed the chat first: see [`TurnDriver::end_overtaken`].
    Overtaken,
}

/// Where a driver enters its turn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DriveFrom {
    /// A new turn, or one picked up after a restart: a new log that begins with `start`.
    Start,
    /// A parked turn (unparked): its log goes on where it paused.
    Pause(Parked),
}

/// The running turn: drives the model and the calls; what it emits goes through its output.
pub(crate) struct TurnDriver {
    rt: Arc<Runtime>,
    session: Arc<Session>,
    /// Where every chunk goes: the message, the chunk log, the turn's log, other instances.
    output: TurnOutput,
    cancel: CancellationToken,
    interrupt_reason: Arc<Mutex<Option<String>>>,
    timing: TextTiming,
    /// `sse` / `bidi`: which model answers, what the client is told.
    transport: Transport,
    turn_id: String,
    /// What the turn has to commit, and whether it still can.
    commits: TurnCommits,
    /// Notices from the model about calls of earlier steps (Gemini Live withdraws calls).
    notices: Option<CallSubscription>,
    /// The `data-question` parts running tools send (questions to the person, open and closed).
    questions: QuestionParts,
    /// "Ask again": an earlier call put before the person again, as the turn's first step.
    reissue: Option<super::history::ToolCall>,
    /// A spoken turn's `data-voice` `heard` chunk, sent before its message starts.
    heard: Option<Chunk>,
    /// The agent's speech in the message streaming now (voice models).
    speech: voice::Speech,
}

/// The channel running tools tell their questions on; the turn emits the parts and records the
/// audit events.
struct QuestionParts {
    tx: tokio::sync::mpsc::UnboundedSender<QuestionEvent>,
    rx: tokio::sync::mpsc::UnboundedReceiver<QuestionEvent>,
}

impl QuestionParts {
    fn new() -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        QuestionParts { tx, rx }
    }
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
    pub(crate) fn spawn(mut self, from: DriveFrom) -> tokio::task::JoinHandle<()> {
        if self.rt.store.shared() {
            // Other instances' readers follow what it logs (ADR 0043).
            self.output.relay(self.rt.clone(), self.turn_id.clone());
        }
        // One span per drive of the turn (a resumed turn is a new one): what an OpenTelemetry
        // export shows as the turn, with its tool calls, answers and commits inside (ADR 0033).
        let span = tracing::info_span!(
            "turn",
            chat = %self.session.id,
            turn = %self.turn_id,
            transport = ?self.transport,
            resumed = matches!(from, DriveFrom::Pause(_)),
        );
        tokio::spawn(
            async move {
                let runtime = self.rt.clone();
                let chat = self.session.id.clone();
                if self.run(from).await {
                    runtime.release_parked(&chat);
                }
            }
            .instrument(span),
        )
    }

    /// Drives the turn until it ends (false) or parks (true).
    async fn run(mut self, from: DriveFrom) -> bool {
        let mut paused_at = match from {
            DriveFrom::Start => {
                if self.begin().await.is_break() {
                    return false;
                }
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
                Flow::Overtaken => {
                    self.end_overtaken().await;
                    return false;
                }
            }
            self.commit_results();
            // What calls that ended without running reserved goes back.
            self.rt.policy().flush(self.rt.clock.now_ms()).await;

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
            if self.model_step().await.is_break() {
                return false;
            }
        }
    }

    /// Opens a new turn's log (the spoken words it answers, then its message's `start`) and
    /// puts an "ask again" call before the person. Breaks, the turn ended, when another
    /// instance committed the chat first.
    async fn begin(&mut self) -> ControlFlow<()> {
        if let Some(heard) = self.heard.take() {
            // Transient, before the assistant message: the reply's reducer never sees it.
            self.push(crate::agent::session::TurnEntry::Chunk(heard));
        }
        self.emit(Chunk::start(self.output.message_id().to_owned()));
        if self.rt.store.shared() {
            // On a shared database the turn is on disk as running, here, before it does
            // anything (ADR 0025): other instances follow it rather than start another.
            self.save().await;
            if self.commits.overtaken() {
                self.end_overtaken().await;
                return ControlFlow::Break(());
            }
        }
        if let Some(call) = self.reissue.take() {
            self.reissue_call(call).await;
        }
        ControlFlow::Continue(())
    }

    /// Phase B, one model step: the model reads the chat's history and streams its answer. A
    /// step that called tools goes on to phase A (the gate decided its calls); any other step
    /// ended the turn (finished, failed or interrupted): it breaks.
    async fn model_step(&mut self) -> ControlFlow<()> {
        self.set_status(TurnStatus::Running);
        self.emit(Chunk::start_step());
        let Some((session_id, mut history)) = self.step_history().await else {
            return ControlFlow::Break(());
        };
        let model = self.rt.models().answering(self.transport).clone();
        if model.reads_attachments() {
            self.rt
                .attachments()
                .inline(&session_id, &mut history)
                .await;
        }
        let stream = model.stream(self.rt.models().request(&session_id, history));
        let Some((mut step, failure)) = self.read_step(stream).await else {
            return ControlFlow::Break(());
        };
        self.close_blocks(&mut step);
        self.with_turn(|t| t.steps += 1);
        self.end_step(step, failure).await
    }

    /// The history the model reads, as it is, shared, not copied (ADR 0038); the request is
    /// gone (with the stream) before the step's entries are added to it. A history read from
    /// the store is decoded here, once (ADR 0045): one that does not decode fails the turn
    /// (`None`).
    async fn step_history(&mut self) -> Option<(String, Arc<Vec<HistoryItem>>)> {
        // A chat an answer loaded with its head only reads the rest of its entries now, after
        // the answer's consequences went out (ADR 0045, amendment).
        if let Err(e) = self.rt.read_entries(&self.session).await {
            tracing::error!(session = %self.session.id, error = %e.report(), "cannot read the chat's stored entries");
            if e.is_conflict() {
                // Another instance committed the chat first: this copy is out of date.
                self.end_overtaken().await;
            } else {
                self.emit(Chunk::finish_step());
                self.fail("this chat's stored history cannot be read".into())
                    .await;
            }
            return None;
        }
        let read = {
            let mut state = self.session.state();
            let record = &mut state.record;
            record.history.shared().map(|h| (record.id.clone(), h))
        };
        match read {
            Ok(read) => Some(read),
            Err(e) => {
                tracing::error!(session = %self.session.id, error = %e, "the chat's stored history does not decode");
                self.emit(Chunk::finish_step());
                self.fail("this chat's stored history cannot be read".into())
                    .await;
                None
            }
        }
    }

    /// Reads the model's stream to the end of its step: what the step produced, and the error
    /// the stream ended with, if any. `None` when the turn was interrupted meanwhile (it is
    /// ended, with what the step had produced).
    async fn read_step(&mut self, mut stream: ModelStream) -> Option<(StepOutput, Option<String>)> {
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
                    return None;
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
        Some((step, failure))
    }

    /// Ends a model step: one that failed (`failure`) or called no tool ends the turn (break);
    /// one that called tools goes on.
    async fn end_step(&mut self, mut step: StepOutput, failure: Option<String>) -> ControlFlow<()> {
        if let Some(message) = failure {
            self.record_step(&mut step);
            self.fail_calls(&mut step, &message);
            self.flush_held_text();
            self.emit(Chunk::finish_step());
            self.fail(message).await;
            return ControlFlow::Break(());
        }

        if step.calls.is_empty() {
            self.record_step(&mut step);
            self.flush_held_text();
            self.emit(Chunk::finish_step());
            let reason = step.finish.unwrap_or(FinishReason::Stop);
            self.finish(reason, TurnStatus::Finished).await;
            return ControlFlow::Break(());
        }

        // The step called tools. In hold mode its text stays in `held_text` until the final
        // response (end_text put it there); in progressive mode it was already streamed.
        self.end_step_with_calls(&mut step).await;
        ControlFlow::Continue(())
    }

    /// Ends a step that called tools: it goes into the history, the gate decides its calls,
    /// and they become the turn's (before any of them is announced: [`Self::gate_calls`]).
    async fn end_step_with_calls(&mut self, step: &mut StepOutput) {
        self.record_step(step);
        self.gate_calls(step).await;
        self.emit(Chunk::finish_step());
        self.sync_messages();
    }
}

impl TurnDriver {
    /// "Ask again": the call, with a new id, as a step of the turn's own (no model spoke): its
    /// input, then the gate decides it as any call (it asks, or a rule or grant decides now).
    async fn reissue_call(&mut self, mut call: super::history::ToolCall) {
        // A provider's data belonged to the step that made the call (Gemini signs each step).
        call.provider_data = None;
        self.emit(Chunk::start_step());
        let mut step = StepOutput::default();
        self.accept_call(&mut step, call);
        self.end_step_with_calls(&mut step).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{
        gate::CallPhase,
        history::HistoryItem,
        model::{Model, ModelEvent, ModelRequest, Usage},
        runtime::{RuntimeSettings, UserTurn},
        session::TurnEntry,
        tools::ToolRegistry,
    };
    use serde_json::json;

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
                    ask_again: None,
                },
                None,
            )
            .await
            .unwrap();
        let mut reader = started.log.subscribe(0);
        while reader.next().await.is_some() {}
        let record = runtime.session("c").await.unwrap().snapshot();
        assert_eq!(
            record.history.to_vec().unwrap()[1],
            HistoryItem::Assistant {
                parts: vec![AssistantPart::Text {
                    text: "Take the train.".into(),
                    provider_data: Some(signature),
                }]
            }
        );
    }

    /// The chat's session in memory, for a test model that holds its runtime weakly.
    fn live_session(
        runtime: &std::sync::OnceLock<std::sync::Weak<Runtime>>,
        chat: &str,
    ) -> Option<Arc<crate::agent::Session>> {
        runtime
            .get()
            .and_then(std::sync::Weak::upgrade)
            .and_then(|runtime| runtime.live_session(chat))
    }

    /// A model that tells, for each step, whether the history it was handed is the chat's own
    /// list (the same allocation), and then answers with text.
    #[derive(Default)]
    struct Shares {
        runtime: std::sync::OnceLock<std::sync::Weak<Runtime>>,
        shared: std::sync::Mutex<Vec<bool>>,
    }

    impl Model for Arc<Shares> {
        fn label(&self) -> String {
            "shares".into()
        }

        fn stream(&self, request: ModelRequest) -> super::super::model::ModelStream {
            let record = live_session(&self.runtime, &request.session_id)
                .and_then(|session| session.state().record.history.shared().ok());
            let same = record.is_some_and(|list| Arc::ptr_eq(&list, &request.history));
            self.shared.lock().unwrap().push(same);
            futures::stream::iter([
                Ok(ModelEvent::TextDelta("Yes.".into())),
                Ok(ModelEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: Usage::default(),
                }),
            ])
            .boxed()
        }
    }

    #[tokio::test]
    async fn the_model_reads_the_chats_history_without_a_copy() {
        let model = Arc::new(Shares::default());
        let runtime = Runtime::new(
            Arc::new(model.clone()),
            ToolRegistry::default(),
            Arc::new(super::super::clock::SystemClock),
            Arc::new(super::super::clock::SequentialIds::default()),
            Arc::new(super::super::store::MemoryStore::default()),
            RuntimeSettings::default(),
        );
        model.runtime.set(Arc::downgrade(&runtime)).unwrap();
        for text in ["One?", "Two?"] {
            let started = runtime
                .start_turn(
                    "c",
                    UserTurn {
                        message_id: None,
                        text: text.into(),
                        attachments: Vec::new(),
                        transport: Transport::Sse,
                        ask_again: None,
                    },
                    None,
                )
                .await
                .unwrap();
            let mut reader = started.log.subscribe(0);
            while reader.next().await.is_some() {}
        }
        assert_eq!(*model.shared.lock().unwrap(), [true, true]);
        let record = runtime.session("c").await.unwrap().snapshot();
        assert_eq!(record.history.len(), 4, "both questions and both answers");
    }

    /// A model that calls `process_payment` with `args` in its first step, then writes text.
    struct Pays(Value);

    impl Model for Pays {
        fn label(&self) -> String {
            "pays".into()
        }

        fn stream(&self, request: ModelRequest) -> super::super::model::ModelStream {
            let answered = matches!(
                request.history.last(),
                Some(HistoryItem::ToolResults { .. })
            );
            let events = if answered {
                vec![ModelEvent::TextDelta("Done.".into())]
            } else {
                vec![ModelEvent::ToolCall(super::super::history::ToolCall {
                    id: String::new(),
                    name: "process_payment".into(),
                    args: self.0.clone(),
                    provider_data: None,
                })]
            };
            let finish = ModelEvent::Finish {
                reason: if answered {
                    FinishReason::Stop
                } else {
                    FinishReason::ToolCalls
                },
                usage: Usage::default(),
            };
            futures::stream::iter(events.into_iter().chain([finish]).map(Ok)).boxed()
        }
    }

    /// [`Pays`] that also notes, when it is told a call waits for a countersignature (right
    /// after the card is shown), whether the chat's turn holds that call waiting for approval.
    #[derive(Default)]
    struct PaysAndLooks {
        runtime: std::sync::OnceLock<std::sync::Weak<Runtime>>,
        waiting_when_shown: std::sync::Mutex<Vec<bool>>,
    }

    impl Model for Arc<PaysAndLooks> {
        fn label(&self) -> String {
            "pays and looks".into()
        }

        fn stream(&self, request: ModelRequest) -> super::super::model::ModelStream {
            Pays(json!({"amount": 5, "recipient": "Bob"})).stream(request)
        }

        fn awaiting_approval(&self, session_id: &str, call: &super::super::history::ToolCall) {
            let waiting = live_session(&self.runtime, session_id).is_some_and(|session| {
                let state = session.state();
                state.record.turn.as_ref().is_some_and(|turn| {
                    turn.calls.iter().any(|c| {
                        c.call.id == call.id
                            && matches!(c.phase, CallPhase::AwaitingApproval { .. })
                    })
                })
            });
            self.waiting_when_shown.lock().unwrap().push(waiting);
        }
    }

    /// The moment a card is shown, its call is the turn's, waiting: an answer sent as soon as
    /// the card arrives (a fast client, an inbox on another instance) finds it. Before, the
    /// step's calls became the turn's only after they were announced, and such an answer was
    /// refused as an unknown approval.
    #[tokio::test]
    async fn a_card_is_shown_only_once_its_call_waits_in_the_turn() {
        let model = Arc::new(PaysAndLooks::default());
        let runtime = Runtime::new(
            Arc::new(model.clone()),
            ToolRegistry::standard(&Default::default()),
            Arc::new(super::super::clock::SystemClock),
            Arc::new(super::super::clock::SequentialIds::default()),
            Arc::new(super::super::store::MemoryStore::default()),
            RuntimeSettings::default(),
        );
        let _ = model.runtime.set(Arc::downgrade(&runtime));
        let started = runtime
            .start_turn(
                "c",
                UserTurn {
                    message_id: None,
                    text: "Pay Bob 5 dollars".into(),
                    attachments: Vec::new(),
                    transport: Transport::Sse,
                    ask_again: None,
                },
                None,
            )
            .await
            .unwrap();
        let mut reader = started.log.subscribe(0);
        loop {
            match reader.next().await {
                Some(TurnEntry::Chunk(Chunk::ToolApprovalRequest(_))) => break,
                Some(_) => {}
                None => panic!("no card"),
            }
        }
        assert_eq!(*model.waiting_when_shown.lock().unwrap(), [true]);
    }

    #[tokio::test]
    async fn a_model_cannot_slip_a_blocked_name_past_a_rule_in_another_form() {
        let policy = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/policy.cedar"
        ))
        .unwrap();
        for written in [
            " Mallory",
            "Mallory ",
            "\u{a0}Mallory",
            "Mallory\t",
            "\u{3000}Mallory\n",
        ] {
            let tools = ToolRegistry::standard(&Default::default());
            let facts = crate::agent::policy::ToolFacts::all(&tools);
            let runtime = Runtime::builder(
                Arc::new(Pays(json!({"amount": 5, "recipient": written}))),
                tools,
                Arc::new(super::super::clock::SystemClock),
                Arc::new(super::super::clock::SequentialIds::default()),
                Arc::new(super::super::store::MemoryStore::default()),
                RuntimeSettings::default(),
            )
            .policy(Arc::new(
                crate::agent::policy::Policy::from_text(&policy, &facts).unwrap(),
            ))
            .build();
            let started = runtime
                .start_turn(
                    "c",
                    UserTurn {
                        message_id: None,
                        text: "Pay her".into(),
                        attachments: Vec::new(),
                        transport: Transport::Sse,
                        ask_again: None,
                    },
                    None,
                )
                .await
                .unwrap();
            let mut reader = started.log.subscribe(0);
            while reader.next().await.is_some() {}
            let record = runtime.session("c").await.unwrap().snapshot();
            let history = record.history.to_vec().unwrap();
            let call = history
                .iter()
                .find_map(|item| match item {
                    HistoryItem::Assistant { parts } => parts.iter().find_map(|p| match p {
                        AssistantPart::ToolCall { call } => Some(call.clone()),
                        _ => None,
                    }),
                    _ => None,
                })
                .expect("the call");
            assert_eq!(call.args["recipient"], "Mallory", "{written:?}");
            let outcome = history
                .iter()
                .find_map(|item| match item {
                    HistoryItem::ToolResults { results } => Some(results[0].outcome.clone()),
                    _ => None,
                })
                .expect("a result");
            assert!(
                matches!(&outcome, super::super::history::Outcome::DeniedByRule { rule, .. } if rule == "blocked-recipients"),
                "{written:?}: {outcome:?}"
            );
            assert!(
                record.wallet.transactions.is_empty(),
                "{written:?}: nothing paid"
            );
        }
    }
}
