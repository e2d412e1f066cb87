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

/// Every refusal: the inputs, and the error code the gate must give (nothing changes).
#[test]
fn every_refusal_has_its_reason_and_changes_nothing() {
    let tools = tools();
    let gate = Gate::new(&tools);
    let cases: Vec<(&str, Vec<PersonInput>, Millis, &str)> = vec![
        (
            "an id this chat never issued",
            vec![approve("apv-forged")],
            10,
            "unknown_approval",
        ),
        (
            "an approval answered before",
            vec![approve("apv-old-approved")],
            10,
            "approval_already_answered",
        ),
        (
            "a denial answered again",
            vec![deny("apv-old-denied", None)],
            10,
            "approval_already_answered",
        ),
        (
            "an approval that expired",
            vec![approve("apv-old-expired")],
            10,
            "approval_expired",
        ),
        (
            "an approval the model withdrew",
            vec![approve("apv-old-withdrawn")],
            10,
            "approval_withdrawn",
        ),
        (
            "at its deadline",
            vec![approve("apv-1")],
            1_000,
            "approval_expired",
        ),
        (
            "after its deadline",
            vec![deny("apv-1", Some("late"))],
            5_000,
            "approval_expired",
        ),
        (
            "the same approval twice in one request",
            vec![approve("apv-1"), deny("apv-1", None)],
            10,
            "approval_already_answered",
        ),
        (
            "edited arguments the schema refuses",
            vec![edit("apv-1", payment(-5))],
            10,
            "invalid_edit",
        ),
        (
            "edited arguments missing a field",
            vec![edit("apv-1", json!({"amount": 5}))],
            10,
            "invalid_edit",
        ),
        (
            "edited arguments of the wrong type",
            vec![edit("apv-1", json!("pay everyone"))],
            10,
            "invalid_edit",
        ),
        (
            "a result for an unknown call",
            vec![output("call-404")],
            10,
            "unknown_tool_call",
        ),
        (
            "a result for a server tool",
            vec![output("call-1")],
            10,
            "not_a_browser_tool",
        ),
        (
            "a result for a finished server tool",
            vec![output("call-3")],
            10,
            "not_a_browser_tool",
        ),
        (
            "a result before its approval",
            vec![output("call-5")],
            10,
            "not_approved_yet",
        ),
        (
            "a result for a denied call",
            vec![output("call-4")],
            10,
            "call_was_denied",
        ),
        (
            "a second result",
            vec![output("call-2"), output("call-2")],
            10,
            "result_already_received",
        ),
        (
            "one good answer and one forged one",
            vec![approve("apv-1"), approve("apv-forged")],
            10,
            "unknown_approval",
        ),
        (
            "a forged one first",
            vec![approve("apv-forged"), approve("apv-1")],
            10,
            "unknown_approval",
        ),
    ];
    assert!(cases.len() >= 19);
    for (what, inputs, now, code) in cases {
        let calls = step();
        let before = calls.clone();
        let err = gate
            .answer(
                Some(&calls),
                &resolved(),
                &inputs,
                now,
                &mut ToolDefaults,
                &Signer::local(),
                "local",
            )
            .expect_err(what);
        assert_eq!(err.code(), code, "{what}: {err}");
        assert_eq!(calls, before, "{what}: nothing changed");
    }
}

/// Every acceptance: the inputs, and each call's phase afterwards.
#[test]
fn every_acceptance_moves_exactly_its_calls() {
    let tools = tools();
    let gate = Gate::new(&tools);
    type Check = fn(&[StepCall]) -> bool;
    type Case = (
        &'static str,
        Vec<PersonInput>,
        Vec<(&'static str, ApprovalResolution)>,
        Check,
    );
    let cases: Vec<Case> = vec![
        (
            "approve a payment: ready with the original arguments",
            vec![approve("apv-1")],
            vec![(
                "apv-1",
                ApprovalResolution::Approved {
                    at_ms: 10,
                    edited: false,
                },
            )],
            |c| {
                c[0].phase
                    == CallPhase::Ready {
                        args: payment(50),
                        edited: false,
                    }
            },
        ),
        (
            "approve with edits: ready with the new arguments, marked edited",
            vec![edit("apv-1", payment(20))],
            vec![(
                "apv-1",
                ApprovalResolution::Approved {
                    at_ms: 10,
                    edited: true,
                },
            )],
            |c| {
                c[0].phase
                    == CallPhase::Ready {
                        args: payment(20),
                        edited: true,
                    }
            },
        ),
        (
            "edits equal to the original are not an edit",
            vec![edit("apv-1", payment(50))],
            vec![(
                "apv-1",
                ApprovalResolution::Approved {
                    at_ms: 10,
                    edited: false,
                },
            )],
            |c| {
                c[0].phase
                    == CallPhase::Ready {
                        args: payment(50),
                        edited: false,
                    }
            },
        ),
        (
            "deny with a reason: done, the reason trimmed",
            vec![deny("apv-1", Some("  too much  "))],
            vec![(
                "apv-1",
                ApprovalResolution::Denied {
                    at_ms: 10,
                    reason: Some("too much".into()),
                },
            )],
            |c| {
                matches!(&c[0].phase, CallPhase::Done { outcome: Outcome::Denied { reason: Some(r), by: None }, .. } if r == "too much")
                    && !c[0].announced
            },
        ),
        (
            "deny with a blank reason: no reason",
            vec![deny("apv-1", Some("   "))],
            vec![(
                "apv-1",
                ApprovalResolution::Denied {
                    at_ms: 10,
                    reason: None,
                },
            )],
            |c| {
                matches!(
                    &c[0].phase,
                    CallPhase::Done {
                        outcome: Outcome::Denied {
                            reason: None,
                            by: None
                        },
                        ..
                    }
                )
            },
        ),
        (
            "approve a browser tool: it waits for the browser, with its deadline",
            vec![approve("apv-5")],
            vec![(
                "apv-5",
                ApprovalResolution::Approved {
                    at_ms: 10,
                    edited: false,
                },
            )],
            |c| matches!(c[4].phase, CallPhase::AwaitingBrowser { deadline_ms, .. } if deadline_ms == 10 + ToolSettings::default().browser_timeout.as_millis() as Millis),
        ),
        (
            "a browser result: done with the output, to be announced",
            vec![output("call-2")],
            vec![],
            |c| {
                matches!(
                    &c[1].phase,
                    CallPhase::Done {
                        outcome: Outcome::Output { .. },
                        ..
                    }
                ) && !c[1].announced
            },
        ),
        (
            "a browser error: done with its message",
            vec![PersonInput::BrowserResult {
                tool_call_id: "call-2".into(),
                result: BrowserResult::Error {
                    message: "denied by the browser".into(),
                },
            }],
            vec![],
            |c| matches!(&c[1].phase, CallPhase::Done { outcome: Outcome::Error { message }, .. } if message == "denied by the browser"),
        ),
        (
            "a browser error without words gets some",
            vec![PersonInput::BrowserResult {
                tool_call_id: "call-2".into(),
                result: BrowserResult::Error {
                    message: " ".into(),
                },
            }],
            vec![],
            |c| matches!(&c[1].phase, CallPhase::Done { outcome: Outcome::Error { message }, .. } if message.contains("without a message")),
        ),
        (
            "approve a browser tool and send its result in one request (seed pattern A)",
            vec![approve("apv-5"), output("call-5")],
            vec![(
                "apv-5",
                ApprovalResolution::Approved {
                    at_ms: 10,
                    edited: false,
                },
            )],
            |c| {
                matches!(
                    &c[4].phase,
                    CallPhase::Done {
                        outcome: Outcome::Output { .. },
                        ..
                    }
                )
            },
        ),
        (
            "two approvals in any order",
            vec![approve("apv-5"), deny("apv-1", None)],
            vec![
                (
                    "apv-5",
                    ApprovalResolution::Approved {
                        at_ms: 10,
                        edited: false,
                    },
                ),
                (
                    "apv-1",
                    ApprovalResolution::Denied {
                        at_ms: 10,
                        reason: None,
                    },
                ),
            ],
            |c| {
                matches!(c[0].phase, CallPhase::Done { .. })
                    && matches!(c[4].phase, CallPhase::AwaitingBrowser { .. })
            },
        ),
        (
            "just before the deadline",
            vec![approve("apv-1")],
            vec![(
                "apv-1",
                ApprovalResolution::Approved {
                    at_ms: 10,
                    edited: false,
                },
            )],
            |c| matches!(c[0].phase, CallPhase::Ready { .. }),
        ),
    ];
    for (what, inputs, resolutions, check) in cases {
        let calls = step();
        let answered = gate
            .answer(
                Some(&calls),
                &resolved(),
                &inputs,
                10,
                &mut ToolDefaults,
                &Signer::local(),
                "local",
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let expected: Vec<(String, ApprovalResolution)> = resolutions
            .into_iter()
            .map(|(id, r)| (id.to_string(), r))
            .collect();
        assert_eq!(answered.resolutions, expected, "{what}");
        assert!(check(&answered.calls), "{what}: {:#?}", answered.calls);
        // Calls the inputs did not name are untouched.
        let touched: Vec<&str> = inputs
            .iter()
            .map(|i| match i {
                PersonInput::Approval { approval_id, .. } => {
                    if approval_id == "apv-1" {
                        "call-1"
                    } else {
                        "call-5"
                    }
                }
                PersonInput::BrowserResult { tool_call_id, .. } => tool_call_id.as_str(),
            })
            .collect();
        for (before, after) in calls.iter().zip(&answered.calls) {
            if !touched.contains(&before.call.id.as_str()) {
                assert_eq!(before, after, "{what}: {} untouched", before.call.id);
            }
        }
    }
}

#[test]
fn input_for_a_chat_with_no_waiting_turn_says_why() {
    let tools = tools();
    let gate = Gate::new(&tools);
    for (inputs, code) in [
        (
            vec![approve("apv-old-approved")],
            "approval_already_answered",
        ),
        (vec![approve("apv-old-expired")], "approval_expired"),
        (vec![approve("apv-old-withdrawn")], "approval_withdrawn"),
        (vec![approve("apv-never")], "no_active_turn"),
        (vec![output("call-2")], "no_active_turn"),
        (
            vec![output("call-2"), approve("apv-old-denied")],
            "approval_already_answered",
        ),
    ] {
        let err = gate
            .answer(
                None,
                &resolved(),
                &inputs,
                10,
                &mut ToolDefaults,
                &Signer::local(),
                "local",
            )
            .unwrap_err();
        assert_eq!(err.code(), code, "{inputs:?}");
    }
}

#[test]
fn request_asks_by_policy_and_sends_browser_calls_out_with_one_deadline() {
    let tools = tools();
    let gate = Gate::new(&tools);
    let settings = ToolSettings::default();
    let mut calls = vec![
        ready("c1", "process_payment", ToolLocation::Server, payment(50)),
        ready(
            "c2",
            "get_weather",
            ToolLocation::Server,
            json!({"city": "Paris"}),
        ),
        ready("c3", "get_location", ToolLocation::Browser, json!({})),
        ready(
            "c4",
            "change_bgm",
            ToolLocation::Browser,
            json!({"track": 2}),
        ),
        call(
            "c5",
            "get_weather",
            ToolLocation::Server,
            json!({}),
            CallPhase::Done {
                outcome: Outcome::Error {
                    message: "bad".into(),
                },
                edited_args: None,
            },
        ),
    ];
    let mut ids = (1..).map(|n| format!("apv-{n}"));
    let requests = gate.request(&mut calls, 100, || ids.next().unwrap(), &mut ToolDefaults);
    let approval_deadline = 100 + settings.approval_timeout.as_millis() as Millis;
    assert_eq!(
        requests,
        vec![
            Request {
                tool_call_id: "c1".into(),
                approval_id: "apv-1".into(),
                deadline_ms: approval_deadline,
                ruling: asked(),
            },
            Request {
                tool_call_id: "c3".into(),
                approval_id: "apv-2".into(),
                deadline_ms: approval_deadline,
                ruling: asked(),
            },
        ]
    );
    assert_eq!(calls[0].gated_by.as_deref(), Some("apv-1"));
    assert!(
        matches!(calls[1].phase, CallPhase::Ready { .. }),
        "weather runs without asking"
    );
    assert!(
        matches!(calls[2].phase, CallPhase::AwaitingApproval { .. }),
        "location asks"
    );
    assert_eq!(
        calls[3].phase,
        CallPhase::AwaitingBrowser {
            args: json!({"track": 2}),
            edited: false,
            deadline_ms: 100 + settings.browser_timeout.as_millis() as Millis
        },
        "music goes straight to the browser"
    );
    assert!(
        matches!(calls[4].phase, CallPhase::Done { .. }),
        "a failed call stays failed"
    );
    assert_eq!(
        next_deadline(&calls),
        Some(approval_deadline.min(100 + settings.browser_timeout.as_millis() as Millis))
    );
}

#[test]
fn a_client_that_never_reports_gets_browser_calls_acknowledged_unless_they_need_approval() {
    let tools = tools();
    let gate = Gate::new(&tools).acknowledging_browser_calls();
    let mut calls = vec![
        ready(
            "c1",
            "change_bgm",
            ToolLocation::Browser,
            json!({"track": 2}),
        ),
        ready("c2", "get_location", ToolLocation::Browser, json!({})),
        ready(
            "c3",
            "get_weather",
            ToolLocation::Server,
            json!({"city": "Paris"}),
        ),
    ];
    let mut ids = (1..).map(|n| format!("apv-{n}"));
    let requests = gate.request(&mut calls, 100, || ids.next().unwrap(), &mut ToolDefaults);
    assert_eq!(
        calls[0].phase,
        CallPhase::Done {
            outcome: Outcome::Output {
                output: json!({"success": true, "track": 2,
                    "message": "BGM change to track 2 initiated (frontend handles execution)"})
            },
            edited_args: None
        },
        "the music is acknowledged at once"
    );
    assert!(!calls[0].announced, "its result is still to be announced");
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].tool_call_id, "c2", "the location still asks");
    assert!(matches!(calls[2].phase, CallPhase::Ready { .. }));
    // Once approved, a browser call waits for the browser whatever the client: only calls that
    // need no approval are acknowledged.
    let answered = gate
        .answer(
            Some(&calls),
            &BTreeMap::new(),
            &[approve("apv-1")],
            200,
            &mut ToolDefaults,
            &Signer::local(),
            "local",
        )
        .unwrap();
    assert!(matches!(
        answered.calls[1].phase,
        CallPhase::AwaitingBrowser { .. }
    ));
}

#[test]
fn tick_expires_what_is_due_and_only_that() {
    let tools = tools();
    let gate = Gate::new(&tools);
    let mut calls = step();
    let mut resolved = crate::agent::journal::Keyed::default();
    assert!(
        gate.tick(&mut calls, &mut resolved, 999).is_empty(),
        "nothing due yet"
    );
    assert_eq!(calls, step());
    let expiries = gate.tick(&mut calls, &mut resolved, 1_000);
    assert_eq!(
        expiries,
        vec![
            Expiry::Approval {
                tool_call_id: "call-1".into(),
                approval_id: "apv-1".into(),
                deadline_ms: 1_000
            },
            Expiry::Approval {
                tool_call_id: "call-5".into(),
                approval_id: "apv-5".into(),
                deadline_ms: 1_000
            },
        ]
    );
    assert_eq!(
        calls[0].phase,
        CallPhase::Done {
            outcome: Outcome::Expired,
            edited_args: None
        }
    );
    assert_eq!(
        resolved["apv-1"],
        ApprovalResolution::Expired { at_ms: 1_000 }
    );
    assert!(
        matches!(calls[1].phase, CallPhase::AwaitingBrowser { .. }),
        "the browser has until 2 s"
    );
    let expiries = gate.tick(&mut calls, &mut resolved, 2_000);
    assert_eq!(expiries.len(), 1);
    assert!(matches!(
        &calls[1].phase,
        CallPhase::Done { outcome: Outcome::Error { message }, .. } if message.contains("did not return a result")
    ));
    // An answer after the expiry is told so.
    let err = gate
        .answer(
            Some(&calls),
            &resolved,
            &[approve("apv-1")],
            2_001,
            &mut ToolDefaults,
            &Signer::local(),
            "local",
        )
        .unwrap_err();
    assert_eq!(err.code(), "approval_expired");
    assert_eq!(next_deadline(&calls), None);
}

#[test]
fn an_echo_of_a_resolution_is_nothing_new_and_a_contradiction_is_refused() {
    let resolved = resolved();
    for (id, approved, expected) in [
        ("apv-old-approved", true, Ok(true)),
        ("apv-old-denied", false, Ok(true)),
        ("apv-never", true, Ok(false)),
        ("apv-never", false, Ok(false)),
        ("apv-old-approved", false, Err("approval_already_answered")),
        ("apv-old-denied", true, Err("approval_already_answered")),
        ("apv-old-expired", true, Err("approval_expired")),
        ("apv-old-expired", false, Err("approval_expired")),
        ("apv-old-withdrawn", true, Err("approval_withdrawn")),
    ] {
        let got = Gate::echo(&resolved, id, approved).map_err(|e| e.code());
        assert_eq!(got, expected, "{id} approved={approved}");
    }
}
