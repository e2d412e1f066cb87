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
//! `machine/approval.rs` holds the rules of one answer to one approval, `machine/echo.rs` the
//! rules of a resent one.
//!
//! Pure: time comes in as `now`, new approval ids from the caller, nothing is awaited, locked or
//! written. The turn loop turns the transitions into chunks, audit events and commits.

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value;

use super::{
    ApprovalResolution, BrowserResult, CallPhase, InputError, PersonInput, StepCall,
    countersign::Signer,
};
use crate::agent::{
    clock::Millis,
    history::Outcome,
    journal::Keyed,
    policy::{Decide, Verdict},
    tools::{ToolLocation, ToolRegistry},
};
use crate::protocol::{
    chunk::BROWSER_TIMEOUT_PREFIX,
    countersign::Signature,
    grant::{GrantRequest, Ruling},
};

mod approval;
mod echo;

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

/// What the person's answers are judged against ([`Gate::answer`]): how the chat's approvals
/// were resolved (a late or repeated answer is told how), the time, the policy as it is now
/// (with the arguments that will run), and who answers whose chat.
pub struct Against<'a> {
    pub resolved: &'a BTreeMap<String, ApprovalResolution>,
    pub now: Millis,
    pub policy: &'a mut dyn Decide,
    pub signer: &'a Signer,
    pub requester: &'a str,
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
    /// `against.signer` is who answers and `against.requester` whose chat it is: the
    /// countersignature rules ([`countersign`](super::countersign)) say who may approve or
    /// deny what.
    pub fn answer(
        &self,
        calls: Option<&[StepCall]>,
        inputs: &[PersonInput],
        mut against: Against<'_>,
    ) -> Result<Answered, InputError> {
        let Some(calls) = calls else {
            return Err(stale(inputs, against.resolved));
        };
        let mut answered = Answered {
            calls: calls.to_vec(),
            resolutions: Vec::new(),
            grants: Vec::new(),
            signed: Vec::new(),
            proposed: Vec::new(),
        };
        for input in inputs {
            self.apply(&mut answered, input, &mut against)?;
        }
        Ok(answered)
    }

    /// Applies one input to the working copy of the calls.
    fn apply(
        &self,
        answered: &mut Answered,
        input: &PersonInput,
        against: &mut Against<'_>,
    ) -> Result<(), InputError> {
        match input {
            PersonInput::Approval {
                approval_id,
                decision,
                ..
            } => self.approval(answered, approval_id, decision, against),
            PersonInput::BrowserResult {
                tool_call_id,
                result,
            } => browser_result(&mut answered.calls, tool_call_id, result),
        }
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
}

/// The browser's result for call `tool_call_id` among the waiting step's `calls`: accepted once,
/// for a browser call that was let run and has none yet.
fn browser_result(
    calls: &mut [StepCall],
    tool_call_id: &String,
    result: &BrowserResult,
) -> Result<(), InputError> {
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
