//! Operating the server (issue #35, ADR 0033): `/metrics` moves with the work and is only for
//! whoever sees the whole server; `/healthz` is liveness and `/readyz` readiness (503 while the
//! database is away); instances on one Postgres stay within their connection budget.
#![cfg(feature = "ssr")]

use std::{collections::BTreeMap, time::Duration};

use serde_json::{Value, json};

use crate::common;
use common::stream::{answer, user};

/// `POST {base}/api/chat` to its end (the pause or the turn's end): its chunks.
async fn chat(base: &str, body: Value) -> Vec<Value> {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/chat"))
        .json(&body)
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the response ends")
        .expect("a body");
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// A scrape's samples: `name{labels}` → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

async fn scrape(base: &str, key: Option<&str>) -> (u16, String, String) {
    let mut request = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (
        status,
        content_type,
        response.text().await.unwrap_or_default(),
    )
}

/// Scrapes until `until` holds of the samples (at most 5 s: what the page sees settles within a
/// commit); the last samples.
async fn scrape_until(
    base: &str,
    what: &str,
    until: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> BTreeMap<String, f64> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (status, _, text) = scrape(base, None).await;
        assert_eq!(status, 200, "{text}");
        let now = samples(&text);
        if until(&now) {
            return now;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn value(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    samples.get(name).copied().unwrap_or(0.0)
}

const WAITING: &str = "countersign_approvals_waiting{tool=\"process_payment\",rule=\"\"}";
const APPROVED: &str = "countersign_decision_seconds_count{outcome=\"approved\"}";
const COMMITS: &str = "countersign_commits_total{store=\"memory\"}";
const TURNS: &str = "countersign_turns_started_total";

#[tokio::test]
async fn a_scrape_follows_an_approval_round_trip() {
    let server = common::start(common::Opts::default()).await;
    let base = format!("http://{}", server.addr);
    let (status, content_type, text) = scrape(&base, None).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    let before = samples(&text);
    assert_eq!(value(&before, WAITING), 0.0);
    assert_eq!(value(&before, APPROVED), 0.0);
    assert_eq!(value(&before, "countersign_instances_live"), 1.0);

    let ask = "Send $50 to Hanako";
    let asked = chat(&base, user("ops-chat", ask)).await;
    let waiting = scrape_until(&base, "the approval waits", |s| value(s, WAITING) == 1.0).await;
    assert!(value(&waiting, COMMITS) > value(&before, COMMITS));
    assert!(value(&waiting, TURNS) > value(&before, TURNS));
    assert_eq!(value(&waiting, APPROVED), 0.0);

    let done = chat(&base, answer("ops-chat", ask, &asked, true)).await;
    assert!(
        done.iter().any(|c| c["type"] == "tool-output-available"),
        "{done:?}"
    );
    let after = scrape_until(&base, "the approval is decided", |s| {
        value(s, WAITING) == 0.0 && value(s, APPROVED) == 1.0
    })
    .await;
    assert!(value(&after, COMMITS) > value(&waiting, COMMITS));
    assert_eq!(
        value(
            &after,
            "countersign_decision_seconds_count{outcome=\"denied\"}"
        ),
        0.0
    );
    assert_eq!(value(&after, "countersign_sse_streams_open"), 0.0);
    assert_eq!(
        value(
            &after,
            "countersign_store_errors_total{store=\"memory\",operation=\"commit\"}"
        ),
        0.0
    );
}

#[tokio::test]
async fn with_an_api_key_the_metrics_need_it() {
    let key = "an-api-key-of-enough-length";
    let server = common::start(common::Opts {
        env: vec![("COUNTERSIGN_API_KEY".into(), key.into())],
        ..common::Opts::default()
    })
    .await;
    let base = format!("http://{}", server.addr);
    let (status, _, text) = scrape(&base, None).await;
    assert_eq!(status, 401, "{text}");
    let error: Value = serde_json::from_str(&text).expect("the API's JSON error");
    assert_eq!(error["error"]["code"], "unauthorized", "{text}");
    let (status, _, text) = scrape(&base, Some(key)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("# TYPE countersign_commits_total counter"),
        "{text}"
    );
    // Liveness and readiness stay open to the load balancer.
    for path in ["/healthz", "/readyz"] {
        let response = reqwest::get(format!("{base}{path}")).await.expect("sent");
        assert_eq!(response.status(), 200, "{path}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_person_who_is_not_an_admin_is_refused_the_metrics() {
    use common::people::{get, passkeys_server, team, temp};
    let db = temp("ops-metrics.db");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [ana, ben, ..] = team(&app, &setup).await;
    let (status, body) = get(&app, Some(&ben), "/metrics").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "not_allowed", "{body}");
    let (status, body) = get(&app, None, "/metrics").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    let response = reqwest::Client::new()
        .get(format!("{}/metrics", app.base))
        .header("cookie", ana.cookie.as_deref().expect("Ana is signed in"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap_or_default();
    assert!(
        text.contains("countersign_commits_total{store=\"sqlite\"}"),
        "{text}"
    );
}

/// Rows of `pg_stat_activity` on `database`, by `application_name`.
#[cfg(unix)]
async fn connections_by_name(admin: &str, database: &str) -> BTreeMap<String, i64> {
    let config = <tokio_postgres::Config as std::str::FromStr>::from_str(admin).expect("a URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("the test cluster answers");
    let connection = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = $1 \
             GROUP BY application_name",
            &[&database],
        )
        .await
        .expect("pg_stat_activity");
    drop(client);
    let _ = connection.await;
    rows.iter().map(|r| (r.get(0), r.get(1))).collect()
}

#[cfg(unix)]
#[tokio::test]
async fn three_instances_on_one_postgres_stay_within_their_connection_budget() {
    use common::binary::Binary;
    let Some(url) = common::fresh_postgres("budget").await else {
        return;
    };
    let admin = std::env::var("COUNTERSIGN_TEST_POSTGRES").expect("set when a database was made");
    let database = url.rsplit('/').next().expect("a database name").to_owned();
    const POOL: i64 = 3;
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(
            Binary::start(&[
                ("COUNTERSIGN_DB", url.clone()),
                ("COUNTERSIGN_DB_POOL", POOL.to_string()),
                ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_owned()),
                ("COUNTERSIGN_WEATHER", "offline".to_owned()),
            ])
            .await,
        );
    }
    // Work enough to fill every pool: chats asking at once on every instance, with readiness
    // and metrics scrapes among them.
    let work = instances.iter().enumerate().flat_map(|(i, app)| {
        (0..8).map(move |n| async move {
            let chat = format!("budget-{i}-{n}");
            let (status, chunks, text) = app.chat(user(&chat, "Send $5 to Hanako")).await;
            assert_eq!(status, 200, "{text}");
            assert!(
                chunks.iter().any(|c| c["type"] == "tool-approval-request"),
                "{text}"
            );
            let ready = reqwest::get(format!("{}/readyz", app.base))
                .await
                .expect("sent");
            assert_eq!(ready.status(), 200);
            let (status, _, _) = scrape(&app.base, None).await;
            assert_eq!(status, 200);
        })
    });
    futures::future::join_all(work).await;

    let by_name = connections_by_name(&admin, &database).await;
    let listeners: Vec<_> = by_name
        .iter()
        .filter(|(name, _)| name.starts_with("countersign ") && name.ends_with(" listen"))
        .collect();
    let pools: Vec<_> = by_name
        .iter()
        .filter(|(name, _)| name.starts_with("countersign ") && !name.ends_with(" listen"))
        .collect();
    assert_eq!(listeners.len(), 3, "one listener per instance: {by_name:?}");
    assert!(listeners.iter().all(|(_, n)| **n == 1), "{by_name:?}");
    assert_eq!(pools.len(), 3, "one pool per instance: {by_name:?}");
    assert!(
        pools.iter().all(|(_, n)| (1..=POOL).contains(*n)),
        "each pool within COUNTERSIGN_DB_POOL={POOL}: {by_name:?}"
    );
    let ours: i64 = by_name
        .iter()
        .filter(|(name, _)| name.starts_with("countersign "))
        .map(|(_, n)| n)
        .sum();
    assert!(ours <= 3 * (POOL + 1), "{by_name:?}");
    // The live instances, as every one of them reports them.
    let (_, _, text) = scrape(&instances[0].base, None).await;
    assert_eq!(
        value(&samples(&text), "countersign_instances_live"),
        3.0,
        "{text}"
    );
}

/// `scripts/pg.sh <args>`: its output.
#[cfg(unix)]
fn pg_sh(args: &[&str]) -> String {
    let output = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg.sh"))
        .args(args)
        .output()
        .expect("scripts/pg.sh runs");
    assert!(
        output.status.success(),
        "pg.sh {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Asks `path` until it answers `status` (at most 15 s: a pool notices a database that went
/// away, or came back, at its next connection).
async fn until_status(base: &str, path: &str, status: u16) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let response = reqwest::get(format!("{base}{path}")).await.expect("sent");
        let got = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if got == status {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path}: {got} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(unix)]
#[tokio::test]
async fn readyz_is_503_while_postgres_is_down_and_healthz_stays_200() {
    if common::fresh_postgres("probe").await.is_none() {
        return;
    }
    // A cluster of its own, to stop under the server.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("bound")
        .port()
        .to_string();
    let dir = std::env::temp_dir().join(format!("countersign-ops-pg-{}", std::process::id()));
    let dir = dir.to_string_lossy().into_owned();
    let url = pg_sh(&["start", &dir, &port]);
    let env = [("COUNTERSIGN_DB".to_owned(), url)];
    let config = countersign::config::Config::resolve(move |k| {
        env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
    })
    .expect("valid settings");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let bound = listener.local_addr().expect("bound");
    let state = countersign::server::AppState::new(config, bound)
        .await
        .expect("the server starts on the cluster");
    let base = format!("http://{bound}");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(countersign::server::serve(listener, state, async {
        let _ = stopped.await;
    }));
    let ready = until_status(&base, "/readyz", 200).await;
    assert_eq!(ready["database"], json!({"kind": "postgres", "ok": true}));

    pg_sh(&["stop", &dir]);
    let down = until_status(&base, "/readyz", 503).await;
    assert_eq!(down["status"], "unavailable", "{down}");
    assert_eq!(down["database"]["ok"], false, "{down}");
    let alive = reqwest::get(format!("{base}/healthz")).await.expect("sent");
    assert_eq!(alive.status(), 200);
    let alive: Value = alive.json().await.expect("JSON");
    assert_eq!(alive["database"], json!({"kind": "postgres"}));

    pg_sh(&["start", &dir, &port]);
    until_status(&base, "/readyz", 200).await;
    let _ = stop.send(());
    let _ = served.await;
    pg_sh(&["stop", &dir]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The spans of one OTLP/JSON export body: (name, trace id, attributes as strings).
fn spans_of(body: &Value) -> Vec<(String, String, BTreeMap<String, String>)> {
    let mut spans = Vec::new();
    let resources = body["resourceSpans"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for scope in resources
        .iter()
        .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
    {
        for span in scope["spans"].as_array().cloned().unwrap_or_default() {
            let attributes = span["attributes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|a| {
                    let value = &a["value"];
                    let text = value["stringValue"]
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| value["intValue"].as_str().map(str::to_owned))
                        .or_else(|| value["intValue"].as_i64().map(|n| n.to_string()))
                        .or_else(|| value["boolValue"].as_bool().map(|b| b.to_string()))
                        .unwrap_or_default();
                    (a["key"].as_str().unwrap_or_default().to_owned(), text)
                })
                .collect();
            spans.push((
                span["name"].as_str().unwrap_or_default().to_owned(),
                span["traceId"].as_str().unwrap_or_default().to_owned(),
                attributes,
            ));
        }
    }
    spans
}

/// With an OTLP endpoint set, an approval's round trip reaches the collector as spans — the
/// request, the turn, the tool, the answer and the commits, the tool inside its turn's trace —
/// named by chat and tool, never by what the person wrote.
#[cfg(unix)]
#[tokio::test]
async fn an_approval_is_traced_to_an_otlp_collector_without_its_words() {
    use common::binary::Binary;

    let (exports, mut exported) = tokio::sync::mpsc::unbounded_channel::<(String, Value)>();
    let collector = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let exports = exports.clone();
            async move {
                let text = String::from_utf8_lossy(&body).into_owned();
                let value = serde_json::from_str(&text).unwrap_or(Value::Null);
                let _ = exports.send((text, value));
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port for the collector");
    let collector_addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, collector).await });

    let app = Binary::start(&[
        ("COUNTERSIGN_DB", ":memory:".into()),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://{collector_addr}"),
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json".into()),
        ("OTEL_BSP_SCHEDULE_DELAY", "20".into()),
    ])
    .await;
    let ask = "Send $50 to Hanako";
    let asked = chat(&app.base, user("traced-chat", ask)).await;
    let done = chat(&app.base, answer("traced-chat", ask, &asked, true)).await;
    assert!(
        done.iter().any(|c| c["type"] == "tool-output-available"),
        "{done:?}"
    );

    let mut spans = Vec::new();
    let has = |spans: &[(String, String, BTreeMap<String, String>)],
               name: &str,
               key: &str,
               value: &str| {
        spans
            .iter()
            .any(|(n, _, a)| n == name && a.get(key).map(String::as_str) == Some(value))
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !(has(&spans, "http", "route", "/api/chat")
        && has(&spans, "turn", "chat", "traced-chat")
        && has(&spans, "tool", "tool", "process_payment")
        && has(&spans, "answer", "chat", "traced-chat")
        && has(&spans, "commit", "chat", "traced-chat"))
    {
        let (text, body) = tokio::time::timeout_at(deadline, exported.recv())
            .await
            .unwrap_or_else(|_| panic!("the spans did not all arrive; got {spans:?}"))
            .expect("the collector runs");
        assert!(
            !text.contains("Hanako") && !text.contains("$50"),
            "an export carries the person's words: {text}"
        );
        spans.extend(spans_of(&body));
    }
    let trace_of = |name: &str| {
        spans
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, t, _)| t.clone())
            .collect::<Vec<_>>()
    };
    assert!(
        trace_of("tool")
            .iter()
            .any(|t| trace_of("turn").contains(t)),
        "the tool runs inside a turn's trace: {spans:?}"
    );
    assert!(
        spans
            .iter()
            .any(|(n, _, a)| n == "http" && a.get("status").map(String::as_str) == Some("200")),
        "{spans:?}"
    );
}
