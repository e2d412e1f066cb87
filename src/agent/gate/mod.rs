//! The approval gate: the reason Countersign exists (ADR 0017).
//!
//! A tool call that needs the person's countersignature waits in the server's session as a
//! [`StepCall`] in phase [`CallPhase::AwaitingApproval`], keyed by a server-issued approval id and
//! holding the exact call (id, name, validated arguments). The client can only answer "approval
//! X: approve | approve with these arguments | deny (reason)". An answer is accepted once, for a
//! pending approval of that session only, before its deadline; anything else is an
//! [`InputError`] and changes nothing. Edited arguments are validated against the tool's schema
//! again. Browser tools wait in [`CallPhase::AwaitingBrowser`] for the result of *their*
//! toolCallId (never matched by tool name).
//!
//! The gate is a pure state machine over a step's calls ([`machine`]): *request* (the step's
//! calls, now) → pending approvals; *answer* (the person's inputs, now) → accepted resolutions
//! or an [`InputError`]; *tick* (now) → expiries. No tokio, no locks, no I/O: the turn loop turns
//! its transitions into chunks, audit events and commits. Every acceptance rule lives in it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod countersign;
pub mod machine;
#[cfg(test)]
mod proposal_tests;
pub mod resent;

pub use countersign::{Signer, StepUp};
pub use machine::{
    Against, Answered, Expiry, Gate, GrantAsked, Proposed, Request, Signed, next_deadline, stale,
};
pub use resent::{Held, Resent};

use super::{
    clock::Millis,
    history::{Outcome, ToolCall},
    schema::SchemaError,
    tools::ToolLocation,
};
use crate::protocol::{
    countersign::{Dropped, Signature},
    grant::{GrantRequest, Ruling},
};

/// The person's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    Approve,
    /// Approve, running the call with these arguments instead (a full replacement).
    ApproveWithEdits {
        args: Value,
    },
    Deny {
        reason: Option<String>,
    },
    /// Approve (with these arguments, when edited) and remember it as a grant.
    ApproveAndGrant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Value>,
        grant: GrantRequest,
    },
    /// "Not now": no decision. The call ends undecided (the model is told so) and the person
    /// can ask for it again from its card.
    Dismiss,
}

impl ApprovalDecision {
    /// Whether the person said yes.
    pub fn approves(&self) -> bool {
        matches!(
            self,
            ApprovalDecision::Approve
                | ApprovalDecision::ApproveWithEdits { .. }
                | ApprovalDecision::ApproveAndGrant { .. }
        )
    }
}

/// How an approval ended (kept after the call is done, to answer late or repeated answers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalResolution {
    Approved {
        at_ms: Millis,
        edited: bool,
    },
    Denied {
        at_ms: Millis,
        reason: Option<String>,
    },
    Expired {
        at_ms: Millis,
    },
    /// The model withdrew the call before the person answered (Gemini Live cancellation).
    Withdrawn {
        at_ms: Millis,
    },
    /// The person dismissed it without deciding ("not now").
    Dismissed {
        at_ms: Millis,
    },
    /// A new message from the person replaced the turn that waited for it.
    Superseded {
        at_ms: Millis,
    },
    /// Decided without the person, by a policy rule or a grant (AI SDK v7's automatic
    /// approval): kept so a client that sends it back is recognised.
    Automatic {
        at_ms: Millis,
        approved: bool,
    },
    /// The person approved, but a policy rule (loaded after the call asked) forbids it now.
    DeniedByRule {
        at_ms: Millis,
        rule: String,
        reason: String,
    },
}

impl ApprovalResolution {
    /// Why a (further) answer to an approval resolved like this is refused.
    pub fn refusal(&self, approval_id: &str) -> InputError {
        let approval_id = approval_id.to_owned();
        match self {
            ApprovalResolution::Expired { .. } => InputError::ApprovalExpired { approval_id },
            ApprovalResolution::Withdrawn { .. } => InputError::ApprovalWithdrawn { approval_id },
            ApprovalResolution::Dismissed { .. } => InputError::ApprovalDismissed { approval_id },
            ApprovalResolution::Superseded { .. } => InputError::ApprovalSuperseded { approval_id },
            _ => InputError::ApprovalAlreadyAnswered { approval_id },
        }
    }
}

/// Where one tool call of the current step stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum CallPhase {
    /// Waiting for the person's countersignature (or, when a rule asks for several people, for
    /// more of them: [`StepCall::signatures`]).
    AwaitingApproval {
        approval_id: String,
        requested_at_ms: Millis,
        deadline_ms: Millis,
    },
    /// Cleared to run on the server (approved, or no approval needed).
    Ready { args: Value, edited: bool },
    /// Running on the server.
    Running { args: Value, edited: bool },
    /// Dispatched to the browser; waiting for its result.
    AwaitingBrowser {
        args: Value,
        edited: bool,
        deadline_ms: Millis,
    },
    /// Finished, one way or another.
    Done {
        outcome: Outcome,
        edited_args: Option<Value>,
    },
}

/// One tool call of the current step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepCall {
    pub call: ToolCall,
    pub location: ToolLocation,
    pub phase: CallPhase,
    /// Whether the chunk that reports the call's end has been emitted.
    pub announced: bool,
    /// The approval id this call was gated by, kept after the answer (for the audit log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gated_by: Option<String>,
    /// What the policy decided for it (a rule or a grant let it run or refused it, or it asks);
    /// `None`: it ran as its tool says, with nothing to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ruling: Option<Ruling>,
    /// For an approval that needs several people: the signatures so far (kept once it ends,
    /// for the part that says how it ended), and who denied it. `signed_args`: the arguments
    /// on the table when an edit replaced the call's (a new proposal, ADR 0028).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<Signature>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_args: Option<Value>,
    /// Who made the last edit that is on the table (their client resends it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<String>,
    /// Signatures that stopped counting while it waited (the person was removed or lost the
    /// role): [`countersign::recheck`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
    /// How many times its countersigning changed (a signature, an edit that made a new
    /// proposal, a requirement that grew, a signature that stopped counting), and how many of
    /// those changes the page was shown (`data-countersign` parts); and whether the part that
    /// ends the countersigning was emitted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub revision: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub revision_shown: u32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub countersign_closed: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl StepCall {
    pub fn is_done(&self) -> bool {
        matches!(self.phase, CallPhase::Done { .. })
    }

    /// Whether the call waits for the person or the browser.
    pub fn is_waiting(&self) -> bool {
        matches!(
            self.phase,
            CallPhase::AwaitingApproval { .. } | CallPhase::AwaitingBrowser { .. }
        )
    }

    /// What its approval needs (the chat's person's click, unless a rule asks for more).
    pub fn needs(&self) -> crate::protocol::countersign::Requirement {
        self.ruling.as_ref().map(Ruling::needs).unwrap_or_default()
    }

    /// The arguments its approval is for: the call's, or those of the last edit that made it
    /// a new proposal.
    pub fn proposal(&self) -> &Value {
        self.signed_args.as_ref().unwrap_or(&self.call.args)
    }

    pub fn approval_id(&self) -> Option<&str> {
        match &self.phase {
            CallPhase::AwaitingApproval { approval_id, .. } => Some(approval_id),
            _ => None,
        }
    }
}

/// What the browser reports for a delegated tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BrowserResult {
    Output { output: Value },
    Error { message: String },
}

impl BrowserResult {
    pub fn into_outcome(self) -> Outcome {
        match self {
            BrowserResult::Output { output } => Outcome::Output { output },
            BrowserResult::Error { message } => Outcome::Error {
                message: if message.trim().is_empty() {
                    "The browser reported an error without a message.".into()
                } else {
                    message
                },
            },
        }
    }
}

/// Input only the person (or their browser) can give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PersonInput {
    Approval {
        approval_id: String,
        decision: ApprovalDecision,
        /// A passkey assertion confirming it (step-up), as the browser's `toJSON()` gives it;
        /// verified before the gate sees the answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_up: Option<Value>,
    },
    BrowserResult {
        tool_call_id: String,
        result: BrowserResult,
    },
}

/// Why person input was rejected. Nothing changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("this chat has no turn waiting for an answer")]
    NoActiveTurn,
    #[error("approval {approval_id} is not known in this chat")]
    UnknownApproval { approval_id: String },
    #[error("approval {approval_id} belongs to another chat")]
    ApprovalOfOtherChat { approval_id: String },
    #[error("approval {approval_id} was already answered")]
    ApprovalAlreadyAnswered { approval_id: String },
    #[error("approval {approval_id} expired before it was answered")]
    ApprovalExpired { approval_id: String },
    #[error("approval {approval_id} was withdrawn by the model before it was answered")]
    ApprovalWithdrawn { approval_id: String },
    #[error(
        "approval {approval_id} was dismissed without a decision; ask for it again from its card"
    )]
    ApprovalDismissed { approval_id: String },
    #[error("approval {approval_id} ended when a new message replaced its turn")]
    ApprovalSuperseded { approval_id: String },
    #[error(
        "the edited arguments for approval {approval_id} are forbidden by the policy rule {rule:?}: {reason}"
    )]
    EditForbidden {
        approval_id: String,
        rule: String,
        reason: String,
    },
    #[error("approval {approval_id} cannot be remembered as asked: {message}")]
    GrantRefused {
        approval_id: String,
        message: String,
    },
    #[error("the edited arguments for approval {approval_id} are invalid: {error}")]
    InvalidEdit {
        approval_id: String,
        error: SchemaError,
    },
    #[error("tool call {tool_call_id} is not known in this chat")]
    UnknownToolCall { tool_call_id: String },
    /// The answers came in a copy of a message that is not the chat's current assistant
    /// message (nor one it wrote earlier).
    #[error("message {message_id} is not this chat's current assistant message ({current})")]
    StaleMessage { message_id: String, current: String },
    #[error("tool call {tool_call_id} ({tool}) runs on the server; the browser cannot answer it")]
    NotABrowserTool { tool_call_id: String, tool: String },
    #[error("tool call {tool_call_id} has not been approved yet")]
    NotApprovedYet { tool_call_id: String },
    #[error("tool call {tool_call_id} was denied; it takes no result")]
    CallWasDenied { tool_call_id: String },
    #[error("tool call {tool_call_id} already has its result")]
    ResultAlreadyReceived { tool_call_id: String },
    /// The answer was valid but could not be written to the store; it was taken back.
    #[error("the answer could not be recorded, nothing was done; try again ({message})")]
    NotRecorded { message: String },
    #[error("you may not decide approval {approval_id}: {why}")]
    NotAnApprover { approval_id: String, why: String },
    #[error("you already approved {approval_id}; it needs someone else now")]
    AlreadySigned { approval_id: String },
    #[error(
        "approval {approval_id} needs a passkey confirmation made for these arguments; confirm with your passkey"
    )]
    StepUpRequired { approval_id: String },
    #[error(
        "the passkey confirmation was made for other arguments than approval {approval_id} would run; confirm again"
    )]
    StepUpMismatch { approval_id: String },
    #[error("the passkey confirmation was not accepted: {message}")]
    StepUpRefused { message: String },
    /// Another instance sharing the database changed the chat first (ADR 0025): nothing was
    /// done here.
    #[error(
        "this chat was answered on another server first, so nothing was done here; reload it to see where it is"
    )]
    AnsweredElsewhere,
    /// The chat's turn is running on another instance sharing the database and did not come to
    /// wait for the person within a few seconds: nothing was done (ADR 0025).
    #[error(
        "this chat's turn is running on another server right now, so nothing was done; answer again in a moment"
    )]
    RunningElsewhere,
}

impl InputError {
    /// A stable machine-readable code for HTTP error bodies and error chunks.
    pub fn code(&self) -> &'static str {
        match self {
            InputError::NoActiveTurn => "no_active_turn",
            InputError::UnknownApproval { .. } => "unknown_approval",
            InputError::ApprovalOfOtherChat { .. } => "approval_of_other_chat",
            InputError::ApprovalAlreadyAnswered { .. } => "approval_already_answered",
            InputError::ApprovalExpired { .. } => "approval_expired",
            InputError::ApprovalWithdrawn { .. } => "approval_withdrawn",
            InputError::ApprovalDismissed { .. } => "approval_dismissed",
            InputError::ApprovalSuperseded { .. } => "approval_superseded",
            InputError::EditForbidden { .. } => "edit_forbidden",
            InputError::GrantRefused { .. } => "grant_refused",
            InputError::InvalidEdit { .. } => "invalid_edit",
            InputError::UnknownToolCall { .. } => "unknown_tool_call",
            InputError::StaleMessage { .. } => "stale_message",
            InputError::NotABrowserTool { .. } => "not_a_browser_tool",
            InputError::NotApprovedYet { .. } => "not_approved_yet",
            InputError::CallWasDenied { .. } => "call_was_denied",
            InputError::ResultAlreadyReceived { .. } => "result_already_received",
            InputError::NotRecorded { .. } => "not_recorded",
            InputError::NotAnApprover { .. } => "not_an_approver",
            InputError::AlreadySigned { .. } => "already_signed",
            InputError::StepUpRequired { .. } => "step_up_required",
            InputError::StepUpMismatch { .. } => "step_up_mismatch",
            InputError::StepUpRefused { .. } => "step_up_refused",
            InputError::AnsweredElsewhere => "answered_elsewhere",
            InputError::RunningElsewhere => "running_elsewhere",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_error_has_a_distinct_code() {
        let errors = [
            InputError::NoActiveTurn,
            InputError::UnknownApproval {
                approval_id: "a".into(),
            },
            InputError::ApprovalOfOtherChat {
                approval_id: "a".into(),
            },
            InputError::ApprovalAlreadyAnswered {
                approval_id: "a".into(),
            },
            InputError::ApprovalExpired {
                approval_id: "a".into(),
            },
            InputError::ApprovalDismissed {
                approval_id: "a".into(),
            },
            InputError::ApprovalSuperseded {
                approval_id: "a".into(),
            },
            InputError::EditForbidden {
                approval_id: "a".into(),
                rule: "r".into(),
                reason: "no".into(),
            },
            InputError::GrantRefused {
                approval_id: "a".into(),
                message: "no".into(),
            },
            InputError::InvalidEdit {
                approval_id: "a".into(),
                error: SchemaError {
                    path: "$".into(),
                    message: "x".into(),
                },
            },
            InputError::UnknownToolCall {
                tool_call_id: "c".into(),
            },
            InputError::NotABrowserTool {
                tool_call_id: "c".into(),
                tool: "t".into(),
            },
            InputError::NotApprovedYet {
                tool_call_id: "c".into(),
            },
            InputError::CallWasDenied {
                tool_call_id: "c".into(),
            },
            InputError::ResultAlreadyReceived {
                tool_call_id: "c".into(),
            },
            InputError::NotRecorded {
                message: "m".into(),
            },
            InputError::NotAnApprover {
                approval_id: "a".into(),
                why: "w".into(),
            },
            InputError::AlreadySigned {
                approval_id: "a".into(),
            },
            InputError::StepUpRequired {
                approval_id: "a".into(),
            },
            InputError::StepUpMismatch {
                approval_id: "a".into(),
            },
            InputError::StepUpRefused {
                message: "m".into(),
            },
            InputError::AnsweredElsewhere,
            InputError::RunningElsewhere,
        ];
        let mut codes: Vec<_> = errors.iter().map(InputError::code).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), errors.len());
    }
}
