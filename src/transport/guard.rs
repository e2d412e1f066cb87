//! The edge's guards, one middleware in front of every route: who may call, from where, how often.
//!
//! In order:
//!
//! 1. **Authentication** (only when `COUNTERSIGN_API_KEY` is set). Every route except
//!    `/healthz`, the static site files and the sign-in page needs the key: programmatic clients
//!    send `Authorization: Bearer <key>` or `X-API-Key: <key>` (the seed system's header); a
//!    person signs in once at `/signin` and gets an `HttpOnly`, `SameSite=Strict` cookie holding
//!    a digest of the key (never the key), which the page's own requests and WebSocket carry.
//!    Pages redirect to `/signin`; API routes answer 401.
//! 2. **Origin** (CSRF). A browser request that changes state (any method but GET/HEAD/OPTIONS)
//!    or opens a WebSocket must come from the server's own origin or one listed in
//!    `COUNTERSIGN_ALLOWED_ORIGINS`; otherwise 403. Non-browser clients send no `Origin` and no
//!    `Sec-Fetch-Site: cross-site` and are let through (they are not a CSRF vector; the API key is
//!    what stops them).
//! 3. **Rate limits** on what costs work (POST and WebSocket upgrades): per client address
//!    (`COUNTERSIGN_IP_RATE` per minute) and, for `POST /api/chat`, per chat
//!    (`COUNTERSIGN_CHAT_RATE` per minute); token buckets that allow a minute's worth at once.
//!    Over the limit: 429 with `Retry-After`. `0` turns a limit off.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    extract::{ConnectInfo, FromRequestParts, Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts},
    middleware::Next,
    response::{Html, IntoResponse, Redirect, Response},
};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use crate::{agent::store::Actor, server::AppState};

/// The sign-in cookie's name.
pub const SESSION_COOKIE: &str = "countersign_auth";

/// Who is calling: the address the connection came from and the user agent.
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub address: Option<SocketAddr>,
    pub user_agent: Option<String>,
}

impl Client {
    pub fn from_parts(parts: &Parts) -> Self {
        Client {
            address: parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0),
            user_agent: parts
                .headers
                .get(header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(|s| s.chars().take(200).collect()),
        }
    }

    /// The audit log's view of this client on `transport`.
    pub fn actor(&self, transport: &str) -> Actor {
        Actor {
            transport: transport.to_owned(),
            address: self.address.map(|a| a.to_string()),
            user_agent: self.user_agent.clone(),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Client::from_parts(parts))
    }
}

/// Token buckets by key (client address, chat id).
#[derive(Debug)]
pub struct RateLimits {
    per_minute: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl RateLimits {
    /// `per_minute` requests per key and minute, a minute's worth at once; 0 = unlimited.
    pub fn new(per_minute: u32) -> Self {
        RateLimits {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key`; `Err(wait)` when there is none.
    pub fn take(&self, key: &str) -> Result<(), Duration> {
        self.take_at(key, Instant::now())
    }

    fn take_at(&self, key: &str, now: Instant) -> Result<(), Duration> {
        if self.per_minute == 0 {
            return Ok(());
        }
        let capacity = f64::from(self.per_minute);
        let per_sec = capacity / 60.0;
        let mut buckets = crate::agent::store::lock(&self.buckets);
        if buckets.len() > 10_000 {
            // Forget keys whose bucket has refilled: they are indistinguishable from new ones.
            buckets.retain(|_, b| {
                b.tokens + now.duration_since(b.last).as_secs_f64() * per_sec < capacity
            });
        }
        let bucket = buckets.entry(key.to_owned()).or_insert(Bucket {
            tokens: capacity,
            last: now,
        });
        bucket.tokens =
            (bucket.tokens + now.duration_since(bucket.last).as_secs_f64() * per_sec).min(capacity);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_sec))
        }
    }
}

/// The guards' shared state.
#[derive(Debug)]
pub struct Guards {
    pub by_address: RateLimits,
    pub by_chat: RateLimits,
}

impl Guards {
    pub fn new(ip_per_minute: u32, chat_per_minute: u32) -> Arc<Self> {
        Arc::new(Guards {
            by_address: RateLimits::new(ip_per_minute),
            by_chat: RateLimits::new(chat_per_minute),
        })
    }
}

/// A 429 with `Retry-After`.
#[derive(Debug, Clone, Copy)]
pub struct TooMany {
    pub wait: Duration,
    pub what: &'static str,
}

impl IntoResponse for TooMany {
    fn into_response(self) -> Response {
        let secs = self.wait.as_secs().max(1);
        let mut response = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!("too many requests {}; retry in {secs} s", self.what),
        )
        .into_response();
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        response
    }
}

/// Paths anyone may fetch, signed in or not.
fn is_public(path: &str) -> bool {
    path == "/healthz"
        || path == "/signin"
        || path == "/favicon.ico"
        || path == "/favicon.svg"
        || path == "/robots.txt"
        || path.starts_with("/pkg/")
        || path.starts_with("/bgm/")
}

/// Paths that are API routes (401 instead of a redirect to the sign-in page).
fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || path == "/stream" || path == "/live"
}

/// The middleware: authentication, origin, rate limits.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let headers = request.headers();
    if let Some(key) = &state.http.api_key
        && !is_public(&path)
        && !authenticated(headers, key)
    {
        return if is_api(&path) {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs its API key: send `Authorization: Bearer <key>` or `X-API-Key`, \
                 or sign in at /signin",
            )
            .into_response()
        } else {
            Redirect::to(&format!("/signin?next={}", encode_component(&path))).into_response()
        };
    }
    let is_upgrade = headers
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let changes_state = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if (changes_state || is_upgrade)
        && let Err(e) = check_origin(headers, &state.http.allowed_origins)
    {
        return e.into_response();
    }
    if changes_state || is_upgrade {
        let client = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_else(|| "local".into());
        if let Err(wait) = state.guards.by_address.take(&client) {
            tracing::warn!(%client, %path, "rate limited (address)");
            return TooMany {
                wait,
                what: "from this address",
            }
            .into_response();
        }
    }
    next.run(request).await
}

/// Applies the per-chat limit (called by `POST /api/chat` once it knows the chat id).
pub fn check_chat_rate(state: &AppState, chat_id: &str) -> Result<(), TooMany> {
    state.guards.by_chat.take(chat_id).map_err(|wait| {
        tracing::warn!(chat = %chat_id, "rate limited (chat)");
        TooMany {
            wait,
            what: "for this chat",
        }
    })
}

/// Same-origin or allow-listed browsers only; non-browser clients pass.
pub fn check_origin(headers: &HeaderMap, allowed: &[String]) -> Result<(), ApiError> {
    let forbidden = |from: &str| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            format!("requests from {from} are not allowed"),
        )
    };
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        // No Origin: a non-browser client, or an old browser's same-origin GET. A browser that
        // says the request is cross-site is refused anyway.
        let cross_site = headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes() == b"cross-site");
        return if cross_site {
            Err(forbidden("another site"))
        } else {
            Ok(())
        };
    };
    let origin = origin.trim_end_matches('/');
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let same_origin = origin
        .split_once("://")
        .is_some_and(|(_, rest)| !host.is_empty() && rest.eq_ignore_ascii_case(host));
    if same_origin || allowed.iter().any(|a| a.eq_ignore_ascii_case(origin)) {
        Ok(())
    } else {
        Err(forbidden(origin))
    }
}

/// What the sign-in cookie holds: a digest of the key, so the cookie never carries the key.
pub fn session_token(key: &str) -> String {
    let hash = Sha256::digest(format!("countersign-signin\0{key}").as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares without an early exit, so the time taken does not reveal how much matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authenticated(headers: &HeaderMap, key: &str) -> bool {
    let header_key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()));
    if let Some(given) = header_key {
        return constant_time_eq(given.trim().as_bytes(), key.as_bytes());
    }
    let token = session_token(key);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .any(|(name, value)| {
            name == SESSION_COOKIE && constant_time_eq(value.as_bytes(), token.as_bytes())
        })
}

fn encode_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Only local paths are followed after signing in (no open redirect).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n.to_owned(),
        _ => "/".to_owned(),
    }
}

#[derive(Debug, serde::Deserialize)]
pub struct SignInQuery {
    next: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
pub struct SignInForm {
    key: String,
    next: Option<String>,
}

/// `GET /signin`: the key form (plain HTML: it works before the app's code has loaded).
pub async fn signin_page(
    State(state): State<AppState>,
    axum::extract::Query(query): axum::extract::Query<SignInQuery>,
) -> Response {
    if state.http.api_key.is_none() {
        return Redirect::to("/").into_response();
    }
    signin_html(&state, &safe_next(query.next.as_deref()), None).into_response()
}

/// `POST /signin`: checks the key, sets the cookie, goes on.
pub async fn signin_submit(
    State(state): State<AppState>,
    axum::Form(form): axum::Form<SignInForm>,
) -> Response {
    let next = safe_next(form.next.as_deref());
    let Some(key) = &state.http.api_key else {
        return Redirect::to(&next).into_response();
    };
    if !constant_time_eq(form.key.trim().as_bytes(), key.as_bytes()) {
        tracing::warn!("sign-in with a wrong key");
        let mut response =
            signin_html(&state, &next, Some("That key is not right.")).into_response();
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        return response;
    }
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age=2592000",
        session_token(key)
    );
    let mut response = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn signin_html(state: &AppState, next: &str, error: Option<&str>) -> Html<String> {
    let error = error
        .map(|e| format!("<p class=\"signin-error\" role=\"alert\">{}</p>", escape(e)))
        .unwrap_or_default();
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Sign in · Countersign</title><link rel=\"stylesheet\" href=\"{css}\">\
         <link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">\
         </head><body><main class=\"signin\"><h1>Countersign</h1>\
         <p>This server is protected by a key. Ask whoever runs it.</p>{error}\
         <form method=\"post\" action=\"/signin\">\
         <label for=\"key\">Key</label>\
         <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"current-password\" required autofocus>\
         <input type=\"hidden\" name=\"next\" value=\"{next}\">\
         <button type=\"submit\">Sign in</button></form></main></body></html>",
        next = escape(next),
        css = escape(&state.site.css_href()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn origins_same_allowed_or_absent_pass_others_do_not() {
        let host = ("host", "127.0.0.1:3000");
        assert!(check_origin(&headers(&[host]), &[]).is_ok());
        assert!(check_origin(&headers(&[host, ("origin", "http://127.0.0.1:3000")]), &[]).is_ok());
        let evil = headers(&[host, ("origin", "https://evil.example")]);
        assert_eq!(
            check_origin(&evil, &[]).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        assert!(check_origin(&evil, &["https://evil.example".into()]).is_ok());
        let cross = headers(&[host, ("sec-fetch-site", "cross-site")]);
        assert!(check_origin(&cross, &[]).is_err());
        // A look-alike host is not the same origin.
        let lookalike = headers(&[host, ("origin", "http://127.0.0.1:3000.evil.example")]);
        assert!(check_origin(&lookalike, &[]).is_err());
    }

    #[test]
    fn the_key_is_accepted_from_either_header_or_the_signin_cookie() {
        let key = "s3cret";
        assert!(authenticated(
            &headers(&[("authorization", "Bearer s3cret")]),
            key
        ));
        assert!(authenticated(&headers(&[("x-api-key", "s3cret")]), key));
        let cookie = format!("a=b; {SESSION_COOKIE}={}", session_token(key));
        assert!(authenticated(&headers(&[("cookie", &cookie)]), key));
        assert!(!authenticated(
            &headers(&[("authorization", "Bearer nope")]),
            key
        ));
        assert!(!authenticated(
            &headers(&[("cookie", "countersign_auth=s3cret")]),
            key
        ));
        assert!(!authenticated(&HeaderMap::new(), key));
        assert!(!session_token(key).contains(key));
    }

    #[test]
    fn buckets_allow_a_minute_at_once_then_refill() {
        let limits = RateLimits::new(3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limits.take_at("a", t0).is_ok());
        }
        let wait = limits.take_at("a", t0).unwrap_err();
        assert!(
            wait > Duration::from_secs(19) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert!(limits.take_at("b", t0).is_ok(), "keys are independent");
        assert!(limits.take_at("a", t0 + Duration::from_secs(20)).is_ok());
        assert!(RateLimits::new(0).take_at("x", t0).is_ok());
    }

    #[test]
    fn only_local_paths_are_followed_after_signing_in() {
        assert_eq!(safe_next(Some("/audit?x=1")), "/audit?x=1");
        assert_eq!(safe_next(Some("//evil.example")), "/");
        assert_eq!(safe_next(Some("https://evil.example")), "/");
        assert_eq!(safe_next(Some("/\\evil")), "/");
        assert_eq!(safe_next(None), "/");
        assert_eq!(encode_component("/a b?c"), "/a%20b%3Fc");
    }
}
