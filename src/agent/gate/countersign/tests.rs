//! Who may countersign what, table by table: one waiting payment of 150 USD, a rule's
//! requirement, the signatures it has, and one person's answer — through [`Gate::answer`], so
//! every rule of the gate applies as it does for a real request.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::test_signer as person;
use super::*;
use crate::agent::{
    gate::{
        Against, ApprovalDecision, ApprovalResolution, CallPhase, Gate, InputError, PersonInput,
        StepCall,
    },
    history::ToolCall,
    policy::ToolDefaults,
    tools::{ToolLocation, ToolRegistry, ToolSettings},
};
use crate::protocol::{
    countersign::Requirement,
    grant::{GrantRequest, GrantScope, Ruling},
};

mod cases;

use cases::{Case, Want, cases};

const APV: &str = "apv-1";

fn args() -> Value {
    json!({"amount": 150, "recipient": "Hanako", "currency": "USD"})
}

fn edited() -> Value {
    json!({"amount": 120, "recipient": "Hanako", "currency": "USD"})
}

fn ana() -> Signer {
    person("ana", &["approver"])
}
fn ben() -> Signer {
    person("ben", &["approver"])
}
fn eve() -> Signer {
    person("eve", &["approver", "finance"])
}
fn cy() -> Signer {
    person("cy", &["finance"])
}
fn dan() -> Signer {
    person("dan", &[])
}
/// The API key in passkeys mode: the local person, whatever roles it claims.
fn key() -> Signer {
    Signer {
        roles: ["approver".to_string()].into(),
        ..Signer::local()
    }
}

/// A step-up of `signer` for `approval` over `args`.
fn with_step_up(mut signer: Signer, approval: &str, args: &Value) -> Signer {
    signer.step_ups.push(StepUp {
        approval_id: approval.into(),
        args_digest: args_digest(args),
        passkey: format!("key-of-{}", signer.id),
    });
    signer
}

fn plain() -> Option<Requirement> {
    None
}
fn two_approvers() -> Option<Requirement> {
    Some(Requirement {
        approvers: 2,
        role: Some("approver".into()),
        not_requester: true,
        step_up: false,
    })
}
fn two_people() -> Option<Requirement> {
    Some(Requirement {
        approvers: 2,
        role: None,
        not_requester: false,
        step_up: false,
    })
}
fn one_approver() -> Option<Requirement> {
    Some(Requirement {
        approvers: 1,
        role: Some("approver".into()),
        not_requester: false,
        step_up: false,
    })
}
fn stepped_approver() -> Option<Requirement> {
    Some(Requirement {
        step_up: true,
        ..one_approver().unwrap_or_default()
    })
}
fn own_step_up() -> Option<Requirement> {
    Some(Requirement {
        approvers: 1,
        role: None,
        not_requester: false,
        step_up: true,
    })
}

fn sig(person: &str) -> Signature {
    Signature {
        person: person.into(),
        name: person.to_uppercase(),
        at_ms: 1,
        step_up: false,
    }
}

fn call(needs: Option<Requirement>, signed: &[&str]) -> StepCall {
    StepCall {
        call: ToolCall {
            id: "call-1".into(),
            name: "process_payment".into(),
            args: args(),
            provider_data: None,
        },
        location: ToolLocation::Server,
        phase: CallPhase::AwaitingApproval {
            approval_id: APV.into(),
            requested_at_ms: 0,
            deadline_ms: 1_000,
        },
        announced: true,
        gated_by: Some(APV.into()),
        ruling: Some(Ruling::Asked {
            rule: needs.as_ref().map(|_| "large-payments".to_owned()),
            grantable: needs.is_none(),
            needs,
        }),
        signatures: signed.iter().map(|p| sig(p)).collect(),
        signed_args: None,
        proposed_by: None,
        denied_by: None,
        revision: 0,
        revision_shown: 0,
        dropped: Vec::new(),
        countersign_closed: false,
    }
}

fn input(decision: ApprovalDecision) -> PersonInput {
    PersonInput::Approval {
        approval_id: APV.into(),
        decision,
        step_up: None,
    }
}

fn approve() -> PersonInput {
    input(ApprovalDecision::Approve)
}
fn deny() -> PersonInput {
    input(ApprovalDecision::Deny { reason: None })
}

#[test]
fn who_may_countersign_what() {
    let tools = ToolRegistry::standard(&ToolSettings::default());
    let gate = Gate::new(&tools);
    let cases = cases();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    for Case {
        what,
        needs,
        requester,
        signed,
        signer,
        inputs,
        now,
        want,
    } in cases
    {
        let calls = vec![call(needs, signed)];
        let result = gate.answer(
            Some(&calls),
            &inputs,
            Against {
                resolved: &BTreeMap::new(),
                now,
                policy: &mut ToolDefaults,
                signer: &signer,
                requester,
            },
        );
        let got = match result {
            Err(e) => Want::Refused(e.code()),
            Ok(answered) => {
                let call = &answered.calls[0];
                match (&answered.resolutions[..], &call.phase) {
                    ([], CallPhase::AwaitingApproval { .. }) => {
                        assert!(
                            answered.signed.iter().all(|s| !s.complete),
                            "{what}: an incomplete signature"
                        );
                        Want::Signed(call.signatures.len())
                    }
                    ([(_, ApprovalResolution::Approved { edited, .. })], _) => {
                        Want::Approved(*edited)
                    }
                    ([(_, ApprovalResolution::Denied { .. })], _) => Want::Denied,
                    ([(_, ApprovalResolution::Dismissed { .. })], _) => Want::Dismissed,
                    other => panic!("{what}: unexpected {other:?}"),
                }
            }
        };
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn a_completed_quorum_keeps_its_signatures_and_an_edit_restarts_it() {
    let tools = ToolRegistry::standard(&ToolSettings::default());
    let gate = Gate::new(&tools);
    let calls = vec![call(two_people(), &["ana"])];
    let answered = gate
        .answer(
            Some(&calls),
            &[input(ApprovalDecision::ApproveWithEdits { args: edited() })],
            Against {
                resolved: &BTreeMap::new(),
                now: 10,
                policy: &mut ToolDefaults,
                signer: &dan(),
                requester: "ana",
            },
        )
        .unwrap();
    let restarted = &answered.signed[0];
    assert!(restarted.restarted && !restarted.complete);
    assert_eq!(answered.calls[0].signed_args, Some(edited()));
    // The next approval approves the edited arguments, and completes it.
    let answered = gate
        .answer(
            Some(&answered.calls),
            &[approve()],
            Against {
                resolved: &BTreeMap::new(),
                now: 11,
                policy: &mut ToolDefaults,
                signer: &ana(),
                requester: "ana",
            },
        )
        .unwrap();
    assert!(answered.signed[0].complete);
    assert_eq!(
        answered.calls[0].phase,
        CallPhase::Ready {
            args: edited(),
            edited: true
        }
    );
    let names: Vec<&str> = answered.calls[0]
        .signatures
        .iter()
        .map(|s| s.person.as_str())
        .collect();
    assert_eq!(names, ["dan", "ana"]);
}

#[test]
fn the_rules_of_eligibility_say_why_in_words() {
    let needs = two_approvers().unwrap_or_default();
    let why = may_sign(&needs, &ana(), "ana").unwrap_err().0;
    assert!(why.contains("you asked for it"), "{why}");
    let why = may_sign(&needs, &cy(), "ana").unwrap_err().0;
    assert!(why.contains("role approver"), "{why}");
    let why = may_sign(&needs, &Signer::local(), "local").unwrap_err().0;
    assert!(why.contains("passkey"), "{why}");
    assert!(may_deny(&needs, &ana(), "ana").is_ok());
    assert!(is_complete(&needs, &[sig("a"), sig("b")]));
    assert!(
        !is_complete(&needs, &[sig("a"), sig("a")]),
        "one person twice"
    );
    let error = InputError::NotAnApprover {
        approval_id: APV.into(),
        why: "w".into(),
    };
    assert_eq!(error.code(), "not_an_approver");
}

#[test]
fn a_denial_records_who_said_no_and_tells_the_model_when_it_was_not_the_requester() {
    use crate::agent::history::Outcome;
    let tools = ToolRegistry::standard(&ToolSettings::default());
    let gate = Gate::new(&tools);
    let no = input(ApprovalDecision::Deny {
        reason: Some(" not this vendor ".into()),
    });
    for (what, needs, signer, by) in [
        ("an approver denies", two_approvers(), eve(), Some("EVE")),
        ("the requester withdraws", two_approvers(), ana(), None),
        ("the requester denies a plain one", plain(), ana(), None),
    ] {
        let calls = vec![call(needs, &[])];
        let answered = gate
            .answer(
                Some(&calls),
                std::slice::from_ref(&no),
                Against {
                    resolved: &BTreeMap::new(),
                    now: 10,
                    policy: &mut ToolDefaults,
                    signer: &signer,
                    requester: "ana",
                },
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let call = &answered.calls[0];
        assert_eq!(
            call.denied_by.as_deref(),
            Some(signer.name.as_str()),
            "{what}"
        );
        assert_eq!(
            call.phase,
            CallPhase::Done {
                outcome: Outcome::Denied {
                    reason: Some("not this vendor".into()),
                    by: by.map(str::to_owned),
                },
                edited_args: None,
            },
            "{what}"
        );
    }
}

/// The inbox lists what a store finds under a signer's keys (ADR 0039): every approval a signer
/// may sign, or asked for, must share a key with them, whatever it needs and whoever they are.
#[test]
fn whoever_may_sign_or_asked_shares_an_audience_key_with_the_approval() {
    use super::{audience, audience_of};
    let needs_all = [
        Requirement::default(),
        Requirement {
            approvers: 2,
            ..Requirement::default()
        },
        Requirement {
            approvers: 1,
            role: Some("approver".into()),
            not_requester: true,
            step_up: true,
        },
        Requirement {
            approvers: 1,
            not_requester: true,
            ..Requirement::default()
        },
    ];
    let signers = [
        Signer::local(),
        person("p-ana", &[]),
        person("p-ben", &["approver"]),
        person("p-cai", &["auditor"]),
    ];
    let mut listed = 0;
    for needs in &needs_all {
        for requester in ["local", "p-ana", "p-ben"] {
            let keys = audience(needs, requester);
            for signer in &signers {
                let seen = audience_of(signer).iter().any(|k| keys.contains(k));
                let may = may_sign(needs, signer, requester).is_ok() || signer.id == requester;
                assert!(
                    seen || !may,
                    "{} may sign {needs:?} asked by {requester} but does not see it",
                    signer.id
                );
                listed += usize::from(seen);
            }
        }
    }
    // Not everyone sees everything: Cai has no key of an approver's approval.
    assert!(listed < needs_all.len() * 3 * signers.len());
    let approver_only = audience(&needs_all[2], "p-ana");
    assert!(
        !audience_of(&signers[3])
            .iter()
            .any(|k| approver_only.contains(k))
    );
}
