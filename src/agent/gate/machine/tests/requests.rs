//! What the gate asks for a new step (by policy, browser calls out with one deadline, a client
//! that never reports), and what a tick expires.

use super::*;

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
            &[approve("apv-1")],
            Against {
                resolved: &BTreeMap::new(),
                now: 200,
                policy: &mut ToolDefaults,
                signer: &Signer::local(),
                requester: "local",
            },
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
            &[approve("apv-1")],
            Against {
                resolved: &resolved,
                now: 2_001,
                policy: &mut ToolDefaults,
                signer: &Signer::local(),
                requester: "local",
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "approval_expired");
    assert_eq!(next_deadline(&calls), None);
}
