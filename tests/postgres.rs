//! The real binary on Postgres (`COUNTERSIGN_DB=postgres://…`, issue #24): it migrates a fresh
//! database at start, reports it in `/readyz`, keeps an approval across `kill -9` and pays
//! once; a database it cannot reach, or one migrated by a newer build, stops the start with a
//! message that names where and never the password.
//!
//! Needs `COUNTERSIGN_TEST_POSTGRES` (an admin URL; `scripts/test.sh` starts a throwaway cluster
//! with `scripts/pg.sh`); without it these tests say so and pass, unless
//! `COUNTERSIGN_REQUIRE_POSTGRES=1` (CI), where they fail.
#![cfg(all(feature = "ssr", unix))]

use std::{process::Command, str::FromStr, time::Duration};

use serde_json::{Value, json};

use crate::common;
use common::stream::{answer, user};

use common::binary::Binary;

use common::fresh_postgres as fresh_database;

/// The kinds of `chat`'s audit events, oldest first, as `app` exports them.
async fn kinds(app: &Binary, chat: &str) -> Vec<String> {
    app.audit(chat)
        .await
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn start(url: &str) -> Binary {
    Binary::start(&[
        ("COUNTERSIGN_DB", url.to_owned()),
        ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_owned()),
        ("COUNTERSIGN_WEATHER", "offline".to_owned()),
    ])
    .await
}

#[tokio::test]
async fn on_postgres_an_approval_survives_kill_9_and_the_payment_happens_once() {
    let Some(url) = fresh_database("restart").await else {
        return;
    };
    let chat = "pg-chat";
    let ask = "Send $50 to Hanako";
    let first = start(&url).await;
    let health: Value = reqwest::get(format!("{}/readyz", first.base))
        .await
        .expect("readyz")
        .json()
        .await
        .expect("JSON");
    assert_eq!(health["database"], json!({"kind": "postgres", "ok": true}));
    let (status, asked, text) = first.chat(user(chat, ask)).await;
    assert_eq!(status, 200, "{text}");
    first.kill9();

    let second = start(&url).await;
    let (status, chunks, text) = second.chat(answer(chat, ask, &asked, true)).await;
    assert_eq!(status, 200, "{text}");
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap_or_else(|| panic!("the payment ran after the restart: {text}"));
    assert_eq!(output["output"]["wallet_balance"], 950, "{output}");
    // Again: already applied, nothing is paid twice.
    let (status, _, text) = second.chat(answer(chat, ask, &asked, true)).await;
    assert_eq!(status, 409, "{text}");
    let kinds: Vec<String> = kinds(&second, chat).await;
    assert_eq!(kinds, ["requested", "approved", "executed"]);
    second.kill9();

    // A third start finds the chat, its wallet and its history where they were.
    let third = start(&url).await;
    let chat_view: Value = reqwest::get(format!("{}/api/chats/{chat}", third.base))
        .await
        .expect("the chat")
        .json()
        .await
        .expect("JSON");
    let text = chat_view["messages"].to_string();
    assert!(text.contains("950"), "{text}");
}

/// Runs the binary on `db` until it exits (it should not start): its exit code and stderr.
fn run_to_exit(db: &str) -> (Option<i32>, String) {
    let site = std::env::temp_dir().join("countersign-binary-site");
    std::fs::create_dir_all(&site).expect("site dir");
    let output = Command::new(env!("CARGO_BIN_EXE_countersign"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
        .env("LEPTOS_SITE_ROOT", &site)
        .env("COUNTERSIGN_DB", db)
        .output()
        .expect("the binary runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_postgres_it_cannot_reach_stops_the_start_naming_where_not_the_password() {
    // Nothing listens on port 1; the connect timeout is short in the URL.
    let (code, stderr) = tokio::task::spawn_blocking(|| {
        run_to_exit("postgres://countersign:s3cret-pw@127.0.0.1:1/team?connect_timeout=2")
    })
    .await
    .expect("ran");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot reach Postgres at 127.0.0.1:1/team"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret-pw"), "{stderr}");
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_build_is_refused_at_start() {
    let Some(url) = fresh_database("newer").await else {
        return;
    };
    // Migrated by this build once, then marked as a later schema.
    drop(start(&url).await);
    let config = tokio_postgres::Config::from_str(&url).expect("a URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connects");
    let connection = tokio::spawn(connection);
    client
        .batch_execute("INSERT INTO countersign_schema (version) VALUES (999)")
        .await
        .expect("marked");
    drop(client);
    let _ = connection.await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (code, stderr) = tokio::task::spawn_blocking(move || run_to_exit(&url))
        .await
        .expect("ran");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("migrated by a newer Countersign (schema 999"),
        "{stderr}"
    );
}

/// What the database says of a chat's payments: (ledger rows, the wallet's balance in cents).
async fn paid(url: &str, chat: &str) -> (i64, i64) {
    let config = tokio_postgres::Config::from_str(url).expect("a URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connects");
    let connection = tokio::spawn(connection);
    let rows: i64 = client
        .query_one(
            "SELECT count(*) FROM ledger WHERE session_id = $1",
            &[&chat],
        )
        .await
        .expect("the ledger")
        .get(0);
    let wallet: String = client
        .query_one("SELECT wallet FROM sessions WHERE id = $1", &[&chat])
        .await
        .expect("the session")
        .get(0);
    drop(client);
    let _ = connection.await;
    let wallet: Value = serde_json::from_str(&wallet).expect("JSON");
    (rows, wallet["balance_cents"].as_i64().expect("a balance"))
}

#[tokio::test]
async fn one_approval_sent_to_three_instances_at_once_pays_once() {
    let Some(url) = fresh_database("once").await else {
        return;
    };
    let (a, b, c) = tokio::join!(start(&url), start(&url), start(&url));
    let chat = "pg-once";
    let ask = "Send $50 to Hanako";
    let (status, asked, text) = a.chat(user(chat, ask)).await;
    assert_eq!(status, 200, "{text}");
    let answer = answer(chat, ask, &asked, true);
    let (ra, rb, rc) = tokio::join!(
        a.chat(answer.clone()),
        b.chat(answer.clone()),
        c.chat(answer.clone())
    );
    let ran: Vec<u16> = [&ra, &rb, &rc].iter().map(|r| r.0).collect();
    assert!(ran.contains(&200), "one of them took it: {ran:?}");
    assert_eq!(paid(&url, chat).await, (1, 95_000), "paid once: {ran:?}");
    // One instance made the payment. A client whose instance lost the race either follows the
    // winner's output (the very same payment) or is told another server answered first (or, when
    // the winner's commit came before its instance read the chat, that it was answered already
    // or that the turn it answers is running on).
    let announced: Vec<&Value> = [&ra, &rb, &rc]
        .iter()
        .filter_map(|r| r.1.iter().find(|c| c["type"] == "tool-output-available"))
        .collect();
    assert!(!announced.is_empty(), "{ra:?}\n{rb:?}\n{rc:?}");
    let transaction = &announced[0]["output"]["transaction_id"];
    for output in &announced {
        assert_eq!(&output["output"]["transaction_id"], transaction, "{output}");
    }
    for r in [&ra, &rb, &rc] {
        let announced = r.1.iter().any(|c| c["type"] == "tool-output-available");
        assert!(
            announced
                || r.2.contains("answered on another server first")
                || r.2.contains("approval_already_answered")
                || r.2.contains("turn_in_progress")
                || r.2.contains("no_active_turn")
                || r.2.contains("answered_elsewhere"),
            "{}",
            r.2
        );
    }
    // Every instance now reads the chat as the database has it.
    for app in [&a, &b, &c] {
        let chat_view: Value = reqwest::get(format!("{}/api/chats/{chat}", app.base))
            .await
            .expect("the chat")
            .json()
            .await
            .expect("JSON");
        let text = chat_view.to_string();
        assert!(text.contains("output-available"), "{text}");
    }
}

#[tokio::test]
async fn payments_asked_and_approved_on_alternating_instances_keep_the_ledger_exact() {
    let Some(url) = fresh_database("alternate").await else {
        return;
    };
    let (a, b, c) = tokio::join!(start(&url), start(&url), start(&url));
    let apps = [&a, &b, &c];
    let chat = "pg-alternate";
    for i in 0..10usize {
        let names = [
            "Bob", "Ana", "Cy", "Dan", "Eve", "Fay", "Gus", "Hal", "Ida", "Jo",
        ];
        let ask = format!("Send $10 to {}", names[i]);
        let asking = apps[i % 3];
        let answering = apps[(i + 1) % 3];
        let (status, asked, text) = asking.chat(user(chat, &ask)).await;
        assert_eq!(status, 200, "payment {i} asked on {}: {text}", asking.base);
        let (status, chunks, text) = answering.chat(answer(chat, &ask, &asked, true)).await;
        assert_eq!(
            status, 200,
            "payment {i} approved on {}: {text}",
            answering.base
        );
        let output = chunks
            .iter()
            .find(|c| c["type"] == "tool-output-available")
            .unwrap_or_else(|| panic!("payment {i} ran: {text}"));
        assert_eq!(
            output["output"]["wallet_balance"],
            json!(1000 - 10 * (i as i64 + 1)),
            "payment {i}: {output}"
        );
    }
    assert_eq!(paid(&url, chat).await, (10, 90_000));
}

#[tokio::test]
async fn an_approval_asked_on_an_instance_that_died_is_answered_on_another() {
    let Some(url) = fresh_database("handover").await else {
        return;
    };
    let (a, b) = tokio::join!(start(&url), start(&url));
    let chat = "pg-handover";
    let ask = "Send $30 to Kenji";
    // B has seen the chat before it asks (its copy in memory is then out of date).
    let (status, _, text) = b.chat(user(chat, "What is the weather in Paris?")).await;
    assert_eq!(status, 200, "{text}");
    let (status, asked, text) = a.chat(user(chat, ask)).await;
    assert_eq!(status, 200, "{text}");
    a.kill9();
    let (status, chunks, text) = b.chat(answer(chat, ask, &asked, true)).await;
    assert_eq!(status, 200, "{text}");
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap_or_else(|| panic!("the payment ran on B: {text}"));
    assert_eq!(output["output"]["wallet_balance"], 970, "{output}");
    assert_eq!(paid(&url, chat).await, (1, 97_000));
}

#[tokio::test]
async fn an_approval_of_an_instance_that_died_still_expires_once() {
    let Some(url) = fresh_database("expiry").await else {
        return;
    };
    let env = |url: &str| {
        vec![
            ("COUNTERSIGN_DB", url.to_owned()),
            ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_owned()),
            ("COUNTERSIGN_WEATHER", "offline".to_owned()),
            ("COUNTERSIGN_APPROVAL_TIMEOUT_SECS", "1".to_owned()),
        ]
    };
    let settings = env(&url);
    let (a, b, c) = tokio::join!(
        Binary::start(&settings),
        Binary::start(&settings),
        Binary::start(&settings)
    );
    let chat = "pg-expiry";
    let (status, _, text) = a.chat(user(chat, "Send $20 to Lena")).await;
    assert_eq!(status, 200, "{text}");
    a.kill9();
    // One second to answer, two of grace for the instance that asked, then B or C takes it up.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let seen = loop {
        let seen = kinds(&b, chat).await;
        if seen.iter().any(|k| k == "expired") || std::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Both survivors may have tried; the log has one expiry, and nothing was paid.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(seen, ["requested", "expired"], "{seen:?}");
    assert_eq!(kinds(&c, chat).await, seen);
    assert_eq!(paid(&url, chat).await, (0, 100_000));
}

/// A BIDI socket of the chat page's protocol on `app`.
async fn live_socket(app: &Binary) -> common::stream::Socket {
    let url = format!("{}/api/live", app.base.replace("http://", "ws://"));
    tokio_tungstenite::connect_async(url)
        .await
        .expect("the socket opens")
        .0
}

/// Waits until `app`'s audit log of `chat` has an event of `kind` (a commit is on disk).
async fn audited(app: &Binary, chat: &str, kind: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !kinds(app, chat).await.iter().any(|k| k == kind) {
        assert!(
            std::time::Instant::now() < deadline,
            "no {kind} event for {chat}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_bidi_socket_on_one_instance_sees_the_result_another_instance_produced() {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let Some(url) = fresh_database("follow").await else {
        return;
    };
    let (a, b) = tokio::join!(start(&url), start(&url));
    let chat = "pg-follow";
    let ask = "Send $25 to Ravi";
    let mut socket = live_socket(&a).await;
    let message = json!({"type": "message", "id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": ask}]}
    ]});
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .expect("sent");
    let asked = common::stream::frames_until(&mut socket, "finish-step").await;
    audited(&a, chat, "requested").await;

    // The person approves on B (another tab, another device: any instance).
    let (status, chunks, text) = b
        .chat(answer(chat, ask, &common::stream::chunks_of(&asked), true))
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        chunks.iter().any(|c| c["type"] == "tool-output-available"),
        "the payment ran on B: {text}"
    );

    // A's socket follows what B produced, to the end of the turn.
    let rest =
        common::stream::chunks_of(&common::stream::frames_until(&mut socket, "[DONE]").await);
    let output = rest
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap_or_else(|| panic!("the socket on A saw the payment's result: {rest:?}"));
    assert_eq!(output["output"]["wallet_balance"], 975, "{output}");
    assert!(rest.iter().any(|c| c["type"] == "finish"), "{rest:?}");
    assert!(!rest.iter().any(|c| c["type"] == "error"), "{rest:?}");
    assert_eq!(paid(&url, chat).await, (1, 97_500));
}

/// Starts `app` with the demo model writing a word every `delay_ms`.
async fn start_slow(url: &str, delay_ms: u64) -> Binary {
    Binary::start(&[
        ("COUNTERSIGN_DB", url.to_owned()),
        ("COUNTERSIGN_DEMO_DELAY_MS", delay_ms.to_string()),
        ("COUNTERSIGN_WEATHER", "offline".to_owned()),
    ])
    .await
}

/// The text of a stream's `text-delta` chunks.
fn text_of(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect()
}

/// Reads `rx` until its stream ends; what came.
async fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Vec<Value> {
    let mut chunks = Vec::new();
    while let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await {
        chunks.push(chunk);
    }
    chunks
}

/// `GET /api/chat/{chat}/stream` on `app`: the status and the chunks.
async fn resume(app: &Binary, chat: &str) -> (u16, Vec<Value>) {
    let response = reqwest::get(format!("{}/api/chat/{chat}/stream", app.base))
        .await
        .expect("resume sent");
    let status = response.status().as_u16();
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the resume ends")
        .expect("a body");
    let chunks = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    (status, chunks)
}

/// Starts a weather turn on `app` (slow words) and reads its stream until the tool's result,
/// which is committed before it is sent; the rest of the stream is left in the receiver.
async fn weather_turn_past_its_tool(
    app: &Binary,
    chat: &str,
) -> (tokio::sync::mpsc::UnboundedReceiver<Value>, Vec<Value>) {
    let mut rx = common::stream::chat_stream(
        &app.base,
        user(chat, "What is the weather in Paris and in Tokyo?"),
    );
    let mut seen = Vec::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("a chunk")
            .expect("the stream goes on");
        let done = chunk["type"] == "tool-output-available";
        seen.push(chunk);
        if done {
            return (rx, seen);
        }
    }
}

#[tokio::test]
async fn a_stream_resumed_on_another_instance_follows_the_turn_without_running_it_again() {
    let Some(url) = fresh_database("resume").await else {
        return;
    };
    let (a, b) = tokio::join!(start_slow(&url, 120), start_slow(&url, 120));
    let chat = "pg-resume";
    let (mut rx, mut on_a) = weather_turn_past_its_tool(&a, chat).await;
    // The person's other tab reconnects through B while A is still writing: B streams A's text
    // as A writes it (each entry as news, ADR 0043), long before A's turn ends.
    let mut on_b_rx = common::stream::resume_stream(&b.base, chat);
    let first_text_on_b = common::stream::next_of(&mut on_b_rx, "text-delta", None).await;
    while let Ok(chunk) = rx.try_recv() {
        on_a.push(chunk);
    }
    assert!(
        !on_a.iter().any(|c| c["type"] == "finish"),
        "B had text only after A's turn ended: {first_text_on_b}"
    );
    let mut on_b = vec![first_text_on_b];
    on_b.extend(drain(&mut on_b_rx).await);
    on_a.extend(drain(&mut rx).await);
    // A's turn was not taken over (no "answered on another server first"), and B showed the
    // same answer A wrote.
    assert!(!on_a.iter().any(|c| c["type"] == "error"), "{on_a:?}");
    assert!(!on_b.iter().any(|c| c["type"] == "error"), "{on_b:?}");
    assert!(on_b.iter().any(|c| c["type"] == "finish"), "{on_b:?}");
    let text = text_of(&on_a);
    assert!(text.contains("Paris"), "{text}");
    assert!(
        text.ends_with(&text_of(&on_b)),
        "{text} / {}",
        text_of(&on_b)
    );
    // B's resume replays the whole message from its start: the same text.
    let (status, replayed) = resume(&b, chat).await;
    assert!(status == 204 || text_of(&replayed) == text, "{status}");
}

#[tokio::test]
async fn a_stop_sent_to_another_instance_stops_the_turn_where_it_runs() {
    let Some(url) = fresh_database("stop").await else {
        return;
    };
    let (a, b) = tokio::join!(start_slow(&url, 200), start_slow(&url, 200));
    let chat = "pg-stop";
    let (mut rx, _) = weather_turn_past_its_tool(&a, chat).await;
    let stopped: Value = reqwest::Client::new()
        .post(format!("{}/api/chat/{chat}/stop", b.base))
        .send()
        .await
        .expect("stop sent")
        .json()
        .await
        .expect("JSON");
    assert_eq!(stopped["stopped"], true, "{stopped}");
    let rest = drain(&mut rx).await;
    assert!(
        rest.iter().any(|c| c["type"] == "abort"),
        "A's turn was stopped: {rest:?}"
    );
}

#[tokio::test]
async fn a_running_turn_of_an_instance_that_died_is_taken_over_by_another() {
    let Some(url) = fresh_database("takeover").await else {
        return;
    };
    let (a, b) = tokio::join!(start_slow(&url, 200), start_slow(&url, 0));
    let chat = "pg-takeover";
    let (_rx, _) = weather_turn_past_its_tool(&a, chat).await;
    a.kill9();
    // No request needed: B sees A's heartbeat stop and takes the turn over, once.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let snapshot: Value = reqwest::get(format!("{}/api/chats/{chat}", b.base))
            .await
            .expect("snapshot")
            .json()
            .await
            .expect("JSON");
        let done = !snapshot["streaming"].as_bool().unwrap_or(true)
            && snapshot["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m["role"] == "assistant" && m.to_string().contains("Tokyo"));
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn was not finished on B: {snapshot}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
