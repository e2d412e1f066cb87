//! The audit events a turn records: approvals requested, expired, interrupted, and the execution
//! of gated calls (an answer's own events are [`crate::agent::answer`]'s).

use serde_json::{Value, json};

use super::TurnDriver;
use crate::agent::{
    clock::Millis,
    gate::StepCall,
    history::{Outcome, ToolCall},
    store::{AuditEvent, AuditKind},
};

impl TurnDriver {
    pub(super) fn audit_event(
        &self,
        kind: AuditKind,
        call: &ToolCall,
        approval_id: &str,
        now: Millis,
    ) -> AuditEvent {
        audit_event(
            kind,
            &self.session.id,
            &self.turn_id,
            call,
            approval_id,
            now,
        )
    }
}

/// An audit event about `call`, gated by `approval_id`.
pub(crate) fn audit_event(
    kind: AuditKind,
    session_id: &str,
    turn_id: &str,
    call: &ToolCall,
    approval_id: &str,
    now: Millis,
) -> AuditEvent {
    let mut event = crate::agent::store::audit::event(
        kind, now, session_id, turn_id, &call.id, &call.name, &call.args,
    );
    event.approval_id = Some(approval_id.to_owned());
    event
}

/// The `executed` event of a gated call that just finished.
pub(crate) fn executed_event(
    session_id: &str,
    turn_id: &str,
    call: &StepCall,
    approval_id: &str,
    outcome: &Outcome,
    edited_args: Option<Value>,
    now: Millis,
) -> AuditEvent {
    let mut event = audit_event(
        AuditKind::Executed,
        session_id,
        turn_id,
        &call.call,
        approval_id,
        now,
    );
    event.edited_args = edited_args;
    event.outcome = Some(match outcome {
        Outcome::Output { output } => json!({ "ok": output }),
        Outcome::Error { message } => json!({ "error": message }),
        other => json!({ "error": other.model_view() }),
    });
    event
}
