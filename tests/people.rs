//! People and countersignatures end to end (issue #23), against the real binary with
//! `COUNTERSIGN_SIGN_IN=passkeys`: the first person from the link printed at start-up, people
//! invited by an admin (and by the API key), sign-in with passkeys (a software authenticator of
//! webauthn-rs' own test kit, speaking to the server exactly as a browser's does), a payment that
//! needs two approvers other than the person who asked, each confirming with a passkey assertion
//! bound to the arguments, from the inbox; and what nobody may read or answer.
#![cfg(unix)]

mod common;

use std::time::Duration;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::{
    binary::Binary,
    people::*,
    socket::{Frame, next},
};
use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn people_come_from_one_time_links_and_sign_in_with_passkeys() {
    let db = temp("links");
    let (app, setup) = passkeys_server(&db, &[]).await;
    assert!(
        setup.starts_with("http://localhost:"),
        "the set-up link is printed: {setup:?}"
    );
    // Nobody is signed in: pages send to the sign-in page, the API says 401.
    let (status, _) = get(&app, None, "/").await;
    assert_eq!(status, 303, "a page redirects to /signin");
    assert_eq!(get(&app, None, "/api/app").await.0, 401);
    let welcome = reqwest::get(format!("{}/welcome/{}", app.base, token_of(&setup)))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(welcome.contains("Set up Countersign"), "{welcome}");
    assert!(welcome.contains("/passkey.js"));
    let bad = reqwest::get(format!("{}/welcome/made-up", app.base))
        .await
        .unwrap();
    assert_eq!(bad.status(), 404);

    let [ana, mut ben, _eve, _cy, dan] = team(&app, &setup).await;
    // A link works once.
    let again = call(
        &app,
        None,
        "passkey_register_begin",
        json!({"token": token_of(&setup), "name": "Mallory"}),
    )
    .await;
    assert_eq!(again.status, 404, "{}", again.text);
    assert!(again.text.contains("not valid"), "{}", again.text);
    // Only an admin invites.
    let refused = call(&app, Some(&dan), "invite_person", json!({"roles": "admin"})).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    // Bad roles are named.
    let bad = call(
        &app,
        Some(&ana),
        "invite_person",
        json!({"roles": "ad;min"}),
    )
    .await;
    assert_eq!(bad.status, 422, "{}", bad.text);

    // The admin's page lists everyone; Ben's shows him only.
    let people = call(&app, Some(&ana), "people_view", json!({})).await;
    assert!(people.text.contains("Ben") && people.text.contains("Invite someone"));
    let own = call(&app, Some(&ben), "people_view", json!({})).await;
    assert!(own.text.contains("Your passkeys") && !own.text.contains("Invite someone"));
    // Ben signs in on a new browser with his passkey; the assertion cannot be used twice.
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
    assert_eq!(signed.body["answer"], "/approvals");
    let (_, me) = get(&app, Some(&ben), "/api/app").await;
    assert_eq!(me["me"]["name"], "Ben");
    let replay = call(
        &app,
        None,
        "passkey_signin_finish",
        json!({"credential": signed.body["credential"], "next": "/"}),
    )
    .await;
    assert_eq!(replay.status, 403, "a replayed assertion: {}", replay.text);
    assert!(replay.cookie.is_none());

    // An admin removes Dan: his session ends at once.
    assert_eq!(
        call(&app, Some(&ana), "remove_person", json!({"person": dan.id}))
            .await
            .status,
        200
    );
    assert_eq!(get(&app, Some(&dan), "/api/app").await.0, 401);
    // The last admin cannot lose the role.
    let last = call(
        &app,
        Some(&ana),
        "set_person_roles",
        json!({"person": ana.id, "roles": "approver"}),
    )
    .await;
    assert_eq!(last.status, 409, "{}", last.text);
    // After a restart, people, passkeys and sessions are still there; no new set-up link.
    app.kill9();
    let (app, setup_again) = passkeys_server(&db, &[]).await;
    assert_eq!(setup_again, "", "an admin exists: no set-up link");
    let (_, me) = get(&app, Some(&ana), "/api/app").await;
    assert_eq!(me["me"]["roles"], json!(["admin", "approver"]));
}

#[tokio::test]
async fn a_large_payment_needs_two_approvers_who_are_not_the_requester_each_with_a_passkey() {
    let db = temp("quorum");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [mut ana, mut ben, _eve, cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-1";
    let (status, chunks) = post_chat(&app, &dan, say(chat, "Send $150 to Jack"), true).await;
    assert_eq!(status, 200);
    let request = of_type(&chunks, "tool-approval-request")[0];
    let approval = request["approvalId"].as_str().unwrap().to_owned();
    assert_eq!(
        request["approvalDescriptor"]["countersign"]["needs"]["approvers"],
        2
    );
    let progress = of_type(&chunks, "data-countersign");
    assert_eq!(progress.len(), 1, "{chunks:?}");
    assert_eq!(progress[0]["id"], approval);
    assert_eq!(progress[0]["data"]["state"], "waiting");
    assert_eq!(progress[0]["data"]["signatures"], json!([]));

    // Dan asked: he may not approve it himself, in his chat or from the inbox.
    let tool_call = request["toolCallId"].as_str().unwrap().to_owned();
    let message = chunks[0]["messageId"].as_str().unwrap().to_owned();
    let own = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": message, "role": "assistant", "parts": [{
            "type": "tool-process_payment", "toolCallId": tool_call,
            "state": "approval-responded", "input": {"amount": 150, "recipient": "Jack"},
            "approval": {"id": approval, "approved": true}
        }]}
    ]});
    let (status, _) = post_chat(&app, &dan, own, false).await;
    assert_eq!(status, 403, "the requester approving their own");
    let inbox = call(&app, Some(&dan), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("You cannot approve it"),
        "{}",
        inbox.text
    );
    // Cy (finance) does not see it; Ben (approver) does.
    let inbox = call(&app, Some(&cy), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Nothing waits for you"),
        "{}",
        inbox.text
    );
    let inbox = call(&app, Some(&ben), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Approve with passkey"),
        "{}",
        inbox.text
    );
    assert_eq!(inbox.body["count"], 1);
    // Cy may not decide it, not even deny it.
    let refused = decide(&app, &cy, &approval, false, None).await;
    assert_eq!(refused.status, 404, "{}", refused.text);

    // Ben without a passkey confirmation: refused; with one bound to other arguments: refused.
    let bare = decide(&app, &ben, &approval, true, None).await;
    assert_eq!(bare.status, 422, "{}", bare.text);
    assert!(bare.text.contains("passkey"), "{}", bare.text);
    let other = json!({"amount": 15, "recipient": "Jack"});
    let assertion = confirm(&app, &mut ben, &approval, Some(other)).await;
    let mismatch = decide(&app, &ben, &approval, true, Some(assertion)).await;
    assert_eq!(mismatch.status, 422, "{}", mismatch.text);
    assert!(
        mismatch.text.contains("other arguments"),
        "{}",
        mismatch.text
    );

    // Ben confirms with his passkey: 1 of 2.
    let assertion = confirm(&app, &mut ben, &approval, None).await;
    let first = decide(&app, &ben, &approval, true, Some(assertion.clone())).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert!(first.text.contains("1 of 2"), "{}", first.text);
    // His assertion cannot sign for Ana; and he cannot sign twice.
    let replayed = decide(&app, &ana, &approval, true, Some(assertion)).await;
    assert_eq!(replayed.status, 403, "{}", replayed.text);
    let again = confirm(&app, &mut ben, &approval, None).await;
    let twice = decide(&app, &ben, &approval, true, Some(again)).await;
    assert_eq!(twice.status, 409, "{}", twice.text);

    // Ana completes it: the payment runs, in Dan's chat.
    let assertion = confirm(&app, &mut ana, &approval, None).await;
    let done = decide(&app, &ana, &approval, true, Some(assertion)).await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert!(done.text.contains("runs now"), "{}", done.text);
    let snapshot = wait_for_output(&app, &dan, chat).await;
    let parts = snapshot["messages"][1]["parts"].as_array().unwrap().clone();
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-process_payment")
        .unwrap();
    assert_eq!(tool["state"], "output-available", "{parts:?}");
    let progress = parts
        .iter()
        .find(|p| p["type"] == "data-countersign")
        .unwrap();
    assert_eq!(progress["data"]["state"], "complete");
    let names: Vec<&str> = progress["data"]["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Ben", "Ana"]);

    // The audit log: who signed, with which passkey, and an assertion anyone can check.
    let audit = audit_as(&app, &ana, chat).await;
    let kinds: Vec<&str> = audit.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["requested", "countersigned", "approved", "executed"],
        "{audit:?}"
    );
    let countersigned = &audit[1];
    assert_eq!(countersigned["actor"]["name"], "Ben");
    assert_eq!(countersigned["actor"]["transport"], "inbox");
    assert!(countersigned["actor"]["passkey"].is_string());
    let receipt = &countersigned["step_up"];
    let client: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(receipt["clientDataJSON"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    let binding = countersign::agent::people::passkeys::Binding {
        person: ben.id.clone(),
        chat: chat.into(),
        approval_id: approval.clone(),
        args_digest: countersigned["args_digest"].as_str().unwrap().to_owned(),
    };
    let nonce = URL_SAFE_NO_PAD
        .decode(receipt["nonce"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        client["challenge"].as_str().unwrap(),
        URL_SAFE_NO_PAD.encode(countersign::agent::people::passkeys::step_up_challenge(
            &binding, &nonce
        )),
        "the signed challenge is made of the approval and the arguments"
    );
    assert_eq!(audit[2]["actor"]["name"], "Ana");
    // The audit page says who: the person, the passkey that confirmed it (a step-up), and only
    // then the transport and address.
    let page = page_as(&app, &ana, &format!("/audit?session={chat}")).await;
    let who = who_cells(&page);
    assert_eq!(who.len(), 4, "{page}");
    let short: String = ben.credential.chars().take(8).collect();
    assert!(
        who.iter().any(|w| w.starts_with("Ben")
            && w.contains(&format!("step-up with passkey {short}…"))
            && w.contains("inbox · 127.0.0.1:")),
        "{who:?}"
    );
    assert!(who.iter().any(|w| w.starts_with("Ana")), "{who:?}");
    assert!(who.iter().any(|w| w.starts_with("the server")), "{who:?}");

    // Dan may not read the others' view of the audit beyond his chat; Cy sees nothing of it.
    let seen_by_cy = audit_as(&app, &cy, chat).await;
    assert!(seen_by_cy.is_empty(), "{seen_by_cy:?}");
    let seen_by_ben = audit_as(&app, &ben, chat).await;
    assert_eq!(
        seen_by_ben.len(),
        1,
        "only his own signature: {seen_by_ben:?}"
    );
    let seen_by_dan = audit_as(&app, &dan, chat).await;
    assert_eq!(seen_by_dan.len(), 4);
}

/// Issue #33: an approver's "no" reaches the person who asked — their card and its part say who
/// denied it and why — and the model is told who said no, so it does not tell the requester
/// that they declined.
#[tokio::test]
async fn an_approvers_denial_reaches_the_requester_with_who_and_why() {
    let db = temp("denial");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [ana, ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-3";
    let (status, chunks) = post_chat(&app, &dan, say(chat, "Send $150 to Jack"), true).await;
    assert_eq!(status, 200);
    let approval = of_type(&chunks, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();
    let denied = call(
        &app,
        Some(&ben),
        "decide_approval",
        json!({"approval_id": approval, "approve": false, "reason": "not this vendor"}),
    )
    .await;
    assert_eq!(denied.status, 200, "{}", denied.text);
    let mut snapshot = Value::Null;
    for _ in 0..100 {
        snapshot = get(&app, Some(&dan), &format!("/api/chats/{chat}")).await.1;
        let answered = snapshot["messages"][1]["parts"]
            .as_array()
            .is_some_and(|parts| parts.iter().any(|p| p["type"] == "text"));
        if answered {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let parts = snapshot["messages"][1]["parts"].as_array().unwrap().clone();
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-process_payment")
        .unwrap();
    assert_eq!(tool["state"], "output-denied", "{parts:?}");
    assert_eq!(tool["approval"]["approved"], false, "{tool}");
    assert_eq!(
        tool["approval"]["reason"], "Denied by Ben: not this vendor",
        "{tool}"
    );
    let progress = parts
        .iter()
        .find(|p| p["type"] == "data-countersign")
        .unwrap();
    assert_eq!(progress["data"]["state"], "denied");
    assert_eq!(progress["data"]["deniedBy"], "Ben");
    assert_eq!(progress["data"]["reason"], "not this vendor");
    let said: String = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert!(
        said.contains("Ben denied the payment") && said.contains("not this vendor"),
        "{said}"
    );
    assert!(!said.contains("You declined"), "{said}");
    // The audit page says it was Ben, signed in with his passkey, from the inbox.
    let page = page_as(&app, &ana, &format!("/audit?session={chat}")).await;
    let short: String = ben.credential.chars().take(8).collect();
    let who = who_cells(&page);
    assert!(
        who.iter().any(|w| w.starts_with(&format!(
            "Ben signed in with passkey {short}… inbox · 127.0.0.1:"
        ))),
        "{who:?}"
    );
}

/// The HTML of page `path` as `who` sees it.
async fn page_as(app: &Binary, who: &Someone, path: &str) -> String {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", app.base))
        .header("cookie", who.cookie.as_deref().unwrap_or_default())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

/// The text of each "Who" cell of an audit page, its markup and comments left out.
fn who_cells(page: &str) -> Vec<String> {
    page.split("data-testid=\"audit-who\"")
        .skip(1)
        .map(|cell| {
            let cell = &cell[..cell.find("</td>").unwrap_or(cell.len())];
            let mut text = String::new();
            let mut in_tag = false;
            for c in cell.chars().skip_while(|c| *c != '>').skip(1) {
                match c {
                    '<' => {
                        in_tag = true;
                        text.push(' ');
                    }
                    '>' => in_tag = false,
                    c if !in_tag => text.push(c),
                    _ => {}
                }
            }
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect()
}

#[tokio::test]
async fn no_one_reads_or_answers_what_they_may_not() {
    let db = temp("walls");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [ana, ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-2";
    let (_, chunks) = post_chat(&app, &dan, say(chat, "Send $50 to Jack"), false).await;
    let request = of_type(&chunks, "tool-approval-request")[0];
    let approval = request["approvalId"].as_str().unwrap().to_owned();
    // A plain approval is Dan's alone: not in Ben's inbox, not his to decide.
    let inbox = call(&app, Some(&ben), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Nothing waits for you"),
        "{}",
        inbox.text
    );
    let refused = decide(&app, &ben, &approval, true, None).await;
    assert_eq!(refused.status, 404, "{}", refused.text);
    // Ben cannot read, continue, stop, resume or answer questions in Dan's chat.
    // Someone else's chat reads exactly as one that does not exist: the same 404 and body, no
    // version that would tell which ids are in use.
    let (status, snapshot) = get(&app, Some(&ben), &format!("/api/chats/{chat}")).await;
    let (unknown_status, unknown) = get(&app, Some(&ben), "/api/chats/no-such-chat").await;
    assert_eq!((status, unknown_status), (404, 404), "{snapshot} {unknown}");
    assert_eq!(snapshot["error"]["code"], "chat_not_found", "{snapshot}");
    assert_eq!(snapshot, unknown);
    assert!(snapshot.get("version").is_none() && snapshot.get("messages").is_none());
    let (status, own) = get(&app, Some(&dan), &format!("/api/chats/{chat}")).await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["messages"].as_array().map(Vec::len), Some(2), "{own}");
    let (status, _) = post_chat(&app, &ben, say(chat, "Send $400 to Ben"), false).await;
    assert_eq!(status, 404);
    let stop = reqwest::Client::new()
        .post(format!("{}/api/chat/{chat}/stop", app.base))
        .header("cookie", ben.cookie.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status(), 404);
    let resume = reqwest::Client::new()
        .get(format!("{}/api/chat/{chat}/stream", app.base))
        .header("cookie", ben.cookie.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resume.status(), 404);
    let news = call(&app, Some(&ben), "chat_news", json!({"chat_id": chat})).await;
    assert_eq!(news.status, 404, "{}", news.text);
    // Dan's grants are his: the policy endpoint shows Ben none of them.
    let (_, policy) = get(&app, Some(&ben), "/api/policy").await;
    assert_eq!(policy["grants"], json!([]));
    // Dan decides his own, from the inbox too.
    let done = call(
        &app,
        Some(&dan),
        "decide_approval",
        json!({"approval_id": approval, "approve": false, "reason": "not today"}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text);
    // The admin sees the whole audit log; Dan's denial names him and the passkey he signed in
    // with (no confirmation was asked: the session's passkey is the one recorded).
    let audit = audit_as(&app, &ana, chat).await;
    let denied = audit
        .iter()
        .find(|e| e["kind"] == "denied")
        .unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!(denied["actor"]["name"], "Dan");
    assert_eq!(denied["actor"]["passkey"], dan.credential.as_str());
    // Without a cookie, nothing.
    assert_eq!(call(&app, None, "inbox_view", json!({})).await.status, 401);
}

/// Someone else's chat is refused alike on every socket route, as on the HTTP routes above: the
/// same `chat_not_found`, whatever the frame that names it — on `/api/live` a message, a resume
/// and voice's start; on ai@7's socket a send and a resume.
#[tokio::test]
async fn another_persons_chat_is_refused_alike_on_every_socket() {
    let db = temp("sockets");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [_ana, ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-3";
    let (status, _) = post_chat(&app, &dan, say(chat, "Send $50 to Jack"), false).await;
    assert_eq!(status, 200);
    let cookie = ben.cookie.as_deref().unwrap();
    let user = json!([{"id": "u-ben", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]);
    for frame in [
        json!({"type": "message", "id": chat, "messages": user}),
        json!({"type": "resume", "id": chat, "received": 0}),
        json!({"type": "audio_control", "action": "start", "id": chat}),
    ] {
        let mut live = open_socket(&app, cookie, "/api/live").await.unwrap();
        live.send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
        let said = next(&mut live).await;
        let Frame::Chunk(error) = &said else {
            panic!("{frame}: {said:?}")
        };
        assert_eq!(
            error["errorText"], "there is no chat with this id that is yours (chat_not_found)",
            "{frame}"
        );
    }
    let mut ai = open_socket(&app, cookie, "/api/chat").await.unwrap();
    for frame in [
        json!({"type": "send", "requestId": "r1", "id": chat, "trigger": "submit-message",
               "messages": user, "headers": {}, "body": {}}),
        json!({"type": "resume", "requestId": "r2", "id": chat, "headers": {}, "body": {}}),
    ] {
        ai.send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
        let said = next(&mut ai).await;
        let Frame::Control(answer) = &said else {
            panic!("{frame}: {said:?}")
        };
        assert_eq!(answer["type"], "error", "{answer}");
        assert_eq!(answer["requestId"], frame["requestId"], "{answer}");
        let error: Value = serde_json::from_str(answer["errorText"].as_str().unwrap()).unwrap();
        assert_eq!(error["error"]["code"], "chat_not_found", "{answer}");
    }
}

#[tokio::test]
async fn the_api_key_sets_up_the_first_person_and_counts_for_no_quorum() {
    let db = temp("key");
    let key = "a-key-of-sixteen-or-more-chars";
    let (app, _setup) = passkeys_server(&db, &[("COUNTERSIGN_API_KEY", key.to_string())]).await;
    let invite = reqwest::Client::new()
        .post(format!("{}/api/fn/invite_person", app.base))
        .bearer_auth(key)
        .json(&json!({"name": "Ana", "roles": "admin approver"}))
        .send()
        .await
        .unwrap();
    assert_eq!(invite.status(), 200);
    let link: String = invite.json().await.unwrap();
    let mut ana = Someone::new("Ana");
    register(&app, &mut ana, &token_of(&link)).await;
    let (_, me) = get(&app, Some(&ana), "/api/app").await;
    assert_eq!(me["me"]["roles"], json!(["admin", "approver"]));
    // A script with the key starts a chat: its large payment waits for two approvers, and the
    // key is not one of them.
    let response = reqwest::Client::new()
        .post(format!("{}/api/chat", app.base))
        .bearer_auth(key)
        .json(&say("chat-script", "Send $200 to Jack"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let approval = response
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|c| c["type"] == "tool-approval-request")
        .map(|c| c["approvalId"].as_str().unwrap().to_owned())
        .expect("it asks");
    let by_key = reqwest::Client::new()
        .post(format!("{}/api/fn/decide_approval", app.base))
        .bearer_auth(key)
        .json(&json!({"approval_id": approval, "approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(by_key.status(), 403, "{}", by_key.text().await.unwrap());
    // Ana sees it in her inbox, asked by the local person (the API key).
    let inbox = call(&app, Some(&ana), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Asked by Local person"),
        "{}",
        inbox.text
    );
}

#[tokio::test]
async fn refused_passkey_answers_make_no_one_at_the_address_wait() {
    let db = temp("throttle");
    let (app, setup) =
        passkeys_server(&db, &[("COUNTERSIGN_AUTH_FAILURE_RATE", "3".to_string())]).await;
    let [_ana, mut ben, ..] = team(&app, &setup).await;
    // Answers to no challenge of this server, from Ben's address: each refused with its reason,
    // none counted (an assertion cannot be guessed; counting refusals let one client at a shared
    // address keep everyone there from signing in).
    let forged = json!({"id": "AA", "rawId": "AA", "type": "public-key", "extensions": {},
        "response": {"clientDataJSON": URL_SAFE_NO_PAD.encode(br#"{"challenge":"nope"}"#),
                     "authenticatorData": "AA", "signature": "AA", "userHandle": "AA"}});
    for _ in 0..10 {
        let answer = call(
            &app,
            None,
            "passkey_signin_finish",
            json!({"credential": forged}),
        )
        .await;
        assert_eq!(answer.status, 403, "{}", answer.text);
        assert!(
            answer.text.contains("no sign-in challenge"),
            "{}",
            answer.text
        );
    }
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
}

#[tokio::test]
async fn on_postgres_people_sign_in_and_out_on_any_instance() {
    let Some(url) = common::fresh_postgres("people").await else {
        return;
    };
    let db = std::path::PathBuf::from(&url);
    let (a, setup) = passkeys_server(&db, &[]).await;
    let (b, _) = passkeys_server(&db, &[]).await;
    // Ana's passkey: options from A, answer to B (no sticky sessions); her cookie works on both.
    let mut ana = Someone::new("Ana");
    assert_eq!(
        register_on(&a, &b, &mut ana, &token_of(&setup)).await,
        "/people"
    );
    for app in [&a, &b] {
        let (status, me) = get(app, Some(&ana), "/api/app").await;
        assert_eq!(status, 200, "{me}");
        assert_eq!(me["me"]["name"], "Ana");
    }
    // Invited on A, Ben registers on B; A knows him at once (its directory heard of it).
    let invite = call(
        &a,
        Some(&ana),
        "invite_person",
        json!({"name": "Ben", "roles": "approver"}),
    )
    .await;
    assert_eq!(invite.status, 200, "{}", invite.text);
    let mut ben = Someone::new("Ben");
    register(&b, &mut ben, &token_of(invite.body.as_str().unwrap())).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let people = call(&a, Some(&ana), "people_view", json!({})).await;
        if people.text.contains("Ben") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", people.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Ben signs in: options from B, answer to A.
    let signed = sign_in_on(&b, &a, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
    assert_eq!(get(&b, Some(&ben), "/api/app").await.0, 200);
    // He signs out on A: B refuses the cookie too.
    let out = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/signout", a.base))
        .header("cookie", ben.cookie.clone().unwrap())
        .header("origin", &a.base)
        .send()
        .await
        .unwrap();
    assert!(
        out.status().is_redirection() || out.status().is_success(),
        "{}",
        out.status()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while get(&b, Some(&ben), "/api/app").await.0 != 401 {
        assert!(std::time::Instant::now() < deadline, "B still lets Ben in");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Ana removes Ben on B: A's directory drops him.
    let removed = call(&b, Some(&ana), "remove_person", json!({"person": ben.id})).await;
    assert_eq!(removed.status, 200, "{}", removed.text);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let again = sign_in_on(&a, &a, &mut ben).await;
        if again.status == 403 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "A still signs Ben in: {}",
            again.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET path` as `who` from `from` (a loopback address): status, `Location`, body.
async fn get_from(
    app: &Binary,
    who: Option<&Someone>,
    path: &str,
    from: [u8; 4],
) -> (u16, Option<String>, String) {
    let mut request = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(std::net::IpAddr::from(from))
        .build()
        .unwrap()
        .get(format!("{}{path}", app.base));
    if let Some(cookie) = who.and_then(|w| w.cookie.as_deref()) {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, location, response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn a_removed_persons_open_pages_are_told_once_and_lock_nobody_out() {
    let db = temp("removed-pages");
    // Three failed authentications a minute from an address, then it waits: the old rule made a
    // removed person's polling such failures, and after three of them everyone there got 429.
    let (app, setup) =
        passkeys_server(&db, &[("COUNTERSIGN_AUTH_FAILURE_RATE", "3".to_string())]).await;
    let [ana, mut ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-removed";
    let (status, _) = post_chat(&app, &dan, say(chat, "What time is it?"), false).await;
    assert_eq!(status, 200);
    let removed = call(&app, Some(&ana), "remove_person", json!({"person": dan.id})).await;
    assert_eq!(removed.status, 200, "{}", removed.text);

    // Dan's open pages keep asking, as they did: the inbox's long poll, the chat page's wait for
    // news, the page's data. Each is told he was removed — a stable code, never a 429 — and
    // his colleagues at the same address go on as before.
    for round in 0..10 {
        for (name, args) in [
            ("inbox_view", json!({})),
            ("chat_news", json!({"chat_id": chat})),
        ] {
            let answer = call(&app, Some(&dan), name, args).await;
            assert_eq!(
                answer.status, 401,
                "{name} (round {round}): {}",
                answer.text
            );
            assert_eq!(
                answer.body["error"]["code"], "signed_out",
                "{name}: {}",
                answer.text
            );
            assert!(
                answer.body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("You were removed")),
                "{}",
                answer.text
            );
        }
        let (status, page) = get(&app, Some(&dan), "/api/app").await;
        assert_eq!(status, 401, "{page}");
        assert_eq!(page["error"]["code"], "signed_out");
        let (status, _) = get(&app, Some(&ben), "/api/app").await;
        assert_eq!(status, 200, "Ben, at the same address, in round {round}");
        let inbox = call(&app, Some(&ben), "inbox_view", json!({})).await;
        assert_eq!(inbox.status, 200, "{}", inbox.text);
    }
    // A page of Dan's goes to the sign-in page, which says why (and comes back after).
    let (status, location, _) = get_from(&app, Some(&dan), "/approvals", [127, 0, 0, 1]).await;
    assert_eq!(status, 303);
    assert_eq!(location.as_deref(), Some("/signin?next=/approvals"));
    let (status, _, page) =
        get_from(&app, Some(&dan), "/signin?next=/approvals", [127, 0, 0, 1]).await;
    assert_eq!(status, 200);
    assert!(page.contains("You were removed"), "{page}");
    assert!(page.contains("data-reason=\"removed\""), "{page}");
    assert!(page.contains("data-next=\"/approvals\""), "{page}");
    // Someone else can still sign in there, and so can Ben.
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);

    // Ben signs out; his old cookie is told that, not counted either.
    let out = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/signout", app.base))
        .header("cookie", ben.cookie.clone().unwrap())
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    for _ in 0..5 {
        let answer = call(&app, Some(&ben), "inbox_view", json!({})).await;
        assert_eq!(answer.status, 401, "{}", answer.text);
        assert_eq!(answer.body["error"]["code"], "signed_out");
        assert!(
            answer.text.contains("You were signed out"),
            "{}",
            answer.text
        );
    }
    let (_, _, page) = get_from(&app, Some(&ben), "/signin", [127, 0, 0, 1]).await;
    assert!(page.contains("data-reason=\"ended\""), "{page}");
    // A cookie this server never signed is no failed attempt either (nothing in it can be
    // guessed): the address is not made to wait for it.
    let forged = Someone {
        cookie: Some("countersign_session=v3.x.p.k.99999999999999.AAAA".into()),
        ..Someone::new("Mallory")
    };
    for _ in 0..5 {
        let answer = call(&app, Some(&forged), "inbox_view", json!({})).await;
        assert_eq!(answer.status, 401, "{}", answer.text);
        assert_eq!(answer.body["error"]["code"], "signed_out");
    }
    assert_eq!(get(&app, Some(&ana), "/api/app").await.0, 200);
}

#[tokio::test]
async fn anonymous_requests_for_sign_in_options_fill_nothing_and_stop_no_one() {
    let db = temp("flood");
    // No per-address rate limit: the flood is as large as anyone could make it.
    let (app, setup) = passkeys_server(&db, &[("COUNTERSIGN_IP_RATE", "0".to_string())]).await;
    let [_ana, mut ben, _eve, _cy, dan] = team(&app, &setup).await;
    let (status, chunks) =
        post_chat(&app, &dan, say("chat-dan-flood", "Send $150 to Jack"), true).await;
    assert_eq!(status, 200);
    let approval = of_type(&chunks, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();

    // 10,001 requests for sign-in options — more than the old shared cap of ceremonies in
    // progress — from eight addresses of one /24 at once.
    let started = std::time::Instant::now();
    let floods = (2..10u8).map(|host| {
        let url = format!("{}/api/fn/passkey_signin_begin", app.base);
        async move {
            let client = reqwest::Client::builder()
                .local_address(std::net::IpAddr::from([127, 0, 0, host]))
                .build()
                .unwrap();
            let mut refused = 0;
            for _ in 0..1_251 {
                let answer = client
                    .post(&url)
                    .json(&json!({}))
                    .send()
                    .await
                    .expect("sent");
                if answer.status() != 200 {
                    refused += 1;
                }
            }
            refused
        }
    });
    let refused: Vec<u32> = futures::future::join_all(floods).await;
    assert_eq!(refused, [0; 8], "every request was answered");
    eprintln!(
        "10,008 requests for sign-in options took {:?}",
        started.elapsed()
    );

    // Someone at another address signs in, and a signed-in approver confirms with a passkey.
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
    let assertion = confirm(&app, &mut ben, &approval, None).await;
    let decided = decide(&app, &ben, &approval, true, Some(assertion)).await;
    assert_eq!(decided.status, 200, "{}", decided.text);
    assert!(decided.text.contains("1 of 2"), "{}", decided.text);
}

/// The `next` values an attacker sends, and where a browser may then be sent: only a path of
/// this site.
const HOSTILE_NEXT: &[(&str, &str)] = &[
    ("/\t/evil.example", "/"),
    ("/\n/x", "/"),
    ("//evil.example", "/"),
    ("/\\evil.example", "/"),
    ("https:evil.example", "/"),
    ("https://evil.example/", "/"),
    ("/.//evil.example", "/"),
    ("/%2F%2Fevil.example", "/%2F%2Fevil.example"),
    ("/caf\u{e9}", "/caf%C3%A9"),
    ("/approvals?x=1", "/approvals?x=1"),
];

#[tokio::test]
async fn every_sign_in_route_sends_the_browser_only_to_a_path_of_this_site() {
    let db = temp("next");
    let key = "a-key-of-sixteen-or-more-chars";
    let (app, setup) = passkeys_server(&db, &[("COUNTERSIGN_API_KEY", key.to_string())]).await;
    let mut ana = Someone::new("Ana");
    register(&app, &mut ana, &token_of(&setup)).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let form_value = |text: &str| {
        percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    for (next, expected) in HOSTILE_NEXT {
        // The sign-in page writes the followed value into its forms.
        let (status, _, page) = get_from(
            &app,
            None,
            &format!("/signin?next={}", form_value(next)),
            [127, 0, 0, 1],
        )
        .await;
        assert_eq!(status, 200, "{next:?}");
        assert!(
            page.contains(&format!("data-next=\"{expected}\""))
                && page.contains(&format!("name=\"next\" value=\"{expected}\"")),
            "{next:?}: {page}"
        );
        // The key form redirects there, after making the session (never a 500).
        let signin = client
            .post(format!("{}/signin", app.base))
            .header("origin", &app.base)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("key={}&next={}", form_value(key), form_value(next)))
            .send()
            .await
            .unwrap();
        assert_eq!(signin.status(), 303, "{next:?}");
        assert_eq!(signin.headers()["location"], *expected, "{next:?}");
        assert!(signin.headers().contains_key("set-cookie"), "{next:?}");
        // The passkey sign-in answers it (public/passkey.js follows it as given).
        let begin = call(&app, None, "passkey_signin_begin", json!({})).await;
        let credential = assert_with(&app, &mut ana, begin.body);
        let finish = call(
            &app,
            None,
            "passkey_signin_finish",
            json!({"credential": credential, "next": next}),
        )
        .await;
        assert_eq!(finish.status, 200, "{next:?}: {}", finish.text);
        assert_eq!(finish.body, json!(expected), "{next:?}");
    }
}
