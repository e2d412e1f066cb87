//! The gate's rules, table by table: what each input does in each state.

use serde_json::{Value, json};

use super::*;
use crate::agent::{
    gate::{ApprovalDecision, Signer},
    history::ToolCall,
    policy::ToolDefaults,
    tools::{ToolRegistry, ToolSettings},
};
use crate::protocol::grant::Ruling;

mod answers;
mod requests;

fn asked() -> Ruling {
    Ruling::Asked {
        rule: None,
        grantable: false,
        needs: None,
    }
}

fn tools() -> ToolRegistry {
    ToolRegistry::standard(&ToolSettings::default())
}

fn call(id: &str, name: &str, location: ToolLocation, args: Value, phase: CallPhase) -> StepCall {
    StepCall {
        call: ToolCall {
            id: id.into(),
            name: name.into(),
            args,
            provider_data: None,
        },
        location,
        phase,
        announced: false,
        gated_by: None,
        ruling: None,
        signatures: Vec::new(),
        signed_args: None,
        proposed_by: None,
        denied_by: None,
        revision: 0,
        revision_shown: 0,
        dropped: Vec::new(),
        countersign_closed: false,
    }
}

fn ready(id: &str, name: &str, location: ToolLocation, args: Value) -> StepCall {
    call(
        id,
        name,
        location,
        args.clone(),
        CallPhase::Ready {
            args,
            edited: false,
        },
    )
}

fn awaiting(id: &str, approval: &str, name: &str, location: ToolLocation, args: Value) -> StepCall {
    let mut c = call(
        id,
        name,
        location,
        args,
        CallPhase::AwaitingApproval {
            approval_id: approval.into(),
            requested_at_ms: 0,
            deadline_ms: 1_000,
        },
    );
    c.gated_by = Some(approval.into());
    c
}

fn payment(amount: i64) -> Value {
    json!({"amount": amount, "recipient": "Hanako"})
}

fn approve(id: &str) -> PersonInput {
    PersonInput::Approval {
        approval_id: id.into(),
        decision: ApprovalDecision::Approve,
        step_up: None,
    }
}

fn edit(id: &str, args: Value) -> PersonInput {
    PersonInput::Approval {
        approval_id: id.into(),
        decision: ApprovalDecision::ApproveWithEdits { args },
        step_up: None,
    }
}

fn deny(id: &str, reason: Option<&str>) -> PersonInput {
    PersonInput::Approval {
        approval_id: id.into(),
        decision: ApprovalDecision::Deny {
            reason: reason.map(str::to_owned),
        },
        step_up: None,
    }
}

fn output(call: &str) -> PersonInput {
    PersonInput::BrowserResult {
        tool_call_id: call.into(),
        result: BrowserResult::Output {
            output: json!({"latitude": 1.0}),
        },
    }
}

/// A step: a payment waiting for approval `apv-1` (call-1), a location call waiting for the
/// browser (call-2), a finished weather call (call-3), a denied location call (call-4) and a
/// location call waiting for approval `apv-5` (call-5).
fn step() -> Vec<StepCall> {
    let mut browser = call(
        "call-2",
        "get_location",
        ToolLocation::Browser,
        json!({}),
        CallPhase::AwaitingBrowser {
            args: json!({}),
            edited: false,
            deadline_ms: 2_000,
        },
    );
    browser.announced = true;
    vec![
        awaiting(
            "call-1",
            "apv-1",
            "process_payment",
            ToolLocation::Server,
            payment(50),
        ),
        browser,
        call(
            "call-3",
            "get_weather",
            ToolLocation::Server,
            json!({"city": "Tokyo"}),
            CallPhase::Done {
                outcome: Outcome::Output {
                    output: json!({"temp": 18}),
                },
                edited_args: None,
            },
        ),
        call(
            "call-4",
            "get_location",
            ToolLocation::Browser,
            json!({}),
            CallPhase::Done {
                outcome: Outcome::Denied {
                    reason: None,
                    by: None,
                },
                edited_args: None,
            },
        ),
        awaiting(
            "call-5",
            "apv-5",
            "get_location",
            ToolLocation::Browser,
            json!({}),
        ),
    ]
}

fn resolved() -> BTreeMap<String, ApprovalResolution> {
    BTreeMap::from([
        (
            "apv-old-approved".to_string(),
            ApprovalResolution::Approved {
                at_ms: 1,
                edited: false,
            },
        ),
        (
            "apv-old-denied".to_string(),
            ApprovalResolution::Denied {
                at_ms: 1,
                reason: None,
            },
        ),
        (
            "apv-old-expired".to_string(),
            ApprovalResolution::Expired { at_ms: 1 },
        ),
        (
            "apv-old-withdrawn".to_string(),
            ApprovalResolution::Withdrawn { at_ms: 1 },
        ),
    ])
}
