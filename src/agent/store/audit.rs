//! The audit log: every approval request, every decision and what came of it, append-only.
//!
//! One [`AuditEvent`] per thing that happened to a gated tool call: it was requested, the person
//! approved (possibly with edits) or denied it, it expired or was interrupted, and it was
//! executed (with the outcome). Events of one call share `tool_call_id` and `approval_id`, so a
//! reader can put the story of a call back together; `args_digest` (SHA-256 of the arguments in
//! canonical JSON — object keys sorted) lets an auditor prove which arguments a decision was
//! about without trusting the stored copy.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::clock::Millis;

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
}

impl AuditKind {
    pub const ALL: [AuditKind; 7] = [
        AuditKind::Requested,
        AuditKind::Approved,
        AuditKind::Edited,
        AuditKind::Denied,
        AuditKind::Expired,
        AuditKind::Interrupted,
        AuditKind::Executed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::Requested => "requested",
            AuditKind::Approved => "approved",
            AuditKind::Edited => "edited",
            AuditKind::Denied => "denied",
            AuditKind::Expired => "expired",
            AuditKind::Interrupted => "interrupted",
            AuditKind::Executed => "executed",
        }
    }

    pub fn parse(text: &str) -> Option<AuditKind> {
        AuditKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// Who answered: the transport and the client's address as the server saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `sse`, `bidi`, `seed` or `api`.
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
}

/// One entry of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEvent {
    pub at_ms: Millis,
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
    pub deadline_ms: Option<Millis>,
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
}

impl AuditEvent {
    /// An event about a call with these arguments; the optional fields start empty.
    pub fn new(
        kind: AuditKind,
        at_ms: Millis,
        session_id: &str,
        turn_id: &str,
        tool_call_id: &str,
        tool: &str,
        args: &Value,
    ) -> Self {
        AuditEvent {
            at_ms,
            kind,
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            approval_id: None,
            tool: tool.to_owned(),
            args: args.clone(),
            args_digest: digest(args),
            deadline_ms: None,
            edited_args: None,
            reason: None,
            actor: None,
            outcome: None,
        }
    }

    #[cfg(test)]
    pub(crate) fn sample(session: &str, kind: AuditKind, args: Value) -> Self {
        let mut e = AuditEvent::new(
            kind,
            1_000,
            session,
            "t1",
            "call-1",
            "process_payment",
            &args,
        );
        e.approval_id = Some("approval-1".into());
        e
    }
}

/// An event as stored: numbered in append order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub seq: i64,
    #[serde(flatten)]
    pub event: AuditEvent,
}

/// Which events to list. Empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    pub session: Option<String>,
    pub tool: Option<String>,
    pub kind: Option<AuditKind>,
    /// Only events with a smaller `seq` (paging backwards).
    pub before: Option<i64>,
    /// At most this many (default [`AuditQuery::DEFAULT_LIMIT`], at most [`AuditQuery::MAX_LIMIT`]).
    pub limit: Option<usize>,
}

impl AuditQuery {
    pub const DEFAULT_LIMIT: usize = 200;
    pub const MAX_LIMIT: usize = 10_000;

    pub fn limit(&self) -> usize {
        self.limit
            .unwrap_or(Self::DEFAULT_LIMIT)
            .clamp(1, Self::MAX_LIMIT)
    }

    pub fn matches(&self, record: &AuditRecord) -> bool {
        let e = &record.event;
        self.session.as_ref().is_none_or(|s| *s == e.session_id)
            && self.tool.as_ref().is_none_or(|t| *t == e.tool)
            && self.kind.is_none_or(|k| k == e.kind)
            && self.before.is_none_or(|b| record.seq < b)
    }
}

/// SHA-256 (hex) of `value` serialised as canonical JSON (keys sorted, no whitespace).
pub fn digest(value: &Value) -> String {
    let canonical = serde_json::to_vec(&sorted(value)).unwrap_or_default();
    let hash = Sha256::digest(&canonical);
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// A copy of `value` whose objects have their keys in sorted order, whatever map type
/// serde_json was built with.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), sorted(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_digest_ignores_key_order_and_is_sha256() {
        let a = digest(&json!({"amount": 50, "recipient": "Hanako"}));
        let b = digest(&json!({"recipient": "Hanako", "amount": 50}));
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        assert_ne!(a, digest(&json!({"recipient": "Hanako", "amount": 51})));
        // SHA-256 of the canonical text `{}`.
        assert_eq!(
            digest(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

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
    fn a_record_serialises_flat_for_jsonl() {
        let record = AuditRecord {
            seq: 7,
            event: AuditEvent::sample("s", AuditKind::Denied, json!({"amount": 1})),
        };
        let v = serde_json::to_value(&record).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["kind"], "denied");
        assert_eq!(v["session_id"], "s");
        let back: AuditRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, record);
    }
}
