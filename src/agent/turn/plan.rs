//! The turn a driver drives ([`TurnPlan`]), and a driver made for it ([`TurnDriver::new`]).

use std::sync::Arc;

use super::{QuestionParts, TurnCommits, TurnDriver, TurnOutput};
use crate::agent::{
    Transport,
    history::ToolCall,
    runtime::{Runtime, TextTiming},
    session::{LiveTurn, Session, SessionRecord, TurnRecord},
};
use crate::protocol::{Chunk, MessageReducer};

/// The turn a driver drives: its ids, the reducer that mirrors its assistant message as the
/// client sees it, and how its output is written.
pub(crate) struct TurnPlan {
    pub(crate) turn_id: String,
    pub(crate) message_id: String,
    /// Mirrors the turn's assistant message as the client sees it.
    pub(crate) reducer: MessageReducer,
    /// The turn's text timing (`None`: the runtime's).
    pub(crate) timing: Option<TextTiming>,
    pub(crate) transport: Transport,
    /// A spoken turn's `data-voice` `heard` chunk (what the person said, as their message).
    pub(crate) heard: Option<Chunk>,
}

impl TurnPlan {
    /// The turn's id.
    pub(crate) fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// The plan of `record`'s turn `turn`, going on with its assistant message as the record
    /// has it (a new one if the record has none yet).
    pub(crate) fn continuing(record: &SessionRecord, turn: &TurnRecord) -> Self {
        // From the end: the turn's message is the last one, the only one decoded here.
        let found = record.messages.iter().rev().find_map(|m| match m {
            Ok(m) if m.id == turn.message_id => Some(Ok(m.into_owned())),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        });
        let reducer = match found {
            Some(Ok(message)) => MessageReducer::continuing(message),
            Some(Err(e)) => {
                tracing::error!(session = %record.id, error = %e, "the turn's stored message does not decode; it goes on in a new one");
                MessageReducer::new(turn.message_id.clone())
            }
            None => MessageReducer::new(turn.message_id.clone()),
        };
        TurnPlan {
            turn_id: turn.id.clone(),
            message_id: turn.message_id.clone(),
            reducer,
            timing: turn.timing,
            transport: turn.transport,
            heard: None,
        }
    }
}

impl TurnDriver {
    /// A driver for `turn` of `session`, writing its log as `plan` says; `reissue`: a call
    /// asked again, put before the person as the turn's first step.
    pub(crate) fn new(
        rt: &Arc<Runtime>,
        session: &Arc<Session>,
        turn: &LiveTurn,
        plan: TurnPlan,
        reissue: Option<ToolCall>,
    ) -> Self {
        let TurnPlan {
            turn_id,
            message_id: _,
            reducer,
            timing,
            transport,
            heard,
        } = plan;
        TurnDriver {
            rt: rt.clone(),
            session: session.clone(),
            output: TurnOutput::new(rt, session.id.clone(), turn.log.clone(), reducer, transport),
            cancel: turn.cancel.clone(),
            interrupt_reason: turn.interrupt_reason.clone(),
            timing: timing.unwrap_or(rt.settings.text_timing),
            transport,
            turn_id,
            commits: TurnCommits::default(),
            notices: rt.models().answering(transport).call_notices(&session.id),
            questions: QuestionParts::new(),
            reissue,
            heard,
            speech: Default::default(),
        }
    }
}
