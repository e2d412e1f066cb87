//! The real server binary, killed with SIGKILL while an approval waits, and started again on the
//! same database: the approval can still be answered, the turn finishes, the payment happens
//! once; a deadline keeps counting while the server is down; the audit log kept everything.
#![cfg(all(feature = "ssr", unix))]

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::common;
use common::stream::user;

use common::stream::frames_until;

use common::binary::Binary as Process;

/// The server on `db` with the demo model, approvals waiting `approval_secs`, commits `sync`.
async fn start_with(db: &Path, approval_secs: u64, sync: &str) -> Process {
    Process::start(&[
        ("COUNTERSIGN_DB", db.display().to_string()),
        ("COUNTERSIGN_DB_SYNC", sync.to_owned()),
        ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_owned()),
        ("COUNTERSIGN_WEATHER", "offline".to_owned()),
        (
            "COUNTERSIGN_APPROVAL_TIMEOUT_SECS",
            approval_secs.to_string(),
        ),
    ])
    .await
}

async fn start(db: &Path, approval_secs: u64) -> Process {
    start_with(db, approval_secs, "full").await
}

fn temp_db(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "countersign-restart-{name}-{}.db",
        std::process::id()
    ))
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// The approval request of a paused response: (approval id, tool call id, message id, input).
/// A server on `db` asks for approval of `ask`'s payment in `chat`, is killed with SIGKILL while
/// it waits, and is started again on the same database: the new server and the approval.
async fn approval_across_kill_9(
    db: &Path,
    chat: &str,
    ask: &str,
    sync: &str,
) -> (Process, (String, String, String, Value)) {
    let first = start_with(db, 300, sync).await;
    let (status, chunks, text) = first.chat(user(chat, ask)).await;
    assert_eq!(status, 200, "{text}");
    let approval = approval_of(&chunks);
    first.kill9();
    (start_with(db, 300, sync).await, approval)
}

fn approval_of(chunks: &[Value]) -> (String, String, String, Value) {
    let request = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .expect("an approval request");
    let call = request["toolCallId"].as_str().unwrap().to_string();
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == call.as_str())
        .expect("the call's input")["input"]
        .clone();
    let message = chunks.iter().find(|c| c["type"] == "start").unwrap()["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    (
        request["approvalId"].as_str().unwrap().to_string(),
        call,
        message,
        input,
    )
}

fn answer(chat: &str, text: &str, approval: &(String, String, String, Value), ok: bool) -> Value {
    let (approval_id, call, message, input) = approval;
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]},
        {"id": message, "role": "assistant", "parts": [
            {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded",
             "input": input, "approval": {"id": approval_id, "approved": ok}}
        ]}
    ]})
}

#[tokio::test]
async fn an_approval_survives_kill_9_and_the_payment_happens_once() {
    let db = temp_db("approve");
    remove_db(&db);
    let chat = "restart-chat";
    let ask = "Send $50 to Hanako";

    let (second, approval) = approval_across_kill_9(&db, chat, ask, "full").await;
    let (status, chunks, text) = second.chat(answer(chat, ask, &approval, true)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(chunks[0]["type"], "start");
    assert_eq!(chunks[0]["messageId"], approval.2.as_str(), "same message");
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap_or_else(|| panic!("the payment ran after the restart: {text}"));
    assert_eq!(output["output"]["wallet_balance"], 950, "{output}");
    assert!(text.contains("data: [DONE]"));

    // The same request again (a replay, or a client resending its history): the answer it
    // repeats was already applied, so there is nothing to continue and nothing is paid twice.
    let (status, _, text) = second.chat(answer(chat, ask, &approval, true)).await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("no_active_turn"), "{text}");
    // The opposite answer to the same approval is refused as such.
    let (status, _, text) = second.chat(answer(chat, ask, &approval, false)).await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("approval_already_answered"), "{text}");
    second.kill9();

    let third = start(&db, 300).await;
    let (status, chunks, text) = third.chat(user(chat, "Send $10 to Bob")).await;
    assert_eq!(status, 200, "{text}");
    let approval = approval_of(&chunks);
    let (_, chunks, text) = third
        .chat(answer(chat, "Send $10 to Bob", &approval, true))
        .await;
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        output["output"]["wallet_balance"], 940,
        "one $50 payment, then $10"
    );

    let kinds: Vec<String> = third
        .audit(chat)
        .await
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "requested",
            "approved",
            "executed",
            "requested",
            "approved",
            "executed"
        ]
    );
    let events = third.audit(chat).await;
    assert_eq!(events[1]["actor"]["transport"], "sse");
    assert!(
        events[1]["actor"]["address"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert_eq!(events[2]["outcome"]["ok"]["wallet_balance"], 950);
    drop(third);
    remove_db(&db);
}

#[tokio::test]
async fn a_deadline_keeps_counting_while_the_server_is_down() {
    let db = temp_db("expire");
    remove_db(&db);
    let chat = "restart-expire";
    let ask = "Send $50 to Hanako";

    let first = start(&db, 2).await;
    let (_, chunks, _) = first.chat(user(chat, ask)).await;
    let approval = approval_of(&chunks);
    first.kill9();
    tokio::time::sleep(Duration::from_millis(2500)).await;

    let second = start(&db, 2).await;
    let (status, _, text) = second.chat(answer(chat, ask, &approval, true)).await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("approval_expired"), "{text}");
    // The revived turn records the expiry on its own task, maybe a moment after the refusal.
    let deadline = Instant::now() + Duration::from_secs(10);
    let kinds = loop {
        let kinds: Vec<String> = second
            .audit(chat)
            .await
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_string())
            .collect();
        if kinds.len() >= 2 || Instant::now() > deadline {
            break kinds;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(kinds, ["requested", "expired"]);
    drop(second);
    remove_db(&db);
}

/// `COUNTERSIGN_DB_SYNC=normal` gives up power-loss safety, not `kill -9` safety.
#[tokio::test]
async fn normal_sync_also_survives_kill_9() {
    let db = temp_db("normal");
    remove_db(&db);
    let chat = "restart-normal";
    let ask = "Send $50 to Hanako";
    let (second, approval) = approval_across_kill_9(&db, chat, ask, "normal").await;
    let (status, chunks, text) = second.chat(answer(chat, ask, &approval, true)).await;
    assert_eq!(status, 200, "{text}");
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(output["output"]["wallet_balance"], 950);
    drop(second);
    remove_db(&db);
}

#[tokio::test]
async fn a_bidi_client_resumes_a_paused_turn_by_frame_count_after_kill_9() {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let db = temp_db("bidi-resume");
    remove_db(&db);
    let chat = "restart-bidi";
    let first = start(&db, 300).await;
    let ws = |p: &Process| format!("{}/api/live", p.base.replace("http://", "ws://"));
    let (mut socket, _) = tokio_tungstenite::connect_async(ws(&first)).await.unwrap();
    let message = json!({"type": "message", "id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send $50 to Hanako"}]}
    ]});
    socket
        .send(Message::Text(message.to_string().into()))
        .await
        .unwrap();
    let before = frames_until(&mut socket, "finish-step").await;
    // The frames can reach the client before the pause is on disk: its audit entry says it is.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !first
        .audit(chat)
        .await
        .iter()
        .any(|e| e["kind"] == "requested")
    {
        assert!(Instant::now() < deadline, "the pause was never committed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill9();

    // A new server on the same database; the client says it got all but the last two frames.
    let second = start(&db, 300).await;
    let (mut socket, _) = tokio_tungstenite::connect_async(ws(&second)).await.unwrap();
    let received = before.len() - 2;
    socket
        .send(Message::Text(
            json!({"type": "resume", "id": chat, "received": received})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    let replayed = frames_until(&mut socket, "finish-step").await;
    // What still waits is announced first, then exactly the frames the client missed.
    assert!(
        replayed[0].contains("countersign-pending"),
        "{}",
        replayed[0]
    );
    assert_eq!(replayed[1..], before[received..]);

    // The approval is answered on the new server and the same stream goes on.
    let approval_id = before
        .iter()
        .filter_map(|f| f.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim_end()).ok())
        .find(|c| c["type"] == "tool-approval-request")
        .and_then(|c| c["approvalId"].as_str().map(str::to_string))
        .expect("an approval request");
    socket
        .send(Message::Text(
            json!({"type": "tool_result", "toolCallId": approval_id, "result": {"confirmed": true}})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    let rest = frames_until(&mut socket, "[DONE]").await;
    assert!(
        rest.iter().any(|f| f.contains("\"tool-output-available\"")),
        "{rest:?}"
    );
    assert!(
        !rest.iter().any(|f| f.contains("\"type\":\"start\"")),
        "no second start: {rest:?}"
    );
    drop(second);
    remove_db(&db);
}
