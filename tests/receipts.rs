//! Receipts anyone can check (issue #38, ADR 0029), against the real binary: a log made by the
//! real flows — a payment two approvers countersign with their passkeys (software passkeys of
//! webauthn-rs' test kit), a grant and a call it lets run, a small payment a rule lets run, a
//! real MCP server's tool approved and another denied, a payment a rule refuses — exported and
//! checked by `countersign audit verify` offline, as is one call's receipt; then the database
//! is tampered with, one way at a time (a record edited, one deleted, two reordered, an
//! argument swapped and the whole chain rewritten to match), and each time the check fails and
//! says where.
#![cfg(all(feature = "ssr", unix))]

use crate::common;

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use axum::{Json, Router, response::IntoResponse, routing::post};
use common::people::*;
use countersign::agent::{
    audit::{
        Notary,
        chain::{Head, digest_of, hex, link},
        export::{Export, Source},
        notary::NotaryError,
    },
    clock::SystemClock,
    store::sqlite::SqliteStore,
};
use serde_json::{Value, json};

/// A scripted OpenAI-compatible model: `pay <amount> <recipient>` calls `process_payment`,
/// `write <path> <text>` the tool ending in `__write_file`; after a tool's result it says so.
async fn fake_model() -> String {
    let app = Router::new().route("/v1/chat/completions", post(complete));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    format!("http://{addr}/v1")
}

async fn complete(Json(request): Json<Value>) -> impl IntoResponse {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let tool_named = |suffix: &str| -> Option<String> {
        request["tools"]
            .as_array()?
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .find(|n| n.ends_with(suffix))
            .map(str::to_owned)
    };
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let said = match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    };
    let call = if last["role"] == "tool" {
        None
    } else {
        let mut words = said.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("pay"), Some(amount), Some(to)) => Some((
                "process_payment".to_owned(),
                json!({"amount": serde_json::from_str::<Value>(amount).unwrap_or_default(), "recipient": to}),
            )),
            (Some("write"), Some(path), rest) => tool_named("__write_file")
                .map(|name| (name, json!({"path": path, "content": rest.unwrap_or("")}))),
            _ => None,
        }
    };
    let events = match call {
        Some((name, args)) => vec![
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_{}", messages.len()), "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
        ],
        None => vec![
            chunk(
                json!({"role": "assistant", "content": "Done."}),
                Value::Null,
            ),
            chunk(json!({}), json!("stop")),
        ],
    };
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], body)
}

/// The filesystem MCP server's config, over a temp directory; the directory.
fn mcp_config(name: &str) -> (PathBuf, PathBuf) {
    let base = std::env::temp_dir().join(format!(
        "countersign-receipts-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("files");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    assert!(
        server.exists(),
        "{} is missing: run scripts/setup.sh",
        server.display()
    );
    let config = base.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"files": {"command": "node", "args": [server, root]}}}).to_string(),
    )
    .unwrap();
    (config, root)
}

/// The answer to the plain approval waiting in `chunks` (with `extra`: a grant).
fn answer(chat: &str, chunks: &[Value], approved: bool, extra: Value) -> Value {
    let request = of_type(chunks, "tool-approval-request")[0];
    let call = request["toolCallId"].as_str().unwrap();
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == call)
        .unwrap();
    let message = chunks[0]["messageId"].as_str().unwrap();
    let mut approval = json!({"id": request["approvalId"], "approved": approved});
    if let Value::Object(extra) = extra {
        approval.as_object_mut().unwrap().extend(extra);
    }
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "…"}]},
        {"id": message, "role": "assistant", "parts": [
            {"type": format!("tool-{}", input["toolName"].as_str().unwrap()), "toolCallId": call,
             "state": "approval-responded", "input": input["input"], "approval": approval}
        ]}
    ]})
}

/// `GET path` as `who`: the status and the body's text.
async fn text_as(app: &common::binary::Binary, who: Option<&Someone>, path: &str) -> (u16, String) {
    let mut request = reqwest::Client::new().get(format!("{}{path}", app.base));
    if let Some(cookie) = who.and_then(|w| w.cookie.as_deref()) {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// `countersign audit verify <file> <more…>`: exit code and output.
fn verify(file: &Path, more: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
        .args(["audit", "verify"])
        .arg(file)
        .args(more)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The seq of the first record of `kind` in `export` about `approval`.
fn seq_of(export: &str, kind: &str, approval: &str) -> i64 {
    export
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["kind"] == kind && r["approval_id"] == approval)
        .and_then(|r| r["seq"].as_i64())
        .unwrap_or_else(|| panic!("no {kind} record of {approval}"))
}

/// A copy of the database at `db` (with its WAL) to tamper with.
fn copy_db(db: &Path, dir: &Path, name: &str) -> PathBuf {
    let copy = dir.join(name);
    for suffix in ["", "-wal", "-shm"] {
        let from = PathBuf::from(format!("{}{suffix}", db.display()));
        if from.exists() {
            std::fs::copy(&from, format!("{}{suffix}", copy.display())).unwrap();
        }
    }
    copy
}

/// The export of the database at `db` as the server would make it, the notary's verdict on
/// its chain first.
async fn export_of(db: &Path, origin: &str) -> (Result<i64, String>, String) {
    let store = Arc::new(SqliteStore::open(db).unwrap());
    let notary = Notary::new(store.clone(), Arc::new(SystemClock), 100)
        .await
        .unwrap();
    let checked = match notary.checkpoint().await {
        Ok(c) => Ok(c.seq),
        Err(NotaryError::Broken(b)) => Err(format!("#{}: {}", b.seq, b.problem)),
        Err(e) => panic!("{e}"),
    };
    let mut export = Export::start(Source {
        sessions: store.clone(),
        policies: store,
        notary,
        origin: Some(origin.to_owned()),
    })
    .await
    .unwrap();
    let mut text = String::new();
    loop {
        let lines = export.next().await.unwrap();
        if lines.is_empty() {
            break;
        }
        text.push_str(&lines);
    }
    (checked, text)
}

#[tokio::test]
async fn a_log_made_by_the_real_flows_verifies_offline_and_any_tampering_is_found() {
    let db = temp("receipts");
    let dir = std::env::temp_dir().join(format!("countersign-receipts-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = fake_model().await;
    let (config, root) = mcp_config("flows");
    let (app, setup) = passkeys_server(
        &db,
        &[
            ("OPENAI_BASE_URL", model),
            ("COUNTERSIGN_MODEL", "openai:scripted".into()),
            ("COUNTERSIGN_MCP_CONFIG", config.display().to_string()),
            ("COUNTERSIGN_TEXT_TIMING", "hold".into()),
        ],
    )
    .await;
    let [mut ana, mut ben, _eve, cy, dan] = team(&app, &setup).await;

    // A small payment a rule lets run (before anything was paid today).
    let (status, chunks) = post_chat(&app, &ben, say("ben-small", "pay 5 Kim"), true).await;
    assert_eq!(status, 200);
    assert_eq!(
        of_type(&chunks, "tool-output-available").len(),
        1,
        "{chunks:?}"
    );

    // Two approvers, not the requester, each with a passkey assertion over the arguments.
    let (_, chunks) = post_chat(&app, &dan, say("dan-150", "pay 150 Jack"), true).await;
    let approval = of_type(&chunks, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();
    for who in [&mut ben, &mut ana] {
        let assertion = confirm(&app, who, &approval, None).await;
        let signed = decide(&app, who, &approval, true, Some(assertion)).await;
        assert_eq!(signed.status, 200, "{}", signed.text);
    }
    wait_for_output(&app, &dan, "dan-150").await;

    // A grant, and a call it lets run.
    let (_, asked) = post_chat(&app, &ben, say("ben-grant", "pay 50 Jill"), true).await;
    let grant = json!({"grant": {"scope": "budget", "seconds": 3600, "maxCents": 10_000}});
    let (status, paid) =
        post_chat(&app, &ben, answer("ben-grant", &asked, true, grant), true).await;
    assert_eq!(status, 200);
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{paid:?}");
    let (_, granted) = post_chat(&app, &ben, say("ben-grant-2", "pay 40 Jill"), true).await;
    assert_eq!(
        of_type(&granted, "tool-output-available").len(),
        1,
        "{granted:?}"
    );

    // A real MCP server's tool: one write approved, one denied; a payment a rule refuses.
    let path = root.join("note.txt");
    let (_, asked) = post_chat(
        &app,
        &dan,
        say("dan-write", &format!("write {} hello", path.display())),
        true,
    )
    .await;
    let (status, _) = post_chat(
        &app,
        &dan,
        answer("dan-write", &asked, true, json!({})),
        true,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
    let never = root.join("never.txt");
    let (_, asked) = post_chat(
        &app,
        &dan,
        say("dan-deny", &format!("write {} no", never.display())),
        true,
    )
    .await;
    let (status, _) = post_chat(
        &app,
        &dan,
        answer("dan-deny", &asked, false, json!({})),
        true,
    )
    .await;
    assert_eq!(status, 200);
    assert!(!never.exists());
    let (_, refused) = post_chat(&app, &dan, say("dan-refused", "pay 900 Mallory"), true).await;
    assert!(of_type(&refused, "tool-output-available").is_empty());

    // The key is public; the page says how far the chain was checked.
    let (status, key) = text_as(&app, None, "/.well-known/countersign-audit-key").await;
    assert_eq!(status, 200, "{key}");
    let key: Value = serde_json::from_str(&key).unwrap();
    let key = key["key"].as_str().unwrap().to_owned();

    // The whole log, as an admin exports it: it verifies, offline.
    let (status, export) = text_as(&app, Some(&ana), "/api/audit/export").await;
    assert_eq!(status, 200, "{export}");
    let header: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    assert_eq!(header["countersign_audit_export"]["key"], key.as_str());
    let kinds: Vec<String> = export
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| r["kind"].as_str().map(str::to_owned))
        .collect();
    for kind in [
        "enrolled",
        "allowed",
        "countersigned",
        "granted",
        "executed",
        "denied",
        "refused",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    let export_file = write(&dir, "export.jsonl", &export);
    let (code, out) = verify(&export_file, &["--key", &key]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(": ok"), "{out}");
    assert!(out.contains("5 executed calls"), "{out}");
    let page = text_as(&app, Some(&ana), "/audit").await.1;
    assert!(page.contains("Chain verified up to #"), "{page}");
    assert!(page.contains("data-testid=\"audit-receipt\""), "{page}");

    // The receipt of the countersigned payment, as the person who asked gets it.
    let (status, receipt) =
        text_as(&app, Some(&dan), &format!("/api/audit/receipts/{approval}")).await;
    assert_eq!(status, 200, "{receipt}");
    let receipt_file = write(&dir, "receipt.json", &receipt);
    let (code, out) = verify(&receipt_file, &["--key", &key]);
    assert_eq!(code, 0, "{out}");
    // Someone with no part in it gets none; a call that did not run has none.
    assert_eq!(
        text_as(&app, Some(&cy), &format!("/api/audit/receipts/{approval}"))
            .await
            .0,
        404
    );
    // A receipt changed by one byte of its arguments does not verify.
    let forged = receipt.replacen("\"amount\":150", "\"amount\":15", 1);
    assert_ne!(forged, receipt);
    let (code, out) = verify(&write(&dir, "forged.json", &forged), &[]);
    assert_eq!(code, 1, "{out}");
    // Another key than the server's is a problem; a file that is no export is unusable.
    let (code, _) = verify(&export_file, &["--key", &"ab".repeat(32)]);
    assert_eq!(code, 1);
    let (status, filtered) = text_as(&app, Some(&ana), "/api/audit/export?session=dan-150").await;
    assert_eq!(status, 200);
    let (code, out) = verify(&write(&dir, "filtered.jsonl", &filtered), &[]);
    assert_eq!(code, 2, "{out}");
    let (status, published) = text_as(&app, Some(&ana), "/api/audit/checkpoints").await;
    assert_eq!(status, 200);
    let published = write(&dir, "published.jsonl", &published);
    let origin = header["countersign_audit_export"]["origin"]
        .as_str()
        .unwrap()
        .to_owned();
    app.kill9();

    // Tampering, one way at a time, on copies of the database.
    let signed = seq_of(&export, "countersigned", &approval);
    let executed = seq_of(&export, "executed", &approval);
    let cases: [(&str, String, &str); 3] = [
        (
            "edited",
            format!("UPDATE audit SET event = replace(event, '\"Ben\"', '\"Eve\"') WHERE seq = {signed}"),
            "its hash does not match",
        ),
        ("deleted", format!("DELETE FROM audit WHERE seq = {signed}"), "records were deleted"),
        (
            "reordered",
            format!(
                "UPDATE audit SET event = CASE seq WHEN {signed} THEN (SELECT event FROM audit WHERE seq = {n})
                     ELSE (SELECT event FROM audit WHERE seq = {signed}) END
                 WHERE seq IN ({signed}, {n})",
                n = signed + 1
            ),
            "its hash does not match",
        ),
    ];
    for (name, sql, said) in cases {
        let copy = copy_db(&db, &dir, &format!("{name}.db"));
        rusqlite::Connection::open(&copy)
            .unwrap()
            .execute_batch(&sql)
            .unwrap();
        if name == "edited" {
            // The server on that database says so on /audit, and marks the record.
            let served = copy_db(&copy, &dir, "edited-served.db");
            let (app, _) = passkeys_server(&served, &[]).await;
            let page = text_as(&app, Some(&ana), "/audit").await.1;
            assert!(
                page.contains(&format!("The chain is broken at #{signed}")),
                "{page}"
            );
            assert!(page.contains("data-testid=\"audit-broken\""), "{page}");
            app.kill9();
        }
        let (checked, text) = export_of(&copy, &origin).await;
        let broken = checked.expect_err(name);
        assert!(
            broken.contains(said),
            "{name}: the server's notary says {broken}"
        );
        let (code, out) = verify(
            &write(&dir, &format!("{name}.jsonl"), &text),
            &["--key", &key],
        );
        assert_eq!(code, 1, "{name}: {out}");
        assert!(out.contains(said), "{name}: {out}");
    }

    // An argument swapped, and the whole chain rewritten to match, the checkpoints dropped:
    // the server signs the new chain, but the passkey assertions still bind the old arguments,
    // and the checkpoints published before no longer match.
    let copy = copy_db(&db, &dir, "swapped.db");
    {
        let conn = rusqlite::Connection::open(&copy).unwrap();
        conn.execute_batch(&format!(
            "UPDATE audit SET event = replace(replace(event, '\"amount\":150', '\"amount\":15'),
                 args_digest, '{digest}'),
                 args_digest = '{digest}'
             WHERE approval_id = '{approval}';
             DELETE FROM audit_checkpoints;",
            digest = countersign::agent::store::audit::digest(
                &json!({"amount": 15, "recipient": "Jack"})
            ),
        ))
        .unwrap();
        let rows: Vec<(i64, String)> = conn
            .prepare("SELECT seq, event FROM audit ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut head = Head::default();
        for (seq, event) in rows {
            let event = countersign::protocol::audit::AuditEvent::from_json(&event).unwrap();
            head = Head {
                seq,
                hash: link(&head.hash, seq, &digest_of(&event)),
            };
            conn.execute(
                "UPDATE audit SET hash = ?2 WHERE seq = ?1",
                rusqlite::params![seq, hex(&head.hash)],
            )
            .unwrap();
        }
    }
    let (checked, text) = export_of(&copy, &origin).await;
    assert!(
        checked.is_ok(),
        "a rewritten chain holds together: {checked:?}"
    );
    let swapped = write(&dir, "swapped.jsonl", &text);
    let (code, out) = verify(&swapped, &["--key", &key]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("another approval or other arguments"), "{out}");
    assert!(out.contains(&format!("#{executed}")), "{out}");
    let (code, out) = verify(
        &swapped,
        &["--key", &key, "--checkpoints", published.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not have the hash it signed"), "{out}");
}
