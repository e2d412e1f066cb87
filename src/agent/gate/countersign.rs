//! Who may countersign what (ADR 0024): the rules the gate applies to each person's answer to an
//! approval, as pure functions over the approval's [`Requirement`], the [`Signer`] and the
//! person who asked (whose chat it is).
//!
//! * A **plain** approval (no rule asks for more) is the chat's person's to decide, as always.
//! * An approval that **wants others** (`@approvers`, `@role`, `@not_requester`) is signed by
//!   people signed in with passkeys — never by the one local person or the API key — each with
//!   the role when one is named, never the person who asked when the rule separates duties, and
//!   never the same person twice. It runs once enough of them approved.
//! * **Step-up** (`@step_up`): each approval carries a passkey assertion whose challenge was made
//!   of this approval and these exact arguments (verified before the gate, which checks the
//!   binding).
//! * Any person who may sign may **deny**, and one denial ends it; the person who asked may
//!   always deny (withdraw) their own request, or set it aside ("not now").
//! * A signature counts only while its person **may still sign** ([`Standing`]): someone removed,
//!   or without the role now, no longer counts towards the quorum ([`recheck`]). The runtime
//!   rechecks when people change, when an answer may complete the quorum, and just before a
//!   countersigned call runs, each time with who may sign as the store says at that moment.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{ApprovalResolution, CallPhase, StepCall};
use crate::agent::{clock::Millis, journal::Keyed};
use crate::protocol::countersign::{Dropped, Requirement, Signature};

/// Who answers an approval, as the edge and the people directory know them now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// `local`, or a person's id.
    pub id: String,
    pub name: String,
    /// Their roles now (a revoked person has none).
    pub roles: BTreeSet<String>,
    /// Signed in with a passkey (a person; not the local person or the API key).
    pub person: bool,
    /// The step-up assertions this answer carries, verified: for which approval and which
    /// arguments (SHA-256 hex of their canonical JSON).
    pub step_ups: Vec<StepUp>,
}

/// The tests' signer: a person `id` (named in capitals) with `roles`, no step-up.
#[cfg(test)]
pub(crate) fn test_signer(id: &str, roles: &[&str]) -> Signer {
    Signer {
        id: id.into(),
        name: id.to_uppercase(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
        person: true,
        step_ups: Vec::new(),
    }
}

/// A verified step-up assertion, as the gate needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepUp {
    pub approval_id: String,
    pub args_digest: String,
    /// The passkey's credential id.
    pub passkey: String,
}

impl Signer {
    /// The one local person (no sign-in, the API key): the chat's person of every chat they
    /// start, never a countersigner.
    pub fn local() -> Signer {
        Signer {
            id: crate::protocol::countersign::LOCAL_PERSON.to_owned(),
            name: "Local person".to_owned(),
            roles: BTreeSet::new(),
            person: false,
            step_ups: Vec::new(),
        }
    }

    /// The verified step-up for `approval_id`, if the answer carries one.
    pub fn step_up_for(&self, approval_id: &str) -> Option<&StepUp> {
        self.step_ups.iter().find(|s| s.approval_id == approval_id)
    }
}

/// Why someone may not sign or deny, in words for the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotEligible(pub String);

/// Whether `signer` may approve an approval needing `needs`, asked for by `requester`.
/// Who sees an approval in their inbox, as the keys a store indexes it under (ADR 0039): the
/// person who asked (whose chat it is) always; when it wants others, the people with its role, or
/// every person when it names none. The same rule as [`may_sign`], coarser: whoever may sign, or
/// asked, shares a key with the approval ([`audience_of`]); the inbox then asks [`may_sign`] of
/// each approval it lists.
pub fn audience(needs: &Requirement, requester: &str) -> Vec<String> {
    let mut keys = vec![format!("owner:{requester}")];
    if needs.wants_others() {
        keys.push(match &needs.role {
            Some(role) => format!("role:{role}"),
            None => "people".to_owned(),
        });
    }
    keys
}

/// The keys `signer` sees approvals by (see [`audience`]): their own chats', their roles', and,
/// when they are a person signed in with a passkey, those any person may sign.
pub fn audience_of(signer: &Signer) -> Vec<String> {
    let mut keys = vec![format!("owner:{}", signer.id)];
    if signer.person {
        keys.push("people".to_owned());
        keys.extend(signer.roles.iter().map(|role| format!("role:{role}")));
    }
    keys
}

pub fn may_sign(needs: &Requirement, signer: &Signer, requester: &str) -> Result<(), NotEligible> {
    if !needs.wants_others() {
        if signer.id != requester {
            return Err(NotEligible(
                "only the person whose chat it is may decide it".into(),
            ));
        }
        if needs.step_up && !signer.person {
            return Err(NotEligible(
                "it needs a passkey confirmation, and this server has no passkeys for you".into(),
            ));
        }
        return Ok(());
    }
    if !signer.person {
        return Err(NotEligible(format!(
            "it needs {}; only people signed in with a passkey count, not the {}",
            needs.words(),
            if signer.id == crate::protocol::countersign::LOCAL_PERSON {
                "local person or the API key"
            } else {
                "API key"
            }
        )));
    }
    if needs.not_requester && signer.id == requester {
        return Err(NotEligible(format!(
            "it needs {}; you asked for it, so you may not approve it yourself",
            needs.words()
        )));
    }
    if let Some(role) = &needs.role
        && !signer.roles.contains(role)
    {
        return Err(NotEligible(format!(
            "it needs {}; you do not have the role {role}",
            needs.words()
        )));
    }
    Ok(())
}

/// Whether `signer` may deny it: the person who asked (withdrawing their own request), or
/// anyone who may sign it.
pub fn may_deny(needs: &Requirement, signer: &Signer, requester: &str) -> Result<(), NotEligible> {
    if signer.id == requester {
        return Ok(());
    }
    let mut without_step_up = needs.clone();
    // Saying no needs no passkey confirmation: it causes nothing.
    without_step_up.step_up = false;
    may_sign(&without_step_up, signer, requester)
}

/// Whether `signatures` meet `needs` (each was checked when it was given).
pub fn is_complete(needs: &Requirement, signatures: &[Signature]) -> bool {
    let distinct: BTreeSet<&str> = signatures.iter().map(|s| s.person.as_str()).collect();
    distinct.len() >= needs.approvers.max(1) as usize
}

/// Who may sign now: the people who may sign in, with their roles, as the people directory
/// has them at one moment (read from the store: another instance may have removed someone
/// this one has not heard of yet). Whoever is not in it was removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    people: BTreeMap<String, Signer>,
}

impl Standing {
    /// `people`: everyone who may sign in now.
    pub fn new(people: impl IntoIterator<Item = Signer>) -> Standing {
        Standing {
            people: people.into_iter().map(|p| (p.id.clone(), p)).collect(),
        }
    }

    /// `id` as they stand now (`None`: removed, or never a person).
    pub fn get(&self, id: &str) -> Option<&Signer> {
        self.people.get(id)
    }
}

/// Why `signature` no longer counts towards an approval needing `needs`, asked for by
/// `requester` — the rest of a sentence that starts with the person's name ("was removed",
/// "no longer has the role approver") — or `None`: it still counts. Its step-up was checked
/// when it was given, against the arguments it is for.
pub fn no_longer_counts(
    needs: &Requirement,
    signature: &Signature,
    standing: &Standing,
    requester: &str,
) -> Option<String> {
    let Some(now) = standing.get(&signature.person) else {
        return Some("was removed".to_owned());
    };
    if let Some(role) = &needs.role
        && !now.roles.contains(role)
    {
        return Some(format!("no longer has the role {role}"));
    }
    let mut without_step_up = needs.clone();
    without_step_up.step_up = false;
    may_sign(&without_step_up, now, requester)
        .err()
        .map(|_| "may no longer sign it".to_owned())
}

/// A signature that stopped counting ([`recheck`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncounted {
    pub approval_id: String,
    pub tool_call_id: String,
    pub dropped: Dropped,
    /// The call was cleared to run and waits for approvals again: without this signature the
    /// quorum is no longer met.
    pub reopened: bool,
}

/// Drops, from the countersignatures of `calls`, every signature that no longer counts
/// ([`no_longer_counts`]; `requester`: whose chat it is), keeping it in the call's `dropped`
/// (the card and the inbox say so). Approvals still waiting keep waiting for more; a call the
/// quorum had cleared to run on the server that has not started yet waits for approvals again
/// when what is left no longer meets it — with a new deadline from `reopen`, and its approval no
/// longer in `resolved` (a late answer is judged as any answer). A call already running, or sent
/// to the browser, is past recall. Returns what was dropped, in call order.
pub fn recheck(
    calls: &mut [StepCall],
    resolved: &mut Keyed<String, ApprovalResolution>,
    standing: &Standing,
    requester: &str,
    now: Millis,
    reopen: impl Fn(&StepCall) -> Millis,
) -> Vec<Uncounted> {
    let mut uncounted = Vec::new();
    for call in calls {
        let needs = call.needs();
        let waiting = match &call.phase {
            CallPhase::AwaitingApproval { approval_id, .. } => Some(approval_id.clone()),
            CallPhase::Ready { .. } => None,
            _ => continue,
        };
        let Some(approval_id) = waiting.clone().or_else(|| call.gated_by.clone()) else {
            continue;
        };
        if needs.is_plain() || call.signatures.is_empty() {
            continue;
        }
        let before = uncounted.len();
        let mut kept = Vec::with_capacity(call.signatures.len());
        for signature in std::mem::take(&mut call.signatures) {
            match no_longer_counts(&needs, &signature, standing, requester) {
                None => kept.push(signature),
                Some(why) => {
                    let dropped = Dropped {
                        person: signature.person,
                        name: signature.name,
                        why,
                        at_ms: now,
                    };
                    call.dropped.push(dropped.clone());
                    uncounted.push(Uncounted {
                        approval_id: approval_id.clone(),
                        tool_call_id: call.call.id.clone(),
                        dropped,
                        reopened: false,
                    });
                }
            }
        }
        call.signatures = kept;
        if uncounted.len() > before {
            // The page is told (a new `data-countersign` part).
            call.revision += 1;
        }
        if waiting.is_none() && uncounted.len() > before && !is_complete(&needs, &call.signatures) {
            call.phase = CallPhase::AwaitingApproval {
                approval_id: approval_id.clone(),
                requested_at_ms: now,
                deadline_ms: reopen(call),
            };
            resolved.remove(&approval_id);
            for u in &mut uncounted[before..] {
                u.reopened = true;
            }
        }
    }
    uncounted
}

/// SHA-256 (hex) of `args` in canonical JSON (object keys sorted): what a step-up assertion is
/// bound to, and what the audit log records as `args_digest`.
pub fn args_digest(args: &Value) -> String {
    crate::agent::store::audit::digest(args)
}

#[cfg(test)]
mod recheck_tests;
#[cfg(test)]
mod tests;
