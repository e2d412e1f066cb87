//! Removing a person ends their power everywhere, at once (issue #33), against the real binary
//! with passkeys: their WebSockets close with a reason and their streams end, nothing of theirs
//! is accepted any more, their grants are revoked, and their signatures on approvals still
//! waiting stop counting — the card and the inbox say so — on every instance. A role change
//! drops the signatures that no longer qualify; signing out ends what that sign-in opened.
#![cfg(unix)]

use crate::common;

use std::time::Duration;

use common::socket::Socket;
use common::{binary::Binary, people::*};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// The close code of a socket whose person may no longer be signed in.
const SIGNED_OUT: u16 = 4401;

/// How `socket` was closed (code and reason), waiting at most 5 s.
async fn closed(socket: &mut Socket) -> (u16, String) {
    let wait = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(Some(frame)))) => {
                    return (u16::from(frame.code), frame.reason.to_string());
                }
                Some(Ok(Message::Close(None))) | None | Some(Err(_)) => {
                    return (0, "closed without a close frame".to_owned());
                }
                Some(Ok(_)) => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the socket is closed within 5 s")
}

/// Whether `/api/live` still answers (a `ping` frame gets its `pong`).
async fn answers(socket: &mut Socket) -> bool {
    let ping = json!({"type": "ping", "timestamp": 7}).to_string();
    if socket.send(Message::Text(ping.into())).await.is_err() {
        return false;
    }
    let wait = async {
        while let Some(Ok(message)) = socket.next().await {
            match message {
                Message::Text(text) if text.contains("pong") => return true,
                Message::Close(_) => return false,
                _ => {}
            }
        }
        false
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .unwrap_or(false)
}

/// The answer to `chat`'s waiting plain approval in `chunks`, approved with `extra` (a grant).
fn approve_in(chat: &str, chunks: &[Value], extra: Value) -> Value {
    let request = of_type(chunks, "tool-approval-request")[0];
    let call = request["toolCallId"].as_str().unwrap();
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == call)
        .map(|c| c["input"].clone())
        .unwrap();
    let message = chunks[0]["messageId"].as_str().unwrap();
    let mut approval = json!({"id": request["approvalId"], "approved": true});
    if let Value::Object(extra) = extra {
        approval.as_object_mut().unwrap().extend(extra);
    }
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "…"}]},
        {"id": message, "role": "assistant", "parts": [
            {"type": "tool-process_payment", "toolCallId": call, "state": "approval-responded",
             "input": input, "approval": approval}
        ]}
    ]})
}

/// Dan asks for 150 USD in `chat` on `app` (two approvers, not him); the approval's id.
async fn dan_asks_for_150(app: &Binary, dan: &Someone, chat: &str) -> String {
    let (status, chunks) = post_chat(app, dan, say(chat, "Send $150 to Jack"), true).await;
    assert_eq!(status, 200);
    of_type(&chunks, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `who` approves `approval` on `app` with a passkey confirmation made there.
async fn sign(app: &Binary, who: &mut Someone, approval: &str) -> Answer {
    let assertion = confirm(app, who, approval, None).await;
    decide(app, who, approval, true, Some(assertion)).await
}

/// The parts of `chat`'s messages as `who` reads them, in order, and the snapshot they came in.
async fn parts(app: &Binary, who: &Someone, chat: &str) -> (Vec<Value>, Value) {
    let (_, snapshot) = get(app, Some(who), &format!("/api/chats/{chat}")).await;
    let parts = snapshot["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .collect();
    (parts, snapshot)
}

/// The `data-countersign` part of `chat` as `who` reads it.
async fn progress(app: &Binary, who: &Someone, chat: &str) -> Value {
    let (parts, snapshot) = parts(app, who, chat).await;
    parts
        .into_iter()
        .rfind(|p| p["type"] == "data-countersign")
        .map(|p| p["data"].clone())
        .unwrap_or_else(|| panic!("no countersign part in {snapshot}"))
}

/// `chat`'s payment as `who` reads it: its tool part.
async fn payment(app: &Binary, who: &Someone, chat: &str) -> Value {
    let (parts, snapshot) = parts(app, who, chat).await;
    parts
        .into_iter()
        .find(|p| p["type"] == "tool-process_payment")
        .unwrap_or_else(|| panic!("no payment in {snapshot}"))
}

#[tokio::test]
async fn removing_someone_closes_their_sockets_revokes_their_grants_and_drops_their_signatures() {
    let db = temp("removal");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [mut ana, mut ben, mut eve, _cy, dan] = team(&app, &setup).await;

    // Ben remembers a payment of his as a grant: up to 100 USD, in every chat of his.
    let (_, asked) = post_chat(&app, &ben, say("ben-1", "Send $50 to Jack"), true).await;
    let grant = json!({"grant": {"scope": "budget", "seconds": 3600, "maxCents": 10_000}});
    let (status, paid) = post_chat(&app, &ben, approve_in("ben-1", &asked, grant), true).await;
    assert_eq!(status, 200);
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{paid:?}");
    // Dan asks for 150 USD; Ben is the first of the two approvers it needs.
    let approval = dan_asks_for_150(&app, &dan, "dan-1").await;
    let first = sign(&app, &mut ben, &approval).await;
    assert!(first.text.contains("1 of 2"), "{}", first.text);
    // Ben's page holds its chat's socket, and an AI SDK v7 client of his its own.
    let cookie = ben.cookie.clone().unwrap();
    let mut live = open_socket(&app, &cookie, "/api/live").await.unwrap();
    let mut chat_socket = open_socket(&app, &cookie, "/api/chat").await.unwrap();
    assert!(answers(&mut live).await);

    // His pages also wait on the inbox and on his chat's news (long polls of 20 s).
    let since = call(&app, Some(&ben), "inbox_view", json!({})).await.body["version"].clone();
    let known = call(&app, Some(&ben), "chat_news", json!({"chat_id": "ben-1"}))
        .await
        .body
        .clone();
    let inbox_poll = call(&app, Some(&ben), "inbox_view", json!({"since": since}));
    let news_poll = call(
        &app,
        Some(&ben),
        "chat_news",
        json!({"chat_id": "ben-1", "known": known}),
    );
    let removal = async {
        // A moment for the polls to reach the server (one that has not is refused at the door,
        // with the same answer).
        tokio::time::sleep(Duration::from_millis(200)).await;
        call(&app, Some(&ana), "remove_person", json!({"person": ben.id})).await
    };
    let (inbox_poll, news_poll, removed) = tokio::join!(inbox_poll, news_poll, removal);
    assert_eq!(removed.status, 200, "{}", removed.text);
    // The polls end with the removal, not 20 s later: signed out, saying why.
    for poll in [&inbox_poll, &news_poll] {
        assert_eq!(poll.status, 401, "{}", poll.text);
        assert_eq!(poll.body["error"]["code"], "signed_out", "{}", poll.text);
        assert!(poll.text.contains("You were removed"), "{}", poll.text);
    }

    // Both sockets close at once, saying why; nothing of his is accepted any more.
    for socket in [&mut live, &mut chat_socket] {
        let (code, reason) = closed(socket).await;
        assert_eq!(code, SIGNED_OUT, "{reason}");
        assert!(reason.contains("you were removed"), "{reason}");
    }
    let again = open_socket(&app, &cookie, "/api/live").await;
    assert!(again.is_err_and(|e| e.contains("401")), "a new socket");
    let (status, _) = post_chat(&app, &ben, say("ben-1", "Send $40 to Jill"), true).await;
    assert_eq!(status, 401, "a new turn");
    assert_eq!(
        call(&app, Some(&ben), "inbox_view", json!({})).await.status,
        401
    );

    // His grant is revoked, by Ana as the audit log says.
    let (_, policy) = get(&app, Some(&ana), "/api/policy").await;
    let grants = policy["grants"].as_array().cloned().unwrap_or_default();
    assert_eq!(grants.len(), 1, "{policy}");
    assert!(grants[0]["revokedAtMs"].is_i64(), "{policy}");
    let audit = audit_as(&app, &ana, "ben-1").await;
    let revoked = audit
        .iter()
        .find(|e| e["kind"] == "revoked")
        .unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!(revoked["actor"]["name"], "Ana");
    assert!(
        revoked["reason"]
            .as_str()
            .unwrap()
            .contains("Ben was removed"),
        "{revoked}"
    );
    let removals = audit_where(&app, &ana, "kind=removed").await;
    assert_eq!(removals.len(), 1, "{removals:?}");
    assert_eq!(removals[0]["actor"]["name"], "Ana");
    assert_eq!(removals[0]["args"]["person"], ben.id.as_str());

    // His signature on Dan's payment no longer counts: the card and the inbox say so.
    let shown = progress(&app, &dan, "dan-1").await;
    assert_eq!(shown["state"], "waiting");
    assert_eq!(shown["signatures"], json!([]), "{shown}");
    assert_eq!(shown["dropped"][0]["name"], "Ben", "{shown}");
    assert_eq!(shown["dropped"][0]["why"], "was removed", "{shown}");
    let inbox = call(&app, Some(&eve), "inbox_view", json!({})).await;
    assert!(
        inbox
            .text
            .contains("Ben was removed; 2 more people (approver) needed"),
        "{}",
        inbox.text
    );
    let audit = audit_as(&app, &ana, "dan-1").await;
    let dropped = audit
        .iter()
        .find(|e| e["kind"] == "dropped")
        .unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!(dropped["actor"]["name"], "Ana");
    assert!(
        dropped["reason"].as_str().unwrap().contains("Ben"),
        "{dropped}"
    );

    // Eve alone is one of two; with Ana the payment runs.
    let second = sign(&app, &mut eve, &approval).await;
    assert_eq!(second.status, 200, "{}", second.text);
    assert!(second.text.contains("1 of 2"), "{}", second.text);
    assert_ne!(
        payment(&app, &dan, "dan-1").await["state"],
        "output-available"
    );
    let shown = progress(&app, &dan, "dan-1").await;
    assert_eq!(shown["dropped"][0]["name"], "Ben", "still said: {shown}");
    let done = sign(&app, &mut ana, &approval).await;
    assert!(done.text.contains("runs now"), "{}", done.text);
    wait_for_output(&app, &dan, "dan-1").await;
}

#[tokio::test]
async fn a_role_change_drops_the_signatures_that_no_longer_qualify() {
    let db = temp("roles");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [mut ana, mut ben, mut eve, _cy, dan] = team(&app, &setup).await;
    let approval = dan_asks_for_150(&app, &dan, "dan-2").await;
    assert_eq!(sign(&app, &mut ben, &approval).await.status, 200);
    let cookie = ben.cookie.clone().unwrap();
    let mut live = open_socket(&app, &cookie, "/api/live").await.unwrap();

    let changed = call(
        &app,
        Some(&ana),
        "set_person_roles",
        json!({"person": ben.id, "roles": "finance"}),
    )
    .await;
    assert_eq!(changed.status, 200, "{}", changed.text);

    let shown = progress(&app, &dan, "dan-2").await;
    assert_eq!(shown["signatures"], json!([]), "{shown}");
    assert_eq!(shown["dropped"][0]["name"], "Ben", "{shown}");
    assert_eq!(
        shown["dropped"][0]["why"], "no longer has the role approver",
        "{shown}"
    );
    let inbox = call(&app, Some(&eve), "inbox_view", json!({})).await;
    assert!(
        inbox
            .text
            .contains("Ben no longer has the role approver; 2 more people (approver) needed"),
        "{}",
        inbox.text
    );
    // Eve's signature is the first that counts: the payment waits.
    let second = sign(&app, &mut eve, &approval).await;
    assert!(second.text.contains("1 of 2"), "{}", second.text);
    assert_ne!(
        payment(&app, &dan, "dan-2").await["state"],
        "output-available"
    );
    // Ben is still signed in (a socket re-reads who he is at every frame), and may no longer
    // sign it.
    assert!(answers(&mut live).await, "the socket stays");
    let inbox = call(&app, Some(&ben), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Nothing waits for you"),
        "{}",
        inbox.text
    );
    let audit = audit_where(&app, &ana, "kind=roles_changed").await;
    assert_eq!(audit.len(), 2, "Ana's own at set-up, and Ben's: {audit:?}");
    assert_eq!(audit[1]["actor"]["name"], "Ana");
    assert_eq!(audit[1]["args"]["roles"], json!(["finance"]));
    assert_eq!(audit[1]["args"]["was"], json!(["approver"]));
    let dropped = audit_as(&app, &ana, "dan-2").await;
    assert!(
        dropped
            .iter()
            .any(|e| e["kind"] == "dropped" && e["actor"]["name"] == "Ana"),
        "{dropped:?}"
    );
    // With Ana's, it runs.
    let done = sign(&app, &mut ana, &approval).await;
    assert!(done.text.contains("runs now"), "{}", done.text);
    wait_for_output(&app, &dan, "dan-2").await;
}

#[tokio::test]
async fn signing_out_ends_the_sockets_and_streams_of_that_sign_in_only() {
    let db = temp("signout");
    let (app, setup) = passkeys_server(&db, &[("COUNTERSIGN_DEMO_DELAY_MS", "50".into())]).await;
    let [_ana, mut ben, _eve, _cy, _dan] = team(&app, &setup).await;
    // Ben on two browsers: the first from his registration, the second signed in since.
    let first = ben.cookie.clone().unwrap();
    assert_eq!(sign_in(&app, &mut ben).await.status, 200);
    let second = ben.cookie.clone().unwrap();
    let mut first_live = open_socket(&app, &first, "/api/live").await.unwrap();
    let mut first_chat = open_socket(&app, &first, "/api/chat").await.unwrap();
    let mut second_live = open_socket(&app, &second, "/api/live").await.unwrap();
    // The first browser streams a long answer (200 words, 50 ms each).
    let streaming = reqwest::Client::new()
        .post(format!("{}/api/chat", app.base))
        .header("cookie", &first)
        .json(&say("ben-long", "/lorem 200"))
        .send()
        .await
        .unwrap();
    assert_eq!(streaming.status(), 200);
    let mut body = streaming.bytes_stream();
    let mut text = String::new();
    while !text.contains("text-delta") {
        let bytes = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .expect("the answer streams")
            .expect("more of it")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&bytes));
    }

    let out = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/signout", app.base))
        .header("cookie", &first)
        .send()
        .await
        .unwrap();
    assert!(out.status().is_redirection(), "{}", out.status());

    for socket in [&mut first_live, &mut first_chat] {
        let (code, reason) = closed(socket).await;
        assert_eq!(code, SIGNED_OUT, "{reason}");
        assert!(reason.contains("signed out"), "{reason}");
    }
    // The stream ends well before its 200 words, saying why.
    let rest = tokio::time::timeout(Duration::from_secs(3), async {
        while let Some(Ok(bytes)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&bytes));
        }
    })
    .await;
    assert!(rest.is_ok(), "the stream ended at once");
    let last = text
        .lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data: "))
        .find_map(|d| serde_json::from_str::<Value>(d).ok())
        .unwrap();
    assert_eq!(last["type"], "error", "{text}");
    assert!(
        last["errorText"].as_str().unwrap().contains("signed out"),
        "{last}"
    );
    assert!(!text.contains("\"finish\""), "{text}");
    // The other browser's sign-in goes on.
    assert!(answers(&mut second_live).await);
    assert!(open_socket(&app, &first, "/api/live").await.is_err());
}

#[tokio::test]
async fn on_postgres_a_removal_on_one_instance_stops_a_quorum_completing_on_another() {
    let Some(url) = common::fresh_postgres("removal").await else {
        return;
    };
    let db = std::path::PathBuf::from(&url);
    let (a, setup) = passkeys_server(&db, &[]).await;
    let (b, _) = passkeys_server(&db, &[]).await;
    let [mut ana, mut ben, mut eve, _cy, dan] = team(&a, &setup).await;
    let approval = dan_asks_for_150(&a, &dan, "dan-pg").await;
    assert_eq!(sign(&a, &mut ben, &approval).await.status, 200);
    // B knows the approval and the people (its inbox shows it to Eve), and holds Ben's socket.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let inbox = call(&b, Some(&eve), "inbox_view", json!({})).await;
        if inbox.text.contains("1 of 2") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", inbox.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut live_on_b = open_socket(&b, ben.cookie.as_deref().unwrap(), "/api/live")
        .await
        .unwrap();

    // Ana removes Ben on A; Eve's signature lands on B right after.
    let removed = call(&a, Some(&ana), "remove_person", json!({"person": ben.id})).await;
    assert_eq!(removed.status, 200, "{}", removed.text);
    let second = sign(&b, &mut eve, &approval).await;
    assert_eq!(second.status, 200, "{}", second.text);
    assert!(second.text.contains("1 of 2"), "{}", second.text);
    assert_ne!(
        payment(&a, &dan, "dan-pg").await["state"],
        "output-available",
        "Ben's signature counted on B"
    );
    let shown = progress(&b, &dan, "dan-pg").await;
    let signed: Vec<&str> = shown["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(signed, ["Eve"], "{shown}");
    assert_eq!(shown["dropped"][0]["name"], "Ben", "{shown}");
    // B closed Ben's socket when it heard of the removal.
    let (code, reason) = closed(&mut live_on_b).await;
    assert_eq!(code, SIGNED_OUT, "{reason}");
    // Ana's signature on B completes it with two that count.
    let done = sign(&b, &mut ana, &approval).await;
    assert!(done.text.contains("runs now"), "{}", done.text);
    wait_for_output(&a, &dan, "dan-pg").await;
}
