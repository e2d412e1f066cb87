//! Whether an answer a client sends again merely repeats what the server holds (AI SDK clients
//! resend the whole conversation with every request): [`Gate::repeats`] and [`Gate::echo`].

use std::collections::BTreeMap;

use super::Gate;
use crate::agent::gate::{ApprovalDecision, ApprovalResolution, InputError, StepCall};

impl Gate<'_> {
    /// Whether an answer a client sends again merely repeats what the server already holds
    /// (AI SDK clients resend the conversation with every request): `Ok(true)`, nothing to do;
    /// `Ok(false)`, for the gate to judge; `Err`, it contradicts how the approval ended.
    ///
    /// * An approval no call waits for any more: [`Gate::echo`].
    /// * An approval of a call still waiting for others, by someone who signed it: their
    ///   signature.
    /// * The same edit, by the person who made it a new proposal they could not sign themselves,
    ///   without a passkey confirmation: their proposal.
    pub fn repeats(
        calls: Option<&[StepCall]>,
        resolved: &BTreeMap<String, ApprovalResolution>,
        approval_id: &str,
        decision: &ApprovalDecision,
        confirmed: bool,
        signer: &str,
    ) -> Result<bool, InputError> {
        let waiting = calls
            .into_iter()
            .flatten()
            .find(|c| c.approval_id() == Some(approval_id));
        let Some(call) = waiting else {
            return Gate::echo(resolved, approval_id, decision.approves());
        };
        if !decision.approves() {
            return Ok(false);
        }
        if call.signatures.iter().any(|s| s.person == signer) {
            return Ok(true);
        }
        let edit = match decision {
            ApprovalDecision::ApproveWithEdits { args } => Some(args),
            ApprovalDecision::ApproveAndGrant { args, .. } => args.as_ref(),
            _ => None,
        };
        Ok(!confirmed
            && call.proposed_by.as_deref() == Some(signer)
            && call.signed_args.is_some()
            && edit.is_some_and(|args| args == call.proposal()))
    }

    /// Whether an answer to approval `approval_id`, which no call waits for any more, merely
    /// repeats how it was resolved (`Ok(true)`: nothing to do), is for the gate to judge
    /// (`Ok(false)`: the id was never resolved here), or contradicts the resolution (`Err`).
    pub fn echo(
        resolved: &BTreeMap<String, ApprovalResolution>,
        approval_id: &str,
        approved: bool,
    ) -> Result<bool, InputError> {
        match resolved.get(approval_id) {
            None => Ok(false),
            Some(ApprovalResolution::Approved { .. }) if approved => Ok(true),
            Some(ApprovalResolution::Denied { .. } | ApprovalResolution::Dismissed { .. })
                if !approved =>
            {
                Ok(true)
            }
            Some(ApprovalResolution::Automatic { approved: was, .. }) if *was == approved => {
                Ok(true)
            }
            // The person approved; a rule refused it when the approval came in.
            Some(ApprovalResolution::DeniedByRule { .. }) if approved => Ok(true),
            Some(other) => Err(other.refusal(approval_id)),
        }
    }
}
