//! Person input applied to a session and not yet committed ([`Session::apply`](super::Session::apply)), and how it is
//! taken back when its commit fails ([`Session::undo`](super::Session::undo)).

use super::{Receipt, SessionRecord};
use crate::agent::{
    gate::{ApprovalResolution, CallPhase, GrantAsked, Signed, StepCall},
    history::ToolCall,
};

/// Person input applied to a session, not yet committed.
#[derive(Debug)]
pub struct AppliedInput {
    pub receipt: Receipt,
    /// The approvals the input answered, with how.
    pub resolutions: Vec<(String, ApprovalResolution)>,
    /// The grants the person asked for with their approvals.
    pub grants: Vec<GrantAsked>,
    /// Signatures given to approvals that need several people.
    pub signed: Vec<Signed>,
    /// Edits that made a waiting call a new proposal nobody has signed yet.
    pub proposed: Vec<crate::agent::gate::Proposed>,
    pub undo: Undo,
}

/// A call whose approval an answer not recorded had cleared, and which its turn ended (an
/// interrupt, a withdrawal) before the answer was taken back ([`Session::undo`](super::Session::undo)).
#[derive(Debug)]
pub struct EndedMeanwhile {
    pub turn_id: String,
    pub call: ToolCall,
    pub approval_id: String,
}

/// What [`Session::undo`](super::Session::undo) needs to take input back.
#[derive(Debug)]
pub struct Undo {
    /// The turn the input went to.
    pub(super) turn_id: String,
    pub(super) calls: Vec<StepCall>,
    pub(super) applied_calls: Vec<StepCall>,
    pub(super) inputs: u64,
    pub(super) resolved: Vec<(String, ApprovalResolution)>,
}

impl Undo {
    /// Takes the input back from `record` (chat `chat`'s), as [`Session::undo`](super::Session::undo) says.
    pub(super) fn take_back_from(
        self,
        chat: &str,
        record: &mut SessionRecord,
    ) -> Vec<EndedMeanwhile> {
        let SessionRecord {
            turn,
            resolved_approvals,
            ..
        } = record;
        // The input's turn, unless another one started since (then its calls are gone).
        let mut turn = turn.as_mut().filter(|t| t.id == self.turn_id);
        let mut ended = Vec::new();
        for (before, applied) in self.calls.into_iter().zip(&self.applied_calls) {
            if before == *applied {
                continue;
            }
            let current = turn
                .as_deref_mut()
                .and_then(|t| t.calls.iter_mut().find(|c| c.call.id == before.call.id));
            match current {
                Some(call) if call == applied => *call = before,
                current => {
                    tracing::info!(session = %chat, call = %before.call.id, "a call an unrecorded answer changed was changed again by its turn; the turn's change stands");
                    // Cleared by the input (the turn, seeing it so, recorded nothing of its
                    // approval when it ended it), then ended or gone from the turn with its
                    // step.
                    if let CallPhase::AwaitingApproval { approval_id, .. } = &before.phase
                        && !matches!(applied.phase, CallPhase::AwaitingApproval { .. })
                        && current.is_none_or(|c| c.is_done())
                    {
                        ended.push(EndedMeanwhile {
                            turn_id: self.turn_id.clone(),
                            call: before.call.clone(),
                            approval_id: approval_id.clone(),
                        });
                    }
                }
            }
        }
        if let Some(turn) = turn
            && turn.inputs == self.inputs + 1
        {
            turn.inputs = self.inputs;
        }
        for (id, resolution) in self.resolved {
            if resolved_approvals.get(&id) == Some(&resolution) {
                resolved_approvals.remove(&id);
            }
        }
        ended
    }
}
