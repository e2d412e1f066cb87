//! An edit is a new proposal (ADR 0028), tried as an attacker and as a team of approvers would:
//! a payment of 20 USD that its requester may approve alone, edited to 150 USD (or 40 KWD, or
//! past a step-up rule), must need what 150 USD needs; signatures given for other arguments
//! never count; what the rules see is the canonical form that runs (ADR 0027).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::countersign::test_signer as person;
use super::*;
use crate::agent::{
    clock::Millis,
    history::ToolCall,
    policy::{Decide, Judgement, Verdict},
    tools::{ToolLocation, ToolRegistry, ToolSettings, ToolSpec, payment_of},
};
use crate::protocol::{
    countersign::Requirement,
    grant::{GrantRequest, GrantScope, Ruling},
};

const APV: &str = "apv-1";

/// The example policy's payments, by what they cost in US cents: above 500 USD refused, above
/// 300 USD one approver with a passkey (the step-up rule), above 100 USD two approvers (not the
/// requester, each with a passkey); `Mallory` never; else the person decides.
struct ByAmount;

fn two_approvers() -> Requirement {
    Requirement {
        approvers: 2,
        role: Some("approver".into()),
        not_requester: true,
        step_up: true,
    }
}

impl Decide for ByAmount {
    fn decide(&mut self, _: &str, tool: &ToolSpec, args: &Value, now: Millis) -> Verdict {
        match self.judge(tool, args, now) {
            Judgement::Forbidden { rule, reason } => {
                Verdict::Ruled(Ruling::DeniedByRule { rule, reason })
            }
            Judgement::Asks { rule, needs } => Verdict::Ruled(Ruling::Asked {
                rule,
                grantable: false,
                needs: Some(needs),
            }),
            Judgement::Free => Verdict::Ruled(Ruling::Asked {
                rule: None,
                grantable: true,
                needs: None,
            }),
        }
    }

    fn judge(&mut self, _: &ToolSpec, args: &Value, _: Millis) -> Judgement {
        if args["recipient"] == "Mallory" {
            return Judgement::Forbidden {
                rule: "blocked-recipients".into(),
                reason: "blocked".into(),
            };
        }
        let cents = payment_of(args).map(|m| m.wallet_cents()).unwrap_or(0);
        if cents > 50_000 {
            Judgement::Forbidden {
                rule: "payment-limit".into(),
                reason: "too large".into(),
            }
        } else if cents > 30_000 {
            Judgement::Asks {
                rule: Some("step-up".into()),
                needs: Requirement {
                    step_up: true,
                    ..Requirement::default()
                },
            }
        } else if cents > 10_000 {
            Judgement::Asks {
                rule: Some("two-approvers".into()),
                needs: two_approvers(),
            }
        } else {
            Judgement::Free
        }
    }
}

fn pay(amount: f64, recipient: &str) -> Value {
    json!({"amount": amount, "recipient": recipient, "currency": "USD"})
}

/// The requester (no role), and two approvers.
fn rae() -> Signer {
    person("rae", &[])
}
fn ana() -> Signer {
    person("ana", &["approver"])
}
fn ben() -> Signer {
    person("ben", &["approver"])
}

fn confirmed(mut signer: Signer, args: &Value) -> Signer {
    signer.step_ups.push(StepUp {
        approval_id: APV.into(),
        args_digest: countersign::args_digest(args),
        passkey: format!("key-of-{}", signer.id),
    });
    signer
}

/// A payment of `args` waiting for approval, as the policy asked for it.
fn waiting(args: Value) -> StepCall {
    let tools = ToolRegistry::standard(&ToolSettings::default());
    let tool = tools.get("process_payment").expect("the payment tool");
    let Verdict::Ruled(ruling) = ByAmount.decide("call-1", &tool.spec, &args, 0) else {
        panic!("asked")
    };
    StepCall {
        call: ToolCall {
            id: "call-1".into(),
            name: "process_payment".into(),
            args,
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
        ruling: Some(ruling),
        signatures: Vec::new(),
        signed_args: None,
        proposed_by: None,
        denied_by: None,
        dropped: Vec::new(),
        revision: 0,
        revision_shown: 0,
        countersign_closed: false,
    }
}

fn edit(args: Value) -> PersonInput {
    PersonInput::Approval {
        approval_id: APV.into(),
        decision: ApprovalDecision::ApproveWithEdits { args },
        step_up: None,
    }
}

fn approve() -> PersonInput {
    PersonInput::Approval {
        approval_id: APV.into(),
        decision: ApprovalDecision::Approve,
        step_up: None,
    }
}

fn answer(calls: &[StepCall], input: PersonInput, signer: &Signer) -> Result<Answered, InputError> {
    let tools = ToolRegistry::standard(&ToolSettings::default());
    Gate::new(&tools).answer(
        Some(calls),
        &[input],
        Against {
            resolved: &BTreeMap::new(),
            now: 10,
            policy: &mut ByAmount,
            signer,
            requester: "rae",
        },
    )
}

#[test]
fn a_requester_editing_20_usd_to_150_proposes_it_to_two_approvers_and_nothing_runs() {
    let calls = [waiting(pay(20.0, "Vendor"))];
    assert!(
        calls[0].needs().is_plain(),
        "20 USD is the requester's to decide"
    );
    let answered = answer(&calls, edit(pay(150.0, "Vendor")), &rae()).expect("a new proposal");
    let call = &answered.calls[0];
    assert!(answered.resolutions.is_empty(), "not approved");
    assert!(matches!(call.phase, CallPhase::AwaitingApproval { .. }));
    assert_eq!(call.needs(), two_approvers());
    assert_eq!(call.signatures, []);
    assert_eq!(call.proposal(), &pay(150.0, "Vendor"));
    assert_eq!(call.proposed_by.as_deref(), Some("rae"));
    assert_eq!(call.revision, 1, "the page is told");
    let proposed = &answered.proposed[0];
    assert_eq!(proposed.needs, two_approvers());
    assert!(!proposed.restarted);

    // The requester cannot approve it now, not even again: it needs two others.
    let again = answer(
        &answered.calls,
        approve(),
        &confirmed(rae(), &pay(150.0, "Vendor")),
    );
    assert_eq!(again.unwrap_err().code(), "not_an_approver");
    // The first approver's passkey must be for 150 USD; the second completes it.
    let stale = answer(
        &answered.calls,
        approve(),
        &confirmed(ana(), &pay(20.0, "Vendor")),
    );
    assert_eq!(stale.unwrap_err().code(), "step_up_mismatch");
    let one = answer(
        &answered.calls,
        approve(),
        &confirmed(ana(), &pay(150.0, "Vendor")),
    )
    .expect("signed");
    assert!(one.resolutions.is_empty() && !one.signed[0].complete);
    let two = answer(
        &one.calls,
        approve(),
        &confirmed(ben(), &pay(150.0, "Vendor")),
    )
    .expect("complete");
    assert!(two.signed[0].complete);
    assert_eq!(
        two.calls[0].phase,
        CallPhase::Ready {
            args: pay(150.0, "Vendor"),
            edited: true
        }
    );
}

#[test]
fn foreign_currencies_and_the_step_up_rule_are_judged_on_the_edit() {
    // 40 KWD ≈ 130 USD: two approvers.
    let kwd = json!({"amount": 40, "recipient": "Vendor", "currency": "KWD"});
    let answered = answer(&[waiting(pay(20.0, "Vendor"))], edit(kwd.clone()), &rae()).unwrap();
    assert_eq!(answered.calls[0].needs(), two_approvers());
    // 350 USD: a passkey confirmation, which the edit did not carry: it waits for one.
    let answered = answer(
        &[waiting(pay(20.0, "Vendor"))],
        edit(pay(350.0, "Vendor")),
        &rae(),
    )
    .unwrap();
    let call = &answered.calls[0];
    assert!(call.needs().step_up && matches!(call.phase, CallPhase::AwaitingApproval { .. }));
    // ...and with a confirmation bound to 350 USD the requester's approval runs it.
    let done = answer(
        &answered.calls,
        approve(),
        &confirmed(rae(), &pay(350.0, "Vendor")),
    )
    .expect("approved");
    assert_eq!(
        done.resolutions[0].1,
        ApprovalResolution::Approved {
            at_ms: 10,
            edited: true
        }
    );
    // Confirmed with the edit itself, it runs at once.
    let at_once = answer(
        &[waiting(pay(20.0, "Vendor"))],
        edit(pay(350.0, "Vendor")),
        &confirmed(rae(), &pay(350.0, "Vendor")),
    )
    .unwrap();
    assert!(matches!(at_once.calls[0].phase, CallPhase::Ready { .. }));
    // Past the limit: refused, nothing changed.
    let refused = answer(
        &[waiting(pay(20.0, "Vendor"))],
        edit(pay(600.0, "Vendor")),
        &rae(),
    );
    assert_eq!(refused.unwrap_err().code(), "edit_forbidden");
}

#[test]
fn the_requirement_never_shrinks_and_signatures_for_other_arguments_never_count() {
    let calls = [waiting(pay(150.0, "Vendor"))];
    let one = answer(&calls, approve(), &confirmed(ana(), &pay(150.0, "Vendor"))).unwrap();
    assert_eq!(one.calls[0].signatures.len(), 1);
    // Ben edits it down to 50 USD, which alone the requester could approve: it still needs two
    // approvers; Ana's signature was for 150 USD and no longer counts; Ben's counts for 50.
    let down = answer(
        &one.calls,
        edit(pay(50.0, "Vendor")),
        &confirmed(ben(), &pay(50.0, "Vendor")),
    )
    .unwrap();
    let call = &down.calls[0];
    assert_eq!(call.needs(), two_approvers());
    assert_eq!(call.signatures.len(), 1);
    assert_eq!(call.signatures[0].person, "ben");
    assert!(down.signed[0].restarted && !down.signed[0].complete);
    // Ana's earlier approval does not complete it: she must approve 50 USD herself.
    let ana_again = answer(
        &down.calls,
        approve(),
        &confirmed(ana(), &pay(50.0, "Vendor")),
    )
    .unwrap();
    assert!(ana_again.signed[0].complete);
    assert_eq!(
        ana_again.calls[0].phase,
        CallPhase::Ready {
            args: pay(50.0, "Vendor"),
            edited: true
        }
    );
}

#[test]
fn a_grant_cannot_be_made_from_an_edit_that_needs_others() {
    let calls = [waiting(pay(20.0, "Vendor"))];
    let grant = PersonInput::Approval {
        approval_id: APV.into(),
        decision: ApprovalDecision::ApproveAndGrant {
            args: Some(pay(150.0, "Vendor")),
            grant: GrantRequest {
                scope: GrantScope::Call,
                seconds: 3600,
                max_cents: None,
            },
        },
        step_up: None,
    };
    let refused = answer(&calls, grant, &rae()).unwrap_err();
    assert_eq!(refused.code(), "not_an_approver", "{refused}");
}

#[test]
fn the_rules_see_the_canonical_form_that_runs() {
    for written in [
        " Mallory",
        "Mallory ",
        "\u{a0}Mallory",
        "Mallory\t",
        "Mallory\n",
    ] {
        let refused = answer(
            &[waiting(pay(20.0, "Vendor"))],
            edit(pay(20.0, written)),
            &rae(),
        );
        assert_eq!(refused.unwrap_err().code(), "edit_forbidden", "{written:?}");
    }
    let refused = answer(
        &[waiting(pay(20.0, "Vendor"))],
        edit(pay(20.0, "Mal\u{200b}lory")),
        &rae(),
    );
    assert_eq!(refused.unwrap_err().code(), "invalid_edit");
    // A name with extra space approves the name itself.
    let answered = answer(
        &[waiting(pay(20.0, "Vendor"))],
        edit(pay(20.0, "  Hana  Ko ")),
        &rae(),
    )
    .unwrap();
    assert_eq!(
        answered.calls[0].phase,
        CallPhase::Ready {
            args: pay(20.0, "Hana Ko"),
            edited: true
        }
    );
}

#[test]
fn a_resent_proposal_is_an_echo_but_a_confirmed_one_is_a_signature() {
    let answered = answer(
        &[waiting(pay(20.0, "Vendor"))],
        edit(pay(350.0, "Vendor")),
        &rae(),
    )
    .unwrap();
    let calls = Some(answered.calls.as_slice());
    let resent = ApprovalDecision::ApproveWithEdits {
        args: pay(350.0, "Vendor"),
    };
    let none = BTreeMap::new();
    assert_eq!(
        Gate::repeats(calls, &none, APV, &resent, false, "rae"),
        Ok(true)
    );
    // With a passkey confirmation it is the requester signing it now.
    assert_eq!(
        Gate::repeats(calls, &none, APV, &resent, true, "rae"),
        Ok(false)
    );
    // Someone else sending the same edit is judged.
    assert_eq!(
        Gate::repeats(calls, &none, APV, &resent, false, "ana"),
        Ok(false)
    );
    // Another edit is judged.
    let other = ApprovalDecision::ApproveWithEdits {
        args: pay(360.0, "Vendor"),
    };
    assert_eq!(
        Gate::repeats(calls, &none, APV, &other, false, "rae"),
        Ok(false)
    );
}
