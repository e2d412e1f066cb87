//! Approval policies and grants end to end (issue #22), against the real binary on a SQLite
//! file: rules that run, ask and refuse, in both dialects of the wire; a grant made from an
//! approval, used, revoked, and kept across kill -9; edits and reloads checked against the
//! rules; "not now" and "ask again"; payments in other currencies; `countersign policy test`.
#![cfg(unix)]

mod common;

use std::{path::Path, time::Duration};

use common::binary::Binary;
use serde_json::{Value, json};

/// A scratch path, deleted when the test is done with it.
fn temp(name: &str) -> common::people::Scratch {
    common::people::Scratch::new(&format!("policy-{name}"))
}

fn example_policy() -> String {
    format!("{}/examples/policy.cedar", env!("CARGO_MANIFEST_DIR"))
}

async fn server(db: &Path, policy: Option<String>) -> Binary {
    let mut env = vec![
        ("COUNTERSIGN_DB", db.display().to_string()),
        ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_string()),
        ("COUNTERSIGN_WEATHER", "offline".to_string()),
    ];
    if let Some(policy) = policy {
        env.push(("COUNTERSIGN_POLICY", policy));
    }
    Binary::start(&env).await
}

/// `POST /api/chat` in `dialect` (`None`: the default, ai@6.0.0's keys only): status, chunks.
async fn post(app: &Binary, body: Value, dialect: Option<&str>) -> (u16, Vec<Value>, String) {
    app.chat_in(body, dialect).await
}

/// `GET /api/policy` until `done` holds of it (the file is polled once a second).
async fn policy_until(base: &str, done: impl Fn(&Value) -> bool) -> Value {
    let wait = async {
        loop {
            let status: Value = reqwest::get(format!("{base}/api/policy"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if done(&status) {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("the policy file is read again")
}

fn say(chat: &str, text: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": format!("u-{text}"), "role": "user", "parts": [{"type": "text", "text": text}]}
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

/// The approval a turn waits for: (approval id, call id, message id, input).
fn waiting(chunks: &[Value]) -> (String, String, String, Value) {
    let request = of_type(chunks, "tool-approval-request")
        .into_iter()
        .rfind(|c| c["isAutomatic"] != true)
        .unwrap_or_else(|| panic!("an approval request in {chunks:?}"))
        .clone();
    let call = request["toolCallId"].as_str().unwrap().to_owned();
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == call.as_str())
        .map(|c| c["input"].clone())
        .unwrap();
    let message = chunks
        .iter()
        .find(|c| c["type"] == "start")
        .and_then(|c| c["messageId"].as_str())
        .unwrap()
        .to_owned();
    (
        request["approvalId"].as_str().unwrap().to_owned(),
        call,
        message,
        input,
    )
}

/// The person's answer to `approval`, with Countersign's `extra` keys on the approval object.
fn answer(
    chat: &str,
    approval: &(String, String, String, Value),
    approved: bool,
    extra: Value,
) -> Value {
    let (approval_id, call, message, input) = approval;
    let mut object = json!({"id": approval_id, "approved": approved});
    if let Value::Object(extra) = extra {
        object.as_object_mut().unwrap().extend(extra);
    }
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "…"}]},
        {"id": message, "role": "assistant", "parts": [
            {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded",
             "input": input, "approval": object}
        ]}
    ]})
}

async fn fn_call(base: &str, name: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/fn/{name}"))
        .json(&body)
        .send()
        .await
        .expect("server function called");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The grants, as `GET /api/policy` lists them (newest first).
async fn grants_of(base: &str) -> Vec<Value> {
    let status: Value = reqwest::get(format!("{base}/api/policy"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["grants"].as_array().cloned().unwrap_or_default()
}

async fn balance(base: &str, chat: &str) -> f64 {
    let snapshot: Value = reqwest::get(format!("{base}/api/chats/{chat}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The last payment's output names the balance after it.
    snapshot["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["type"] == "tool-process_payment" && p["state"] == "output-available")
        .filter_map(|p| p["output"]["wallet_balance"].as_f64())
        .next_back()
        .unwrap_or(1000.0)
}

#[tokio::test]
async fn rules_run_ask_and_refuse_in_both_dialects() {
    let db = temp("rules");
    let app = server(&db, Some(example_policy())).await;

    // A small payment runs by rule. ai@6.0.0's keys only: a call that ran, no approval at all.
    let (status, strict, body) = post(&app, say("c1", "Send $5 to Jack"), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        of_type(&strict, "tool-approval-request").is_empty(),
        "{body}"
    );
    assert!(
        of_type(&strict, "tool-approval-response").is_empty(),
        "{body}"
    );
    assert_eq!(
        of_type(&strict, "tool-output-available")[0]["output"]["wallet_balance"],
        995
    );

    // The same in the full (v7) dialect: an automatic approval, its response, then the output.
    let (_, full, body) = post(&app, say("c2", "Send $5 to Jill"), Some("full")).await;
    let request = of_type(&full, "tool-approval-request")[0];
    assert_eq!(request["isAutomatic"], true, "{body}");
    assert_eq!(
        request["approvalDescriptor"]["countersign"],
        json!({"decision": "allowed_by_rule", "rule": "small-payments"})
    );
    let response = of_type(&full, "tool-approval-response")[0];
    assert_eq!(response["approvalId"], request["approvalId"]);
    assert_eq!(response["approved"], true);
    assert_eq!(
        response["reason"],
        "Ran without asking: rule small-payments"
    );
    let order: Vec<&str> = full.iter().filter_map(|c| c["type"].as_str()).collect();
    let at = |kind: &str| order.iter().position(|t| *t == kind).unwrap();
    assert!(at("tool-approval-request") < at("tool-approval-response"));
    assert!(at("tool-approval-response") < at("tool-output-available"));

    // Over the limit: refused by a rule, the model told why.
    let (_, refused, body) = post(&app, say("c3", "Send $600 to Jack"), Some("full")).await;
    let request = of_type(&refused, "tool-approval-request")[0];
    assert_eq!(
        request["approvalDescriptor"]["countersign"]["decision"],
        "denied_by_rule"
    );
    assert_eq!(
        of_type(&refused, "tool-approval-response")[0]["approved"],
        false
    );
    assert_eq!(of_type(&refused, "tool-output-denied").len(), 1, "{body}");
    assert!(
        text_of(&refused).contains("policy does not allow"),
        "{body}"
    );
    let (_, refused_strict, _) = post(&app, say("c3b", "Send $600 to Jack"), None).await;
    assert!(of_type(&refused_strict, "tool-approval-request").is_empty());
    assert_eq!(of_type(&refused_strict, "tool-output-denied").len(), 1);
    assert_eq!(balance(&app.base, "c3").await, 1000.0);

    // 50 USD asks, and may be remembered.
    let (_, asked, body) = post(&app, say("c4", "Send $50 to Jack"), Some("full")).await;
    let request = of_type(&asked, "tool-approval-request")[0];
    assert_ne!(request["isAutomatic"], true, "{body}");
    assert_eq!(
        request["approvalDescriptor"]["countersign"],
        json!({"decision": "asked", "grantable": true})
    );
    assert_eq!(asked.last().unwrap()["type"], "finish");

    // The audit log names the rules and the policy's version.
    let audit = app.audit("c2").await;
    let allowed = audit
        .iter()
        .find(|e| e["kind"] == "allowed")
        .expect("allowed");
    assert_eq!(allowed["rule"], "small-payments");
    assert!(
        allowed["policy_version"]
            .as_str()
            .is_some_and(|v| v.len() == 12)
    );
    let audit = app.audit("c3").await;
    let refused = audit
        .iter()
        .find(|e| e["kind"] == "refused")
        .expect("refused");
    assert_eq!(refused["rule"], "payment-limit");
    assert!(refused["reason"].as_str().unwrap().contains("500 USD"));

    // /api/policy shows the rules in force.
    let status: Value = reqwest::get(format!("{}/api/policy", app.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rules: Vec<&str> = status["policy"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(
        rules,
        [
            "weather",
            "music",
            "small-payments",
            "blocked-recipients",
            "two-approvers",
            "payment-limit"
        ]
    );
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn a_grant_runs_later_calls_until_it_is_spent_or_revoked_and_survives_kill_9() {
    let db = temp("grants");
    let app = server(&db, None).await;
    let chat = "g1";

    // No policy file: a payment asks; the person approves and remembers "up to 100 USD".
    let (_, first, _) = post(&app, say(chat, "Send $50 to Jack"), Some("full")).await;
    let approval = waiting(&first);
    let grant = json!({"grant": {"scope": "budget", "seconds": 3600, "maxCents": 10_000}});
    let (status, paid, body) = post(&app, answer(chat, &approval, true, grant), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{body}");

    // 40 more fits: it runs by the grant, in another chat too.
    let (_, second, body) = post(&app, say("g2", "Send $40 to Jill"), Some("full")).await;
    let request = of_type(&second, "tool-approval-request")[0];
    assert_eq!(request["isAutomatic"], true, "{body}");
    assert_eq!(
        request["approvalDescriptor"]["countersign"]["decision"],
        "allowed_by_grant"
    );
    let grant_id = request["approvalDescriptor"]["countersign"]["grant"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(of_type(&second, "tool-output-available").len(), 1, "{body}");
    // 20 more would pass 100: it asks.
    let (_, third, body) = post(&app, say("g3", "Send $20 to Jim"), Some("full")).await;
    assert_ne!(
        of_type(&third, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );

    // The list shows what was used: GET /api/policy for scripts, and the page's panel (a server
    // function answering HTML).
    let grants = grants_of(&app.base).await;
    assert_eq!(grants[0]["id"], grant_id.as_str());
    assert_eq!(grants[0]["usedCents"], 9_000);
    assert_eq!(grants[0]["uses"], 1);
    assert_eq!(
        grants[0]["label"],
        "Payment up to 100.00 USD in all, in every chat"
    );

    // kill -9: the grant and its use come back.
    app.kill9();
    let app = server(&db, None).await;
    let grants = grants_of(&app.base).await;
    assert_eq!(grants[0]["usedCents"], 9_000, "{grants:?}");
    let (_, fourth, body) = post(&app, say("g4", "Send $10 to Jo"), Some("full")).await;
    assert_eq!(
        of_type(&fourth, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );

    // Revoked: nothing runs by it any more, and a second revoke says so.
    let (status, revoked) = fn_call(&app.base, "revoke_grant", json!({"id": grant_id})).await;
    assert_eq!(status, 200, "{revoked}");
    assert!(
        grants_of(&app.base).await[0]["revokedAtMs"]
            .as_i64()
            .is_some()
    );
    let (status, again) = fn_call(&app.base, "revoke_grant", json!({"id": grant_id})).await;
    assert!(status >= 400, "{again}");
    assert!(again.to_string().contains("already revoked"), "{again}");
    let (status, unknown) = fn_call(&app.base, "revoke_grant", json!({"id": "nope"})).await;
    assert!(
        status >= 400 && unknown.to_string().contains("not known"),
        "{unknown}"
    );
    let (_, fifth, body) = post(&app, say("g5", "Send $1 to Jo"), Some("full")).await;
    assert_ne!(
        of_type(&fifth, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );

    let audit = app.audit(chat).await;
    assert!(
        audit
            .iter()
            .any(|e| e["kind"] == "granted" && e["grant"] == grant_id.as_str())
    );
    assert!(
        audit
            .iter()
            .any(|e| e["kind"] == "revoked" && e["grant"] == grant_id.as_str())
    );
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn a_grant_the_call_does_not_allow_is_refused_and_changes_nothing() {
    let db = temp("grant-refused");
    let app = server(&db, Some(example_policy())).await;
    let (_, first, _) = post(&app, say("r1", "Send $50 to Jack"), Some("full")).await;
    let approval = waiting(&first);
    for (grant, why) in [
        (
            json!({"scope": "budget", "seconds": 3600, "maxCents": 1_000}),
            "does not cover",
        ),
        (json!({"scope": "tool", "seconds": 3600}), "budget"),
        // How long a grant lasts: what the card offers and the README says, 15 minutes to
        // 7 days (the server once took a minute to 30 days).
        (json!({"scope": "call", "seconds": 99_999_999}), "7 days"),
        (json!({"scope": "call", "seconds": 8 * 86_400}), "7 days"),
        (json!({"scope": "call", "seconds": 60}), "15 minutes"),
        (json!({"scope": "everything", "seconds": 60}), "scope"),
    ] {
        let (status, _, body) = post(
            &app,
            answer("r1", &approval, true, json!({"grant": grant})),
            Some("full"),
        )
        .await;
        assert!(status == 422 || status == 400, "{status} {body}");
        assert!(body.contains(why), "{why}: {body}");
    }
    // Still waiting: a plain approval goes through.
    let (status, paid, body) =
        post(&app, answer("r1", &approval, true, json!({})), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1);
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn edits_and_approvals_are_checked_again_against_the_rules_in_force() {
    let db = temp("reload");
    let policy = temp("reload.cedar");
    std::fs::write(&policy, std::fs::read_to_string(example_policy()).unwrap()).unwrap();
    let app = server(&db, Some(policy.display().to_string())).await;

    // An edit across the limit is refused with the rule's reason; the approval still waits.
    let (_, first, _) = post(&app, say("e1", "Send $50 to Jack"), Some("full")).await;
    let approval = waiting(&first);
    let edit = json!({"editedInput": {"amount": 600, "recipient": "Jack"}});
    let (status, _, body) = post(&app, answer("e1", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.contains("edit_forbidden") && body.contains("payment-limit"),
        "{body}"
    );
    let edit = json!({"editedInput": {"amount": 40, "recipient": "Jack"}});
    let (status, paid, body) = post(&app, answer("e1", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        of_type(&paid, "tool-output-available")[0]["output"]["amount"],
        40
    );

    // A call waits; the policy changes under it to forbid that payee: approving it now refuses it.
    let (_, second, _) = post(&app, say("e2", "Send $60 to Jill"), Some("full")).await;
    let approval = waiting(&second);
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(
        &policy,
        format!("{text}\n@id(\"no-jill\")\n@reason(\"Jill left the company.\")\nforbid (principal, action == Action::\"process_payment\", resource) when {{ context.input.recipient == \"Jill\" }};\n"),
    )
    .unwrap();
    policy_until(&app.base, |s| {
        s["policy"]["rules"].to_string().contains("no-jill")
    })
    .await;
    let (status, refused, body) =
        post(&app, answer("e2", &approval, true, json!({})), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&refused, "tool-output-denied").len(), 1, "{body}");
    assert!(
        text_of(&refused).contains("Jill left the company"),
        "{body}"
    );
    assert_eq!(balance(&app.base, "e2").await, 1000.0);
    let audit = app.audit("e2").await;
    assert!(
        audit
            .iter()
            .any(|e| e["kind"] == "refused" && e["rule"] == "no-jill"),
        "{audit:?}"
    );

    // A broken file keeps the rules in force and says why.
    std::fs::write(&policy, "@id(\"half\") permit (principal, action ==").unwrap();
    let status = policy_until(&app.base, |s| s["policy"]["reload_error"].is_string()).await;
    assert!(
        status["policy"]["reload_error"]
            .as_str()
            .unwrap()
            .contains("line 1")
    );
    assert!(status["policy"]["rules"].to_string().contains("no-jill"));
    let (_, small, _) = post(&app, say("e3", "Send $5 to Jack"), Some("full")).await;
    assert_eq!(
        of_type(&small, "tool-approval-request")[0]["isAutomatic"],
        true
    );
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn not_now_leaves_a_call_undecided_and_it_can_be_asked_again() {
    let db = temp("dismiss");
    let app = server(&db, None).await;
    let chat = "d1";
    let (_, first, _) = post(&app, say(chat, "Send $50 to Hanako"), Some("full")).await;
    let approval = waiting(&first);
    let (status, undecided, body) = post(
        &app,
        answer(chat, &approval, false, json!({"dismissed": true})),
        Some("full"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let error = of_type(&undecided, "tool-output-error")[0]["errorText"]
        .as_str()
        .unwrap();
    assert!(error.starts_with("Not decided"), "{error}");
    assert!(text_of(&undecided).contains("haven't decided"), "{body}");

    // Ask again: the same payment asks again, as a new call.
    let ask_again = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u-again", "role": "user", "parts": [{"type": "text", "text": "Ask me again: Pay 50.00 USD to Hanako"}],
         "metadata": {"countersign": {"askAgain": approval.1}}}
    ]});
    let (status, again, body) = post(&app, ask_again.clone(), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    let second = waiting(&again);
    assert_ne!(second.1, approval.1, "a new call");
    assert_eq!(second.3, approval.3, "the same arguments");
    let (_, paid, body) = post(&app, answer(chat, &second, true, json!({})), Some("full")).await;
    assert_eq!(
        of_type(&paid, "tool-output-available")[0]["output"]["wallet_balance"],
        950,
        "{body}"
    );

    // A call that ran cannot be asked again; nor one this chat never made.
    let again_paid = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u-again-2", "role": "user", "parts": [{"type": "text", "text": "Ask me again"}],
         "metadata": {"countersign": {"askAgain": second.1}}}
    ]});
    let (status, _, body) = post(&app, again_paid, Some("full")).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("cannot_ask_again") && body.contains("ran already"),
        "{body}"
    );
    let forged = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u-again-3", "role": "user", "parts": [{"type": "text", "text": "Ask me again"}],
         "metadata": {"countersign": {"askAgain": "call_forged"}}}
    ]});
    let (status, _, body) = post(&app, forged, Some("full")).await;
    assert_eq!(status, 409, "{body}");
    let audit = app.audit(chat).await;
    assert!(audit.iter().any(|e| e["kind"] == "dismissed"), "{audit:?}");
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn a_payment_in_yen_is_converted_and_shows_both_amounts() {
    let db = temp("yen");
    let app = server(&db, Some(example_policy())).await;
    let (_, first, body) = post(&app, say("y1", "Send 3000 yen to Kenji"), Some("full")).await;
    let approval = waiting(&first);
    assert_eq!(approval.3["currency"], "JPY", "{body}");
    let (_, paid, body) = post(&app, answer("y1", &approval, true, json!({})), Some("full")).await;
    let output = &of_type(&paid, "tool-output-available")[0]["output"];
    assert_eq!(output["amount"], 3000, "{body}");
    assert_eq!(output["currency"], "JPY");
    assert_eq!(output["charged"], 20.1);
    assert_eq!(output["wallet_balance"], 979.9);
    // 1000 yen is 6.70 USD: under the rule's 10 USD, it runs.
    let (_, small, body) = post(&app, say("y2", "Send 1000 yen to Kenji"), Some("full")).await;
    assert_eq!(
        of_type(&small, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );
    let _ = std::fs::remove_file(&db);
}

#[test]
fn the_policy_test_command_runs_the_examples_cases() {
    let root = env!("CARGO_MANIFEST_DIR");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
            .current_dir(root)
            .args(args)
            .output()
            .expect("the binary runs")
    };
    let passed = run(&[
        "policy",
        "test",
        "examples/policy.cedar",
        "examples/policy-cases.toml",
    ]);
    let out = String::from_utf8_lossy(&passed.stdout);
    assert_eq!(passed.status.code(), Some(0), "{out}");
    assert!(out.contains("15 of 15 cases passed"), "{out}");
    assert!(
        out.contains(
            "ok    150 USD needs two approvers: ask (rule two-approvers): needs 2 different \
             people with the role approver, not the person who asked, each confirming with their \
             passkey"
        ),
        "{out}"
    );
    assert!(
        out.contains("ok    a 5 USD payment runs without asking: run (rule small-payments)"),
        "{out}"
    );

    let checked = run(&["policy", "check", "examples/policy.cedar"]);
    let out = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(0), "{out}");
    assert!(out.contains("6 rules"), "{out}");
    assert!(
        out.contains("ask   two-approvers (needs 2 different people with the role approver"),
        "{out}"
    );

    // A case that fails says what it expected and got; a broken policy names its line.
    let dir = temp("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "[[case]]\nname = \"wrong\"\ntool = \"process_payment\"\nargs = { amount = 5, recipient = \"Jack\" }\nexpect = \"ask\"\n",
    )
    .unwrap();
    let failed = run(&[
        "policy",
        "test",
        "examples/policy.cedar",
        cases.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{out}");
    assert!(
        out.contains("FAIL  wrong: expected ask, got run (rule small-payments)"),
        "{out}"
    );
    let broken = dir.join("broken.cedar");
    std::fs::write(
        &broken,
        "@id(\"a\") permit (principal, action, resource);\n@id(\"b\") forbid (",
    )
    .unwrap();
    let refused = run(&["policy", "check", broken.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&refused.stdout);
    assert_eq!(refused.status.code(), Some(2), "{out}");
    assert!(
        out.contains("line 2") && out.contains("rule \"b\""),
        "{out}"
    );
    let usage = run(&["policy"]);
    assert_eq!(usage.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `metadata.countersign.askAgain` of call `call`: the page's "Ask again".
fn ask_again(chat: &str, id: &str, call: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": id, "role": "user", "parts": [{"type": "text", "text": "Ask me again"}],
         "metadata": {"countersign": {"askAgain": call}}}
    ]})
}

#[tokio::test]
async fn an_edit_is_a_new_proposal_that_needs_what_its_arguments_need() {
    let db = temp("proposal");
    let app = server(&db, Some(example_policy())).await;

    // 20 USD is the person's own to approve; edited to 150 USD it needs two approvers (not the
    // person who asked), so nothing runs and the card is told what it needs now.
    let (_, first, _) = post(&app, say("p1", "Send $20 to Vendor"), Some("full")).await;
    let approval = waiting(&first);
    assert_eq!(approval.3["amount"], 20);
    let edit = json!({"editedInput": {"amount": 150, "recipient": "Vendor"}});
    let (status, proposed, body) =
        post(&app, answer("p1", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        of_type(&proposed, "tool-output-available").is_empty(),
        "{body}"
    );
    let progress = of_type(&proposed, "data-countersign");
    let progress = progress.last().unwrap_or_else(|| panic!("{body}"));
    assert_eq!(progress["data"]["needs"]["approvers"], 2, "{body}");
    assert_eq!(progress["data"]["needs"]["notRequester"], true);
    assert_eq!(progress["data"]["args"]["amount"], 150);
    assert_eq!(progress["data"]["signatures"], json!([]));
    // Approving it again is not theirs to do any more.
    let (status, _, body) =
        post(&app, answer("p1", &approval, true, json!({})), Some("full")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not_an_approver"), "{body}");
    assert_eq!(balance(&app.base, "p1").await, 1000.0);
    let audit = app.audit("p1").await;
    let proposal = audit
        .iter()
        .find(|e| e["kind"] == "proposed")
        .unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!(proposal["edited_args"]["amount"], 150, "{proposal}");
    assert!(!audit.iter().any(|e| e["kind"] == "executed"), "{audit:?}");

    // 40 KWD is about 130 USD: the same.
    let (_, second, _) = post(&app, say("p2", "Send $20 to Vendor"), Some("full")).await;
    let approval = waiting(&second);
    let edit = json!({"editedInput": {"amount": 40, "currency": "KWD", "recipient": "Vendor"}});
    let (status, proposed, body) =
        post(&app, answer("p2", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        of_type(&proposed, "tool-output-available").is_empty(),
        "{body}"
    );
    assert_eq!(balance(&app.base, "p2").await, 1000.0);

    // Names the rules block are blocked however they are written; invisible characters are
    // refused rather than dropped.
    let (_, third, _) = post(&app, say("p3", "Send $20 to Vendor"), Some("full")).await;
    let approval = waiting(&third);
    for written in [" Mallory", "Mallory ", "\u{a0}Mallory", "Mallory\t"] {
        let edit = json!({"editedInput": {"amount": 20, "recipient": written}});
        let (status, _, body) = post(&app, answer("p3", &approval, true, edit), Some("full")).await;
        assert_eq!(status, 422, "{written:?}: {body}");
        assert!(
            body.contains("edit_forbidden") && body.contains("blocked-recipients"),
            "{written:?}: {body}"
        );
    }
    let edit = json!({"editedInput": {"amount": 20, "recipient": "Mal\u{200b}lory"}});
    let (status, _, body) = post(&app, answer("p3", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.contains("invalid_edit") && body.contains("U+200B"),
        "{body}"
    );
    // The name the person approves is the name the ledger records.
    let edit = json!({"editedInput": {"amount": 20, "recipient": "  Vendor\u{a0} Co "}});
    let (status, paid, body) = post(&app, answer("p3", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        of_type(&paid, "tool-output-available")[0]["output"]["recipient"],
        "Vendor Co",
        "{body}"
    );
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn a_call_is_asked_again_at_most_once_and_never_pays_twice() {
    let db = temp("again-once");
    let app = server(&db, None).await;
    let chat = "a1";
    let (_, first, _) = post(&app, say(chat, "Send $50 to Hanako"), Some("full")).await;
    let original = waiting(&first);
    let (status, _, body) = post(
        &app,
        answer(chat, &original, false, json!({"dismissed": true})),
        Some("full"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Asked again, approved and remembered as "this exact payment": it pays once.
    let (status, again, body) =
        post(&app, ask_again(chat, "u-a1", &original.1), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    let reissued = waiting(&again);
    let grant = json!({"grant": {"scope": "call", "seconds": 3600}});
    let (status, paid, body) = post(&app, answer(chat, &reissued, true, grant), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{body}");
    assert_eq!(balance(&app.base, chat).await, 950.0);
    // The original cannot be asked again: its re-proposal ran. Neither can the one that ran.
    for (id, call) in [
        ("u-a2", &original.1),
        ("u-a3", &original.1),
        ("u-a4", &reissued.1),
    ] {
        let (status, _, body) = post(&app, ask_again(chat, id, call), Some("full")).await;
        assert_eq!(status, 409, "{body}");
        assert!(body.contains("cannot_ask_again"), "{body}");
    }
    assert_eq!(balance(&app.base, chat).await, 950.0, "paid once");
    let audit = app.audit(chat).await;
    assert_eq!(
        audit.iter().filter(|e| e["kind"] == "executed").count(),
        1,
        "{audit:?}"
    );

    // A re-proposal that is itself set aside is the one to ask again, once.
    let (_, first, _) = post(&app, say("a2", "Send $5 to Jo"), Some("full")).await;
    let original = waiting(&first);
    let not_now = |approval: &(String, String, String, Value)| {
        answer("a2", approval, false, json!({"dismissed": true}))
    };
    assert_eq!(post(&app, not_now(&original), Some("full")).await.0, 200);
    let (_, again, _) = post(&app, ask_again("a2", "u-b1", &original.1), Some("full")).await;
    let second = waiting(&again);
    assert_eq!(post(&app, not_now(&second), Some("full")).await.0, 200);
    let (status, _, body) = post(&app, ask_again("a2", "u-b2", &original.1), Some("full")).await;
    assert_eq!(status, 409, "{body}");
    let (status, again, body) = post(&app, ask_again("a2", "u-b3", &second.1), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    let third = waiting(&again);
    assert_ne!(third.1, second.1);
    let _ = std::fs::remove_file(&db);
}
