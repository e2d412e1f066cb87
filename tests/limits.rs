//! Budgets and daily limits are exact across instances (issue #33): payments raced against a
//! daily limit rule and against a grant's budget, over three real binaries on one Postgres (and
//! one binary on SQLite), never pay a cent past the limit; every payment the limit stops is
//! refused — the model told why, the card shown the rule, the audit log naming it — or asks.
//!
//! The Postgres cases need `COUNTERSIGN_TEST_POSTGRES` (see tests/postgres.rs).
#![cfg(all(feature = "ssr", unix))]

use crate::common;

use std::{str::FromStr, time::Duration};

use common::binary::Binary;
use serde_json::{Value, json};

/// 7 USD payments run without asking, as long as the day's total stays within 100 USD: 14 of
/// them fit (98 USD), the 15th would make 105.
const DAILY_LIMIT: &str = r#"
@id("small-payments")
permit (principal, action == Action::"process_payment", resource)
when { context.amount_cents <= 1000 };

@id("daily-limit")
@reason("The organisation pays at most 100 USD a day without the finance system.")
forbid (principal, action == Action::"process_payment", resource)
when { context.spent_today_cents + context.amount_cents > 10000 };
"#;

const LIMIT_CENTS: i64 = 10_000;
const PAYMENT: i64 = 7;

async fn start(db: &str, policy: Option<&std::path::Path>) -> Binary {
    let mut env = vec![
        ("COUNTERSIGN_DB", db.to_owned()),
        ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_owned()),
        ("COUNTERSIGN_WEATHER", "offline".to_owned()),
    ];
    if let Some(policy) = policy {
        env.push(("COUNTERSIGN_POLICY", policy.display().to_string()));
    }
    Binary::start(&env).await
}

fn say(chat: &str, text: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
    ]})
}

fn of_type<'a>(chunks: &'a [Value], kind: &str) -> Vec<&'a Value> {
    chunks.iter().filter(|c| c["type"] == kind).collect()
}

fn text_of(chunks: &[Value]) -> String {
    of_type(chunks, "text-delta")
        .iter()
        .filter_map(|c| c["delta"].as_str())
        .collect()
}

/// How a payment's turn ended, as its stream shows it.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Ended {
    Paid,
    Refused,
    Asked,
}

/// Reads a payment's stream (full dialect): what happened, checking that a refusal is shown
/// (the automatic approval's response carries the rule's reason) and told to the model.
fn ended(chat: &str, chunks: &[Value], body: &str) -> Ended {
    if !of_type(chunks, "tool-output-available").is_empty() {
        return Ended::Paid;
    }
    if !of_type(chunks, "tool-output-denied").is_empty() {
        let response = of_type(chunks, "tool-approval-response");
        assert_eq!(response.len(), 1, "{chat}: {body}");
        assert_eq!(response[0]["approved"], false, "{chat}: {body}");
        assert_eq!(
            response[0]["reason"],
            "Refused by rule daily-limit: The organisation pays at most 100 USD a day without \
             the finance system.",
            "{chat}: {body}"
        );
        let request = of_type(chunks, "tool-approval-request");
        assert_eq!(
            request[0]["approvalDescriptor"]["countersign"]["decision"], "denied_by_rule",
            "{chat}: {body}"
        );
        let text = text_of(chunks);
        assert!(
            text.contains("policy does not allow") && text.contains("100 USD a day"),
            "{chat}: the model is told why: {text}"
        );
        return Ended::Refused;
    }
    let request = of_type(chunks, "tool-approval-request");
    assert!(
        request.iter().any(|r| r["isAutomatic"] != true),
        "{chat}: paid, refused or asked: {body}"
    );
    Ended::Asked
}

/// Sends one payment per chat, all at once, each to `apps[i % apps.len()]`: how each ended.
async fn race(apps: &[&Binary], prefix: &str, count: usize, say_what: &str) -> Vec<Ended> {
    let sends = (0..count).map(|i| {
        let app = apps[i % apps.len()];
        let chat = format!("{prefix}-{i}");
        async move {
            let (status, chunks, body) = app.chat_in(say(&chat, say_what), Some("full")).await;
            assert_eq!(status, 200, "{chat}: {body}");
            ended(&chat, &chunks, &body)
        }
    });
    futures::future::join_all(sends).await
}

fn policy_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "countersign-limits-{}-{name}.cedar",
        std::process::id()
    ));
    std::fs::write(&path, text).expect("the policy is written");
    path
}

/// `SELECT` one number from the database at `url`.
async fn number(url: &str, sql: &str) -> i64 {
    let config = tokio_postgres::Config::from_str(url).expect("a URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connects");
    let connection = tokio::spawn(connection);
    let n: i64 = client.query_one(sql, &[]).await.expect("the query").get(0);
    drop(client);
    let _ = connection.await;
    n
}

/// Checks the audit log of every refused chat names the rule and its reason.
async fn refusals_audited(app: &Binary, prefix: &str, outcomes: &[Ended]) {
    for (i, outcome) in outcomes.iter().enumerate() {
        if *outcome != Ended::Refused {
            continue;
        }
        let chat = format!("{prefix}-{i}");
        let audit = app.audit(&chat).await;
        assert!(
            audit.iter().any(|e| e["kind"] == "refused"
                && e["rule"] == "daily-limit"
                && e["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("100 USD a day"))),
            "{chat}: {audit:?}"
        );
    }
}

#[tokio::test]
async fn thirty_payments_racing_a_daily_limit_over_three_instances_never_pass_it() {
    let Some(url) = common::fresh_postgres("daily_limit").await else {
        return;
    };
    let policy = policy_file("daily", DAILY_LIMIT);
    let (a, b, c) = tokio::join!(
        start(&url, Some(&policy)),
        start(&url, Some(&policy)),
        start(&url, Some(&policy))
    );
    let outcomes = race(
        &[&a, &b, &c],
        "limit",
        30,
        &format!("Send ${PAYMENT} to Jack"),
    )
    .await;
    let paid_cents = number(
        &url,
        "SELECT COALESCE(SUM(amount_cents), 0)::BIGINT FROM ledger",
    )
    .await;
    assert!(
        paid_cents <= LIMIT_CENTS,
        "paid {paid_cents} cents past a limit of {LIMIT_CENTS}: {outcomes:?}"
    );
    let paid = outcomes.iter().filter(|o| **o == Ended::Paid).count() as i64;
    let refused = outcomes.iter().filter(|o| **o == Ended::Refused).count() as i64;
    assert_eq!(paid * PAYMENT * 100, paid_cents, "{outcomes:?}");
    // Exact, not merely safe: every payment that fitted was made.
    assert_eq!((paid, refused), (14, 16), "{outcomes:?}");
    // The audit log (read through any instance) names the rule for each refusal.
    refusals_audited(&b, "limit", &outcomes).await;
    // Once the calls are over nothing is held that was not paid (a paid call's reservation
    // counts no more and goes with the next reservation).
    let held = "SELECT count(*) FROM spending_reservations r WHERE NOT EXISTS (
        SELECT 1 FROM ledger l WHERE l.session_id = r.session_id AND l.tool_call_id = r.tool_call_id)";
    assert_eq!(number(&url, held).await, 0);
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn thirty_payments_racing_a_daily_limit_on_one_sqlite_instance_never_pass_it() {
    let db = common::people::Scratch::new("limits.db");
    let policy = policy_file("daily-sqlite", DAILY_LIMIT);
    let app = start(&db.display().to_string(), Some(&policy)).await;
    let outcomes = race(&[&app], "one", 30, &format!("Send ${PAYMENT} to Jack")).await;
    let paid = outcomes.iter().filter(|o| **o == Ended::Paid).count();
    let refused = outcomes.iter().filter(|o| **o == Ended::Refused).count();
    assert_eq!((paid, refused), (14, 16), "{outcomes:?}");
    refusals_audited(&app, "one", &outcomes).await;
    let _ = std::fs::remove_file(&policy);
    let _ = std::fs::remove_file(&db);
}

/// The grants of `app` (newest first), as `GET /api/policy` lists them.
async fn grants_of(app: &Binary) -> Vec<Value> {
    let status: Value = reqwest::get(format!("{}/api/policy", app.base))
        .await
        .expect("the policy")
        .json()
        .await
        .expect("JSON");
    status["grants"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_budget_grant_raced_over_three_instances_is_never_overspent() {
    let Some(url) = common::fresh_postgres("budget").await else {
        return;
    };
    let (a, b, c) = tokio::join!(start(&url, None), start(&url, None), start(&url, None));
    // A 10 USD payment is approved with a budget of 50 USD in every chat: 40 USD are left.
    let (_, first, body) = a
        .chat_in(say("budget-first", "Send $10 to Jack"), Some("full"))
        .await;
    let request = of_type(&first, "tool-approval-request")[0];
    let call = request["toolCallId"].as_str().expect("a call id");
    let input = &first
        .iter()
        .find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == call)
        .expect("the call's input")["input"];
    let message = &of_type(&first, "start")[0]["messageId"];
    let approve = json!({"id": "budget-first", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send $10 to Jack"}]},
        {"id": message, "role": "assistant", "parts": [
            {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded",
             "input": input, "approval": {"id": request["approvalId"], "approved": true,
                 "grant": {"scope": "budget", "seconds": 3600, "maxCents": 5000}}}
        ]}
    ]});
    let (status, paid, body2) = a.chat_in(approve, Some("full")).await;
    assert_eq!(status, 200, "{body}\n{body2}");
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{body2}");
    // Every instance knows the grant before the race (news, or a read of the database).
    for app in [&b, &c] {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while grants_of(app).await.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the grant reached {}",
                app.base
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // Twelve 10 USD payments at once, four per instance: four fit in what is left.
    let outcomes = race(&[&a, &b, &c], "budget", 12, "Send $10 to Jill").await;
    let by_grant = outcomes.iter().filter(|o| **o == Ended::Paid).count();
    let asked = outcomes.iter().filter(|o| **o == Ended::Asked).count();
    assert_eq!((by_grant, asked), (4, 8), "{outcomes:?}");
    assert_eq!(
        number(
            &url,
            "SELECT COALESCE(SUM(amount_cents), 0)::BIGINT FROM ledger"
        )
        .await,
        5_000,
        "the first payment and four by the grant"
    );
    // Every instance shows the grant spent exactly, never past its budget.
    for app in [&a, &b, &c] {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let grants = grants_of(app).await;
            let used = grants[0]["usedCents"].as_i64().expect("usedCents");
            assert!(used <= 5_000, "{}: {grants:?}", app.base);
            if used == 5_000 && grants[0]["uses"] == 4 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} shows the grant's use: {grants:?}",
                app.base
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An instance of the runtime with the [`DAILY_LIMIT`] rules on `store` (several share it, as
/// instances share a database), its policy restored from it as at start-up.
async fn instance(
    store: &std::sync::Arc<countersign::agent::store::MemoryStore>,
) -> std::sync::Arc<countersign::agent::Runtime> {
    use countersign::agent::{
        Runtime, RuntimeSettings,
        clock::{RandomIds, SystemClock},
        policy::{Policy, ToolFacts},
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    };
    use countersign::models::demo::DemoModel;
    use std::sync::Arc;
    let tools = ToolRegistry::standard(&ToolSettings {
        weather: WeatherSource::Offline,
        ..ToolSettings::default()
    });
    let policy = Policy::from_text(DAILY_LIMIT, &ToolFacts::all(&tools)).expect("the rules load");
    let runtime = Runtime::builder(
        Arc::new(DemoModel::new(Duration::ZERO)),
        tools,
        Arc::new(SystemClock),
        Arc::new(RandomIds),
        store.clone(),
        RuntimeSettings::default(),
    )
    .policy(Arc::new(policy))
    .build();
    runtime
        .policy()
        .restore(store.clone(), runtime.clock.now_ms())
        .await
        .expect("restored");
    runtime
}

/// The chunks of `log` from `from` to its next pause or its end, in the full dialect.
async fn segment(
    log: &std::sync::Arc<countersign::agent::session::TurnLog>,
    from: usize,
) -> Vec<Value> {
    use countersign::agent::TurnEntry;
    let mut reader = log.subscribe(from);
    let mut chunks = Vec::new();
    while let Some(entry) = tokio::time::timeout(Duration::from_secs(30), reader.next())
        .await
        .expect("the turn goes on")
    {
        match entry {
            TurnEntry::Chunk(chunk) => {
                chunks.extend(chunk.to_value(countersign::protocol::Dialect::Full))
            }
            TurnEntry::Pause | TurnEntry::End => break,
        }
    }
    chunks
}

/// Starts a turn saying `text` in `chat` on `runtime`: its chunks until it pauses or ends.
async fn turn(
    runtime: &std::sync::Arc<countersign::agent::Runtime>,
    chat: &str,
    text: &str,
) -> Vec<Value> {
    let started = runtime
        .start_turn(
            chat,
            countersign::agent::UserTurn {
                text: text.into(),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("the turn starts");
    segment(&started.log, 0).await
}

#[tokio::test]
async fn a_payment_approved_while_the_day_had_room_is_refused_when_it_starts_past_the_limit() {
    use countersign::agent::{
        ApprovalDecision, PersonInput,
        store::{AuditQuery, PolicyStore, SessionStore},
    };
    let store = std::sync::Arc::new(countersign::agent::store::MemoryStore::default());
    let (a, b) = (instance(&store).await, instance(&store).await);
    // On A, 20 USD asks (the rules run payments without asking up to 10 USD).
    let asked = turn(&a, "approved", "Send $20 to Jill").await;
    let approval = of_type(&asked, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .expect("an approval")
        .to_owned();
    // Meanwhile B lets fourteen 7 USD payments run by the rule: 98 of the day's 100 USD.
    for i in 0..14 {
        let paid = turn(&b, &format!("small-{i}"), "Send $7 to Jack").await;
        assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{paid:?}");
    }
    // The person approves on A, whose copy of the day's total still says 0: the store's says
    // 98 USD, and the payment is refused as it starts, the model told why.
    let receipt = a
        .submit(
            "approved",
            &[PersonInput::Approval {
                approval_id: approval,
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .expect("the approval is taken");
    let rest = segment(&receipt.log, receipt.from).await;
    assert!(
        of_type(&rest, "tool-output-available").is_empty(),
        "{rest:?}"
    );
    assert_eq!(of_type(&rest, "tool-output-denied").len(), 1, "{rest:?}");
    let text = text_of(&rest);
    assert!(
        text.contains("policy does not allow") && text.contains("100 USD a day"),
        "{text}"
    );
    let audit = store
        .audit(&AuditQuery {
            session: Some("approved".into()),
            ..Default::default()
        })
        .await
        .expect("the audit log");
    assert!(
        audit.iter().any(
            |r| r.event.kind == countersign::agent::store::AuditKind::Refused
                && r.event.rule.as_deref() == Some("daily-limit")
        ),
        "{audit:?}"
    );
    let now = a.clock.now_ms();
    assert_eq!(store.spent(now).await.expect("spent").today_cents, 9_800);
}
