//! The gate's transitions over one step's calls (ADR 0017):
//!
//! * [`Gate::request`] — at the end of a model step, the policy ([`Decide`]) rules on each call
//!   cleared to run: it waits for the person, or a rule refuses it, or it is let run (by its
//!   tool's own setting, a rule or the person's grant) — and then waits for the browser or stays
//!   ready to run on the server;
//! * [`Gate::answer`] — the person's inputs (approval answers, browser results), all or
//!   nothing: every acceptance rule (unknown, foreign, already answered, expired, withdrawn,
//!   dismissed, edited arguments against the schema and the rules, a grant the approval may not
//!   make, a result for the wrong kind of call) is decided here;
//! * [`Gate::tick`] — deadlines: approvals and browser calls past theirs end;
//! * [`Gate::repeats`] (and [`Gate::echo`]) — whether an answer a client sends again merely
//!   repeats what the server holds (AI SDK clients resend the whole conversation).
//!
//! Every approval is judged by the rules on the arguments that would run; an edit is a new
//! proposal whose requirement only grows (ADR 0028).
//!
//! Pure: time comes in as `now`, new approval ids from the caller, nothing is awaited, locked or
//! written. The turn loop turns the transitions into chunks, audit events and commits.

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value;

use super::{
    ApprovalDecision, ApprovalResolution, CallPhase, InputError, PersonInput, StepCall,
    countersign::{self, Signer},
};
use crate::agent::{
    clock::Millis,
    history::Outcome,
    journal::Keyed,
    policy::{Decide, Judgement, Verdict},
    schema::{SchemaError, validate},
    tools::{ToolLocation, ToolRegistry},
};
use crate::protocol::{
    chunk::BROWSER_TIMEOUT_PREFIX,
    countersign::Signature,
    grant::{GrantRequest, Ruling},
};

/// The gate of a runtime's tools.
#[derive(Clone, Copy)]
pub struct Gate<'a> {
    tools: &'a ToolRegistry,
    /// The turn's client runs browser calls without reporting back
    /// ([`Gate::acknowledging_browser_calls`]).
    acknowledge_browser: bool,
}

/// An approval the gate issued: one the person is asked for (`ruling` is
/// [`Ruling::Asked`], until `deadline_ms`), or one a rule or a grant decided at once (AI SDK v7's
/// automatic approval: the call was let run or refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub tool_call_id: String,
    pub approval_id: String,
    pub deadline_ms: Millis,
    pub ruling: Ruling,
}

impl Request {
    /// Whether it was decided without the person.
    pub fn is_automatic(&self) -> bool {
        !matches!(self.ruling, Ruling::Asked { .. })
    }
}

/// A wait that ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expiry {
    /// The person did not answer in time: the call ended as expired.
    Approval {
        tool_call_id: String,
        approval_id: String,
        deadline_ms: Millis,
    },
    /// The browser did not return a result in time: the call ended with an error.
    Browser {
        tool_call_id: String,
        waited: Duration,
    },
}

/// Inputs the gate accepted: the step's calls after them, how each approval they answered
/// was resolved (in input order), and the grants the person asked for with them.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub calls: Vec<StepCall>,
    pub resolutions: Vec<(String, ApprovalResolution)>,
    pub grants: Vec<GrantAsked>,
    /// The signatures given to approvals that need several people (complete or not).
    pub signed: Vec<Signed>,
    /// Edits that became new proposals the editor could not sign themselves: the call waits
    /// for what its new arguments need.
    pub proposed: Vec<Proposed>,
}

/// An edit that made a waiting call a new proposal, which now needs others (or a passkey
/// confirmation the answer did not carry): nobody has signed it yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposed {
    pub approval_id: String,
    pub tool_call_id: String,
    /// The arguments now on the table.
    pub args: Value,
    /// What they need (never less than before).
    pub needs: crate::protocol::countersign::Requirement,
    /// Signatures given for the arguments before no longer count.
    pub restarted: bool,
}

/// One person's approval of an approval that needs several.
#[derive(Debug, Clone, PartialEq)]
pub struct Signed {
    pub approval_id: String,
    pub tool_call_id: String,
    pub signature: Signature,
    /// The arguments they approved (edited or not).
    pub args: Value,
    /// Their edit replaced the arguments the earlier signatures were for: those no longer count.
    pub restarted: bool,
    /// With it the approval has what it needs: the call runs.
    pub complete: bool,
}

/// A grant the person asked for with an approval the gate accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct GrantAsked {
    pub approval_id: String,
    pub tool_call_id: String,
    pub tool: String,
    /// The arguments that run (edited or not).
    pub args: Value,
    pub request: GrantRequest,
}

/// The deadline of a browser call when its tool is unknown (it cannot be: calls of unknown tools
/// never get this far).
const FALLBACK_RESULT_TIMEOUT: Duration = Duration::from_secs(30);

impl<'a> Gate<'a> {
    pub fn new(tools: &'a ToolRegistry) -> Self {
        Gate {
            tools,
            acknowledge_browser: false,
        }
    }

    /// The gate for a turn whose client runs browser calls itself and never reports their
    /// results ([`crate::agent::BrowserCalls::Unreported`]): a browser call that needs no approval ends at
    /// once with its tool's acknowledgment ([`ToolSpec::acknowledgment`]) instead of waiting for
    /// a result that will not come. Calls that need approval, and tools without an
    /// acknowledgment, wait for the browser as always.
    ///
    /// [`ToolSpec::acknowledgment`]: crate::agent::tools::ToolSpec::acknowledgment
    pub fn acknowledging_browser_calls(self) -> Self {
        Gate {
            acknowledge_browser: true,
            ..self
        }
    }

    /// How long `tool`'s browser result may take.
    fn result_timeout(&self, tool: &str) -> Duration {
        self.tools
            .get(tool)
            .map_or(FALLBACK_RESULT_TIMEOUT, |t| t.spec.result_timeout)
    }

    /// When a browser call of `tool` dispatched at `now` times out.
    fn browser_deadline(&self, tool: &str, now: Millis) -> Millis {
        now + self.result_timeout(tool).as_millis() as Millis
    }

    /// At the end of a step: the policy rules on each call cleared to run (`Ready`). A call it
    /// asks for waits for the person (with an approval id from `next_id`); one a rule refuses
    /// ends denied; one it lets run (a rule, a grant, or its tool's own setting) waits for the
    /// browser when it is a browser tool (or ends acknowledged, see
    /// [`Gate::acknowledging_browser_calls`]), else stays ready to run on the server. Calls a
    /// rule or a grant decided get an approval id too: AI SDK v7 shows them as automatic
    /// approvals.
    pub fn request(
        &self,
        calls: &mut [StepCall],
        now: Millis,
        mut next_id: impl FnMut() -> String,
        decide: &mut dyn Decide,
    ) -> Vec<Request> {
        let mut requests = Vec::new();
        for call in calls {
            let CallPhase::Ready { args, .. } = &call.phase else {
                continue;
            };
            let Some(tool) = self.tools.get(&call.call.name) else {
                continue;
            };
            let verdict = decide.decide(&call.call.id, &tool.spec, args, now);
            if let Verdict::Ruled(ruling) = &verdict {
                let approval_id = next_id();
                let deadline_ms = now + tool.spec.approval_timeout.as_millis() as Millis;
                call.gated_by = Some(approval_id.clone());
                call.ruling = Some(ruling.clone());
                requests.push(Request {
                    tool_call_id: call.call.id.clone(),
                    approval_id: approval_id.clone(),
                    deadline_ms,
                    ruling: ruling.clone(),
                });
                match ruling {
                    Ruling::Asked { .. } => {
                        call.phase = CallPhase::AwaitingApproval {
                            approval_id,
                            requested_at_ms: now,
                            deadline_ms,
                        };
                        continue;
                    }
                    Ruling::DeniedByRule { rule, reason } => {
                        refuse(call, rule, reason);
                        continue;
                    }
                    Ruling::AllowedByRule { .. } | Ruling::AllowedByGrant { .. } => {}
                }
            }
            let CallPhase::Ready { args, .. } = &call.phase else {
                continue;
            };
            if tool.spec.location == ToolLocation::Browser {
                call.phase = match tool
                    .spec
                    .acknowledgment
                    .filter(|_| self.acknowledge_browser)
                {
                    Some(acknowledge) => CallPhase::Done {
                        outcome: Outcome::Output {
                            output: acknowledge(args),
                        },
                        edited_args: None,
                    },
                    None => CallPhase::AwaitingBrowser {
                        args: args.clone(),
                        edited: false,
                        deadline_ms: self.browser_deadline(&call.call.name, now),
                    },
                };
                call.announced = false;
            }
        }
        requests
    }

    /// The person's `inputs` for the waiting step's `calls` (`None`: no turn waits), all or
    /// nothing: on any refusal nothing is answered and the error says why.
    ///
    /// An approval is checked against the policy as it is now, with the arguments that will
    /// run: edited arguments a rule forbids are refused (the person may edit again); an
    /// approval a rule forbids now (the rules changed while it waited) ends the call denied by
    /// that rule. A grant is accepted only where the policy left the call to the person.
    ///
    /// `signer` is who answers and `requester` whose chat it is: the countersignature rules
    /// ([`countersign`]) say who may approve or deny what.
    #[allow(clippy::too_many_arguments)]
    pub fn answer(
        &self,
        calls: Option<&[StepCall]>,
        resolved: &BTreeMap<String, ApprovalResolution>,
        inputs: &[PersonInput],
        now: Millis,
        decide: &mut dyn Decide,
        signer: &Signer,
        requester: &str,
    ) -> Result<Answered, InputError> {
        let Some(calls) = calls else {
            return Err(stale(inputs, resolved));
        };
        let mut answered = Answered {
            calls: calls.to_vec(),
            resolutions: Vec::new(),
            grants: Vec::new(),
            signed: Vec::new(),
            proposed: Vec::new(),
        };
        let who = Who { signer, requester };
        for input in inputs {
            self.apply(&mut answered, resolved, input, now, decide, who)?;
        }
        Ok(answered)
    }

    /// Applies one input to the working copy of the calls.
    fn apply(
        &self,
        answered: &mut Answered,
        resolved: &BTreeMap<String, ApprovalResolution>,
        input: &PersonInput,
        now: Millis,
        decide: &mut dyn Decide,
        who: Who<'_>,
    ) -> Result<(), InputError> {
        let Answered {
            calls,
            resolutions,
            grants,
            signed,
            proposed,
        } = answered;
        match input {
            PersonInput::Approval {
                approval_id,
                decision,
                ..
            } => {
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
                let decided = self.decide(call, approval_id, decision, now, decide, who)?;
                if let Some(resolution) = decided.resolution {
                    resolutions.push((approval_id.clone(), resolution));
                }
                grants.extend(decided.grant);
                signed.extend(decided.signed);
                proposed.extend(decided.proposed);
                Ok(())
            }
            PersonInput::BrowserResult {
                tool_call_id,
                result,
            } => {
                let Some(call) = calls.iter_mut().find(|c| &c.call.id == tool_call_id) else {
                    return Err(InputError::UnknownToolCall {
                        tool_call_id: tool_call_id.clone(),
                    });
                };
                if call.location != ToolLocation::Browser {
                    return Err(InputError::NotABrowserTool {
                        tool_call_id: tool_call_id.clone(),
                        tool: call.call.name.clone(),
                    });
                }
                match &call.phase {
                    CallPhase::AwaitingBrowser { args, edited, .. } => {
                        let edited_args = edited.then(|| args.clone());
                        call.phase = CallPhase::Done {
                            outcome: result.clone().into_outcome(),
                            edited_args,
                        };
                        call.announced = false;
                        Ok(())
                    }
                    CallPhase::AwaitingApproval { .. } => Err(InputError::NotApprovedYet {
                        tool_call_id: tool_call_id.clone(),
                    }),
                    CallPhase::Done {
                        outcome: Outcome::Denied { .. },
                        ..
                    } => Err(InputError::CallWasDenied {
                        tool_call_id: tool_call_id.clone(),
                    }),
                    _ => Err(InputError::ResultAlreadyReceived {
                        tool_call_id: tool_call_id.clone(),
                    }),
                }
            }
        }
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
        approval_id: &str,
        decision: &ApprovalDecision,
        now: Millis,
        policy: &mut dyn Decide,
        who: Who<'_>,
    ) -> Result<Decided, InputError> {
        let needs = call.needs();
        let not_eligible = |e: countersign::NotEligible| InputError::NotAnApprover {
            approval_id: approval_id.to_owned(),
            why: e.0,
        };
        let (asked, grant): (Option<&Value>, Option<&GrantRequest>) = match decision {
            ApprovalDecision::Deny { reason } => {
                countersign::may_deny(&needs, who.signer, who.requester).map_err(not_eligible)?;
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
                return Ok(Decided::ended(ApprovalResolution::Denied {
                    at_ms: now,
                    reason,
                }));
            }
            ApprovalDecision::Dismiss => {
                if who.signer.id != who.requester {
                    return Err(not_eligible(countersign::NotEligible(
                        "only the person who asked may set it aside; approve or deny it".into(),
                    )));
                }
                call.phase = CallPhase::Done {
                    outcome: Outcome::Dismissed,
                    edited_args: None,
                };
                call.announced = false;
                return Ok(Decided::ended(ApprovalResolution::Dismissed { at_ms: now }));
            }
            ApprovalDecision::Approve => (None, None),
            ApprovalDecision::ApproveWithEdits { args } => (Some(args), None),
            ApprovalDecision::ApproveAndGrant { args, grant } => (args.as_ref(), Some(grant)),
        };
        // Whoever acts on an approval must be someone who may sign it as it stands.
        countersign::may_sign(&needs, who.signer, who.requester).map_err(not_eligible)?;
        let proposal = call.proposal().clone();
        let tool = self.tools.get(&call.call.name);
        let args = match (asked, &tool) {
            (None, _) => proposal.clone(),
            (Some(args), _) if *args == proposal => proposal.clone(),
            (Some(args), Some(tool)) => {
                let invalid = |error| InputError::InvalidEdit {
                    approval_id: approval_id.to_owned(),
                    error,
                };
                let args = tool.spec.canonical_args(args).map_err(invalid)?;
                validate(&tool.spec.parameters, &args).map_err(invalid)?;
                args
            }
            (Some(_), None) => {
                return Err(InputError::InvalidEdit {
                    approval_id: approval_id.to_owned(),
                    error: SchemaError {
                        path: "$".into(),
                        message: format!("{} is no longer offered", call.call.name),
                    },
                });
            }
        };
        let new_proposal = args != proposal;
        if !new_proposal && call.signatures.iter().any(|s| s.person == who.signer.id) {
            return Err(InputError::AlreadySigned {
                approval_id: approval_id.to_owned(),
            });
        }
        let edited = args != call.call.args;
        // The rules in force, on the arguments that would run.
        let judged = match &tool {
            Some(tool) => policy.judge(&tool.spec, &args, now),
            None => Judgement::Free,
        };
        let (required, asking_rule) = match judged {
            Judgement::Forbidden { rule, reason } if new_proposal => {
                return Err(InputError::EditForbidden {
                    approval_id: approval_id.to_owned(),
                    rule,
                    reason,
                });
            }
            Judgement::Forbidden { rule, reason } => {
                refuse(call, &rule, &reason);
                return Ok(Decided::ended(ApprovalResolution::DeniedByRule {
                    at_ms: now,
                    rule,
                    reason,
                }));
            }
            Judgement::Asks { rule, needs: more } => (needs.merge(&more), rule),
            Judgement::Free => (needs.clone(), None),
        };
        let grew = required != needs;
        // Can this answer be a signature of what is now on the table?
        let signs = countersign::may_sign(&required, who.signer, who.requester)
            .map_err(not_eligible)
            .and_then(|()| {
                if !required.step_up {
                    return Ok(());
                }
                match who.signer.step_up_for(approval_id) {
                    None => Err(InputError::StepUpRequired {
                        approval_id: approval_id.to_owned(),
                    }),
                    Some(step_up) if step_up.args_digest != countersign::args_digest(&args) => {
                        Err(InputError::StepUpMismatch {
                            approval_id: approval_id.to_owned(),
                        })
                    }
                    Some(_) => Ok(()),
                }
            });
        let proposed_only = match signs {
            Ok(()) => false,
            // A passkey confirmation of other arguments is never a proposal of these.
            Err(e @ InputError::StepUpMismatch { .. }) => return Err(e),
            // An edit that now needs others, or a passkey: the call waits for them, for these
            // arguments (a grant cannot be remembered from it).
            Err(_) if new_proposal && grant.is_none() => true,
            Err(e) => return Err(e),
        };
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
        let restarted = new_proposal && !call.signatures.is_empty();
        if new_proposal {
            // Signatures count for the arguments they approved: an edit starts again.
            call.signatures.clear();
            call.signed_args = edited.then(|| args.clone());
            call.proposed_by = edited.then(|| who.signer.id.clone());
            call.revision += 1;
        } else if grew {
            call.revision += 1;
        }
        if proposed_only {
            return Ok(Decided {
                resolution: None,
                grant: None,
                signed: None,
                proposed: Some(Proposed {
                    approval_id: approval_id.to_owned(),
                    tool_call_id: call.call.id.clone(),
                    args,
                    needs: required,
                    restarted,
                }),
            });
        }
        let grant = match grant {
            None => None,
            Some(request) => Some(self.grant_asked(
                call,
                approval_id,
                &required,
                tool.as_ref().map(|t| &t.spec),
                &args,
                request,
                policy,
            )?),
        };
        if required.is_plain() {
            // The chat's person approved what they edited: it runs; nothing was proposed.
            call.signed_args = None;
            call.proposed_by = None;
            self.clear(call, args, edited, now);
            return Ok(Decided {
                resolution: Some(ApprovalResolution::Approved { at_ms: now, edited }),
                grant,
                signed: None,
                proposed: None,
            });
        }
        let signature = Signature {
            person: who.signer.id.clone(),
            name: who.signer.name.clone(),
            at_ms: now,
            step_up: required.step_up,
        };
        call.signatures.push(signature.clone());
        call.revision += 1;
        let complete = countersign::is_complete(&required, &call.signatures);
        let signed = Signed {
            approval_id: approval_id.to_owned(),
            tool_call_id: call.call.id.clone(),
            signature,
            args: args.clone(),
            restarted,
            complete,
        };
        if !complete {
            return Ok(Decided {
                resolution: None,
                grant: None,
                signed: Some(signed),
                proposed: None,
            });
        }
        self.clear(call, args, edited, now);
        Ok(Decided {
            resolution: Some(ApprovalResolution::Approved { at_ms: now, edited }),
            grant,
            signed: Some(signed),
            proposed: None,
        })
    }

    /// The grant an approval asks for, when the policy left the call to the person (and only
    /// to them) and the grant fits the call; else why not.
    #[allow(clippy::too_many_arguments)]
    fn grant_asked(
        &self,
        call: &StepCall,
        approval_id: &str,
        required: &crate::protocol::countersign::Requirement,
        tool: Option<&crate::agent::tools::ToolSpec>,
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

    /// Deadlines at `now`: an approval past its deadline ends as expired (and is recorded in
    /// `resolved`, so a late answer is told so), a browser call past its deadline ends with an
    /// error.
    pub fn tick(
        &self,
        calls: &mut [StepCall],
        resolved: &mut Keyed<String, ApprovalResolution>,
        now: Millis,
    ) -> Vec<Expiry> {
        let mut expiries = Vec::new();
        for call in calls {
            match &call.phase {
                CallPhase::AwaitingApproval {
                    approval_id,
                    deadline_ms,
                    ..
                } if now >= *deadline_ms => {
                    resolved.insert(
                        approval_id.clone(),
                        ApprovalResolution::Expired { at_ms: now },
                    );
                    expiries.push(Expiry::Approval {
                        tool_call_id: call.call.id.clone(),
                        approval_id: approval_id.clone(),
                        deadline_ms: *deadline_ms,
                    });
                    call.phase = CallPhase::Done {
                        outcome: Outcome::Expired,
                        edited_args: None,
                    };
                    call.announced = false;
                }
                CallPhase::AwaitingBrowser {
                    deadline_ms,
                    args,
                    edited,
                } if now >= *deadline_ms => {
                    let waited = self.result_timeout(&call.call.name);
                    call.phase = CallPhase::Done {
                        outcome: Outcome::Error {
                            message: format!("{BROWSER_TIMEOUT_PREFIX} {} s.", waited.as_secs()),
                        },
                        edited_args: edited.then(|| args.clone()),
                    };
                    call.announced = false;
                    expiries.push(Expiry::Browser {
                        tool_call_id: call.call.id.clone(),
                        waited,
                    });
                }
                _ => {}
            }
        }
        expiries
    }

    /// Whether an answer a client sends again merely repeats what the server already holds
    /// (AI SDK clients resend the conversation with every request): `Ok(true)`, nothing to do;
    /// `Ok(false)`, for the gate to judge; `Err`, it contradicts how the approval ended.
    ///
    /// * An approval no call waits for any more: [`Gate::echo`].
    /// * An approval of a call still waiting for others, by someone who signed it: their
    ///   signature.
    /// * The same edit, by the person who made it a new proposal they could not sign themselves,
    ///   without a passkey confirmation: their proposal.
    pub fn repeats(
        calls: Option<&[StepCall]>,
        resolved: &BTreeMap<String, ApprovalResolution>,
        approval_id: &str,
        decision: &ApprovalDecision,
        confirmed: bool,
        signer: &str,
    ) -> Result<bool, InputError> {
        let waiting = calls
            .into_iter()
            .flatten()
            .find(|c| c.approval_id() == Some(approval_id));
        let Some(call) = waiting else {
            return Gate::echo(resolved, approval_id, decision.approves());
        };
        if !decision.approves() {
            return Ok(false);
        }
        if call.signatures.iter().any(|s| s.person == signer) {
            return Ok(true);
        }
        let edit = match decision {
            ApprovalDecision::ApproveWithEdits { args } => Some(args),
            ApprovalDecision::ApproveAndGrant { args, .. } => args.as_ref(),
            _ => None,
        };
        Ok(!confirmed
            && call.proposed_by.as_deref() == Some(signer)
            && call.signed_args.is_some()
            && edit.is_some_and(|args| args == call.proposal()))
    }

    /// Whether an answer to approval `approval_id`, which no call waits for any more, merely
    /// repeats how it was resolved (`Ok(true)`: nothing to do), is for the gate to judge
    /// (`Ok(false)`: the id was never resolved here), or contradicts the resolution (`Err`).
    pub fn echo(
        resolved: &BTreeMap<String, ApprovalResolution>,
        approval_id: &str,
        approved: bool,
    ) -> Result<bool, InputError> {
        match resolved.get(approval_id) {
            None => Ok(false),
            Some(ApprovalResolution::Approved { .. }) if approved => Ok(true),
            Some(ApprovalResolution::Denied { .. } | ApprovalResolution::Dismissed { .. })
                if !approved =>
            {
                Ok(true)
            }
            Some(ApprovalResolution::Automatic { approved: was, .. }) if *was == approved => {
                Ok(true)
            }
            // The person approved; a rule refused it when the approval came in.
            Some(ApprovalResolution::DeniedByRule { .. }) if approved => Ok(true),
            Some(other) => Err(other.refusal(approval_id)),
        }
    }
}

/// Who answers, and whose chat it is.
#[derive(Clone, Copy)]
struct Who<'a> {
    signer: &'a Signer,
    requester: &'a str,
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

/// Ends `call` refused by policy rule `rule`, the model told `reason`.
fn refuse(call: &mut StepCall, rule: &str, reason: &str) {
    call.phase = CallPhase::Done {
        outcome: Outcome::DeniedByRule {
            rule: rule.to_owned(),
            reason: reason.to_owned(),
        },
        edited_args: None,
    };
    call.announced = false;
}

/// Why input for a chat with no waiting turn is refused: an answer to an approval that was
/// already answered (or expired, or withdrawn) says so; anything else finds no turn.
pub fn stale(
    inputs: &[PersonInput],
    resolved: &BTreeMap<String, ApprovalResolution>,
) -> InputError {
    for input in inputs {
        if let PersonInput::Approval { approval_id, .. } = input
            && let Some(resolution) = resolved.get(approval_id)
        {
            return resolution.refusal(approval_id);
        }
    }
    InputError::NoActiveTurn
}

/// The earliest deadline among the calls still waiting.
pub fn next_deadline(calls: &[StepCall]) -> Option<Millis> {
    calls
        .iter()
        .filter_map(|c| match &c.phase {
            CallPhase::AwaitingApproval { deadline_ms, .. }
            | CallPhase::AwaitingBrowser { deadline_ms, .. } => Some(*deadline_ms),
            _ => None,
        })
        .min()
}

#[cfg(test)]
mod tests;
