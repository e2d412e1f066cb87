//! [`Gate::answer`]'s rules for one answer to one approval: which approval it is and whether it
//! may still be answered, who may deny or set it aside, the arguments on the table (an edit
//! checked against the tool's schema), the rules in force on them, whether the answer can be a
//! signature of what they now need — or only a new proposal — and the grant it asks for.

use serde_json::Value;

use super::{Against, Answered, Gate, GrantAsked, Proposed, Signed, refuse};
use crate::agent::{
    clock::Millis,
    gate::{
        ApprovalDecision, ApprovalResolution, CallPhase, InputError, StepCall,
        countersign::{self, Signer},
    },
    history::Outcome,
    policy::{Decide, Judgement},
    schema::{SchemaError, validate},
    tools::{ToolLocation, ToolSpec},
};
use crate::protocol::{
    countersign::{Requirement, Signature},
    grant::{GrantRequest, Ruling},
};

/// Who answers, and whose chat it is.
#[derive(Clone, Copy)]
pub(super) struct Who<'a> {
    pub(super) signer: &'a Signer,
    pub(super) requester: &'a str,
}

/// One answer to one approval as the gate judges it: which, when, by whom.
#[derive(Clone, Copy)]
struct Answer<'a> {
    approval_id: &'a str,
    now: Millis,
    who: Who<'a>,
}

impl Answer<'_> {
    fn not_eligible(&self, e: countersign::NotEligible) -> InputError {
        InputError::NotAnApprover {
            approval_id: self.approval_id.to_owned(),
            why: e.0,
        }
    }
}

/// What one answer to an approval did: it ended the approval (approved, denied, set aside,
/// refused by a rule: `resolution`), perhaps with a grant; and, when the approval needs several
/// people, it was a signature (`signed`: complete, or one more while it waits for the rest).
struct Decided {
    resolution: Option<ApprovalResolution>,
    grant: Option<GrantAsked>,
    signed: Option<Signed>,
    proposed: Option<Proposed>,
}

impl Decided {
    fn ended(resolution: ApprovalResolution) -> Self {
        Decided {
            resolution: Some(resolution),
            grant: None,
            signed: None,
            proposed: None,
        }
    }
}

/// The arguments an approval is for, and what they are to the call.
struct OnTable {
    args: Value,
    /// They are not the arguments the model asked for.
    edited: bool,
    /// They are not what was on the table before this answer: a new proposal (ADR 0028).
    new_proposal: bool,
}

/// What the rules in force say of the arguments on the table.
enum Judged {
    /// What the approval needs now, and the rule that asks for more, if one does.
    Needs(Requirement, Option<String>),
    /// A rule forbids them: the call ended denied by it.
    Ended(ApprovalResolution),
}

impl Gate<'_> {
    /// The answer `decision` to approval `approval_id` among the waiting step's `calls` (the
    /// working copy of [`Gate::answer`]): refused when no call waits for it, it expired, or this
    /// answer already signed it; else decided, and what it did added to `answered`.
    pub(super) fn approval(
        &self,
        answered: &mut Answered,
        approval_id: &String,
        decision: &ApprovalDecision,
        against: &mut Against<'_>,
    ) -> Result<(), InputError> {
        let Against {
            resolved,
            now,
            ref mut policy,
            signer,
            requester,
        } = *against;
        let who = Who { signer, requester };
        let Answered {
            calls,
            resolutions,
            grants,
            signed,
            proposed,
        } = answered;
        let waiting = calls.iter_mut().find(|c| {
            matches!(&c.phase, CallPhase::AwaitingApproval { approval_id: id, .. } if id == approval_id)
        });
        let Some(call) = waiting else {
            if resolutions.iter().any(|(id, _)| id == approval_id) {
                return Err(InputError::ApprovalAlreadyAnswered {
                    approval_id: approval_id.clone(),
                });
            }
            return Err(match resolved.get(approval_id) {
                Some(resolution) => resolution.refusal(approval_id),
                None => InputError::UnknownApproval {
                    approval_id: approval_id.clone(),
                },
            });
        };
        let CallPhase::AwaitingApproval { deadline_ms, .. } = call.phase else {
            return Err(InputError::UnknownApproval {
                approval_id: approval_id.clone(),
            });
        };
        if now >= deadline_ms {
            return Err(InputError::ApprovalExpired {
                approval_id: approval_id.clone(),
            });
        }
        if signed.iter().any(|s| &s.approval_id == approval_id) {
            return Err(InputError::AlreadySigned {
                approval_id: approval_id.clone(),
            });
        }
        let answer = Answer {
            approval_id,
            now,
            who,
        };
        let decided = self.decide(call, decision, &mut **policy, answer)?;
        if let Some(resolution) = decided.resolution {
            resolutions.push((approval_id.clone(), resolution));
        }
        grants.extend(decided.grant);
        signed.extend(decided.signed);
        proposed.extend(decided.proposed);
        Ok(())
    }

    /// The person's decision on a call awaiting approval: denied (with the trimmed reason),
    /// dismissed, or approved — with the arguments on the table (the call's, or the last
    /// edit's), or edited ones.
    ///
    /// An approval is judged by the rules in force on the arguments that would run (ADR 0028):
    /// a rule that forbids them refuses an edit (the person may edit again) or ends the call
    /// denied; a rule that asks for more people makes the requirement grow — never shrink.
    /// An edit is a **new proposal**: signatures given for other arguments no longer count,
    /// and the editor's own approval counts only when they may sign what it now needs (with a
    /// step-up bound to the new arguments when it asks for one); otherwise the call waits, for
    /// the new requirement, with no signature. When the requirement is met the call is ready
    /// to run, or waits for the browser; perhaps with a grant to remember.
    fn decide(
        &self,
        call: &mut StepCall,
        decision: &ApprovalDecision,
        policy: &mut dyn Decide,
        answer: Answer<'_>,
    ) -> Result<Decided, InputError> {
        let needs = call.needs();
        let (asked, grant): (Option<&Value>, Option<&GrantRequest>) = match decision {
            ApprovalDecision::Deny { reason } => return deny(call, &needs, reason, answer),
            ApprovalDecision::Dismiss => return dismiss(call, answer),
            ApprovalDecision::Approve => (None, None),
            ApprovalDecision::ApproveWithEdits { args } => (Some(args), None),
            ApprovalDecision::ApproveAndGrant { args, grant } => (args.as_ref(), Some(grant)),
        };
        let who = answer.who;
        // Whoever acts on an approval must be someone who may sign it as it stands.
        countersign::may_sign(&needs, who.signer, who.requester)
            .map_err(|e| answer.not_eligible(e))?;
        let tool = self.tools.get(&call.call.name);
        let spec = tool.as_ref().map(|t| &t.spec);
        let table = on_table(call, spec, asked, answer)?;
        if !table.new_proposal && call.signatures.iter().any(|s| s.person == who.signer.id) {
            return Err(InputError::AlreadySigned {
                approval_id: answer.approval_id.to_owned(),
            });
        }
        let (required, asking_rule) = match judge(call, spec, &table, &needs, policy, answer)? {
            Judged::Needs(required, asking_rule) => (required, asking_rule),
            Judged::Ended(resolution) => return Ok(Decided::ended(resolution)),
        };
        let proposed_only = match signs(&required, &table.args, answer) {
            Ok(()) => false,
            // A passkey confirmation of other arguments is never a proposal of these.
            Err(e @ InputError::StepUpMismatch { .. }) => return Err(e),
            // An edit that now needs others, or a passkey: the call waits for them, for these
            // arguments (a grant cannot be remembered from it).
            Err(_) if table.new_proposal && grant.is_none() => true,
            Err(e) => return Err(e),
        };
        let restarted = revise(call, &table, &needs, &required, asking_rule, who);
        if proposed_only {
            return Ok(Decided {
                resolution: None,
                grant: None,
                signed: None,
                proposed: Some(Proposed {
                    approval_id: answer.approval_id.to_owned(),
                    tool_call_id: call.call.id.clone(),
                    args: table.args,
                    needs: required,
                    restarted,
                }),
            });
        }
        let grant = match grant {
            None => None,
            Some(request) => Some(Self::grant_asked(
                call,
                answer.approval_id,
                &required,
                spec,
                &table.args,
                request,
                policy,
            )?),
        };
        Ok(self.sign(call, table, &required, restarted, grant, answer))
    }

    /// An approval that can be a signature of what the call now needs: when that is the chat's
    /// person alone, the call is approved; else the signature is added, and the call approved
    /// once it has every one it needs.
    fn sign(
        &self,
        call: &mut StepCall,
        table: OnTable,
        required: &Requirement,
        restarted: bool,
        grant: Option<GrantAsked>,
        answer: Answer<'_>,
    ) -> Decided {
        let OnTable { args, edited, .. } = table;
        let now = answer.now;
        if required.is_plain() {
            // The chat's person approved what they edited: it runs; nothing was proposed.
            call.signed_args = None;
            call.proposed_by = None;
            self.clear(call, args, edited, now);
            return Decided {
                resolution: Some(ApprovalResolution::Approved { at_ms: now, edited }),
                grant,
                signed: None,
                proposed: None,
            };
        }
        let signature = Signature {
            person: answer.who.signer.id.clone(),
            name: answer.who.signer.name.clone(),
            at_ms: now,
            step_up: required.step_up,
        };
        call.signatures.push(signature.clone());
        call.revision += 1;
        let complete = countersign::is_complete(required, &call.signatures);
        let signed = Signed {
            approval_id: answer.approval_id.to_owned(),
            tool_call_id: call.call.id.clone(),
            signature,
            args: args.clone(),
            restarted,
            complete,
        };
        if !complete {
            return Decided {
                resolution: None,
                grant: None,
                signed: Some(signed),
                proposed: None,
            };
        }
        self.clear(call, args, edited, now);
        Decided {
            resolution: Some(ApprovalResolution::Approved { at_ms: now, edited }),
            grant,
            signed: Some(signed),
            proposed: None,
        }
    }

    /// The grant an approval asks for, when the policy left the call to the person (and only
    /// to them) and the grant fits the call; else why not.
    fn grant_asked(
        call: &StepCall,
        approval_id: &str,
        required: &Requirement,
        tool: Option<&ToolSpec>,
        args: &Value,
        request: &GrantRequest,
        policy: &mut dyn Decide,
    ) -> Result<GrantAsked, InputError> {
        let refused = |message: String| InputError::GrantRefused {
            approval_id: approval_id.to_owned(),
            message,
        };
        match &call.ruling {
            Some(Ruling::Asked {
                grantable: true, ..
            }) if required.is_plain() => {}
            Some(Ruling::Asked {
                rule: Some(rule), ..
            }) => {
                return Err(refused(format!(
                    "the policy rule {rule:?} asks for every such call"
                )));
            }
            _ if !required.is_plain() => {
                return Err(refused(format!(
                    "it needs {}; such a call cannot be remembered",
                    required.words()
                )));
            }
            _ => {
                return Err(refused(
                    "the policy decides this call; it cannot be remembered".into(),
                ));
            }
        }
        let Some(tool) = tool else {
            return Err(refused(format!("{} is no longer offered", call.call.name)));
        };
        policy.may_grant(tool, args, request).map_err(refused)?;
        Ok(GrantAsked {
            approval_id: approval_id.to_owned(),
            tool_call_id: call.call.id.clone(),
            tool: call.call.name.clone(),
            args: args.clone(),
            request: request.clone(),
        })
    }

    /// An approved call: ready to run on the server, or waiting for the browser.
    fn clear(&self, call: &mut StepCall, args: Value, edited: bool, now: Millis) {
        call.phase = match call.location {
            ToolLocation::Server => CallPhase::Ready { args, edited },
            ToolLocation::Browser => CallPhase::AwaitingBrowser {
                args,
                edited,
                deadline_ms: self.browser_deadline(&call.call.name, now),
            },
        };
    }
}

/// A denial, by someone who may deny what the call needs: the call ends denied, with the
/// trimmed reason (and, told to the model, who said no when it was not the person who asked).
fn deny(
    call: &mut StepCall,
    needs: &Requirement,
    reason: &Option<String>,
    answer: Answer<'_>,
) -> Result<Decided, InputError> {
    let who = answer.who;
    countersign::may_deny(needs, who.signer, who.requester).map_err(|e| answer.not_eligible(e))?;
    call.denied_by = Some(who.signer.name.clone());
    let reason = reason
        .as_ref()
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty());
    call.phase = CallPhase::Done {
        outcome: Outcome::Denied {
            reason: reason.clone(),
            // The model is told who said no when it was not the person who asked.
            by: (who.signer.id != who.requester).then(|| who.signer.name.clone()),
        },
        edited_args: None,
    };
    call.announced = false;
    Ok(Decided::ended(ApprovalResolution::Denied {
        at_ms: answer.now,
        reason,
    }))
}

/// Setting the call aside: only the person who asked may.
fn dismiss(call: &mut StepCall, answer: Answer<'_>) -> Result<Decided, InputError> {
    if answer.who.signer.id != answer.who.requester {
        return Err(answer.not_eligible(countersign::NotEligible(
            "only the person who asked may set it aside; approve or deny it".into(),
        )));
    }
    call.phase = CallPhase::Done {
        outcome: Outcome::Dismissed,
        edited_args: None,
    };
    call.announced = false;
    Ok(Decided::ended(ApprovalResolution::Dismissed {
        at_ms: answer.now,
    }))
}

/// The arguments an approval is for: what is on the table, or the edit `asked` (in its
/// canonical form, checked against the tool's schema; refused when the tool is gone).
fn on_table(
    call: &StepCall,
    tool: Option<&ToolSpec>,
    asked: Option<&Value>,
    answer: Answer<'_>,
) -> Result<OnTable, InputError> {
    let proposal = call.proposal();
    let args = match (asked, tool) {
        (None, _) => proposal.clone(),
        (Some(args), _) if args == proposal => proposal.clone(),
        (Some(args), Some(tool)) => {
            let invalid = |error| InputError::InvalidEdit {
                approval_id: answer.approval_id.to_owned(),
                error,
            };
            let args = tool.canonical_args(args).map_err(invalid)?;
            validate(&tool.parameters, &args).map_err(invalid)?;
            args
        }
        (Some(_), None) => {
            return Err(InputError::InvalidEdit {
                approval_id: answer.approval_id.to_owned(),
                error: SchemaError {
                    path: "$".into(),
                    message: format!("{} is no longer offered", call.call.name),
                },
            });
        }
    };
    Ok(OnTable {
        new_proposal: args != *proposal,
        edited: args != call.call.args,
        args,
    })
}

/// The rules in force, on the arguments that would run: a rule that forbids them refuses a new
/// proposal (the person may edit again) or ends the call denied by it; a rule that asks for
/// more makes what the approval `needs` grow.
fn judge(
    call: &mut StepCall,
    tool: Option<&ToolSpec>,
    table: &OnTable,
    needs: &Requirement,
    policy: &mut dyn Decide,
    answer: Answer<'_>,
) -> Result<Judged, InputError> {
    let judged = match tool {
        Some(tool) => policy.judge(tool, &table.args, answer.now),
        None => Judgement::Free,
    };
    Ok(match judged {
        Judgement::Forbidden { rule, reason } if table.new_proposal => {
            return Err(InputError::EditForbidden {
                approval_id: answer.approval_id.to_owned(),
                rule,
                reason,
            });
        }
        Judgement::Forbidden { rule, reason } => {
            refuse(call, &rule, &reason);
            Judged::Ended(ApprovalResolution::DeniedByRule {
                at_ms: answer.now,
                rule,
                reason,
            })
        }
        Judgement::Asks { rule, needs: more } => Judged::Needs(needs.merge(&more), rule),
        Judgement::Free => Judged::Needs(needs.clone(), None),
    })
}

/// Whether this answer can be a signature of `args` as they now need `required`: the signer
/// may sign it, with a step-up bound to exactly these arguments when it asks for one.
fn signs(required: &Requirement, args: &Value, answer: Answer<'_>) -> Result<(), InputError> {
    let who = answer.who;
    countersign::may_sign(required, who.signer, who.requester)
        .map_err(|e| answer.not_eligible(e))?;
    if !required.step_up {
        return Ok(());
    }
    match who.signer.step_up_for(answer.approval_id) {
        None => Err(InputError::StepUpRequired {
            approval_id: answer.approval_id.to_owned(),
        }),
        Some(step_up) if step_up.args_digest != countersign::args_digest(args) => {
            Err(InputError::StepUpMismatch {
                approval_id: answer.approval_id.to_owned(),
            })
        }
        Some(_) => Ok(()),
    }
}

/// The call after an answer that grew what it `needs` into `required` (the ruling says so, with
/// the rule that asks) or made a new proposal (signatures given for other arguments no longer
/// count): its revision moves. Whether earlier signatures were dropped.
fn revise(
    call: &mut StepCall,
    table: &OnTable,
    needs: &Requirement,
    required: &Requirement,
    asking_rule: Option<String>,
    who: Who<'_>,
) -> bool {
    let grew = required != needs;
    if grew {
        let rule = asking_rule.or_else(|| match &call.ruling {
            Some(Ruling::Asked { rule, .. }) => rule.clone(),
            _ => None,
        });
        call.ruling = Some(Ruling::Asked {
            rule,
            grantable: false,
            needs: Some(required.clone()),
        });
    }
    let restarted = table.new_proposal && !call.signatures.is_empty();
    if table.new_proposal {
        // Signatures count for the arguments they approved: an edit starts again.
        call.signatures.clear();
        call.signed_args = table.edited.then(|| table.args.clone());
        call.proposed_by = table.edited.then(|| who.signer.id.clone());
        call.revision += 1;
    } else if grew {
        call.revision += 1;
    }
    restarted
}
