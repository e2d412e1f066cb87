//! The person's inputs against a waiting step: every refusal with its reason, every acceptance
//! with the calls it moves, a chat with nothing waiting, and echoes of a resolution.

use super::*;

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
                &inputs,
                Against {
                    resolved: &resolved(),
                    now,
                    policy: &mut ToolDefaults,
                    signer: &Signer::local(),
                    requester: "local",
                },
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
                &inputs,
                Against {
                    resolved: &resolved(),
                    now: 10,
                    policy: &mut ToolDefaults,
                    signer: &Signer::local(),
                    requester: "local",
                },
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
                &inputs,
                Against {
                    resolved: &resolved(),
                    now: 10,
                    policy: &mut ToolDefaults,
                    signer: &Signer::local(),
                    requester: "local",
                },
            )
            .unwrap_err();
        assert_eq!(err.code(), code, "{inputs:?}");
    }
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
