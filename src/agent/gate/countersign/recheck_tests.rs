//! [`recheck`], case by case: which signatures stop counting, what the call does then, and
//! what is left alone.

use std::collections::BTreeMap;

use serde_json::json;

use super::test_signer as signer;
use super::*;
use crate::agent::journal::Keyed;
use crate::agent::{history::ToolCall, tools::ToolLocation};
use crate::protocol::grant::Ruling;

const APV: &str = "apv-1";

/// Two approvers, not the requester (Dan).
fn two_approvers() -> Requirement {
    Requirement {
        approvers: 2,
        role: Some("approver".into()),
        not_requester: true,
        step_up: true,
    }
}

fn call(needs: Option<Requirement>, phase: CallPhase, signed: &[&str]) -> StepCall {
    StepCall {
        call: ToolCall {
            id: "call-1".into(),
            name: "process_payment".into(),
            args: json!({"amount": 150}),
            provider_data: None,
        },
        location: ToolLocation::Server,
        phase,
        announced: true,
        gated_by: Some(APV.into()),
        ruling: Some(Ruling::Asked {
            rule: Some("two-approvers".into()),
            grantable: false,
            needs,
        }),
        signatures: signed
            .iter()
            .map(|p| Signature {
                person: (*p).into(),
                name: p.to_uppercase(),
                at_ms: 1,
                step_up: true,
            })
            .collect(),
        signed_args: None,
        proposed_by: None,
        denied_by: None,
        dropped: Vec::new(),
        revision: 0,
        revision_shown: 0,
        countersign_closed: false,
    }
}

fn waiting() -> CallPhase {
    CallPhase::AwaitingApproval {
        approval_id: APV.into(),
        requested_at_ms: 0,
        deadline_ms: 1_000,
    }
}

fn ready() -> CallPhase {
    CallPhase::Ready {
        args: json!({"amount": 150}),
        edited: false,
    }
}

/// Ana, Ben and Eve are approvers; Cy has finance; Dan asked.
fn everyone() -> Vec<Signer> {
    vec![
        signer("ana", &["approver"]),
        signer("ben", &["approver"]),
        signer("eve", &["approver"]),
        signer("cy", &["finance"]),
        signer("dan", &[]),
    ]
}

/// Everyone as they stand, but with `changes` (`None`: removed).
fn standing(changes: &[(&str, Option<&[&str]>)]) -> Standing {
    Standing::new(everyone().into_iter().filter_map(|s| {
        match changes.iter().find(|(id, _)| *id == s.id) {
            None => Some(s),
            Some((_, None)) => None,
            Some((id, Some(roles))) => Some(signer(id, roles)),
        }
    }))
}

fn names(call: &StepCall) -> Vec<&str> {
    call.signatures.iter().map(|s| s.person.as_str()).collect()
}

/// Rechecks `calls` at 500 (a reopened approval waits until 500 + 60 000).
fn run(
    calls: &mut [StepCall],
    resolved: &mut Keyed<String, ApprovalResolution>,
    s: &Standing,
) -> Vec<Uncounted> {
    recheck(calls, resolved, s, "dan", 500, |_| 60_500)
}

/// What happened, who stands how, whose signatures still count, and what is said of the others.
type Case = (
    &'static str,
    Standing,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

#[test]
fn a_waiting_approval_drops_the_removed_and_those_without_the_role_and_keeps_waiting() {
    #[rustfmt::skip]
    let cases: [Case; 4] = [
        ("nobody changed", standing(&[]), &["ben", "ana"], &[]),
        ("Ben removed", standing(&[("ben", None)]), &["ana"], &[("BEN", "was removed")]),
        ("Ben lost the role", standing(&[("ben", Some(&["finance"]))]), &["ana"],
            &[("BEN", "no longer has the role approver")]),
        ("both gone", standing(&[("ben", None), ("ana", Some(&[]))]), &[],
            &[("BEN", "was removed"), ("ANA", "no longer has the role approver")]),
    ];
    for (what, standing, kept, dropped) in cases {
        let mut calls = vec![call(Some(two_approvers()), waiting(), &["ben", "ana"])];
        let mut resolved = Keyed::default();
        let uncounted = run(&mut calls, &mut resolved, &standing);
        assert_eq!(names(&calls[0]), kept, "{what}");
        let said: Vec<(&str, &str)> = calls[0]
            .dropped
            .iter()
            .map(|d| (d.name.as_str(), d.why.as_str()))
            .collect();
        assert_eq!(said, dropped, "{what}");
        assert_eq!(uncounted.len(), dropped.len(), "{what}");
        assert!(
            uncounted
                .iter()
                .all(|u| u.approval_id == APV && !u.reopened),
            "{what}"
        );
        assert_eq!(calls[0].phase, waiting(), "{what}: it waits as before");
        assert_eq!(
            calls[0].dropped.first().map(|d| d.at_ms),
            dropped.first().map(|_| 500)
        );
    }
}

#[test]
fn a_call_cleared_to_run_waits_again_when_what_is_left_is_not_enough() {
    let mut resolved: Keyed<_, _> = Keyed::from(BTreeMap::from([(
        APV.to_owned(),
        ApprovalResolution::Approved {
            at_ms: 400,
            edited: false,
        },
    )]));
    let mut calls = vec![call(Some(two_approvers()), ready(), &["ben", "ana"])];
    let uncounted = run(&mut calls, &mut resolved, &standing(&[("ben", None)]));
    assert_eq!(uncounted.len(), 1);
    assert!(uncounted[0].reopened);
    assert_eq!(
        calls[0].phase,
        CallPhase::AwaitingApproval {
            approval_id: APV.into(),
            requested_at_ms: 500,
            deadline_ms: 60_500,
        }
    );
    assert!(resolved.is_empty(), "its approval may be answered again");
    assert_eq!(names(&calls[0]), ["ana"]);

    // Three signed where two are needed: without one it still runs.
    let mut calls = vec![call(Some(two_approvers()), ready(), &["ben", "ana", "eve"])];
    let mut resolved = Keyed::default();
    let uncounted = run(&mut calls, &mut resolved, &standing(&[("ben", None)]));
    assert_eq!(uncounted.len(), 1);
    assert!(!uncounted[0].reopened);
    assert_eq!(calls[0].phase, ready());
    assert_eq!(names(&calls[0]), ["ana", "eve"]);
}

#[test]
fn what_is_past_recall_or_not_countersigned_is_left_alone() {
    let removed = standing(&[("ben", None), ("ana", None), ("dan", None)]);
    let running = CallPhase::Running {
        args: json!({"amount": 150}),
        edited: false,
    };
    let browser = CallPhase::AwaitingBrowser {
        args: json!({"amount": 150}),
        edited: false,
        deadline_ms: 9_000,
    };
    // The chat's own person's plain approval: Dan decides it, whatever the directory says of
    // signatures (a removed person's own approvals end with their turns).
    let plain = call(None, waiting(), &["dan"]);
    for (what, mut one) in [
        (
            "running",
            call(Some(two_approvers()), running.clone(), &["ben", "ana"]),
        ),
        (
            "in the browser",
            call(Some(two_approvers()), browser.clone(), &["ben", "ana"]),
        ),
        ("plain", plain),
        ("nothing signed", call(Some(two_approvers()), ready(), &[])),
    ] {
        let before = one.clone();
        let mut calls = vec![one.clone()];
        assert!(
            run(&mut calls, &mut Keyed::default(), &removed).is_empty(),
            "{what}"
        );
        one = calls.remove(0);
        assert_eq!(one, before, "{what}");
    }
}

#[test]
fn the_words_follow_the_name() {
    let needs = two_approvers();
    let ben = Signature {
        person: "ben".into(),
        name: "Ben".into(),
        at_ms: 1,
        step_up: true,
    };
    assert_eq!(no_longer_counts(&needs, &ben, &standing(&[]), "dan"), None);
    assert_eq!(
        no_longer_counts(&needs, &ben, &standing(&[("ben", None)]), "dan").as_deref(),
        Some("was removed")
    );
    // Whatever else keeps someone from signing it keeps their signature from counting (here:
    // the person who asked, under @not_requester). The step-up is not asked again: it was
    // checked, against these arguments, when the signature was given.
    assert_eq!(
        no_longer_counts(&needs, &ben, &standing(&[]), "ben").as_deref(),
        Some("may no longer sign it")
    );
}
