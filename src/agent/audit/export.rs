//! What the server hands out for checking (ADR 0029): the whole log as JSONL — a header, the
//! policy texts, every record with its hash, every checkpoint — and the receipt of one executed
//! call: its records, those of the signers' passkeys and roles, each linked to a signed
//! checkpoint by the digests of the records in between (which say nothing of those records).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    chain::{digest_of, hex},
    checkpoint::Checkpoint,
    notary::{Notary, NotaryError},
};
use crate::{
    agent::store::{AuditKind, AuditQuery, AuditRecord, PolicyStore, SessionStore, StoreError},
    protocol::audit::AuditEvent,
};

/// The export's first line's key, and a receipt's.
pub const EXPORT: &str = "countersign_audit_export";
pub const RECEIPT: &str = "countersign_receipt";
/// The format's version.
pub const VERSION: u32 = 1;

/// Records read at once while exporting.
const PAGE: usize = 1_000;

/// Why an export or a receipt cannot be made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The chain does not hold: nothing is signed until it does.
    #[error("{0}")]
    Notary(NotaryError),
    /// The approval has no executed call (unknown, not run yet, denied).
    #[error("approval {0} has no executed call to give a receipt of")]
    NoExecution(String),
}

impl From<NotaryError> for ExportError {
    fn from(e: NotaryError) -> Self {
        match e {
            NotaryError::Store(e) => ExportError::Store(e),
            other => ExportError::Notary(other),
        }
    }
}

/// Where the export and the receipts come from.
#[derive(Clone)]
pub struct Source {
    pub sessions: Arc<dyn SessionStore>,
    pub policies: Arc<dyn PolicyStore>,
    pub notary: Arc<Notary>,
    /// The passkeys' origin (`COUNTERSIGN_PUBLIC_URL`), which their assertions name.
    pub origin: Option<String>,
}

fn header(source: &Source, since: i64, checkpoint: Option<&Checkpoint>) -> Value {
    json!({
        "version": VERSION,
        "key": source.notary.public_key(),
        "origin": source.origin,
        "since": since,
        "checkpoint": checkpoint.map(|c| c.seq),
    })
}

/// The whole log as JSONL, up to a checkpoint signed now: the header, the policy texts, the
/// records, the checkpoints. Sent page by page (`next` gives the next lines, empty at the end).
pub struct Export {
    source: Source,
    /// The last checkpoint: signed now, or the last one signed before the chain broke.
    checkpoint: Option<Checkpoint>,
    /// The last record exported.
    end: i64,
    since: i64,
    stage: Stage,
}

enum Stage {
    Start,
    Records { after: i64 },
    Checkpoints { after: i64 },
    Done,
}

impl Export {
    /// Signs the chain's head (checking it first) and starts the export there. A chain that
    /// does not hold is exported as it is, up to its head, unsigned beyond the last checkpoint
    /// signed before it broke: the evidence, for whoever checks it.
    pub async fn start(source: Source) -> Result<Export, ExportError> {
        let (checkpoint, end, since) = match source.notary.checkpoint().await {
            Ok(c) => (Some(c.clone()), c.seq, c.since),
            Err(NotaryError::Broken(_)) => {
                let head = source.sessions.chain_head().await?;
                let last = source.sessions.last_checkpoint().await?;
                (last, head.head.seq, head.since)
            }
            Err(NotaryError::Store(e)) => return Err(e.into()),
        };
        Ok(Export {
            source,
            checkpoint,
            end,
            since,
            stage: Stage::Start,
        })
    }

    /// The next lines (each ending in `\n`); empty when the export is over.
    pub async fn next(&mut self) -> Result<String, ExportError> {
        let mut out = String::new();
        let end = self.end;
        match self.stage {
            Stage::Start => {
                let header = header(&self.source, self.since, self.checkpoint.as_ref());
                line(&mut out, &json!({ EXPORT: header }));
                for (digest, text) in self.source.policies.policy_texts().await? {
                    line(
                        &mut out,
                        &json!({"policy": {"digest": digest, "text": text}}),
                    );
                }
                self.stage = Stage::Records { after: 0 };
            }
            Stage::Records { after } => {
                let records = self.source.sessions.chain(after, PAGE).await?;
                let mut last = after;
                for record in records.iter().take_while(|r| r.seq <= end) {
                    line(&mut out, &serde_json::to_value(record).unwrap_or_default());
                    last = record.seq;
                }
                self.stage = if last == after || last >= end {
                    Stage::Checkpoints { after: 0 }
                } else {
                    Stage::Records { after: last }
                };
                if out.is_empty() {
                    return Box::pin(self.next()).await;
                }
            }
            Stage::Checkpoints { after } => {
                let checkpoints = self.source.sessions.checkpoints(after, PAGE).await?;
                let mut last = after;
                for c in checkpoints.iter().take_while(|c| c.seq <= end) {
                    line(&mut out, &json!({ "checkpoint": c }));
                    last = c.seq;
                }
                self.stage = if last == after || last >= end {
                    Stage::Done
                } else {
                    Stage::Checkpoints { after: last }
                };
                if out.is_empty() && !matches!(self.stage, Stage::Done) {
                    return Box::pin(self.next()).await;
                }
            }
            Stage::Done => {}
        }
        Ok(out)
    }
}

fn line(out: &mut String, value: &Value) {
    if let Ok(text) = serde_json::to_string(value) {
        out.push_str(&text);
        out.push('\n');
    }
}

/// Every record matching `query`, oldest first.
async fn all(
    store: &dyn SessionStore,
    mut query: AuditQuery,
) -> Result<Vec<AuditRecord>, StoreError> {
    query.limit = Some(AuditQuery::MAX_LIMIT);
    let mut out = Vec::new();
    loop {
        let page = store.audit(&query).await?;
        let full = page.len() >= AuditQuery::MAX_LIMIT;
        query.before = page.last().map(|r| r.seq);
        out.extend(page);
        if !full {
            break;
        }
    }
    out.reverse();
    Ok(out)
}

/// Whether `event` is about `person` (their passkey, their roles, their removal).
fn about(event: &AuditEvent, person: &str) -> bool {
    matches!(
        event.kind,
        AuditKind::Enrolled | AuditKind::RolesChanged | AuditKind::Removed
    ) && event.args.get("person").and_then(Value::as_str) == Some(person)
}

/// What a receipt says, for a person reading it (the check reads the records themselves): the
/// proposal, each signature, the execution and where they are in the chain.
fn summary(records: &[AuditRecord], approval_id: &str, executed: i64) -> Value {
    let story: Vec<&AuditRecord> = records
        .iter()
        .filter(|r| r.event.approval_id.as_deref() == Some(approval_id))
        .collect();
    let decision = story.iter().find(|r| {
        matches!(
            r.event.kind,
            AuditKind::Requested | AuditKind::Allowed | AuditKind::Refused
        )
    });
    let ran = story.iter().find(|r| r.seq == executed);
    let args = ran.map(|r| {
        r.event
            .edited_args
            .clone()
            .unwrap_or_else(|| r.event.args.clone())
    });
    let signatures: Vec<Value> = story
        .iter()
        .filter(|r| {
            matches!(
                r.event.kind,
                AuditKind::Countersigned | AuditKind::Approved | AuditKind::Edited
            )
        })
        .map(|r| {
            let actor = r.event.actor.as_ref();
            json!({
                "seq": r.seq,
                "kind": r.event.kind,
                "person": actor.and_then(|a| a.person.clone()),
                "name": actor.and_then(|a| a.name.clone()),
                "passkey": actor.and_then(|a| a.passkey.clone()),
                "at_ms": r.event.at_ms,
                "args_digest": crate::agent::store::audit::digest(
                    r.event.edited_args.as_ref().unwrap_or(&r.event.args)
                ),
                "assertion": r.event.step_up.is_some(),
            })
        })
        .collect();
    json!({
        "tool": ran.map(|r| r.event.tool.clone()),
        "chat": ran.map(|r| r.event.session_id.clone()),
        "args_digest": args.as_ref().map(crate::agent::store::audit::digest),
        "decision": decision.map(|r| json!({
            "seq": r.seq,
            "kind": r.event.kind,
            "rule": r.event.rule,
            "grant": r.event.grant,
            "policy_version": r.event.policy_version,
            "policy": r.event.facts.as_ref().and_then(|f| f.get("policy").cloned()),
        })),
        "signatures": signatures,
        "execution": ran.map(|r| json!({
            "seq": r.seq,
            "at_ms": r.event.at_ms,
            "result_digest": r.event.outcome.as_ref().map(crate::agent::store::audit::digest),
        })),
    })
}

/// The receipt of approval `approval_id`'s executed call (ADR 0029): the call's records; the
/// records that say which passkeys and roles its signers had (and the grant that let it run);
/// the policy text its rule is in; each record linked to the first checkpoint after it.
pub async fn receipt(source: &Source, approval_id: &str) -> Result<Value, ExportError> {
    let (included, executed_seq) = included(&*source.sessions, approval_id).await?;
    let policy_texts = policy_texts(source, &included).await?;
    let segments = segments(source, &included, executed_seq).await?;
    let checkpoint = source.sessions.last_checkpoint().await?;
    let summary = summary(&included, approval_id, executed_seq);
    Ok(json!({
        RECEIPT: {
            "version": VERSION,
            "key": source.notary.public_key(),
            "origin": source.origin,
            "since": checkpoint.map_or(0, |c| c.since),
            "approval_id": approval_id,
            "executed": executed_seq,
        },
        "call": summary,
        "segments": segments,
        "policies": policy_texts
            .into_iter()
            .map(|(digest, text)| json!({"digest": digest, "text": text}))
            .collect::<Vec<_>>(),
    }))
}

/// The records a receipt for `approval_id` shows whole, in order, and the number of its
/// execution: the approval's story up to its execution, what made its signers who they were
/// (enrolment, roles, removal) and the grants it ran under (granted, revoked), all before it.
async fn included(
    store: &dyn SessionStore,
    approval_id: &str,
) -> Result<(Vec<AuditRecord>, i64), ExportError> {
    let story = all(
        store,
        AuditQuery {
            approval: Some(approval_id.to_owned()),
            ..AuditQuery::default()
        },
    )
    .await?;
    let executed = story
        .iter()
        .rfind(|r| r.event.kind == AuditKind::Executed)
        .ok_or_else(|| ExportError::NoExecution(approval_id.to_owned()))?;
    let executed_seq = executed.seq;
    let mut included: Vec<AuditRecord> = story
        .iter()
        .filter(|r| r.seq <= executed_seq)
        .cloned()
        .collect();
    let mut people: Vec<String> = included
        .iter()
        .filter_map(|r| r.event.actor.as_ref()?.person.clone())
        .collect();
    people.sort();
    people.dedup();
    for kind in [
        AuditKind::Enrolled,
        AuditKind::RolesChanged,
        AuditKind::Removed,
    ] {
        let records = all(
            store,
            AuditQuery {
                kind: Some(kind),
                before: Some(executed_seq),
                ..AuditQuery::default()
            },
        )
        .await?;
        included.extend(
            records
                .into_iter()
                .filter(|r| people.iter().any(|p| about(&r.event, p))),
        );
    }
    let grants: Vec<String> = included
        .iter()
        .filter(|r| r.event.kind == AuditKind::Allowed)
        .filter_map(|r| r.event.grant.clone())
        .collect();
    for kind in [AuditKind::Granted, AuditKind::Revoked] {
        if grants.is_empty() {
            break;
        }
        let records = all(
            store,
            AuditQuery {
                kind: Some(kind),
                before: Some(executed_seq),
                ..AuditQuery::default()
            },
        )
        .await?;
        included.extend(
            records
                .into_iter()
                .filter(|r| r.event.grant.as_ref().is_some_and(|g| grants.contains(g))),
        );
    }
    included.sort_by_key(|r| r.seq);
    included.dedup_by_key(|r| r.seq);
    Ok((included, executed_seq))
}

/// The texts of the policies the included records were decided under, once each:
/// (digest, text).
async fn policy_texts(
    source: &Source,
    included: &[AuditRecord],
) -> Result<Vec<(String, String)>, ExportError> {
    let policies = included.iter().filter_map(|r| {
        r.event
            .facts
            .as_ref()?
            .get("policy")?
            .as_str()
            .map(str::to_owned)
    });
    let mut policy_texts: Vec<(String, String)> = Vec::new();
    for digest in policies {
        if policy_texts.iter().any(|(d, _)| *d == digest) {
            continue;
        }
        if let Some(text) = source.policies.policy_text(&digest).await? {
            policy_texts.push((digest, text));
        }
    }
    Ok(policy_texts)
}

/// The chain from just before each run of included records to the first signed checkpoint at or
/// after it: included records whole, the others as their digests (signing the head first when
/// no checkpoint covers the execution yet).
async fn segments(
    source: &Source,
    included: &[AuditRecord],
    executed_seq: i64,
) -> Result<Vec<Value>, ExportError> {
    let store = &*source.sessions;
    let last = store.last_checkpoint().await?.map_or(0, |c| c.seq);
    if last < executed_seq {
        source.notary.checkpoint().await?;
    }
    let mut segments = Vec::new();
    let mut i = 0;
    while i < included.len() {
        let first = included[i].seq;
        let Some(checkpoint) = store.checkpoints(first - 1, 1).await?.into_iter().next() else {
            break;
        };
        // The record before (numbers before the chain may skip), or the chain's start.
        let before = store
            .audit(&AuditQuery {
                before: Some(first),
                limit: Some(1),
                ..AuditQuery::default()
            })
            .await?
            .into_iter()
            .next();
        let (start, prev) = match before {
            Some(r) => (r.seq, r.hash.unwrap_or_default()),
            None => (0, hex(&super::chain::ZERO)),
        };
        let mut entries = Vec::new();
        let mut after = start;
        while after < checkpoint.seq {
            let page = store.chain(after, PAGE).await?;
            if page.is_empty() {
                break;
            }
            for record in page.iter().take_while(|r| r.seq <= checkpoint.seq) {
                if included.iter().any(|r| r.seq == record.seq) {
                    entries.push(serde_json::to_value(record).unwrap_or_default());
                } else {
                    entries.push(json!({
                        "seq": record.seq,
                        "digest": hex(&digest_of(&record.event)),
                    }));
                }
                after = record.seq;
            }
            if page.last().is_some_and(|r| r.seq > checkpoint.seq) {
                break;
            }
        }
        while i < included.len() && included[i].seq <= checkpoint.seq {
            i += 1;
        }
        segments.push(json!({
            "after": {"seq": start, "hash": prev},
            "entries": entries,
            "checkpoint": checkpoint,
        }));
    }
    Ok(segments)
}
