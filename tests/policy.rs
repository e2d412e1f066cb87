//! Approval policies and grants end to end (issue #22), against the real binary on a SQLite
//! file: rules that run, ask and refuse, in both dialects of the wire; a grant made from an
//! approval, used, revoked, and kept across kill -9; edits and reloads checked against the
//! rules; "not now" and "ask again"; payments in other currencies; `countersign policy test`.
#![cfg(unix)]

use crate::common;

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

#[path = "policy/asking.rs"]
mod asking;
#[path = "policy/grants.rs"]
mod grants;
#[path = "policy/rules.rs"]
mod rules;
