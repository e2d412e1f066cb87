//! People and countersignatures end to end (issue #23), against the real binary with
//! `COUNTERSIGN_SIGN_IN=passkeys`: the first person from the link printed at start-up, people
//! invited by an admin (and by the API key), sign-in with passkeys (a software authenticator of
//! webauthn-rs' own test kit, speaking to the server exactly as a browser's does), a payment that
//! needs two approvers other than the person who asked, each confirming with a passkey assertion
//! bound to the arguments, from the inbox; and what nobody may read or answer.
#![cfg(unix)]

mod common;

use std::{sync::mpsc, time::Duration};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use common::binary::Binary;
use serde_json::{Value, json};
use webauthn_authenticator_rs::{WebauthnAuthenticator, softpasskey::SoftPasskey};
use webauthn_rs::prelude::{CreationChallengeResponse, RequestChallengeResponse, Url};

/// Someone with a browser: a cookie jar of one cookie, and a passkey authenticator.
struct Someone {
    name: &'static str,
    cookie: Option<String>,
    authenticator: SoftPasskey,
    /// Their person id (the WebAuthn user handle of their passkey).
    id: String,
    /// Their passkey's credential id (base64url).
    credential: String,
}

impl Someone {
    fn new(name: &'static str) -> Self {
        Someone {
            name,
            cookie: None,
            authenticator: SoftPasskey::new(true),
            id: String::new(),
            credential: String::new(),
        }
    }
}

struct Answer {
    status: u16,
    body: Value,
    text: String,
    cookie: Option<String>,
}

/// A Leptos server function (`POST /api/fn/<name>`, JSON) as `who` (`None`: nobody signed in).
async fn call(app: &Binary, who: Option<&Someone>, name: &str, args: Value) -> Answer {
    let mut request = reqwest::Client::new()
        .post(format!("{}/api/fn/{name}", app.base))
        .header("accept", "application/json")
        .json(&args);
    if let Some(cookie) = who.and_then(|w| w.cookie.as_deref()) {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned);
    let text = response.text().await.unwrap_or_default();
    Answer {
        status,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
        cookie,
    }
}

/// `GET path` as `who`: status and JSON.
async fn get(app: &Binary, who: Option<&Someone>, path: &str) -> (u16, Value) {
    let mut request = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}{path}", app.base));
    if let Some(cookie) = who.and_then(|w| w.cookie.as_deref()) {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// `POST /api/chat` as `who`: status and chunks.
async fn post_chat(app: &Binary, who: &Someone, body: Value, full: bool) -> (u16, Vec<Value>) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/api/chat", app.base))
        .json(&body);
    if let Some(cookie) = &who.cookie {
        request = request.header("cookie", cookie);
    }
    if full {
        request = request.header("x-countersign-dialect", "full");
    }
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let text = tokio::time::timeout(Duration::from_secs(30), response.text())
        .await
        .expect("the response ends")
        .unwrap_or_default();
    let chunks = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    (status, chunks)
}

fn origin(app: &Binary) -> Url {
    let port = app.base.rsplit(':').next().unwrap();
    Url::parse(&format!("http://localhost:{port}")).unwrap()
}

/// Registers a passkey for `someone` from the one-time link `token`; they are signed in after.
async fn register(app: &Binary, someone: &mut Someone, token: &str) -> String {
    register_on(app, app, someone, token).await
}

/// [`register`], the options from `app` and the answer to `finish` (another instance).
async fn register_on(
    app: &Binary,
    finish_on: &Binary,
    someone: &mut Someone,
    token: &str,
) -> String {
    let begin = call(
        app,
        None,
        "passkey_register_begin",
        json!({"token": token, "name": someone.name}),
    )
    .await;
    assert_eq!(begin.status, 200, "{}", begin.text);
    let mut options = begin.body;
    assert_eq!(
        options["publicKey"]["authenticatorSelection"]["residentKey"], "required",
        "a passkey proper: discoverable"
    );
    someone.id = uuid_of(options["publicKey"]["user"]["id"].as_str().unwrap());
    // The test kit's authenticator keeps no resident keys: it is told not to (the server does
    // not check residency; browsers make the passkey discoverable).
    options["publicKey"]["authenticatorSelection"]["requireResidentKey"] = json!(false);
    let options: CreationChallengeResponse = serde_json::from_value(options).unwrap();
    let credential = someone
        .authenticator
        .do_registration(origin(app), options)
        .expect("the authenticator registers");
    someone.credential = credential.id.clone();
    let finish = call(
        finish_on,
        None,
        "passkey_register_finish",
        json!({"credential": credential}),
    )
    .await;
    assert_eq!(finish.status, 200, "{}", finish.text);
    someone.cookie = finish.cookie;
    assert!(someone.cookie.is_some(), "signed in after registering");
    finish.body.as_str().unwrap_or_default().to_owned()
}

fn uuid_of(handle: &str) -> String {
    let bytes = URL_SAFE_NO_PAD.decode(handle).unwrap();
    uuid::Uuid::from_slice(&bytes).unwrap().to_string()
}

/// An assertion for `options` by `someone`'s passkey, with their user handle (a discoverable
/// credential's, which the test kit does not keep).
fn assert_with(app: &Binary, someone: &mut Someone, mut options: Value) -> Value {
    if options["publicKey"]["allowCredentials"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        // A browser finds its discoverable passkey by itself; the kit is told which one.
        options["publicKey"]["allowCredentials"] =
            json!([{"type": "public-key", "id": someone.credential}]);
    }
    let options: RequestChallengeResponse = serde_json::from_value(options).unwrap();
    let mut credential = someone
        .authenticator
        .do_authentication(origin(app), options)
        .expect("the authenticator asserts");
    credential.response.user_handle = Some(
        uuid::Uuid::parse_str(&someone.id)
            .unwrap()
            .as_bytes()
            .to_vec(),
    );
    serde_json::to_value(credential).unwrap()
}

/// `someone`'s passkey confirmation of `approval` (for `args` when they edit it).
async fn confirm(
    app: &Binary,
    someone: &mut Someone,
    approval: &str,
    args: Option<Value>,
) -> Value {
    let mut body = json!({"approval_id": approval});
    if let Some(args) = args {
        body["args"] = args;
    }
    let options = call(app, Some(someone), "step_up_options", body).await;
    assert_eq!(options.status, 200, "{}", options.text);
    assert_with(app, someone, options.body)
}

/// `who` decides `approval` from the inbox (with a passkey confirmation when given).
async fn decide(
    app: &Binary,
    who: &Someone,
    approval: &str,
    approve: bool,
    step_up: Option<Value>,
) -> Answer {
    let mut body = json!({"approval_id": approval, "approve": approve});
    if let Some(assertion) = step_up {
        body["step_up"] = assertion;
    }
    call(app, Some(who), "decide_approval", body).await
}

/// Signs `someone` in with their passkey (a fresh browser: no cookie).
async fn sign_in(app: &Binary, someone: &mut Someone) -> Answer {
    sign_in_on(app, app, someone).await
}

/// [`sign_in`], the options from `app` and the answer to `finish_on` (another instance).
async fn sign_in_on(app: &Binary, finish_on: &Binary, someone: &mut Someone) -> Answer {
    someone.cookie = None;
    let begin = call(app, None, "passkey_signin_begin", json!({})).await;
    assert_eq!(begin.status, 200, "{}", begin.text);
    assert!(begin.body.get("mediation").is_none(), "a modal sign-in");
    let credential = assert_with(app, someone, begin.body);
    let finish = call(
        finish_on,
        None,
        "passkey_signin_finish",
        json!({"credential": credential.clone(), "next": "/approvals"}),
    )
    .await;
    someone.cookie = finish.cookie.clone();
    Answer {
        body: json!({"credential": credential, "answer": finish.body}),
        ..finish
    }
}

fn say(chat: &str, text: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": format!("u-{text}"), "role": "user", "parts": [{"type": "text", "text": text}]}
    ]})
}

fn of_type<'a>(chunks: &'a [Value], kind: &str) -> Vec<&'a Value> {
    chunks.iter().filter(|c| c["type"] == kind).collect()
}

fn token_of(link: &str) -> String {
    link.rsplit("/welcome/").next().unwrap().to_owned()
}

async fn passkeys_server(db: &std::path::Path, extra: &[(&str, String)]) -> (Binary, String) {
    let (lines, printed) = mpsc::channel();
    let mut env = vec![
        ("COUNTERSIGN_DB", db.display().to_string()),
        ("COUNTERSIGN_DEMO_DELAY_MS", "0".to_string()),
        ("COUNTERSIGN_WEATHER", "offline".to_string()),
        ("COUNTERSIGN_SIGN_IN", "passkeys".to_string()),
        (
            "COUNTERSIGN_POLICY",
            format!("{}/examples/policy.cedar", env!("CARGO_MANIFEST_DIR")),
        ),
    ];
    env.extend(extra.iter().cloned());
    let app = Binary::start_printing(&env, lines).await;
    // The banner (and the link) is printed before the server answers `/healthz`.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut link = String::new();
    while std::time::Instant::now() < deadline {
        match printed.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                if let Some(found) = line.split_whitespace().find(|w| w.contains("/welcome/")) {
                    link = found.to_owned();
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    (app, link)
}

fn temp(name: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("countersign-people-{}-{name}", std::process::id()));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    path
}

/// Ana (admin, approver) from the set-up link; Ben and Eve (approvers), Cy (finance) and Dan (no
/// role) invited by her.
async fn team(app: &Binary, setup: &str) -> [Someone; 5] {
    let mut ana = Someone::new("Ana");
    assert_eq!(register(app, &mut ana, &token_of(setup)).await, "/people");
    let (status, me) = get(app, Some(&ana), "/api/app").await;
    assert_eq!(status, 200);
    assert_eq!(me["me"]["name"], "Ana");
    assert_eq!(me["me"]["roles"], json!(["admin"]));
    assert_eq!(
        call(
            app,
            Some(&ana),
            "set_person_roles",
            json!({"person": ana.id, "roles": "admin approver"})
        )
        .await
        .status,
        200
    );
    let mut people = Vec::new();
    for (name, roles) in [
        ("Ben", "approver"),
        ("Eve", "approver"),
        ("Cy", "finance"),
        ("Dan", ""),
    ] {
        let invite = call(
            app,
            Some(&ana),
            "invite_person",
            json!({"name": name, "roles": roles}),
        )
        .await;
        assert_eq!(invite.status, 200, "{}", invite.text);
        let link = invite.body.as_str().unwrap().to_owned();
        assert!(link.contains("/welcome/"), "{link}");
        let mut someone = Someone::new(name);
        assert_eq!(register(app, &mut someone, &token_of(&link)).await, "/");
        people.push(someone);
    }
    let [ben, eve, cy, dan]: [Someone; 4] = people.try_into().ok().unwrap();
    [ana, ben, eve, cy, dan]
}

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
    let binding = countersign::people::passkeys::Binding {
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
        URL_SAFE_NO_PAD.encode(countersign::people::passkeys::step_up_challenge(
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

async fn wait_for_output(app: &Binary, who: &Someone, chat: &str) -> Value {
    for _ in 0..100 {
        let (_, snapshot) = get(app, Some(who), &format!("/api/chats/{chat}")).await;
        let done = snapshot["messages"]
            .as_array()
            .and_then(|m| m.get(1))
            .and_then(|m| m["parts"].as_array())
            .is_some_and(|parts| {
                parts.iter().any(|p| {
                    p["type"] == "tool-process_payment" && p["state"] == "output-available"
                })
            });
        if done {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the payment did not run");
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

async fn audit_as(app: &Binary, who: &Someone, chat: &str) -> Vec<Value> {
    let text = reqwest::Client::new()
        .get(format!("{}/api/audit/export?session={chat}", app.base))
        .header("cookie", who.cookie.as_deref().unwrap_or_default())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("JSONL"))
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
    let (_, snapshot) = get(&app, Some(&ben), &format!("/api/chats/{chat}")).await;
    assert_eq!(
        snapshot["messages"],
        json!([]),
        "someone else's chat reads as empty"
    );
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
async fn failed_passkey_sign_ins_make_the_address_wait() {
    let db = temp("throttle");
    let (app, _setup) =
        passkeys_server(&db, &[("COUNTERSIGN_AUTH_FAILURE_RATE", "3".to_string())]).await;
    // Answers to no challenge of this server: each one a failure of this address.
    let forged = json!({"id": "AA", "rawId": "AA", "type": "public-key", "extensions": {},
        "response": {"clientDataJSON": URL_SAFE_NO_PAD.encode(br#"{"challenge":"nope"}"#),
                     "authenticatorData": "AA", "signature": "AA", "userHandle": "AA"}});
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let answer = call(
            &app,
            None,
            "passkey_signin_finish",
            json!({"credential": forged}),
        )
        .await;
        statuses.push(answer.status);
        if answer.status == 429 {
            assert!(answer.text.contains("try again in"), "{}", answer.text);
        } else {
            assert!(
                answer.text.contains("no challenge") || answer.text.contains("not a WebAuthn"),
                "{}",
                answer.text
            );
        }
    }
    assert_eq!(statuses, [403, 403, 403, 429]);
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
