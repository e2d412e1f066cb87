//! The audit events of an answer: each approval answered, each signature that did not complete
//! its approval yet, each edit that made a call a new proposal, and the execution of a gated
//! browser tool whose result came in.

use crate::agent::{
    clock::Millis,
    gate::{ApprovalResolution, CallPhase, PersonInput, Proposed, Signed},
    session::Session,
    store::{Actor, AuditEvent, AuditKind},
    turn::{audit_event, executed_event},
};

/// The audit events of accepted person input: each approval answer, and the execution of a
/// gated browser tool whose result came in.
pub(super) fn answer_events(
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
            ApprovalResolution::Dismissed { .. } => AuditKind::Dismissed,
            ApprovalResolution::Superseded { .. } => AuditKind::Superseded,
            ApprovalResolution::Automatic { approved: true, .. } => AuditKind::Allowed,
            ApprovalResolution::Automatic {
                approved: false, ..
            } => AuditKind::Refused,
            ApprovalResolution::DeniedByRule { .. } => AuditKind::Refused,
        };
        let mut event = audit_event(kind, &record.id, &turn.id, &call.call, approval_id, now);
        event.actor = Some(actor.clone());
        match resolution {
            ApprovalResolution::Denied { reason, .. } => event.reason = reason.clone(),
            ApprovalResolution::DeniedByRule { rule, reason, .. } => {
                event.rule = Some(rule.clone());
                event.reason = Some(format!("approved, but refused by the rule: {reason}"));
            }
            _ => {}
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

/// The audit events of signatures given to approvals that need several people: each one that
/// did not complete its approval is `countersigned` (the one that did is the `approved` or
/// `edited` event of [`answer_events`]), saying how far it got.
pub(super) fn signature_events(
    session: &Session,
    signed: &[Signed],
    actor: &Actor,
    now: Millis,
) -> Vec<AuditEvent> {
    let state = session.state();
    let record = &state.record;
    let Some(turn) = record.turn.as_ref() else {
        return Vec::new();
    };
    let mut events = Vec::new();
    for signature in signed.iter().filter(|s| !s.complete) {
        let Some(call) = turn.call(&signature.tool_call_id) else {
            continue;
        };
        let mut event = audit_event(
            AuditKind::Countersigned,
            &record.id,
            &turn.id,
            &call.call,
            &signature.approval_id,
            now,
        );
        event.actor = Some(actor.clone());
        let needs = call.needs();
        let mut reason = format!(
            "{} of {} approvals",
            call.signatures.len(),
            needs.approvers.max(1)
        );
        if signature.restarted {
            reason.push_str("; the edit started the count again");
        }
        event.reason = Some(reason);
        if signature.args != call.call.args {
            event.edited_args = Some(signature.args.clone());
        }
        events.push(event);
    }
    events
}

/// The audit events of edits that made a waiting call a new proposal nobody has signed yet
/// (ADR 0028): who edited it, the new arguments, and what they need now.
pub(super) fn proposal_events(
    session: &Session,
    proposed: &[Proposed],
    actor: &Actor,
    now: Millis,
) -> Vec<AuditEvent> {
    let state = session.state();
    let record = &state.record;
    let Some(turn) = record.turn.as_ref() else {
        return Vec::new();
    };
    proposed
        .iter()
        .filter_map(|proposal| {
            let call = turn.call(&proposal.tool_call_id)?;
            let mut event = audit_event(
                AuditKind::Proposed,
                &record.id,
                &turn.id,
                &call.call,
                &proposal.approval_id,
                now,
            );
            event.actor = Some(actor.clone());
            event.edited_args = Some(proposal.args.clone());
            let mut reason = format!("edited; it now needs {}", proposal.needs.words());
            if proposal.restarted {
                reason.push_str("; the approvals given for the earlier arguments no longer count");
            }
            event.reason = Some(reason);
            Some(event)
        })
        .collect()
}
