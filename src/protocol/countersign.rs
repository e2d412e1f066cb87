//! Countersignatures: what an approval needs, from whom, and how far it got — shared by the
//! server (the gate enforces it) and the page (the card and the inbox say it).
//!
//! A policy rule that asks may require more than the chat's own person's click
//! ([`Requirement`]): **several different people** (a quorum), **with a role**, **not the
//! person who asked** (separation of duties), each confirming with a **fresh passkey
//! assertion bound to the exact arguments** (step-up). Each approval given is a
//! [`Signature`]; while the requirement is not met the approval stays open and its progress
//! travels as a `data-countersign` part ([`Progress`], by approval id: a newer part replaces
//! the older, as the AI SDK does with data parts that share an id).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The id of the one local person (a server without passkeys; the API key).
pub const LOCAL_PERSON: &str = "local";

/// The data part's name (`data-countersign`).
pub const PROGRESS_PART: &str = "countersign";

/// The transient data part a resumed socket is told what still waits in (`data-countersign-pending`:
/// `{pending: [{toolCallId, toolName, approvalId, waitingFor}], resumedAt}`).
pub const PENDING_PART: &str = "countersign-pending";

/// What an approval needs before its call may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    /// How many different people must approve (at least 1).
    pub approvers: u32,
    /// The role each of them needs; `None`: any person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The person who asked (whose chat it is) may not be one of them.
    #[serde(default)]
    pub not_requester: bool,
    /// Each approval needs a passkey assertion made for these exact arguments.
    #[serde(default)]
    pub step_up: bool,
}

impl Default for Requirement {
    /// The chat's own person, one click.
    fn default() -> Self {
        Requirement {
            approvers: 1,
            role: None,
            not_requester: false,
            step_up: false,
        }
    }
}

impl Requirement {
    /// Whether only the chat's own person decides (no quorum, role, separation or step-up).
    pub fn is_plain(&self) -> bool {
        self.approvers <= 1 && self.role.is_none() && !self.not_requester && !self.step_up
    }

    /// Whether people other than the chat's own may (or must) sign.
    pub fn wants_others(&self) -> bool {
        self.approvers > 1 || self.role.is_some() || self.not_requester
    }

    /// Both requirements at once (two rules that ask): the larger quorum, either role (a rule's
    /// role is kept only when the other names none or the same), and every flag.
    pub fn merge(&self, other: &Requirement) -> Requirement {
        Requirement {
            approvers: self.approvers.max(other.approvers),
            role: match (&self.role, &other.role) {
                (Some(a), _) => Some(a.clone()),
                (None, b) => b.clone(),
            },
            not_requester: self.not_requester || other.not_requester,
            step_up: self.step_up || other.step_up,
        }
    }

    /// "2 different people with the role approver, not the person who asked, each confirming
    /// with their passkey".
    pub fn words(&self) -> String {
        let mut words = match (self.approvers, &self.role) {
            (0 | 1, None) if !self.not_requester => "the person whose chat it is".to_owned(),
            (0 | 1, None) => "one other person".to_owned(),
            (0 | 1, Some(role)) => format!("one person with the role {role}"),
            (n, None) => format!("{n} different people"),
            (n, Some(role)) => format!("{n} different people with the role {role}"),
        };
        if self.not_requester && (self.approvers > 1 || self.role.is_some()) {
            words.push_str(", not the person who asked");
        }
        if self.step_up {
            words.push_str(if self.approvers > 1 {
                ", each confirming with their passkey"
            } else {
                ", confirming with a passkey"
            });
        }
        words
    }

    /// Reads it back from JSON (hand-read: the page's bundle, ADR 0022).
    pub fn from_value(value: &Value) -> Option<Requirement> {
        let object = value.as_object()?;
        Some(Requirement {
            approvers: object
                .get("approvers")
                .and_then(Value::as_u64)
                .map_or(1, |n| n.clamp(1, 100) as u32),
            role: object
                .get("role")
                .and_then(Value::as_str)
                .map(str::to_owned),
            not_requester: flag(object, "notRequester"),
            step_up: flag(object, "stepUp"),
        })
    }
}

fn flag(object: &Map<String, Value>, key: &str) -> bool {
    object.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// One person's approval of an approval that needs several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    /// The person's id.
    pub person: String,
    /// Their name, as the card shows it.
    pub name: String,
    pub at_ms: i64,
    /// They confirmed with a passkey assertion over the arguments.
    #[serde(default)]
    pub step_up: bool,
}

/// A signature that stopped counting while its approval waited: the person was removed, or no
/// longer has the role the approval needs. The card and the inbox say so ("Cai was removed").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dropped {
    /// The person's id.
    pub person: String,
    pub name: String,
    /// Why, as the rest of a sentence that starts with their name: "was removed", "no longer
    /// has the role approver".
    pub why: String,
    pub at_ms: i64,
}

impl Dropped {
    /// "Cai was removed".
    pub fn words(&self) -> String {
        format!("{} {}", self.name, self.why)
    }
}

/// Where an approval that needs several people stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressState {
    /// Waiting for more approvals.
    Waiting,
    /// Enough people approved: the call runs.
    Complete,
    /// Someone who may decide denied it.
    Denied,
    /// It ended otherwise (expired, withdrawn, stopped, set aside).
    Ended,
}

impl ProgressState {
    pub fn as_str(self) -> &'static str {
        match self {
            ProgressState::Waiting => "waiting",
            ProgressState::Complete => "complete",
            ProgressState::Denied => "denied",
            ProgressState::Ended => "ended",
        }
    }

    fn parse(text: &str) -> Option<ProgressState> {
        [
            ProgressState::Waiting,
            ProgressState::Complete,
            ProgressState::Denied,
            ProgressState::Ended,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// The `data-countersign` part: an approval's requirement and the signatures it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub approval_id: String,
    pub tool_call_id: String,
    pub needs: Requirement,
    pub signatures: Vec<Signature>,
    pub state: ProgressState,
    /// Who denied it ([`ProgressState::Denied`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<String>,
    /// The arguments the approval is now for, when an edit replaced the call's: a new proposal
    /// (the signatures are for these; the card shows them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Signatures given and then dropped (not in `signatures`): they no longer count. Absent
    /// when there are none, so a part is what it always was until someone is removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
    /// Why, in their words ([`ProgressState::Denied`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Progress {
    /// The part's `data`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| json!({}))
    }

    /// Reads a part's `data` back (hand-read).
    pub fn from_value(value: &Value) -> Option<Progress> {
        let object = value.as_object()?;
        let text = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_owned);
        let signatures = object
            .get("signatures")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|s| {
                        let s = s.as_object()?;
                        Some(Signature {
                            person: s.get("person")?.as_str()?.to_owned(),
                            name: s.get("name")?.as_str()?.to_owned(),
                            at_ms: s.get("atMs").and_then(Value::as_i64).unwrap_or(0),
                            step_up: flag(s, "stepUp"),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let dropped = object
            .get("dropped")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|d| {
                        let d = d.as_object()?;
                        Some(Dropped {
                            person: d.get("person")?.as_str()?.to_owned(),
                            name: d.get("name")?.as_str()?.to_owned(),
                            why: d.get("why")?.as_str()?.to_owned(),
                            at_ms: d.get("atMs").and_then(Value::as_i64).unwrap_or(0),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Progress {
            approval_id: text("approvalId")?,
            tool_call_id: text("toolCallId")?,
            needs: object
                .get("needs")
                .and_then(Requirement::from_value)
                .unwrap_or_default(),
            signatures,
            state: text("state")
                .as_deref()
                .and_then(ProgressState::parse)
                .unwrap_or(ProgressState::Waiting),
            denied_by: text("deniedBy"),
            args: object.get("args").filter(|a| a.is_object()).cloned(),
            dropped,
            reason: text("reason"),
        })
    }

    /// "1 of 2: Ana approved — waiting for one more approver"; after a signature was dropped,
    /// "Cai was removed; 1 more approver needed (Ana approved)".
    pub fn words(&self) -> String {
        let have = self.signatures.len();
        let need = self.needs.approvers.max(1) as usize;
        let names = names(self.signatures.iter().map(|s| s.name.as_str()));
        match self.state {
            ProgressState::Denied => denial_words(
                Some(self.denied_by.as_deref().unwrap_or("an approver")),
                self.reason.as_deref(),
            )
            .unwrap_or_default(),
            ProgressState::Complete => format!("Approved by {names}"),
            ProgressState::Ended if have == 0 => "Ended before anyone approved".to_owned(),
            ProgressState::Ended => format!("Ended after {have} of {need}: {names} approved"),
            ProgressState::Waiting if !self.dropped.is_empty() => {
                let dropped: Vec<String> = self.dropped.iter().map(Dropped::words).collect();
                let left = need.saturating_sub(have);
                let more = match left {
                    1 => format!("1 more {}", self.needs_who()),
                    n => format!("{n} more people ({})", self.needs_who()),
                };
                let approved = if have == 0 {
                    String::new()
                } else {
                    format!(" ({names} approved)")
                };
                format!("{}; {more} needed{approved}", dropped.join("; "))
            }
            ProgressState::Waiting if have == 0 => format!("0 of {need}: waiting for approvers"),
            ProgressState::Waiting => {
                let left = need.saturating_sub(have);
                let who = self.needs_who();
                let more = if left == 1 {
                    format!("one more {who}")
                } else {
                    format!("{left} more people ({who})")
                };
                format!("{have} of {need}: {names} approved — waiting for {more}")
            }
        }
    }

    /// Who is still needed, in one word: the role, or "approver".
    fn needs_who(&self) -> &str {
        self.needs.role.as_deref().unwrap_or("approver")
    }
}

/// What a denial says of itself — the `reason` of the approval's answer the server sends
/// (`tool-approval-response`) and the card's words: "Denied by Ben: not this vendor" when
/// someone (`by`) other than the person who asked said no; the reason as given (if any) when it
/// was the person who asked.
pub fn denial_words(by: Option<&str>, reason: Option<&str>) -> Option<String> {
    match (by, reason) {
        (Some(by), Some(reason)) => Some(format!("{DENIED_BY}{by}: {reason}")),
        (Some(by), None) => Some(format!("{DENIED_BY}{by}")),
        (None, reason) => reason.map(str::to_owned),
    }
}

/// How [`denial_words`] names who denied a call.
pub const DENIED_BY: &str = "Denied by ";

/// "Ana", "Ana and Ben", "Ana, Ben and Cy".
pub fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Who is signed in, as the page needs to know it (`GET /api/app`'s `me`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    /// `local` for the one local person (no sign-in, or the API key); else a person's id.
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub roles: Vec<String>,
    /// Whether this server signs people in with passkeys (else it has one local person).
    #[serde(default)]
    pub people: bool,
}

impl Me {
    /// Whether `me` may be one of the people `needs` asks for, on a request `requester` made;
    /// `None`: they may; else why not, in words for the card.
    pub fn cannot_sign(&self, needs: &Requirement, requester: &str) -> Option<String> {
        if needs.is_plain() {
            return None;
        }
        if !self.people {
            return Some(
                "This server runs with one local person and no sign-in, so it cannot be approved \
                 here: turn on passkeys (COUNTERSIGN_SIGN_IN=passkeys) and invite people (README: \
                 People and countersignatures)."
                    .to_owned(),
            );
        }
        if needs.not_requester && self.id == requester {
            return Some(
                "You asked for it, so you cannot approve it yourself; the approvers see it in \
                 their inbox."
                    .to_owned(),
            );
        }
        if let Some(role) = &needs.role
            && !self.roles.iter().any(|r| r == role)
        {
            return Some(format!(
                "You do not have the role {role}; the people who do see it in their inbox."
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_approvers() -> Requirement {
        Requirement {
            approvers: 2,
            role: Some("approver".into()),
            not_requester: true,
            step_up: true,
        }
    }

    #[test]
    fn a_requirement_says_what_it_needs() {
        assert!(Requirement::default().is_plain());
        assert_eq!(
            two_approvers().words(),
            "2 different people with the role approver, not the person who asked, each \
             confirming with their passkey"
        );
        let one = Requirement {
            approvers: 1,
            role: None,
            not_requester: true,
            step_up: false,
        };
        assert_eq!(one.words(), "one other person");
        assert!(one.wants_others());
        let merged = one.merge(&two_approvers());
        assert_eq!(merged, two_approvers());
        let value = serde_json::to_value(two_approvers()).unwrap();
        assert_eq!(Requirement::from_value(&value), Some(two_approvers()));
    }

    #[test]
    fn progress_round_trips_and_reads_as_a_sentence() {
        let mut progress = Progress {
            approval_id: "a1".into(),
            tool_call_id: "c1".into(),
            needs: two_approvers(),
            signatures: vec![Signature {
                person: "p1".into(),
                name: "Ana".into(),
                at_ms: 5,
                step_up: true,
            }],
            state: ProgressState::Waiting,
            denied_by: None,
            args: None,
            dropped: Vec::new(),
            reason: None,
        };
        assert_eq!(
            progress.words(),
            "1 of 2: Ana approved — waiting for one more approver"
        );
        assert!(
            !progress
                .to_value()
                .as_object()
                .unwrap()
                .contains_key("dropped"),
            "a part without dropped signatures is what it always was"
        );
        assert_eq!(
            Progress::from_value(&progress.to_value()),
            Some(progress.clone())
        );
        progress.signatures.push(Signature {
            person: "p2".into(),
            name: "Ben".into(),
            at_ms: 6,
            step_up: true,
        });
        progress.state = ProgressState::Complete;
        assert_eq!(progress.words(), "Approved by Ana and Ben");
        progress.state = ProgressState::Denied;
        progress.denied_by = Some("Cy".into());
        assert_eq!(progress.words(), "Denied by Cy");
        assert_eq!(
            Progress::from_value(&progress.to_value()),
            Some(progress.clone())
        );
        progress.reason = Some("not this vendor".into());
        assert_eq!(progress.words(), "Denied by Cy: not this vendor");
        assert_eq!(progress.to_value()["reason"], "not this vendor");
        assert_eq!(Progress::from_value(&progress.to_value()), Some(progress));
        assert_eq!(
            denial_words(None, Some("too much")).as_deref(),
            Some("too much")
        );
        assert_eq!(denial_words(None, None), None);
        assert_eq!(names(["a", "b", "c"].into_iter()), "a, b and c");
    }

    #[test]
    fn a_dropped_signature_is_said_with_what_is_still_needed() {
        let cai = Dropped {
            person: "p3".into(),
            name: "Cai".into(),
            why: "was removed".into(),
            at_ms: 9,
        };
        let mut progress = Progress {
            approval_id: "a1".into(),
            tool_call_id: "c1".into(),
            needs: two_approvers(),
            signatures: vec![Signature {
                person: "p1".into(),
                name: "Ana".into(),
                at_ms: 5,
                step_up: true,
            }],
            state: ProgressState::Waiting,
            denied_by: None,
            args: None,
            dropped: vec![cai.clone()],
            reason: None,
        };
        assert_eq!(
            progress.words(),
            "Cai was removed; 1 more approver needed (Ana approved)"
        );
        assert_eq!(
            Progress::from_value(&progress.to_value()),
            Some(progress.clone()),
            "hand-read like the rest"
        );
        assert_eq!(progress.to_value()["dropped"][0]["why"], "was removed");
        progress.signatures.clear();
        progress.dropped.push(Dropped {
            name: "Ben".into(),
            why: "no longer has the role approver".into(),
            ..cai
        });
        assert_eq!(
            progress.words(),
            "Cai was removed; Ben no longer has the role approver; 2 more people (approver) needed"
        );
        // Once it ends, what ended it is what is said.
        progress.state = ProgressState::Ended;
        assert_eq!(progress.words(), "Ended before anyone approved");
    }

    #[test]
    fn the_card_says_why_someone_cannot_sign() {
        let needs = two_approvers();
        let local = Me {
            id: "local".into(),
            name: "You".into(),
            roles: vec![],
            people: false,
        };
        assert!(
            local
                .cannot_sign(&needs, "local")
                .unwrap()
                .contains("one local person")
        );
        assert_eq!(local.cannot_sign(&Requirement::default(), "local"), None);
        let ana = Me {
            id: "p1".into(),
            name: "Ana".into(),
            roles: vec!["approver".into()],
            people: true,
        };
        assert!(
            ana.cannot_sign(&needs, "p1")
                .unwrap()
                .contains("You asked for it")
        );
        assert_eq!(ana.cannot_sign(&needs, "p2"), None);
        let ben = Me {
            roles: vec!["finance".into()],
            ..ana
        };
        assert!(
            ben.cannot_sign(&needs, "p2")
                .unwrap()
                .contains("role approver")
        );
    }
}
