//! Who may countersign what, table by table: one waiting payment of 150 USD, a rule's
//! requirement, the signatures it has, and one person's answer — through [`Gate::answer`], so
//! every rule of the gate applies as it does for a real request.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::test_signer as person;
use super::*;
use crate::agent::{
    gate::{
        ApprovalDecision, ApprovalResolution, CallPhase, Gate, InputError, PersonInput, StepCall,
    },
    history::ToolCall,
    policy::ToolDefaults,
    tools::{ToolLocation, ToolRegistry, ToolSettings},
};
use crate::protocol::{
    countersign::Requirement,
    grant::{GrantRequest, GrantScope, Ruling},
};

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

/// What an answer did.
#[derive(Debug, PartialEq)]
enum Want {
    /// One more signature; this many now.
    Signed(usize),
    /// The approval ended approved (`true`: with edits).
    Approved(bool),
    Denied,
    Dismissed,
    /// Refused with this code; nothing changed.
    Refused(&'static str),
}

struct Case {
    what: &'static str,
    needs: Option<Requirement>,
    requester: &'static str,
    signed: &'static [&'static str],
    signer: Signer,
    inputs: Vec<PersonInput>,
    now: i64,
    want: Want,
}

fn case(
    what: &'static str,
    needs: Option<Requirement>,
    requester: &'static str,
    signed: &'static [&'static str],
    signer: Signer,
    inputs: Vec<PersonInput>,
    want: Want,
) -> Case {
    Case {
        what,
        needs,
        requester,
        signed,
        signer,
        inputs,
        now: 10,
        want,
    }
}

fn cases() -> Vec<Case> {
    use Want::*;
    let grant = GrantRequest {
        scope: GrantScope::Budget,
        seconds: 3600,
        max_cents: Some(50_000),
    };
    vec![
        // The chat's own person decides a plain approval, no one else.
        case(
            "plain: the local person's own chat",
            plain(),
            "local",
            &[],
            Signer::local(),
            vec![approve()],
            Approved(false),
        ),
        case(
            "plain: a person's own chat",
            plain(),
            "ana",
            &[],
            ana(),
            vec![approve()],
            Approved(false),
        ),
        case(
            "plain: another person's chat",
            plain(),
            "ana",
            &[],
            ben(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        case(
            "plain: the API key in a person's chat",
            plain(),
            "ana",
            &[],
            key(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        case(
            "plain: denying another person's request",
            plain(),
            "ana",
            &[],
            ben(),
            vec![deny()],
            Refused("not_an_approver"),
        ),
        case(
            "plain: setting aside another's request",
            plain(),
            "local",
            &[],
            ben(),
            vec![input(ApprovalDecision::Dismiss)],
            Refused("not_an_approver"),
        ),
        case(
            "plain: the owner sets it aside",
            plain(),
            "ana",
            &[],
            ana(),
            vec![input(ApprovalDecision::Dismiss)],
            Dismissed,
        ),
        // Two approvers, not the requester.
        case(
            "quorum: the first approver",
            two_approvers(),
            "ana",
            &[],
            ben(),
            vec![approve()],
            Signed(1),
        ),
        case(
            "quorum: a person without the role",
            two_approvers(),
            "ana",
            &["ben"],
            cy(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        case(
            "quorum: the same person twice",
            two_approvers(),
            "ana",
            &["ben"],
            ben(),
            vec![approve()],
            Refused("already_signed"),
        ),
        case(
            "quorum: twice in one request",
            two_approvers(),
            "ana",
            &[],
            ben(),
            vec![approve(), approve()],
            Refused("already_signed"),
        ),
        case(
            "quorum: the second approver completes it",
            two_approvers(),
            "ana",
            &["ben"],
            eve(),
            vec![approve()],
            Approved(false),
        ),
        case(
            "quorum: the requester may not approve their own",
            two_approvers(),
            "ana",
            &[],
            ana(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        case(
            "quorum: the requester withdraws",
            two_approvers(),
            "ana",
            &["ben"],
            ana(),
            vec![deny()],
            Denied,
        ),
        case(
            "quorum: the requester sets it aside",
            two_approvers(),
            "ana",
            &["ben"],
            ana(),
            vec![input(ApprovalDecision::Dismiss)],
            Dismissed,
        ),
        case(
            "quorum: someone without the role may not deny",
            two_approvers(),
            "ana",
            &[],
            dan(),
            vec![deny()],
            Refused("not_an_approver"),
        ),
        case(
            "quorum: one approver's denial ends it",
            two_approvers(),
            "ana",
            &["ben"],
            eve(),
            vec![deny()],
            Denied,
        ),
        case(
            "quorum: an approver may not set it aside",
            two_approvers(),
            "ana",
            &[],
            ben(),
            vec![input(ApprovalDecision::Dismiss)],
            Refused("not_an_approver"),
        ),
        case(
            "quorum: the local person is no approver",
            two_approvers(),
            "local",
            &[],
            Signer::local(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        case(
            "quorum: the API key claiming the role",
            two_approvers(),
            "ana",
            &[],
            key(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        case(
            "quorum: a revoked person has no roles",
            two_approvers(),
            "ana",
            &["ben"],
            person("ben-revoked", &[]),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        case(
            "quorum: approving and remembering",
            two_approvers(),
            "ana",
            &[],
            ben(),
            vec![input(ApprovalDecision::ApproveAndGrant {
                args: None,
                grant: grant.clone(),
            })],
            Refused("grant_refused"),
        ),
        // Two people, any role, the requester may be one.
        case(
            "two people: the requester signs first",
            two_people(),
            "ana",
            &[],
            ana(),
            vec![approve()],
            Signed(1),
        ),
        case(
            "two people: the requester again",
            two_people(),
            "ana",
            &["ana"],
            ana(),
            vec![approve()],
            Refused("already_signed"),
        ),
        case(
            "two people: anyone completes it",
            two_people(),
            "ana",
            &["ana"],
            dan(),
            vec![approve()],
            Approved(false),
        ),
        case(
            "two people: an edit starts the count again",
            two_people(),
            "ana",
            &["ana"],
            dan(),
            vec![input(ApprovalDecision::ApproveWithEdits { args: edited() })],
            Signed(1),
        ),
        // One person with a role.
        case(
            "role: an approver",
            one_approver(),
            "ana",
            &[],
            ben(),
            vec![approve()],
            Approved(false),
        ),
        case(
            "role: the requester who has it",
            one_approver(),
            "ana",
            &[],
            ana(),
            vec![approve()],
            Approved(false),
        ),
        case(
            "role: finance is not approver",
            one_approver(),
            "ana",
            &[],
            cy(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        // Step-up: a passkey assertion bound to the approval and the arguments.
        case(
            "step-up: none given",
            stepped_approver(),
            "ana",
            &[],
            ben(),
            vec![approve()],
            Refused("step_up_required"),
        ),
        case(
            "step-up: made for another approval",
            stepped_approver(),
            "ana",
            &[],
            with_step_up(ben(), "apv-other", &args()),
            vec![approve()],
            Refused("step_up_required"),
        ),
        case(
            "step-up: made for other arguments",
            stepped_approver(),
            "ana",
            &[],
            with_step_up(ben(), APV, &edited()),
            vec![approve()],
            Refused("step_up_mismatch"),
        ),
        case(
            "step-up: bound to this approval and these arguments",
            stepped_approver(),
            "ana",
            &[],
            with_step_up(ben(), APV, &args()),
            vec![approve()],
            Approved(false),
        ),
        case(
            "step-up: an edit needs a new assertion",
            stepped_approver(),
            "ana",
            &[],
            with_step_up(ben(), APV, &args()),
            vec![input(ApprovalDecision::ApproveWithEdits { args: edited() })],
            Refused("step_up_mismatch"),
        ),
        case(
            "step-up: one made for the edited arguments",
            stepped_approver(),
            "ana",
            &[],
            with_step_up(ben(), APV, &edited()),
            vec![input(ApprovalDecision::ApproveWithEdits { args: edited() })],
            Approved(true),
        ),
        case(
            "step-up: saying no needs no passkey",
            stepped_approver(),
            "ana",
            &[],
            ben(),
            vec![deny()],
            Denied,
        ),
        case(
            "step-up: the chat's person, with a passkey",
            own_step_up(),
            "ana",
            &[],
            with_step_up(ana(), APV, &args()),
            vec![approve()],
            Approved(false),
        ),
        case(
            "step-up: the chat's person, without",
            own_step_up(),
            "ana",
            &[],
            ana(),
            vec![approve()],
            Refused("step_up_required"),
        ),
        case(
            "step-up: the local person has no passkeys",
            own_step_up(),
            "local",
            &[],
            Signer::local(),
            vec![approve()],
            Refused("not_an_approver"),
        ),
        Case {
            now: 1_000,
            ..case(
                "an approval past its deadline",
                two_approvers(),
                "ana",
                &[],
                ben(),
                vec![approve()],
                Refused("approval_expired"),
            )
        },
    ]
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
            &BTreeMap::new(),
            &inputs,
            now,
            &mut ToolDefaults,
            &signer,
            requester,
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
            &BTreeMap::new(),
            &[input(ApprovalDecision::ApproveWithEdits { args: edited() })],
            10,
            &mut ToolDefaults,
            &dan(),
            "ana",
        )
        .unwrap();
    let restarted = &answered.signed[0];
    assert!(restarted.restarted && !restarted.complete);
    assert_eq!(answered.calls[0].signed_args, Some(edited()));
    // The next approval approves the edited arguments, and completes it.
    let answered = gate
        .answer(
            Some(&answered.calls),
            &BTreeMap::new(),
            &[approve()],
            11,
            &mut ToolDefaults,
            &ana(),
            "ana",
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
                &BTreeMap::new(),
                std::slice::from_ref(&no),
                10,
                &mut ToolDefaults,
                &signer,
                "ana",
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
