//! The audit log's server side: events are built here with their argument digest; the record
//! types themselves are shared with the browser ([`crate::protocol::audit`]).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::clock::Millis;
pub use crate::protocol::audit::{Actor, AuditEvent, AuditKind, AuditQuery, AuditRecord};

/// An event about a call with these arguments (digest included); the optional fields start
/// empty.
pub fn event(
    kind: AuditKind,
    at_ms: Millis,
    session_id: &str,
    turn_id: &str,
    tool_call_id: &str,
    tool: &str,
    args: &Value,
) -> AuditEvent {
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
        rule: None,
        policy_version: None,
        grant: None,
        step_up: None,
        facts: None,
    }
}

/// The `enrolled` event of a passkey registered for `person` (given when the registration made
/// them: their name and roles then), with the credential's public key: what their step-up
/// assertions are checked with later (ADR 0029). Its time is the passkey's.
pub fn enrolled(
    person: Option<&crate::agent::people::Person>,
    passkey: &crate::agent::people::StoredPasskey,
) -> AuditEvent {
    let mut args = serde_json::json!({
        "person": passkey.person,
        "passkey": passkey.id,
        "label": passkey.label,
        "public_key": crate::agent::people::passkeys::public_key(passkey),
    });
    if let Some(person) = person {
        args["name"] = Value::String(person.name.clone());
        args["roles"] = serde_json::json!(person.roles);
    }
    event(
        AuditKind::Enrolled,
        passkey.created_ms,
        "",
        "",
        "",
        "",
        &args,
    )
}

#[cfg(test)]
pub(crate) fn sample(session: &str, kind: AuditKind, args: Value) -> AuditEvent {
    let mut e = event(
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

/// SHA-256 (hex) of `value` serialised as canonical JSON (keys sorted, no whitespace).
pub fn digest(value: &Value) -> String {
    sha256_hex(&canonical(value))
}

/// `value` as canonical JSON: object keys sorted, no whitespace, numbers as serde_json writes
/// them (what [`digest`] and the audit chain hash).
pub fn canonical(value: &Value) -> Vec<u8> {
    serde_json::to_vec(&sorted(value)).unwrap_or_default()
}

/// SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
    fn a_record_serialises_flat_for_jsonl() {
        let record = AuditRecord {
            seq: 7,
            event: sample("s", AuditKind::Denied, json!({"amount": 1})),
            hash: None,
        };
        let v = serde_json::to_value(&record).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["kind"], "denied");
        assert_eq!(v["session_id"], "s");
        let back: AuditRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, record);
    }
}
