//! People with passkeys against the real binary (`COUNTERSIGN_SIGN_IN=passkeys`): someone with
//! a browser (a cookie and a software passkey of webauthn-rs' own test kit, speaking to the
//! server exactly as a browser's does), the one-time links, sign-in, step-up confirmations, the
//! inbox's server functions, their sockets and the team most scenarios start from. Shared by
//! tests/people.rs and tests/removal.rs.

use std::{sync::mpsc, time::Duration};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use webauthn_authenticator_rs::{WebauthnAuthenticator, softpasskey::SoftPasskey};
use webauthn_rs::prelude::{CreationChallengeResponse, RequestChallengeResponse, Url};

use super::{binary::Binary, socket::Socket};

/// Someone with a browser: a cookie jar of one cookie, and a passkey authenticator.
pub struct Someone {
    pub name: &'static str,
    pub cookie: Option<String>,
    pub authenticator: SoftPasskey,
    /// Their person id (the WebAuthn user handle of their passkey).
    pub id: String,
    /// Their passkey's credential id (base64url).
    pub credential: String,
}

impl Someone {
    pub fn new(name: &'static str) -> Self {
        Someone {
            name,
            cookie: None,
            authenticator: SoftPasskey::new(true),
            id: String::new(),
            credential: String::new(),
        }
    }
}

pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub text: String,
    pub cookie: Option<String>,
}

/// A Leptos server function (`POST /api/fn/<name>`, JSON) as `who` (`None`: nobody signed in).
pub async fn call(app: &Binary, who: Option<&Someone>, name: &str, args: Value) -> Answer {
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
pub async fn get(app: &Binary, who: Option<&Someone>, path: &str) -> (u16, Value) {
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
pub async fn post_chat(app: &Binary, who: &Someone, body: Value, full: bool) -> (u16, Vec<Value>) {
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

pub fn origin(app: &Binary) -> Url {
    let port = app.base.rsplit(':').next().unwrap();
    Url::parse(&format!("http://localhost:{port}")).unwrap()
}

/// Registers a passkey for `someone` from the one-time link `token`; they are signed in after.
pub async fn register(app: &Binary, someone: &mut Someone, token: &str) -> String {
    register_on(app, app, someone, token).await
}

/// [`register`], the options from `app` and the answer to `finish` (another instance).
pub async fn register_on(
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

pub fn uuid_of(handle: &str) -> String {
    let bytes = URL_SAFE_NO_PAD.decode(handle).unwrap();
    uuid::Uuid::from_slice(&bytes).unwrap().to_string()
}

/// An assertion for `options` by `someone`'s passkey, with their user handle (a discoverable
/// credential's, which the test kit does not keep).
pub fn assert_with(app: &Binary, someone: &mut Someone, mut options: Value) -> Value {
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
pub async fn confirm(
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
pub async fn decide(
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
pub async fn sign_in(app: &Binary, someone: &mut Someone) -> Answer {
    sign_in_on(app, app, someone).await
}

/// [`sign_in`], the options from `app` and the answer to `finish_on` (another instance).
pub async fn sign_in_on(app: &Binary, finish_on: &Binary, someone: &mut Someone) -> Answer {
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

pub fn say(chat: &str, text: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": format!("u-{text}"), "role": "user", "parts": [{"type": "text", "text": text}]}
    ]})
}

pub fn of_type<'a>(chunks: &'a [Value], kind: &str) -> Vec<&'a Value> {
    chunks.iter().filter(|c| c["type"] == kind).collect()
}

pub fn token_of(link: &str) -> String {
    link.rsplit("/welcome/").next().unwrap().to_owned()
}

pub async fn passkeys_server(db: &std::path::Path, extra: &[(&str, String)]) -> (Binary, String) {
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

/// A scratch path for a test's database (or file): removed, with SQLite's `-wal` and `-shm`,
/// when the test is done with it.
pub fn temp(name: &str) -> Scratch {
    Scratch::new(&format!("people-{name}"))
}

/// A path in the temporary directory that is deleted (a file, its SQLite siblings, or a
/// directory) when dropped: declared before the server that uses it, it outlives the server.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("countersign-{name}-{}", std::process::id()));
        let scratch = Scratch(path);
        scratch.remove();
        scratch
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Ana (admin, approver) from the set-up link; Ben and Eve (approvers), Cy (finance) and Dan (no
/// role) invited by her.
pub async fn team(app: &Binary, setup: &str) -> [Someone; 5] {
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

pub async fn wait_for_output(app: &Binary, who: &Someone, chat: &str) -> Value {
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

pub async fn audit_as(app: &Binary, who: &Someone, chat: &str) -> Vec<Value> {
    audit_where(app, who, &format!("session={chat}")).await
}

/// `/api/audit/export?{query}` as `who`.
pub async fn audit_where(app: &Binary, who: &Someone, query: &str) -> Vec<Value> {
    let text = reqwest::Client::new()
        .get(format!("{}/api/audit/export?{query}", app.base))
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

/// A WebSocket to `path` with `cookie` (a browser's, on the same origin).
pub async fn open_socket(app: &Binary, cookie: &str, path: &str) -> Result<Socket, String> {
    use tokio_tungstenite::{connect_async, tungstenite::client::IntoClientRequest};
    let url = format!("{}{path}", app.base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().map_err(|e| e.to_string())?;
    let cookie = cookie.parse().map_err(|e| format!("{e}"))?;
    request.headers_mut().insert("cookie", cookie);
    connect_async(request)
        .await
        .map(|(socket, _)| socket)
        .map_err(|e| e.to_string())
}
