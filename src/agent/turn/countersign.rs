//! The `data-countersign` parts of approvals that need several people (ADR 0024): the first when
//! the approval is asked, one each time its signatures change, and one when it ends — complete
//! (then, for AI SDK v7 clients, each signature as a `tool-approval-response`), denied, or ended
//! otherwise. A part replaces the one before it (same id: the approval's).

use crate::agent::{
    gate::{CallPhase, StepCall, countersign::is_complete},
    history::Outcome,
};
use crate::protocol::{
    Chunk,
    countersign::{PROGRESS_PART, Progress, ProgressState},
};

/// The part that says where `call`'s countersigning stands now.
pub(crate) fn progress_part(call: &StepCall, state: ProgressState) -> Option<Chunk> {
    let approval_id = call.gated_by.as_ref()?;
    let progress = Progress {
        approval_id: approval_id.clone(),
        tool_call_id: call.call.id.clone(),
        needs: call.needs(),
        signatures: call.signatures.clone(),
        state,
        denied_by: call.denied_by.clone(),
    };
    Some(Chunk::data_with_id(
        PROGRESS_PART,
        approval_id.clone(),
        progress.to_value(),
    ))
}

/// What `call`'s countersigning has to tell that was not told yet (marking it told): nothing
/// for a call whose approval is the chat's person's click.
pub(crate) fn news(call: &mut StepCall) -> Vec<Chunk> {
    let needs = call.needs();
    if needs.is_plain() || call.countersign_closed || call.gated_by.is_none() {
        return Vec::new();
    }
    let state = match &call.phase {
        CallPhase::AwaitingApproval { .. } => ProgressState::Waiting,
        _ if is_complete(&needs, &call.signatures) => ProgressState::Complete,
        CallPhase::Done {
            outcome: Outcome::Denied { .. },
            ..
        } => ProgressState::Denied,
        _ => ProgressState::Ended,
    };
    let shown = call.signatures.len() as u32;
    if state == ProgressState::Waiting {
        if shown == call.signatures_shown {
            return Vec::new();
        }
        call.signatures_shown = shown;
        return progress_part(call, state).into_iter().collect();
    }
    call.countersign_closed = true;
    call.signatures_shown = shown;
    let mut chunks: Vec<Chunk> = progress_part(call, state).into_iter().collect();
    if state == ProgressState::Complete
        && let Some(approval_id) = &call.gated_by
    {
        // AI SDK v7: the signatures, now that they suffice (a client shown the first as the
        // answer would have run the call early).
        for signature in &call.signatures {
            chunks.push(Chunk::tool_approval_response(
                approval_id.clone(),
                true,
                Some(format!("Approved by {}", signature.name)),
            ));
        }
    }
    chunks
}
