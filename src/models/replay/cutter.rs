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
    pub(super) steps: Vec<StepDraft>,
    open: Option<StepDraft>,
    /// The reason of the turn's last `finish`.
    pub(super) finish: Option<FinishReason>,
}

#[derive(Default)]
struct StepDraft {
    pub(super) events: Vec<ModelEvent>,
    pub(super) calls: usize,
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
            Chunk::StartStep => {
                let turn = self.current.get_or_insert_with(TurnDraft::default);
                if let Some(step) = turn.open.take() {
                    turn.steps.push(step);
                }
                turn.open = Some(StepDraft::default());
            }
            Chunk::FinishStep => {
                if let Some(turn) = self.current.as_mut()
                    && let Some(step) = turn.open.take()
                {
                    turn.steps.push(step);
                }
            }
            Chunk::Finish(finish) => {
                if let Some(turn) = self.current.as_mut() {
                    turn.finish = finish.finish_reason;
                }
            }
            Chunk::TextDelta(delta) => self.step_event(ModelEvent::TextDelta(delta.delta), false),
            Chunk::ReasoningDelta(delta) => self.step_event(
                ModelEvent::ReasoningDelta {
                    text: delta.delta,
                    provider_data: None,
                },
                false,
            ),
            Chunk::ToolInputAvailable(input) => {
                self.step_event(call(input.tool_name, input.input), true);
            }
            Chunk::ToolInputError(input) => {
                self.step_event(call(input.tool_name, input.input), true);
            }
            _ => {}
        }
    }

    /// Adds an event to the open step; outside a step it is not the model's and is dropped.
    fn step_event(&mut self, event: ModelEvent, is_call: bool) {
        if let Some(step) = self.current.as_mut().and_then(|t| t.open.as_mut()) {
            step.events.push(event);
            if is_call {
                step.calls += 1;
            }
        }
    }

    fn close_turn(&mut self) {
        let Some(mut turn) = self.current.take() else {
            return;
        };
        if let Some(step) = turn.open.take() {
            turn.steps.push(step);
        }
        let last = turn.steps.len().saturating_sub(1);
        let steps = turn
            .steps
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

pub(super) fn call(name: String, args: Value) -> ModelEvent {
    ModelEvent::ToolCall(ToolCall {
        id: String::new(),
        name,
        args,
        provider_data: None,
    })
}
