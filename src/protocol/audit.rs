//! The audit log's records, as `/api/audit` sends them and the `/audit` page shows them.
//!
//! One [`AuditEvent`] per thing that happened to a gated tool call: it was requested, the person
//! approved (possibly with edits) or denied it, it expired or was interrupted, and it was
//! executed (with the outcome) — and, about people, when an admin removed someone or changed
//! their roles (no chat, no tool; `args` names the person). Events of one call share `tool_call_id` and `approval_id`, so a
//! reader can put the story of a call back together; `args_digest` (SHA-256 of the arguments in
//! canonical JSON — object keys sorted) lets an auditor prove which arguments a decision was
//! about without trusting the stored copy. Times are Unix epoch milliseconds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    /// The model asked for a gated call; the person was asked to countersign it.
    Requested,
    Approved,
    /// Approved with arguments the person edited.
    Edited,
    Denied,
    /// Nobody answered before the deadline.
    Expired,
    /// The turn was stopped or superseded while the call waited.
    Interrupted,
    /// The approved call ran; `outcome` says how it went.
    Executed,
    /// A running tool's server asked the person something (`reason`: the question;
    /// `approval_id`: the question's id).
    Asked,
    /// The question closed (`reason`: answered, declined, cancelled or expired; `outcome`: what
    /// the person answered).
    Answered,
    /// A policy rule (`rule`) or the person's grant (`grant`) let the call run without asking.
    Allowed,
    /// A policy rule (`rule`) refused the call (`reason`: what the model was told).
    Refused,
    /// The person set the approval aside without deciding ("not now").
    Dismissed,
    /// The person sent a new message while the call waited for them.
    Superseded,
    /// The person spoke while the call waited, and the conversation went on around it (an
    /// aside, ADR 0035): `reason` keeps what they said. Words decide nothing: the call still
    /// waits for its card.
    Spoken,
    /// The person remembered an approval as a grant (`grant`; `reason`: what it lets run).
    Granted,
    /// The person revoked a grant (`grant`).
    Revoked,
    /// One person approved a call that needs several (`actor`: who; `reason`: how far it got);
    /// the call runs when the last of them approves (`approved` / `edited`).
    Countersigned,
    /// Someone edited a waiting call into a new proposal that needs others (or a passkey
    /// confirmation) before it may run (`actor`: who; `edited_args`: the arguments now on the
    /// table; `reason`: what they need). Earlier approvals no longer count (ADR 0028).
    Proposed,
    /// A signature stopped counting: its person was removed or no longer has the role the
    /// approval needs (`reason`: whose, and why; `actor`: who removed them or changed their
    /// roles, when known).
    Dropped,
    /// An admin removed a person (`args`: `{person, name}`; `actor`: the admin). Not about a
    /// call: no chat, no tool.
    Removed,
    /// An admin changed a person's roles (`args`: `{person, name, roles, was}`).
    RolesChanged,
    /// A passkey was registered (`args`: `{person, name, roles, passkey, public_key}`: the
    /// person, their roles when it was made — a new person's — and the credential's public
    /// key, which their step-up assertions are checked with, ADR 0029). Not about a call.
    Enrolled,
}

impl AuditKind {
    pub const ALL: [AuditKind; 22] = [
        AuditKind::Requested,
        AuditKind::Approved,
        AuditKind::Edited,
        AuditKind::Denied,
        AuditKind::Expired,
        AuditKind::Interrupted,
        AuditKind::Executed,
        AuditKind::Asked,
        AuditKind::Answered,
        AuditKind::Allowed,
        AuditKind::Refused,
        AuditKind::Dismissed,
        AuditKind::Superseded,
        AuditKind::Spoken,
        AuditKind::Granted,
        AuditKind::Revoked,
        AuditKind::Countersigned,
        AuditKind::Proposed,
        AuditKind::Dropped,
        AuditKind::Removed,
        AuditKind::RolesChanged,
        AuditKind::Enrolled,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            AuditKind::Requested => "requested",
            AuditKind::Approved => "approved",
            AuditKind::Edited => "edited",
            AuditKind::Denied => "denied",
            AuditKind::Expired => "expired",
            AuditKind::Interrupted => "interrupted",
            AuditKind::Executed => "executed",
            AuditKind::Asked => "asked",
            AuditKind::Answered => "answered",
            AuditKind::Allowed => "allowed",
            AuditKind::Refused => "refused",
            AuditKind::Dismissed => "dismissed",
            AuditKind::Superseded => "superseded",
            AuditKind::Spoken => "spoken",
            AuditKind::Granted => "granted",
            AuditKind::Revoked => "revoked",
            AuditKind::Countersigned => "countersigned",
            AuditKind::Proposed => "proposed",
            AuditKind::Dropped => "dropped",
            AuditKind::Removed => "removed",
            AuditKind::RolesChanged => "roles_changed",
            AuditKind::Enrolled => "enrolled",
        }
    }

    pub fn parse(text: &str) -> Option<AuditKind> {
        AuditKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// Who answered: the person (when people sign in with passkeys), the transport and the
/// client's address as the server saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
pub struct Actor {
    /// `sse`, `bidi`, `ws`, `seed`, `api`, `inbox` or `people` (the people page: a removal,
    /// new roles).
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The person's id (`None`: the one local person, or the API key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
    /// Their name when they answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The passkey that confirmed the answer (a step-up), or that they signed in with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passkey: Option<String>,
}

/// One entry of the audit log (read back by [`AuditRecord`]'s decoder).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
pub struct AuditEvent {
    pub at_ms: i64,
    pub kind: AuditKind,
    pub session_id: String,
    pub turn_id: String,
    pub tool_call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    pub tool: String,
    /// The arguments the model asked for.
    pub args: Value,
    /// SHA-256 (hex) of `args` in canonical JSON.
    pub args_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
    /// The arguments the person approved instead (`edited`, and `executed` after an edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_args: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Actor>,
    /// How the execution went (`executed`): `{"ok": output}` or `{"error": message}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Value>,
    /// The policy rule that decided (`allowed`, `refused`, or `requested` when a rule asks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The version (digest) of the policy file whose rule decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<String>,
    /// The grant that let the call run (`allowed`), or that was made or revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// A step-up approval's passkey assertion, checkable later: the nonce and the assertion as
    /// the authenticator made it (ADR 0024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_up: Option<Value>,
    /// What a policy rule decided from (`requested`, `allowed`, `refused` by a rule): the
    /// policy file's SHA-256 (`policy`), the requester, the tool's schema and the running
    /// totals — so anyone can evaluate the rule again on these arguments (ADR 0029).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<Value>,
}

/// An event as stored: numbered in commit order (`{"seq", ...event, "hash"}` on the wire).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    pub seq: i64,
    #[serde(flatten)]
    pub event: AuditEvent,
    /// The audit chain's hash at this record (hex): SHA-256 over the previous record's hash,
    /// `seq` and the event (ADR 0029).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// How far the server checked its audit chain, for the `/audit` page (`GET /api/audit/chain`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainStatus {
    /// The Ed25519 public key checkpoints are signed with (hex), also served at
    /// `/.well-known/countersign-audit-key`.
    pub key: String,
    /// The last record.
    pub head: i64,
    /// The chain was checked from its start up to this record, which a checkpoint signed…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<i64>,
    /// …at this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_at_ms: Option<i64>,
    /// The first record whose link does not hold, and what is wrong with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<BrokenLink>,
}

/// A link of the audit chain that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokenLink {
    pub seq: i64,
    pub problem: String,
}

/// Decoded by hand rather than with `flatten` or a derive: serde's flattening decoder and a
/// derived decoder per struct cost the browser's bundle several KB (ADR 0022), and the page
/// decodes these.
impl<'de> Deserialize<'de> for AuditRecord {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = serde_json::Map::<String, Value>::deserialize(deserializer)?;
        let seq = map
            .remove("seq")
            .and_then(|v| v.as_i64())
            .ok_or_else(|| D::Error::custom("an audit record needs an integer `seq`"))?;
        let hash = match map.remove("hash") {
            None | Some(Value::Null) => None,
            Some(Value::String(hash)) => Some(hash),
            Some(_) => return Err(D::Error::custom("an audit record's `hash` is text")),
        };
        let event = event_of(map).map_err(D::Error::custom)?;
        Ok(AuditRecord { seq, event, hash })
    }
}

/// The wire names of [`AuditKind`], in the order of [`AuditKind::ALL`].
const KIND_NAMES: [&str; AuditKind::ALL.len()] = {
    let mut names = [""; AuditKind::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = AuditKind::ALL[i].as_str();
        i += 1;
    }
    names
};

impl AuditEvent {
    /// An event from its JSON text (as the store keeps it).
    pub fn from_json(text: &str) -> Result<AuditEvent, serde_json::Error> {
        match serde_json::from_str::<Value>(text)? {
            Value::Object(map) => event_of(map),
            other => Err(super::json_util::invalid_type(&other, "struct AuditEvent")),
        }
    }
}

/// An [`AuditEvent`] from its JSON object.
fn event_of(map: serde_json::Map<String, Value>) -> Result<AuditEvent, serde_json::Error> {
    use super::json_util::{Fields, i64_of};
    let mut f = Fields::new(map);
    let event = AuditEvent {
        at_ms: f.with("at_ms", i64_of),
        kind: f
            .variant("kind", &KIND_NAMES)
            .and_then(|i| AuditKind::ALL.get(i).copied())
            .unwrap_or(AuditKind::Requested),
        session_id: f.string("session_id"),
        turn_id: f.string("turn_id"),
        tool_call_id: f.string("tool_call_id"),
        approval_id: f.opt_string("approval_id"),
        tool: f.string("tool"),
        args: f.with("args", Ok),
        args_digest: f.string("args_digest"),
        deadline_ms: f.opt_with("deadline_ms", i64_of),
        edited_args: f.opt_value("edited_args"),
        reason: f.opt_string("reason"),
        actor: f.opt_with("actor", actor_of),
        outcome: f.opt_value("outcome"),
        rule: f.opt_string("rule"),
        policy_version: f.opt_string("policy_version"),
        grant: f.opt_string("grant"),
        step_up: f.opt_value("step_up"),
        facts: f.opt_value("facts"),
    };
    f.check().map(|()| event)
}

fn actor_of(value: Value) -> Result<Actor, serde_json::Error> {
    let Value::Object(map) = value else {
        return Err(super::json_util::invalid_type(&value, "struct Actor"));
    };
    let mut f = super::json_util::Fields::new(map);
    let actor = Actor {
        transport: f.string("transport"),
        address: f.opt_string("address"),
        user_agent: f.opt_string("user_agent"),
        person: f.opt_string("person"),
        name: f.opt_string("name"),
        passkey: f.opt_string("passkey"),
    };
    f.check().map(|()| actor)
}

/// Which events to list. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    pub session: Option<String>,
    pub tool: Option<String>,
    pub kind: Option<AuditKind>,
    /// Only events with a smaller `seq` (paging backwards).
    pub before: Option<i64>,
    /// Only events of this approval (a call's story: its receipt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// At most this many (default [`AuditQuery::DEFAULT_LIMIT`], at most [`AuditQuery::MAX_LIMIT`]).
    pub limit: Option<usize>,
    /// Only what this person may read: events of their own chats, and their own answers to
    /// others' approvals (`None`: everything, for admins and the operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_to: Option<String>,
}

impl AuditQuery {
    pub const DEFAULT_LIMIT: usize = 200;
    pub const MAX_LIMIT: usize = 10_000;

    pub fn limit(&self) -> usize {
        self.limit
            .unwrap_or(Self::DEFAULT_LIMIT)
            .clamp(1, Self::MAX_LIMIT)
    }

    /// Whether `record` passes the filters; `owner` is the owner of the record's chat (for
    /// [`AuditQuery::visible_to`]).
    pub fn matches(&self, record: &AuditRecord, owner: &str) -> bool {
        let e = &record.event;
        let visible = self.visible_to.as_ref().is_none_or(|person| {
            owner == person
                || e.actor
                    .as_ref()
                    .and_then(|a| a.person.as_ref())
                    .is_some_and(|p| p == person)
        });
        visible
            && self.session.as_ref().is_none_or(|s| *s == e.session_id)
            && self.tool.as_ref().is_none_or(|t| *t == e.tool)
            && self.kind.is_none_or(|k| k == e.kind)
            && self
                .approval
                .as_ref()
                .is_none_or(|a| e.approval_id.as_ref() == Some(a))
            && self.before.is_none_or(|b| record.seq < b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in AuditKind::ALL {
            assert_eq!(AuditKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                Value::String(kind.as_str().into())
            );
        }
        assert_eq!(AuditKind::parse("nope"), None);
    }

    #[test]
    fn events_decode_by_hand_as_the_derive_did() {
        let base = serde_json::json!({
            "at_ms": 5, "kind": "refused", "session_id": "c", "turn_id": "t", "tool_call_id": "k",
            "approval_id": "a", "tool": "process_payment", "args": {"amount": 1}, "args_digest": "d",
            "deadline_ms": 9, "edited_args": {"amount": 2}, "reason": "r",
            "actor": {"transport": "sse", "address": "127.0.0.1", "user_agent": "ua",
                "person": "p1", "name": "Ana", "passkey": "k1"},
            "outcome": {"ok": 1}, "rule": "limit", "policy_version": "v", "grant": "g",
            "step_up": {"nonce": "n"}, "facts": {"policy": "p"}
        });
        let mut inputs = vec![base.clone()];
        for key in base.as_object().unwrap().keys() {
            for replacement in [
                serde_json::Value::Null,
                serde_json::json!(1.5),
                serde_json::json!("x"),
                serde_json::json!({"transport": 1}),
                serde_json::json!([]),
            ] {
                let mut input = base.clone();
                input[key] = replacement;
                inputs.push(input);
            }
            let mut without = base.clone();
            without.as_object_mut().unwrap().remove(key);
            inputs.push(without);
        }
        for input in inputs {
            let new = AuditEvent::from_json(&input.to_string()).map_err(|e| e.to_string());
            let old =
                serde_json::from_value::<AuditEvent>(input.clone()).map_err(|e| e.to_string());
            if input["actor"].is_array() {
                // A derived struct also reads an array of its fields; the server never writes
                // one, and the hand-written reader refuses it.
                assert!(new.is_err() && old.is_err(), "{input}");
                continue;
            }
            assert_eq!(new, old, "{input}");
        }
    }

    #[test]
    fn records_round_trip_with_seq_beside_the_event() {
        let record = AuditRecord {
            seq: 7,
            event: AuditEvent {
                at_ms: 1,
                kind: AuditKind::ALL[0],
                session_id: "c".into(),
                turn_id: "t".into(),
                tool_call_id: "call".into(),
                approval_id: Some("apv".into()),
                tool: "process_payment".into(),
                args: serde_json::json!({"amount": 2.5}),
                args_digest: "d".into(),
                deadline_ms: None,
                edited_args: None,
                reason: None,
                actor: None,
                outcome: Some(serde_json::json!({"ok": null})),
                rule: Some("small-payments".into()),
                policy_version: Some("abc".into()),
                grant: None,
                step_up: None,
                facts: None,
            },
            hash: Some("ab".repeat(32)),
        };
        let wire = serde_json::to_value(&record).unwrap();
        assert_eq!(wire["hash"], "ab".repeat(32));
        assert_eq!(wire["seq"], 7);
        assert_eq!(wire["tool"], "process_payment");
        assert_eq!(
            serde_json::from_value::<AuditRecord>(wire.clone()).unwrap(),
            record
        );
        let mut no_seq = wire;
        no_seq.as_object_mut().unwrap().remove("seq");
        assert!(serde_json::from_value::<AuditRecord>(no_seq).is_err());
    }
}
