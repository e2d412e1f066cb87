//! Chunks cut into turns and steps of model events (the module docs, "How it is cut up").

use super::*;

/// Cuts chunks into turns and steps (module docs, "How it is cut up").
#[derive(Default)]
pub(super) struct Cutter {
    pub(super) turns: Vec<Vec<Vec<ModelEvent>>>,
    current: Option<TurnDraft>,
}

#[derive(Default)]
struct TurnDraft {
    message_id: Option<String>,
    /// The turn's step markers, model events and tool results, in order: how they are cut
    /// into steps depends on the whole turn ([`TurnDraft::stepless`]).
    chunks: Vec<Chunk>,
    /// The reason of the turn's last `finish`.
    finish: Option<FinishReason>,
}

#[derive(Default)]
struct StepDraft {
    events: Vec<ModelEvent>,
    calls: usize,
}

/// What a chunk is to the cutter.
enum Kind {
    StartStep,
    FinishStep,
    /// Something the model said or asked for.
    Model,
    /// A tool's result: in a turn without step markers, what ends a step that made calls.
    Result,
    Other,
}

fn kind(chunk: &Chunk) -> Kind {
    match chunk {
        Chunk::StartStep => Kind::StartStep,
        Chunk::FinishStep => Kind::FinishStep,
        Chunk::TextDelta(_)
        | Chunk::ReasoningDelta(_)
        | Chunk::ToolInputAvailable(_)
        | Chunk::ToolInputError(_) => Kind::Model,
        Chunk::ToolOutputAvailable(_) | Chunk::ToolOutputError(_) | Chunk::ToolOutputDenied(_) => {
            Kind::Result
        }
        _ => Kind::Other,
    }
}

/// The original system's text block of what the person said (its `input_transcription`, which
/// it writes inside the assistant's message, as does our seed encoder on `/live`): the
/// person's words, never the model's.
fn is_input_text(block_id: &str) -> bool {
    block_id.ends_with("_input_text")
}

impl Cutter {
    pub(super) fn push(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Start(start) => {
                let continues = matches!(
                    (&self.current, &start.message_id),
                    (Some(turn), Some(id)) if turn.message_id.as_ref() == Some(id)
                );
                if !continues {
                    self.close_turn();
                    self.current = Some(TurnDraft {
                        message_id: start.message_id,
                        ..TurnDraft::default()
                    });
                }
            }
            Chunk::Finish(finish) => {
                if let Some(turn) = self.current.as_mut() {
                    turn.finish = finish.finish_reason;
                }
            }
            Chunk::TextDelta(delta) if is_input_text(&delta.id) => {}
            chunk => match kind(&chunk) {
                // A step before any `start` still opens a turn.
                Kind::StartStep => self
                    .current
                    .get_or_insert_with(TurnDraft::default)
                    .chunks
                    .push(chunk),
                // Outside any turn they are not the model's.
                Kind::FinishStep | Kind::Model | Kind::Result => {
                    if let Some(turn) = self.current.as_mut() {
                        turn.chunks.push(chunk);
                    }
                }
                Kind::Other => {}
            },
        }
    }

    fn close_turn(&mut self) {
        let Some(turn) = self.current.take() else {
            return;
        };
        let drafts = if turn.stepless() {
            implicit_steps(turn.chunks)
        } else {
            explicit_steps(turn.chunks)
        };
        let last = drafts.len().saturating_sub(1);
        let steps = drafts
            .into_iter()
            .enumerate()
            .map(|(index, mut step)| {
                let reason = if step.calls > 0 {
                    FinishReason::ToolCalls
                } else if index == last {
                    match &turn.finish {
                        None | Some(FinishReason::ToolCalls) => FinishReason::Stop,
                        Some(reason) => reason.clone(),
                    }
                } else {
                    FinishReason::Stop
                };
                step.events.push(ModelEvent::Finish {
                    reason,
                    usage: Usage::default(),
                });
                step.events
            })
            .collect();
        self.turns.push(steps);
    }

    pub(super) fn finish(mut self) -> Vec<Vec<Vec<ModelEvent>>> {
        self.close_turn();
        self.turns
    }
}

impl TurnDraft {
    /// The turn is in the original system's shape (ADR 0019): what the model said is outside
    /// any `start-step` … `finish-step`, and the only steps are its pauses for approval, which
    /// hold none of it. Our runtime's turns say everything inside steps.
    fn stepless(&self) -> bool {
        let (mut in_step, mut outside, mut inside) = (false, false, false);
        for chunk in &self.chunks {
            match kind(chunk) {
                Kind::StartStep => in_step = true,
                Kind::FinishStep => in_step = false,
                Kind::Model if in_step => inside = true,
                Kind::Model => outside = true,
                Kind::Result | Kind::Other => {}
            }
        }
        outside && !inside
    }
}

/// Steps as their markers say: `start-step` … `finish-step` (one left open by the next
/// `start-step` or the turn's end still counts); what is outside them is not the model's.
fn explicit_steps(chunks: Vec<Chunk>) -> Vec<StepDraft> {
    let mut steps = Vec::new();
    let mut open: Option<StepDraft> = None;
    for chunk in chunks {
        match kind(&chunk) {
            Kind::StartStep => steps.extend(open.replace(StepDraft::default())),
            Kind::FinishStep => steps.extend(open.take()),
            Kind::Model => {
                if let Some(step) = open.as_mut() {
                    step.add(chunk);
                }
            }
            Kind::Result | Kind::Other => {}
        }
    }
    steps.extend(open);
    steps
}

/// Steps of a turn without step markers: a step is what the model said up to the results of
/// the calls it made (the next model event after them opens the next step).
fn implicit_steps(chunks: Vec<Chunk>) -> Vec<StepDraft> {
    let mut steps = Vec::new();
    let mut open: Option<StepDraft> = None;
    for chunk in chunks {
        match kind(&chunk) {
            Kind::Model => open.get_or_insert_with(StepDraft::default).add(chunk),
            Kind::Result => {
                if open.as_ref().is_some_and(|step| step.calls > 0) {
                    steps.extend(open.take());
                }
            }
            Kind::StartStep | Kind::FinishStep | Kind::Other => {}
        }
    }
    steps.extend(open);
    steps
}

impl StepDraft {
    /// Adds a model chunk's event.
    fn add(&mut self, chunk: Chunk) {
        let event = match chunk {
            Chunk::TextDelta(delta) => ModelEvent::TextDelta(delta.delta),
            Chunk::ReasoningDelta(delta) => ModelEvent::ReasoningDelta {
                text: delta.delta,
                provider_data: None,
            },
            Chunk::ToolInputAvailable(input) => call(input.tool_name, input.input),
            Chunk::ToolInputError(input) => call(input.tool_name, input.input),
            _ => return,
        };
        if matches!(event, ModelEvent::ToolCall(_)) {
            self.calls += 1;
        }
        self.events.push(event);
    }
}

pub(super) fn call(name: String, args: Value) -> ModelEvent {
    ModelEvent::ToolCall(ToolCall {
        id: String::new(),
        name,
        args,
        provider_data: None,
    })
}
