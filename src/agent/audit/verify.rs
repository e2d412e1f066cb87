//! `countersign audit verify` (ADR 0029): an export or a receipt checked with nothing but the
//! file — no server, no database. A problem is a line; none means the file proves what it
//! says:
//!
//! 1. the **chain**: each record's hash from the one before, its number the next (no record
//!    changed, deleted or moved); each **checkpoint**'s Ed25519 signature, by the server's key,
//!    over the hash the chain has at its record;
//! 2. each **passkey assertion** of a signature: made by a passkey the chain recorded for that
//!    person when it was registered (its public key in the `enrolled` record), over a challenge
//!    made of the chat, the approval and the digest of the exact arguments signed;
//! 3. each **executed call**: a request or a rule before it; the rule of the recorded policy
//!    text (by its SHA-256), evaluated again for the arguments that ran with the facts recorded
//!    when the call was requested, asks for what the signatures give — enough different people,
//!    with the role (at signing and when it ran), not the requester, each with a valid
//!    assertion for those arguments; a call a rule let run is one that rule lets run; a call a
//!    grant let run has the grant, not revoked.

mod calls;
use std::collections::{BTreeSet, HashMap};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    chain::{Head, Walk, event_of_line, hex, link, parse_hash},
    checkpoint::Checkpoint,
    export::{EXPORT, RECEIPT},
};
use crate::{
    agent::people::passkeys::{Binding, step_up_challenge},
    agent::{
        policy::{CallFacts, CedarRules, Requester, RuleVerdict, ToolFacts},
        store::audit::{digest as args_digest, sha256_hex},
        tools::{ToolRegistry, ToolSettings},
    },
    protocol::{
        audit::{AuditEvent, AuditKind, AuditRecord},
        countersign::Requirement,
    },
};
use calls::check_calls;

/// What the check found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// One line per problem (none: the file proves what it says).
    pub problems: Vec<String>,
    /// What was checked, in a few lines.
    pub checked: Vec<String>,
}

/// A file that is neither an export nor a receipt (the exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unusable(pub String);

/// What `--key` and `--checkpoints` add: the key the server publishes, checkpoints kept
/// elsewhere.
#[derive(Debug, Default, Clone)]
pub struct Trusted {
    pub key: Option<String>,
    pub checkpoints: Vec<Checkpoint>,
}

/// Checks `text`, an export (JSONL) or a receipt (JSON).
pub fn verify(text: &str, trusted: &Trusted) -> Result<Report, Unusable> {
    let trimmed = text.trim_start();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed)
        && value.get(RECEIPT).is_some()
    {
        return receipt(&value, trusted);
    }
    let mut lines = trimmed.lines().filter(|l| !l.trim().is_empty());
    let first = lines
        .next()
        .ok_or_else(|| Unusable("the file is empty".into()))?;
    let first: Value =
        serde_json::from_str(first).map_err(|e| Unusable(format!("line 1 is not JSON: {e}")))?;
    if first.get(EXPORT).is_none() {
        return Err(Unusable(if first.get("seq").is_some() {
            "these are audit records without the export's header: a filtered export (a chat, a \
             tool, a kind) cannot be checked; export the whole log (/api/audit/export with no \
             filter, as an admin)"
                .into()
        } else {
            "neither an audit export (JSONL) nor a receipt (JSON)".into()
        }));
    }
    export(&first[EXPORT], lines, trusted)
}

/// The key the file names, checked against the trusted one.
fn key_of(
    header: &Value,
    trusted: &Trusted,
    problems: &mut Vec<String>,
) -> Result<String, Unusable> {
    let named = header
        .get("key")
        .and_then(Value::as_str)
        .ok_or_else(|| Unusable("the header names no key".into()))?
        .to_owned();
    if let Some(key) = &trusted.key
        && !key.eq_ignore_ascii_case(&named)
    {
        problems.push(format!(
            "the file is signed with key {named}, not the server's {key}"
        ));
        return Ok(key.clone());
    }
    Ok(named)
}

/// A record read from the file: the decoded event, and the JSON its hash covers.
struct Rec {
    seq: i64,
    raw: Value,
    event: AuditEvent,
    hash: Option<String>,
}

fn rec(line: &Value) -> Result<Rec, String> {
    let record: AuditRecord =
        serde_json::from_value(line.clone()).map_err(|e| format!("not a record: {e}"))?;
    Ok(Rec {
        seq: record.seq,
        raw: event_of_line(line),
        event: record.event,
        hash: record.hash,
    })
}

fn policies(
    items: impl Iterator<Item = Value>,
    problems: &mut Vec<String>,
) -> HashMap<String, String> {
    let mut texts = HashMap::new();
    for p in items {
        let (Some(digest), Some(text)) = (
            p.get("digest").and_then(Value::as_str),
            p.get("text").and_then(Value::as_str),
        ) else {
            problems.push("a policy entry without its digest and text".into());
            continue;
        };
        if sha256_hex(text.as_bytes()) != digest {
            problems.push(format!(
                "the policy text given for {digest} is not the text of that digest"
            ));
            continue;
        }
        texts.insert(digest.to_owned(), text.to_owned());
    }
    texts
}

fn export<'a>(
    header: &Value,
    lines: impl Iterator<Item = &'a str>,
    trusted: &Trusted,
) -> Result<Report, Unusable> {
    let mut report = Report::default();
    let problems = &mut report.problems;
    let key = key_of(header, trusted, problems)?;
    let since = header.get("since").and_then(Value::as_i64).unwrap_or(0);
    let origin = header
        .get("origin")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut records = Vec::new();
    let mut checkpoints = trusted.checkpoints.clone();
    let mut policy_items = Vec::new();
    for (i, text) in lines.enumerate() {
        let n = i + 2;
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            problems.push(format!("line {n}: not JSON"));
            continue;
        };
        if let Some(p) = value.get("policy") {
            policy_items.push(p.clone());
        } else if let Some(c) = value.get("checkpoint") {
            match serde_json::from_value::<Checkpoint>(c.clone()) {
                Ok(c) => checkpoints.push(c),
                Err(e) => problems.push(format!("line {n}: a checkpoint that does not read: {e}")),
            }
        } else if value.get("seq").is_some() {
            match rec(&value) {
                Ok(r) => records.push(r),
                Err(e) => problems.push(format!("line {n}: {e}")),
            }
        } else {
            problems.push(format!("line {n}: not a record, a checkpoint or a policy"));
        }
    }
    let texts = policies(policy_items.into_iter(), problems);
    // The chain, record by record; after a broken link, on from the record's own hash (each
    // break is told once).
    let mut walk = Walk::from_start(since);
    let mut hashes: HashMap<i64, String> = HashMap::new();
    for r in &records {
        match walk.step(r.seq, &r.raw, r.hash.as_deref()) {
            Ok(head) => {
                hashes.insert(r.seq, hex(&head.hash));
            }
            Err(broken) => {
                problems.push(format!("#{}: {}", broken.seq, broken.problem));
                let stored = r.hash.as_deref().and_then(parse_hash);
                walk = Walk::from(
                    Head {
                        seq: r.seq.max(walk.head().seq),
                        hash: stored.unwrap_or(walk.head().hash),
                    },
                    since,
                );
                if let Some(hash) = stored {
                    hashes.insert(r.seq, hex(&hash));
                }
            }
        }
    }
    let last = records.last().map_or(0, |r| r.seq);
    let signed = checkpoints_hold(&checkpoints, &hashes, &key, problems);
    if signed < last {
        problems.push(format!(
            "#{} to #{last}: no signed checkpoint covers these records",
            signed + 1
        ));
    }
    if let Some(end) = header.get("checkpoint").and_then(Value::as_i64)
        && end > last
    {
        problems.push(format!(
            "the export was signed up to #{end} but its records end at #{last}"
        ));
    }
    let calls = check_calls(&records, since, &texts, origin.as_deref(), None, problems);
    report.checked = vec![
        format!(
            "{} records, chained from #{}",
            records.len(),
            records.first().map_or(0, |r| r.seq)
        ),
        format!(
            "{} checkpoints signed by {key}, up to #{signed}",
            checkpoints.len()
        ),
        format!("{calls} executed calls after #{since} checked against their rules and signatures"),
    ];
    Ok(report)
}

/// Checks every checkpoint's signature and that it signs the hash the chain has at its
/// record; the last record a good checkpoint covers.
fn checkpoints_hold(
    checkpoints: &[Checkpoint],
    hashes: &HashMap<i64, String>,
    key: &str,
    problems: &mut Vec<String>,
) -> i64 {
    let mut signed = 0;
    for c in checkpoints {
        if let Err(e) = c.verify(Some(key)) {
            problems.push(format!("checkpoint of #{}: {e}", c.seq));
            continue;
        }
        match hashes.get(&c.seq) {
            None => problems.push(format!(
                "checkpoint of #{}: the record it signs is not there: records were deleted",
                c.seq
            )),
            Some(hash) if !hash.eq_ignore_ascii_case(&c.hash) => problems.push(format!(
                "checkpoint of #{}: the chain does not have the hash it signed: records up to \
                 #{} were changed after it was signed",
                c.seq, c.seq
            )),
            Some(_) => signed = signed.max(c.seq),
        }
    }
    signed
}

fn receipt(value: &Value, trusted: &Trusted) -> Result<Report, Unusable> {
    let mut report = Report::default();
    let problems = &mut report.problems;
    let header = &value[RECEIPT];
    let key = key_of(header, trusted, problems)?;
    let since = header.get("since").and_then(Value::as_i64).unwrap_or(0);
    let origin = header
        .get("origin")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let executed = header
        .get("executed")
        .and_then(Value::as_i64)
        .ok_or_else(|| Unusable("the receipt names no executed record".into()))?;
    let texts = policies(
        value
            .get("policies")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .cloned(),
        problems,
    );
    let segments = value
        .get("segments")
        .and_then(Value::as_array)
        .ok_or_else(|| Unusable("the receipt has no segments".into()))?;
    let mut records: Vec<Rec> = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        let at = SegmentCheck {
            n: i + 1,
            since,
            key: &key,
            trusted,
        };
        at.check(segment, &mut records, problems);
    }
    records.sort_by_key(|r| r.seq);
    records.dedup_by_key(|r| r.seq);
    if !records.iter().any(|r| r.seq == executed) {
        problems.push(format!(
            "#{executed}: the executed call the receipt is about is not in it"
        ));
    }
    let calls = check_calls(
        &records,
        since,
        &texts,
        origin.as_deref(),
        Some(executed),
        problems,
    );
    report.checked = vec![
        format!(
            "{} records linked to {} signed checkpoints of key {key}",
            records.len(),
            segments.len()
        ),
        format!("{calls} executed call checked against its rule and signatures"),
    ];
    Ok(report)
}

/// What checking one segment of a receipt needs: its number (1-based, for the problems), where
/// the published chain starts, the notary's key and what the reader trusts.
struct SegmentCheck<'a> {
    n: usize,
    since: i64,
    key: &'a str,
    trusted: &'a Trusted,
}

impl SegmentCheck<'_> {
    /// Walks `segment` from the hash it starts after through its entries (records whole, kept
    /// in `records`, or digests) and checks the checkpoint it ends at: its signature, that the
    /// walk made the chain it signed, and that it agrees with any published checkpoint.
    fn check(&self, segment: &Value, records: &mut Vec<Rec>, problems: &mut Vec<String>) {
        let SegmentCheck {
            n,
            since,
            key,
            trusted,
        } = *self;
        let after = &segment["after"];
        let (Some(seq), Some(hash)) = (
            after.get("seq").and_then(Value::as_i64),
            after
                .get("hash")
                .and_then(Value::as_str)
                .and_then(parse_hash),
        ) else {
            problems.push(format!("segment {n}: it does not say where it starts"));
            return;
        };
        let checkpoint = match serde_json::from_value::<Checkpoint>(segment["checkpoint"].clone()) {
            Ok(c) => c,
            Err(e) => {
                problems.push(format!("segment {n}: its checkpoint does not read: {e}"));
                return;
            }
        };
        let mut walk = Walk::from(Head { seq, hash }, since);
        let mut ok = true;
        for entry in segment["entries"].as_array().into_iter().flatten() {
            let step = if let Some(digest) = entry.get("digest").and_then(Value::as_str) {
                let seq = entry.get("seq").and_then(Value::as_i64).unwrap_or(-1);
                let head = walk.head().seq;
                match parse_hash(digest) {
                    Some(d) if seq == head + 1 || (seq > head && seq <= since) => {
                        walk = Walk::from(
                            Head {
                                seq,
                                hash: link(&walk.head().hash, seq, &d),
                            },
                            since,
                        );
                        Ok(())
                    }
                    _ => Err(format!("#{seq}: out of place, or not a digest")),
                }
            } else {
                match rec(entry) {
                    Ok(r) => {
                        let stepped = walk
                            .step(r.seq, &r.raw, r.hash.as_deref())
                            .map(|_| ())
                            .map_err(|b| format!("#{}: {}", b.seq, b.problem));
                        records.push(r);
                        stepped
                    }
                    Err(e) => Err(format!("segment {n}: {e}")),
                }
            };
            if let Err(e) = step {
                problems.push(e);
                ok = false;
                break;
            }
        }
        if !ok {
            return;
        }
        if let Err(e) = checkpoint.verify(Some(key)) {
            problems.push(format!(
                "segment {n}: its checkpoint of #{}: {e}",
                checkpoint.seq
            ));
        } else if walk.head().seq != checkpoint.seq
            || !hex(&walk.head().hash).eq_ignore_ascii_case(&checkpoint.hash)
        {
            problems.push(format!(
                "segment {n}: its records do not make the chain its checkpoint of #{} signed",
                checkpoint.seq
            ));
        }
        for c in trusted
            .checkpoints
            .iter()
            .filter(|c| c.seq == checkpoint.seq)
        {
            if !c.hash.eq_ignore_ascii_case(&checkpoint.hash) {
                problems.push(format!(
                    "segment {n}: the published checkpoint of #{} signs another chain",
                    c.seq
                ));
            }
        }
    }
}
