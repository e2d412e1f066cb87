//! `/audit`: the audit log as a person reads it — every approval request, decision and execution,
//! newest first, with filters. The filter form is a plain GET form, so the page works (and can be
//! bookmarked) before the wasm has loaded; "Export JSONL" downloads the same selection.

use leptos::{either::Either, prelude::*};
use serde_json::Value;

use super::{
    api::{AuditFilters, AuditPage as AuditData, list_audit},
    url::{encode, query_param},
};
use crate::protocol::audit::{AuditKind, AuditRecord};

/// Hydrates the audit page: with a split wasm its code is loaded on this page only (ADR 0030).
#[cfg(feature = "hydrate")]
#[cfg_attr(wasm_split, leptos::lazy(audit_page))]
pub async fn hydrate(query: String) {
    super::hydrate_in_frame(move || view! { <AuditPage query/> });
}

/// The audit log page; `query` is the page's query string (its filters).
#[component]
pub fn AuditPage(query: String) -> impl IntoView {
    let param = |name: &str| query_param(&query, name).filter(|v| !v.is_empty());
    let filters = AuditFilters {
        session: param("session"),
        tool: param("tool"),
        kind: param("kind"),
        before: param("before").and_then(|b| b.parse::<i64>().ok()),
    };
    let data = Resource::new(
        {
            let filters = filters.clone();
            move || filters.clone()
        },
        list_audit,
    );
    let export_href = {
        let AuditFilters {
            session,
            tool,
            kind,
            ..
        } = filters.clone();
        let mut pairs = Vec::new();
        for (name, value) in [("session", session), ("tool", tool), ("kind", kind)] {
            if let Some(v) = value {
                pairs.push(format!("{name}={}", encode(&v)));
            }
        }
        if pairs.is_empty() {
            "/api/audit/export".to_owned()
        } else {
            format!("/api/audit/export?{}", pairs.join("&"))
        }
    };

    view! {
        <main class="audit-page">
            <h1>"Audit log"</h1>
            <p class="audit-intro">
                "Every approval request, every decision and what came of it. Arguments are shown as the model asked for them; "
                "the digest is SHA-256 of their canonical JSON."
            </p>
            <Transition fallback=|| view! { <p class="audit-loading">"Loading the audit log…"</p> }>
                {move || {
                    data.get()
                        .map(|result| match result {
                            Ok(page) => Either::Left(view! {
                                <AuditBody page filters=filters.clone() export=export_href.clone()/>
                            }),
                            Err(e) => Either::Right(view! {
                                <p class="audit-error" role="alert">
                                    {format!("The audit log could not be loaded: {e}")}
                                </p>
                            }),
                        })
                }}
            </Transition>
        </main>
    }
}

#[component]
fn AuditBody(page: AuditData, filters: AuditFilters, export: String) -> impl IntoView {
    let AuditFilters {
        session,
        tool,
        kind,
        ..
    } = filters.clone();
    let older = (page.records.len() >= page.limit)
        .then(|| page.records.last().map(|r| r.seq))
        .flatten()
        .map(|seq| {
            let mut pairs = vec![format!("before={seq}")];
            for (name, value) in [
                ("session", filters.session.clone()),
                ("tool", filters.tool.clone()),
                ("kind", filters.kind.clone()),
            ] {
                if let Some(v) = value {
                    pairs.push(format!("{name}={}", encode(&v)));
                }
            }
            format!("/audit?{}", pairs.join("&"))
        });
    let count = page.records.len();
    let broken = page
        .chain
        .as_ref()
        .and_then(|c| c.broken.as_ref())
        .map(|b| b.seq);
    let chain = page.chain.clone().map(|c| view! { <ChainLine chain=c/> });
    view! {
        {chain}
        <form class="audit-filters" method="get" action="/audit" data-testid="audit-filters">
            <label>
                "Chat"
                <input name="session" type="search" placeholder="any chat id" value=session.unwrap_or_default()/>
            </label>
            <label>
                "Tool"
                <select name="tool">
                    <option value="">"any tool"</option>
                    {page
                        .tools
                        .iter()
                        .map(|t| {
                            let selected = tool.as_deref() == Some(t.as_str());
                            view! { <option value=t.clone() selected=selected>{t.clone()}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>
                "Event"
                <select name="kind">
                    <option value="">"any event"</option>
                    {AuditKind::ALL
                        .iter()
                        .map(|k| {
                            let selected = kind.as_deref() == Some(k.as_str());
                            view! { <option value=k.as_str() selected=selected>{kind_label(*k)}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <button type="submit">"Filter"</button>
            <a class="audit-clear" href="/audit">"Clear"</a>
            <a class="audit-export" href=export download="countersign-audit.jsonl" data-testid="audit-export">
                "Export JSONL"
            </a>
        </form>
        {if count == 0 {
            Either::Left(view! { <p class="audit-empty" data-testid="audit-empty">"No entries match."</p> })
        } else {
            Either::Right(view! {
                <table class="audit-table" data-testid="audit-table">
                    <thead>
                        <tr>
                            <th scope="col">"#"</th>
                            <th scope="col">"When (UTC)"</th>
                            <th scope="col">"Event"</th>
                            <th scope="col">"Tool"</th>
                            <th scope="col">"Arguments"</th>
                            <th scope="col">"Details"</th>
                            <th scope="col">"Who"</th>
                            <th scope="col">"Chat"</th>
                        </tr>
                    </thead>
                    <tbody>{page.records.into_iter().map(|r| {
                        let broken = broken == Some(r.seq);
                        view! { <AuditRow record=r broken/> }
                    }).collect_view()}</tbody>
                </table>
            })
        }}
        {older.map(|href| view! { <p class="audit-more"><a href=href>"Older entries →"</a></p> })}
    }
}

/// "Chain verified up to #N, signed at …" — or where it broke — and the key that signs it.
#[component]
fn ChainLine(chain: crate::protocol::audit::ChainStatus) -> impl IntoView {
    let key_short: String = chain.key.chars().take(16).collect();
    let state = match (&chain.broken, chain.verified, chain.signed_at_ms) {
        (Some(b), _, _) => Either::Left(view! {
            <strong class="audit-chain-broken" role="alert">
                {format!("The chain is broken at #{}: {}. Nothing after it is signed.", b.seq, b.problem)}
            </strong>
        }),
        (None, Some(seq), Some(at)) => Either::Right(Either::Left(view! {
            <span>{format!("Chain verified up to #{seq}, signed at {} UTC", utc(at))}</span>
            {(chain.head > seq).then(|| format!(" (#{} to #{} not signed yet).", seq + 1, chain.head))}
        })),
        _ => Either::Right(Either::Right(
            view! { <span>"The chain has not been checked yet."</span> },
        )),
    };
    view! {
        <p class="audit-chain" data-testid="audit-chain">
            {state}
            " Checkpoints are signed with Ed25519 key "
            <code title=chain.key.clone()>{key_short}"…"</code>
            " ("<a href="/.well-known/countersign-audit-key">"the key"</a>"); check an export or a receipt with "
            <code>"countersign audit verify"</code>"."
        </p>
    }
}

#[component]
fn AuditRow(record: AuditRecord, broken: bool) -> impl IntoView {
    let e = record.event;
    let kind = e.kind;
    let details = details(&e);
    let who = who(&e);
    let digest_short: String = e.args_digest.chars().take(12).collect();
    let receipt = (kind == AuditKind::Executed)
        .then(|| {
            e.approval_id
                .as_ref()
                .map(|a| format!("/api/audit/receipts/{}", encode(a)))
        })
        .flatten();
    view! {
        <tr data-testid="audit-row" data-kind=kind.as_str() class:audit-broken=broken>
            <td class="audit-seq" title=record.hash.clone().unwrap_or_default()>
                {record.seq}
                {broken.then(|| view! { <span class="audit-broken-mark" data-testid="audit-broken">" broken link"</span> })}
            </td>
            <td class="audit-time">
                <time datetime=utc(e.at_ms)>{utc(e.at_ms)}</time>
            </td>
            <td>
                <span class=format!("audit-kind audit-kind-{}", kind.as_str())>{kind_label(kind)}</span>
            </td>
            <td class="audit-tool">{e.tool.clone()}</td>
            <td class="audit-args">
                <span>{compact(&e.args)}</span>
                <code class="audit-digest" title=e.args_digest.clone()>{digest_short}"…"</code>
            </td>
            <td class="audit-details">
                {details}
                {receipt.map(|href| view! {
                    " " <a class="audit-receipt" href=href download="" data-testid="audit-receipt">"Receipt"</a>
                })}
            </td>
            <td class="audit-who" data-testid="audit-who">
                <span class="audit-who-name">{who.name}</span>
                {who.proof.map(|(words, passkey)| view! {
                    <span class="audit-who-proof" title=passkey>{words}</span>
                })}
                {who.via.map(|via| view! { <span class="audit-who-via">{via}</span> })}
            </td>
            <td class="audit-chat">
                <a href=format!("/audit?session={}", encode(&e.session_id))>{e.session_id.clone()}</a>
            </td>
        </tr>
    }
}

/// Who did it, as the "Who" column says it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Who {
    /// The person's name; "Local person" for the one local person or the API key; "the
    /// server" when nobody answered (a rule, a grant, a deadline, the turn).
    name: String,
    /// How they proved it, in words ("step-up with passkey AbCd1234…", "signed in with passkey
    /// AbCd1234…"), and the passkey's full credential id.
    proof: Option<(String, String)>,
    /// Where the answer came from: the transport and the client's address.
    via: Option<String>,
}

fn who(e: &crate::protocol::audit::AuditEvent) -> Who {
    let Some(actor) = &e.actor else {
        return Who {
            name: "the server".to_owned(),
            proof: None,
            via: None,
        };
    };
    let name = actor
        .name
        .clone()
        .or_else(|| actor.person.clone())
        .unwrap_or_else(|| "Local person".to_owned());
    let proof = actor.passkey.as_ref().map(|passkey| {
        let short: String = passkey.chars().take(8).collect();
        let short = if short.len() < passkey.len() {
            format!("{short}…")
        } else {
            short
        };
        let words = if e.step_up.is_some() {
            format!("step-up with passkey {short}")
        } else {
            format!("signed in with passkey {short}")
        };
        (words, passkey.clone())
    });
    let via = match &actor.address {
        Some(address) => format!("{} · {address}", actor.transport),
        None => actor.transport.clone(),
    };
    Who {
        name,
        proof,
        via: Some(via),
    }
}

fn kind_label(kind: AuditKind) -> &'static str {
    match kind {
        AuditKind::Requested => "Requested",
        AuditKind::Approved => "Approved",
        AuditKind::Edited => "Approved with edits",
        AuditKind::Denied => "Denied",
        AuditKind::Expired => "Expired",
        AuditKind::Interrupted => "Interrupted",
        AuditKind::Executed => "Executed",
        AuditKind::Asked => "Asked the person",
        AuditKind::Answered => "Question closed",
        AuditKind::Allowed => "Ran without asking",
        AuditKind::Refused => "Refused by a rule",
        AuditKind::Dismissed => "Not decided",
        AuditKind::Superseded => "Superseded",
        AuditKind::Spoken => "Spoken while it waited",
        AuditKind::Granted => "Granted",
        AuditKind::Revoked => "Grant revoked",
        AuditKind::Countersigned => "Countersigned",
        AuditKind::Proposed => "Edited: a new proposal",
        AuditKind::Dropped => "Signature dropped",
        AuditKind::Removed => "Person removed",
        AuditKind::RolesChanged => "Roles changed",
        AuditKind::Enrolled => "Passkey registered",
    }
}

/// What a reader needs to know beyond the arguments, in words.
fn details(e: &crate::protocol::audit::AuditEvent) -> String {
    let mut parts = Vec::new();
    if let Some(deadline) = e.deadline_ms {
        parts.push(format!("answer by {}", utc(deadline)));
    }
    if let Some(edited) = &e.edited_args {
        parts.push(format!("ran with {}", compact(edited)));
    }
    if let Some(rule) = &e.rule {
        match &e.policy_version {
            Some(version) => parts.push(format!("rule {rule} (policy {version})")),
            None => parts.push(format!("rule {rule}")),
        }
    }
    if let Some(grant) = &e.grant {
        parts.push(format!("grant {grant}"));
    }
    if let Some(reason) = &e.reason {
        parts.push(format!("reason: {reason}"));
    }
    if let Some(outcome) = &e.outcome {
        match (outcome.get("ok"), outcome.get("error")) {
            (Some(ok), _) => parts.push(format!("result: {}", compact(ok))),
            (_, Some(err)) => parts.push(format!("failed: {}", compact(err))),
            _ => parts.push(compact(outcome)),
        }
    }
    parts.join(" · ")
}

/// `key: value, …` for an object; JSON otherwise; long text cut.
fn compact(value: &Value) -> String {
    let text = match &crate::protocol::json_util::sorted(value) {
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !matches!(v, Value::String(s) if s.is_empty()) && !v.is_null())
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.chars().count() > 160 {
        text.chars().take(159).chain(['…']).collect()
    } else {
        text
    }
}

/// `YYYY-MM-DD HH:MM:SS` in UTC from epoch milliseconds (the same on server and browser, so
/// hydration matches).
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn times_are_utc_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_795_326_821_838), "2026-11-22 05:53:41");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
    }

    #[test]
    fn who_is_the_person_with_their_passkey_then_where_from() {
        let mut event: crate::protocol::audit::AuditEvent = serde_json::from_value(json!({
            "at_ms": 1, "kind": "countersigned", "session_id": "c", "turn_id": "t",
            "tool_call_id": "k", "tool": "process_payment", "args": {}, "args_digest": "d",
            "actor": {"transport": "inbox", "address": "127.0.0.1:38490", "person": "p-ben",
                "name": "Ben", "passkey": "AbCdEfGh12345678"},
            "step_up": {"nonce": "n"}
        }))
        .unwrap();
        assert_eq!(
            who(&event),
            Who {
                name: "Ben".into(),
                proof: Some((
                    "step-up with passkey AbCdEfGh…".into(),
                    "AbCdEfGh12345678".into()
                )),
                via: Some("inbox · 127.0.0.1:38490".into()),
            }
        );
        event.step_up = None;
        assert_eq!(
            who(&event).proof.unwrap().0,
            "signed in with passkey AbCdEfGh…"
        );
        // A person whose name was not recorded is their id; no person is the local one.
        let actor = event.actor.as_mut().unwrap();
        actor.name = None;
        assert_eq!(who(&event).name, "p-ben");
        let actor = event.actor.as_mut().unwrap();
        actor.person = None;
        actor.passkey = None;
        actor.address = None;
        actor.transport = "sse".into();
        assert_eq!(
            who(&event),
            Who {
                name: "Local person".into(),
                proof: None,
                via: Some("sse".into()),
            }
        );
        event.actor = None;
        assert_eq!(who(&event).name, "the server");
    }

    #[test]
    fn arguments_read_as_key_value_pairs() {
        assert_eq!(
            compact(&json!({"amount": 50, "recipient": "Hanako"})),
            "amount: 50, recipient: Hanako"
        );
        assert!(compact(&json!("x".repeat(500))).ends_with('…'));
        assert_eq!(
            compact(&json!({"amount": 5, "description": "", "note": null})),
            "amount: 5"
        );
    }
}
