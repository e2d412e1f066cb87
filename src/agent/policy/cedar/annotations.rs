//! What a rule's annotations say: its name (`@id`), what it does when it matches (`@ask` on a
//! `forbid`), what the person is told (`@reason`), and who must countersign
//! (`@approvers`, `@role`, `@not_requester`, `@step_up`).

use std::collections::BTreeMap;

use cedar_policy::{Effect, Policy};

use super::{RuleEffect, RuleInfo};
use crate::agent::policy::PolicyProblem;
use crate::protocol::countersign::Requirement;

/// The annotations a rule may carry.
const KNOWN_ANNOTATIONS: [&str; 9] = [
    "id",
    "reason",
    "ask",
    "doc",
    "description",
    "approvers",
    "role",
    "not_requester",
    "step_up",
];

/// The most approvers a rule may ask for.
const MAX_APPROVERS: u32 = 20;

/// Reads one rule at `line`:`column`. `Err` is the problem that keeps the file from loading
/// (no or empty `@id`, a name used twice, an annotation where it does not belong); warnings
/// (unknown annotations, a `@reason` that is never told) are pushed onto `warnings`.
pub(super) fn read_rule(
    policy: &Policy,
    line: usize,
    column: usize,
    rules: &BTreeMap<String, RuleInfo>,
    warnings: &mut Vec<PolicyProblem>,
) -> Result<RuleInfo, PolicyProblem> {
    let Some(id) = policy.annotation("id").map(str::trim).map(str::to_owned) else {
        return Err(PolicyProblem::at(
            None,
            line,
            column,
            "this rule has no @id(\"…\"): every rule needs a name, which the audit log and \
             the person see",
        ));
    };
    if id.is_empty() {
        return Err(PolicyProblem::at(None, line, column, "@id(\"\") is empty"));
    }
    if let Some(other) = rules.get(&id) {
        return Err(PolicyProblem::at(
            Some(&id),
            line,
            column,
            format!(
                "two rules are named {id:?} (the other is on line {})",
                other.line
            ),
        ));
    }
    let ask = policy.annotation("ask").is_some();
    let effect = match (policy.effect(), ask) {
        (Effect::Permit, false) => RuleEffect::Run,
        (Effect::Forbid, true) => RuleEffect::Ask,
        (Effect::Forbid, false) => RuleEffect::Deny,
        (Effect::Permit, true) => {
            return Err(PolicyProblem::at(
                Some(&id),
                line,
                column,
                "@ask belongs on a forbid rule (\"ask even if a permit matches\"); a \
                 permit runs the call",
            ));
        }
    };
    for (key, _) in policy.annotations() {
        if !KNOWN_ANNOTATIONS.contains(&key) {
            warnings.push(PolicyProblem::at(
                Some(&id),
                line,
                column,
                format!(
                    "unknown annotation @{key} is ignored (known: @id, @reason, @ask, \
                     @approvers, @role, @not_requester, @step_up, @doc)"
                ),
            ));
        }
    }
    let reason = policy
        .annotation("reason")
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    if reason.is_some() && effect != RuleEffect::Deny {
        warnings.push(PolicyProblem::at(
            Some(&id),
            line,
            column,
            "@reason is told only when a rule denies a call; this rule does not deny",
        ));
    }
    let needs = countersign(policy, effect)
        .map_err(|message| PolicyProblem::at(Some(&id), line, column, message))?;
    Ok(RuleInfo {
        id,
        effect,
        reason,
        needs,
        line,
    })
}

/// What an `@ask` rule's countersignature annotations ask for (`None`: nothing beyond the chat's
/// person's click); an error names what is wrong.
fn countersign(policy: &Policy, effect: RuleEffect) -> Result<Option<Requirement>, String> {
    let approvers = policy.annotation("approvers");
    let role = policy.annotation("role");
    let not_requester = policy.annotation("not_requester").is_some();
    let step_up = policy.annotation("step_up").is_some();
    if approvers.is_none() && role.is_none() && !not_requester && !step_up {
        return Ok(None);
    }
    if effect != RuleEffect::Ask {
        return Err(
            "@approvers, @role, @not_requester and @step_up say who must approve; they belong on \
             an @ask forbid rule"
                .into(),
        );
    }
    let approvers = match approvers {
        None => 1,
        Some(text) => text
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_APPROVERS).contains(n))
            .ok_or_else(|| {
                format!("@approvers({text:?}) must be a whole number from 1 to {MAX_APPROVERS}")
            })?,
    };
    let role = role
        .map(|r| crate::agent::people::role_name(r).map_err(|e| format!("@role: {e}")))
        .transpose()?;
    Ok(Some(Requirement {
        approvers,
        role,
        not_requester,
        step_up,
    }))
}
