//! The page's Leptos server functions (`POST /api/fn/{name}`): the verbs the page asks of the
//! server (decide an approval from the inbox, revoke a grant, invite someone, the passkey
//! ceremonies), behind the same edge as every other route.
//!
//! Whatever a caller sends, the answer is the API's: a refusal is a 4xx
//! `{"error": {"code", "message"}}` (the page's `FnError`) — a name that is no
//! function 404 `unknown_function`, a body over [`MAX_BODY`] 413 `body_too_large`, a body that
//! is not the function's arguments 400 `invalid_arguments`, and each function's own refusals
//! (an unknown id 404, a value it does not take 422, …) — never a 500 for what the caller got
//! wrong.

use axum::{
    body::Body,
    extract::{Request, State},
    http::StatusCode,
    response::{IntoResponse, Response},
};
use leptos::prelude::provide_context;

use super::{error::ApiError, request::read_body};
use crate::transport::state::AppState;

/// The largest body a server function takes: arguments and a passkey's credential are a few
/// KB; an edit of a long text argument stays well under this.
pub const MAX_BODY: usize = 1024 * 1024;

/// `POST /api/fn/{name}`: the function `name` with the app's state in its context, its body read
/// whole (at most [`MAX_BODY`]) before it is decoded.
pub async fn handle(State(state): State<AppState>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if !leptos::server_fn::axum::server_fn_paths().any(|(p, m)| p == path && m == method) {
        let shown: String = path.chars().take(100).collect();
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_function",
            format!("there is no server function {shown}"),
        )
        .into_response();
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    leptos_axum::handle_server_fns_with_context(move || provide_context(state.clone()), request)
        .await
        .into_response()
}

#[cfg(test)]
mod tests {
    use std::{net::SocketAddr, sync::Arc};

    use axum::{
        body::Body,
        http::{Request, StatusCode, header},
    };
    use http_body_util::BodyExt;
    use serde_json::{Value, json};
    use tower::ServiceExt;

    use crate::models::demo::DemoModel;
    use crate::{
        agent::{
            Runtime, RuntimeSettings,
            clock::{SequentialIds, SystemClock},
            store::MemoryStore,
            tools::ToolRegistry,
        },
        config::Config,
        server::{AppState, router},
    };

    const KEY: &str = "a-test-key-of-enough-length";

    /// A well-formed body for each server function: the table every registered function must
    /// be in (a new one fails [`every_server_function_answers_bad_input_with_a_4xx_and_a_code`]
    /// until its arguments are listed here). The ids name nothing that exists.
    const ARGUMENTS: [(&str, &str); 15] = [
        ("grants_panel", "{}"),
        ("revoke_grant", r#"{"id":"g-none"}"#),
        ("inbox_view", r#"{"since":null,"focus":"apv-none"}"#),
        (
            "decide_approval",
            r#"{"approval_id":"apv-none","approve":true,"reason":"no","step_up":null,"edit":[["amount","5"]]}"#,
        ),
        (
            "step_up_options",
            r#"{"approval_id":"apv-none","args":{"amount":5},"edit":null}"#,
        ),
        ("chat_news", r#"{"chat_id":"chat-none","known":null}"#),
        ("people_view", "{}"),
        ("invite_person", r#"{"name":"Ana","roles":"approver"}"#),
        (
            "set_person_roles",
            r#"{"person":"p-none","roles":"approver"}"#,
        ),
        ("remove_person", r#"{"person":"p-none"}"#),
        ("device_link", "{}"),
        (
            "passkey_register_begin",
            r#"{"token":"t-none","name":"Ana"}"#,
        ),
        ("passkey_register_finish", r#"{"credential":{"id":"x"}}"#),
        ("passkey_signin_begin", "{}"),
        (
            "passkey_signin_finish",
            r#"{"credential":{"id":"x"},"next":"/"}"#,
        ),
    ];

    /// `depth` arrays inside each other.
    fn deep_array(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    /// `depth` objects inside each other.
    fn deep_object(depth: usize) -> String {
        format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
    }

    /// A JSON string of `len` bytes' worth of `x`.
    fn huge_string(len: usize) -> String {
        format!("\"{}\"", "x".repeat(len))
    }

    /// Bodies no server function takes as its arguments, whatever they are (`true`), and one
    /// that a function without arguments may take: an object whose one key it does not know,
    /// nested 10,000 deep (skipped unread; any other function refuses it).
    fn malformed() -> Vec<(&'static str, Vec<u8>, bool)> {
        vec![
            ("an empty body", Vec::new(), true),
            ("broken JSON", b"{\"id\":".to_vec(), true),
            ("null", b"null".to_vec(), true),
            ("a number", b"42".to_vec(), true),
            ("a string", b"\"x\"".to_vec(), true),
            ("invalid UTF-8", vec![b'"', 0xff, 0xfe, b'"'], true),
            ("arrays 10,000 deep", deep_array(10_000).into_bytes(), true),
            ("a 300 KB string", huge_string(300_000).into_bytes(), true),
            (
                "a 2 MiB string",
                huge_string(2 * 1024 * 1024).into_bytes(),
                true,
            ),
            (
                "objects 10,000 deep",
                deep_object(10_000).into_bytes(),
                false,
            ),
        ]
    }

    /// Values that do not fit the field `was` held (a number field is never given a number:
    /// a long poll would wait for it).
    fn wrong_values(was: &Value) -> Vec<String> {
        let mut values = vec![
            "[]".to_owned(),
            "{}".to_owned(),
            "null".to_owned(),
            deep_array(10_000),
            deep_object(10_000),
            huge_string(300_000),
        ];
        if !was.is_string() {
            values.push("\"x\"".to_owned());
        }
        if was.is_string() || was.is_boolean() {
            values.push("-1.5e300".to_owned());
        }
        if !was.is_boolean() {
            values.push("true".to_owned());
        }
        values
    }

    /// Each field of `body` in turn given each wrong value, as JSON text.
    fn mutations(body: &str) -> Vec<(String, Vec<u8>)> {
        let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(body) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (name, was) in &fields {
            for wrong in wrong_values(was) {
                let mut parts: Vec<String> = Vec::new();
                for (other, value) in &fields {
                    let value = if other == name {
                        wrong.clone()
                    } else {
                        value.to_string()
                    };
                    parts.push(format!("{}:{value}", json!(other)));
                }
                let text = format!("{{{}}}", parts.join(","));
                let shown: String = wrong.chars().take(12).collect();
                out.push((format!("{name} = {shown}…"), text.into_bytes()));
            }
        }
        out
    }

    async fn app(env: &[(&str, &str)]) -> (axum::Router, AppState) {
        let mut vars: Vec<(String, String)> = vec![("COUNTERSIGN_IP_RATE".into(), "0".into())];
        vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let config = Config::resolve(move |k| {
            vars.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        })
        .expect("a valid configuration");
        let runtime = Runtime::builder(
            Arc::new(DemoModel::new(std::time::Duration::ZERO)),
            ToolRegistry::default(),
            Arc::new(SystemClock),
            Arc::new(SequentialIds::default()),
            Arc::new(MemoryStore::default()),
            RuntimeSettings::default(),
        );
        let addr: SocketAddr = "127.0.0.1:3000".parse().expect("an address");
        let state = AppState::with_runtime(config, runtime, addr)
            .await
            .expect("the state builds");
        (router(state.clone()), state)
    }

    /// `POST /api/fn/{name}` with `body`: the status and the body.
    async fn call(app: &axum::Router, name: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
        let request = Request::post(format!("/api/fn/{name}"))
            .header(header::HOST, "127.0.0.1:3000")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .header(header::AUTHORIZATION, format!("Bearer {KEY}"))
            .body(Body::from(body))
            .expect("a request");
        let response = app.clone().oneshot(request).await.expect("an answer");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes().to_vec())
            .unwrap_or_default();
        (status, body)
    }

    /// The `{"error": {"code", "message"}}` of a refusal, or why it is not one.
    fn refusal(body: &[u8]) -> Result<(String, String), String> {
        let text: String = String::from_utf8_lossy(body).chars().take(300).collect();
        let value: Value = serde_json::from_slice(body).map_err(|_| format!("not JSON: {text}"))?;
        match (
            value["error"]["code"].as_str(),
            value["error"]["message"].as_str(),
        ) {
            (Some(code), Some(message)) if !code.is_empty() && !message.is_empty() => {
                Ok((code.to_owned(), message.to_owned()))
            }
            _ => Err(format!("not {{error: {{code, message}}}}: {text}")),
        }
    }

    /// Every registered server function, called with bodies that are not its arguments (empty,
    /// broken, the wrong type, nested 10,000 deep, huge) and with each of its arguments made
    /// wrong in turn, answers a 4xx `{"error": {"code", "message"}}` — never a 500 — on a server
    /// without sign-in and on one with passkeys (called with the API key).
    #[tokio::test]
    async fn every_server_function_answers_bad_input_with_a_4xx_and_a_code() {
        let registered: Vec<String> = leptos::server_fn::axum::server_fn_paths()
            .map(|(path, _)| path.to_owned())
            .collect();
        for (name, _) in ARGUMENTS {
            assert!(
                registered.contains(&format!("/api/fn/{name}")),
                "{name} is not registered: {registered:?}"
            );
        }
        for sign_in in ["open", "passkeys"] {
            let env: Vec<(&str, &str)> = if sign_in == "open" {
                vec![]
            } else {
                vec![
                    ("COUNTERSIGN_SIGN_IN", "passkeys"),
                    ("COUNTERSIGN_API_KEY", KEY),
                ]
            };
            let (app, _state) = app(&env).await;
            let mut failures = Vec::new();
            for path in &registered {
                let name = path.trim_start_matches("/api/fn/");
                let Some((_, arguments)) = ARGUMENTS.iter().find(|(n, _)| *n == name) else {
                    failures.push(format!("{name}: not in ARGUMENTS; list a well-formed body"));
                    continue;
                };
                let cases = malformed()
                    .into_iter()
                    .map(|(what, body, must_refuse)| (what.to_owned(), body, must_refuse))
                    .chain(
                        mutations(arguments)
                            .into_iter()
                            .map(|(what, body)| (what, body, false)),
                    );
                for (what, body, must_refuse) in cases {
                    let (status, answer) = call(&app, name, body).await;
                    let case = format!("{sign_in}: {name} with {what}: {status}");
                    if status.is_server_error() {
                        let shown: String =
                            String::from_utf8_lossy(&answer).chars().take(300).collect();
                        failures.push(format!("{case}: {shown}"));
                    } else if status.is_client_error() {
                        if let Err(why) = refusal(&answer) {
                            failures.push(format!("{case}: {why}"));
                        }
                    } else if must_refuse {
                        failures.push(format!("{case}: accepted"));
                    }
                }
            }
            assert!(
                failures.is_empty(),
                "{} failures:\n{}",
                failures.len(),
                failures.join("\n")
            );
        }
    }

    /// A malformed body is a 400 `invalid_arguments`, a body over the functions' limit a 413
    /// `body_too_large`, a function that does not exist a 404, and revoking a grant that does
    /// not exist a 404 `grant_not_found`.
    #[tokio::test]
    async fn malformed_unknown_and_too_large_have_their_own_codes() {
        let (app, _state) = app(&[]).await;
        let (status, body) = call(&app, "revoke_grant", b"{\"id\":7}".to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(refusal(&body).unwrap().0, "invalid_arguments");
        let (status, body) = call(&app, "revoke_grant", deep_array(10_000).into_bytes()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(refusal(&body).unwrap().0, "invalid_arguments");
        let (status, body) = call(&app, "revoke_grant", b"{\"id\":\"g-none\"}".to_vec()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(refusal(&body).unwrap().0, "grant_not_found");
        let (status, body) = call(
            &app,
            "revoke_grant",
            huge_string(2 * 1024 * 1024).into_bytes(),
        )
        .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(refusal(&body).unwrap().0, "body_too_large");
        let (status, body) = call(&app, "no_such_function", b"{}".to_vec()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(refusal(&body).unwrap().0, "unknown_function");
    }
}
