//! The edge: what stands between the network and the routes (ADR 0016). In the order a request
//! meets it:
//!
//! 1. **Connections** (`server::accept`, [`connections`]): caps per client address and in all,
//!    idle and header timeouts, a write deadline on every connection, a minimum pace for bodies.
//! 2. **Host** ([`hosts`], middleware [`check_host`]): a request for a name that is not the
//!    server's own gets 421 — DNS rebinding ends here, key or no key.
//! 3. **CORS** ([`cors`]): preflights are answered before authentication; only the origins of
//!    `COUNTERSIGN_ALLOWED_ORIGINS` get `Access-Control-Allow-*`.
//! 4. **Guard** (middleware [`guard`]):
//!    * *authentication*, when `COUNTERSIGN_API_KEY` is set ([`auth`]): every route but
//!      `/healthz`, `/readyz`, the site's files and the sign-in pages needs the key (`Authorization: Bearer`,
//!      `X-API-Key`), a sign-in session cookie, or for a WebSocket upgrade a single-use ticket;
//!      failed attempts are throttled per address before any credential is checked again;
//!    * *origin* (CSRF): a browser request that changes state or opens a WebSocket must come
//!      from the server's own origin or an allowed one;
//!    * *rate limits* on what costs work (POST and upgrades) per address, and per chat for
//!      `POST /api/chat` ([`check_chat_rate`]);
//!    * *bodies in flight* per address ([`inflight`]): a request's body is read only when its
//!      address has room for it, then at a minimum pace ([`connections::MinRateBody`]).
//!
//! TLS is the reverse proxy's job; behind one, `COUNTERSIGN_ALLOWED_HOSTS` names the public host.

pub mod auth;
pub mod connections;
pub mod cors;
pub mod hosts;
pub mod inflight;
pub mod limits;
pub mod signin;

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    extract::{ConnectInfo, FromRequestParts, Request, State},
    http::{HeaderMap, Method, StatusCode, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use self::{
    auth::{ApiKey, BrowserSessionError, Failures, SignIns, Tickets},
    connections::{BodyPace, ConnectionLimits, MinRateBody},
    hosts::HostAllowlist,
    inflight::BodyBudget,
    limits::{RateLimits, TooMany, address_key},
};
use super::error::ApiError;
use crate::{
    agent::people::{Principal, SignInMode},
    agent::{Transport, store::Actor},
    config::EdgeSettings,
    transport::state::AppState,
};

/// What the edge keeps between requests.
pub struct Edge {
    /// How people sign in (ADR 0024).
    pub mode: SignInMode,
    /// The origin people's browsers use (links in the inbox, passkeys' relying party):
    /// `COUNTERSIGN_PUBLIC_URL`, else `http://localhost:<port>` of the address it listens on.
    pub public_url: String,
    pub hosts: HostAllowlist,
    pub by_address: RateLimits,
    pub by_chat: RateLimits,
    /// The API key, when one is configured.
    pub key: Option<ApiKey>,
    pub failures: Failures,
    /// Sign-in sessions (loaded from the store on first use, or at start by `server::serve`).
    pub signins: tokio::sync::OnceCell<SignIns>,
    signin_lifetime: Duration,
    pub tickets: Tickets,
    pub connections: Arc<ConnectionLimits>,
    pub pace: BodyPace,
    /// Request-body bytes in flight per address (`None`: no cap).
    pub bodies: Option<Arc<BodyBudget>>,
    /// The largest request body (`COUNTERSIGN_MAX_BODY_BYTES`).
    max_body_bytes: usize,
    /// Cancelled when the server shuts down: open WebSockets close with 1001.
    pub shutdown: CancellationToken,
    /// Cancelled when shutdown begins (before requests in flight finish): `/readyz` answers
    /// 503 from then on, so a load balancer stops sending this instance new work.
    pub draining: CancellationToken,
    /// The WebSockets' tasks, which shutdown waits for.
    pub sockets: TaskTracker,
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge")
            .field("hosts", &self.hosts)
            .field("key", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl Edge {
    /// The edge for a server listening on `addr` with `http`'s settings.
    pub fn new(addr: SocketAddr, http: &EdgeSettings) -> Arc<Self> {
        Arc::new(Edge {
            mode: http.sign_in,
            public_url: http
                .public_url
                .clone()
                .unwrap_or_else(|| format!("http://localhost:{}", addr.port())),
            hosts: HostAllowlist::new(addr, &http.allowed_hosts),
            by_address: RateLimits::new(http.ip_rate),
            by_chat: RateLimits::new(http.chat_rate),
            key: http.api_key.as_deref().map(ApiKey::new),
            failures: Failures::new(http.auth_failure_rate),
            signins: tokio::sync::OnceCell::new(),
            signin_lifetime: http.signin_lifetime,
            tickets: Tickets::default(),
            connections: ConnectionLimits::new(
                http.max_connections,
                http.max_connections_per_address,
            ),
            pace: BodyPace {
                grace: http.body_grace,
                min_rate: http.body_min_rate,
            },
            bodies: BodyBudget::new(http.body_bytes_per_address),
            max_body_bytes: http.max_body_bytes,
            shutdown: CancellationToken::new(),
            draining: CancellationToken::new(),
            sockets: TaskTracker::new(),
        })
    }

    /// The sign-in sessions (`None` when nobody signs in: no key, no passkeys), loading them
    /// from the store the first time.
    pub async fn signins(&self, state: &AppState) -> Result<Option<&SignIns>, ApiError> {
        if self.mode == SignInMode::Open {
            return Ok(None);
        }
        let store = state.signin_store.clone();
        let now = state.runtime.clock.now_ms();
        self.signins
            .get_or_try_init(|| SignIns::load(store, self.key.clone(), self.signin_lifetime, now))
            .await
            .map(Some)
            .map_err(ApiError::from)
    }
}

/// Who is calling: the address the connection came from, the user agent, and the principal the
/// guard found (none on a public path without a valid sign-in) with the sign-in session it
/// came with (none for the API key in a header, or without sign-in).
#[derive(Debug, Clone, Default)]
pub struct Client {
    pub address: Option<SocketAddr>,
    pub user_agent: Option<String>,
    pub principal: Option<Principal>,
    pub signin: Option<String>,
}

/// The sign-in session a request came with (its id), as the guard found it: what a socket or
/// stream it opens ends with ([`hold`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInId(pub String);

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
            principal: parts.extensions.get::<Principal>().cloned(),
            signin: parts.extensions.get::<SignInId>().map(|s| s.0.clone()),
        }
    }

    /// Who calls as the people directory has them now (a socket re-reads it at every frame):
    /// `None` once they were removed.
    pub fn principal_now(&self, people: &crate::agent::people::People) -> Option<Principal> {
        match self.principal() {
            Principal::Person { id, passkey, .. } => people
                .active(&id)
                .map(|person| Principal::of(&person, passkey)),
            local => Some(local),
        }
    }

    /// Who calls: the guard's principal (the local person on a server without sign-in).
    pub fn principal(&self) -> Principal {
        self.principal.clone().unwrap_or_else(Principal::local)
    }

    /// The audit log's view of this client on `transport`.
    pub fn actor(&self, transport: Transport) -> Actor {
        actor_of(
            &self.principal(),
            transport.as_str(),
            self.address,
            self.user_agent.clone(),
        )
    }
}

/// The audit log's view of `principal` calling over `transport` from `address`.
pub fn actor_of(
    principal: &Principal,
    transport: &str,
    address: Option<SocketAddr>,
    user_agent: Option<String>,
) -> Actor {
    let person = principal.is_person();
    Actor {
        transport: transport.to_owned(),
        address: address.map(|a| a.to_string()),
        user_agent,
        person: person.then(|| principal.id().to_owned()),
        name: person.then(|| principal.name().to_owned()),
        passkey: principal.passkey().map(str::to_owned),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Client::from_parts(parts))
    }
}

/// A hold for a socket or stream `client` opens: it ends (and the socket closes, the stream
/// stops) when their person is removed or their sign-in session ends — also when that happened
/// between the guard letting the request in and now.
pub fn hold(state: &AppState, client: &Client) -> crate::agent::people::Hold {
    let hold = state
        .runtime
        .people()
        .hold(&client.principal(), client.signin.as_deref());
    if let (Some(id), Some(signins)) = (&client.signin, state.edge.signins.get())
        && signins.is_ended(id)
    {
        hold.end(crate::agent::people::Ending::SignedOut);
    }
    hold
}

/// Paths anyone may fetch, signed in or not: the sign-in pages and their passkey ceremonies,
/// one-time links, the site's files.
fn is_public(path: &str) -> bool {
    path == "/healthz"
        || path == "/readyz"
        || path == "/signin"
        || path == "/signout"
        || path == "/favicon.ico"
        || path == "/favicon.svg"
        || path == "/robots.txt"
        || path == "/passkey.js"
        || path == crate::transport::audit::KEY_PATH
        || path.starts_with("/pkg/")
        || path.starts_with("/bgm/")
        || path.starts_with("/welcome/")
        || crate::transport::people::PUBLIC_FUNCTIONS.contains(&path)
}

/// Paths that are API routes (401 instead of a redirect to the sign-in page).
fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || path == "/stream" || path == "/live" || path == "/metrics"
}

/// Middleware: refuses a request for a name that is not the server's own (421).
pub async fn check_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{fffd}"))
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if let Some(host) = host
        && !state.edge.hosts.allows(host)
    {
        tracing::warn!(host, path = %request.uri().path(), "request for a name this server does not answer to");
        let shown: String = host.chars().take(100).collect();
        return ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            format!(
                "This server does not answer to the name {shown:?}. It answers to {}; set \
                 COUNTERSIGN_ALLOWED_HOSTS to add a name (behind a reverse proxy: its public name).",
                state.edge.hosts.describe()
            ),
        )
        .into_response();
    }
    next.run(request).await
}

/// What a request presents to prove it may call.
#[derive(Debug, PartialEq, Eq)]
enum Credential<'a> {
    None,
    Key(&'a str),
    BrowserSession(&'a str),
    Ticket(String),
}

fn credential<'a>(headers: &'a HeaderMap, query: Option<&str>, upgrade: bool) -> Credential<'a> {
    let header_key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()));
    if let Some(key) = header_key {
        return Credential::Key(key);
    }
    if let Some(token) = signin::session_cookie(headers) {
        return Credential::BrowserSession(token);
    }
    if upgrade
        && let Some(ticket) = query.and_then(|q| crate::common::url::query_param(q, "ticket"))
    {
        return Credential::Ticket(ticket);
    }
    Credential::None
}

/// The middleware: authentication (who calls: the [`Principal`] every handler finds in the
/// request's extensions), origin, rate limits, and the body's pace.
pub async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let now = Instant::now();
    let path = request.uri().path().to_owned();
    let upgrade = crate::transport::ws::is_upgrade(request.headers());
    let address = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let edge = &state.edge;
    let principal = if edge.mode == SignInMode::Open {
        Some(Principal::local())
    } else {
        let presented = credential(request.headers(), request.uri().query(), upgrade);
        match authenticate(&state, &presented, &path, address, now).await {
            Ok(Some((principal, signin))) => {
                if let Some(signin) = signin {
                    request.extensions_mut().insert(SignInId(signin));
                }
                Some(principal)
            }
            Ok(None) => None,
            Err(refused) => return refused,
        }
    };
    if let Some(principal) = principal {
        request.extensions_mut().insert(principal);
    }
    let headers = request.headers();
    let changes_state = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if changes_state || upgrade {
        if let Err(e) = check_origin(headers, &state.edge_settings.allowed_origins) {
            return e.into_response();
        }
        let client = address_key(address);
        if let Err(wait) = edge.by_address.take(&client, now) {
            tracing::warn!(%client, %path, "rate limited (address)");
            return TooMany {
                wait,
                what: "from this address",
            }
            .into_response();
        }
    }
    if http_body::Body::is_end_stream(request.body()) {
        return next.run(request).await;
    }
    // The body is read once its address has room for it, and held until the answer begins.
    let _in_flight = match &edge.bodies {
        Some(budget) => {
            let declared = http_body::Body::size_hint(request.body()).exact();
            let bytes = declared.map_or(edge.max_body_bytes, |n| {
                usize::try_from(n).map_or(edge.max_body_bytes, |n| n.min(edge.max_body_bytes))
            });
            Some(budget.reserve(&address_key(address), bytes).await)
        }
        None => None,
    };
    let pace = edge.pace;
    let request = request.map(|body| axum::body::Body::new(MinRateBody::new(body, pace)));
    next.run(request).await
}

/// Who `presented` proves the caller is, with the sign-in session it came with (`None` on a
/// public path without a valid credential), or the response that refuses the request.
///
/// Only a wrong API key counts as a failed attempt against the address (and only the key waits
/// while the address has none left): it is the one credential that can be guessed. A cookie that
/// no longer signs anyone in is [`SignedOut`], a used or unknown ticket plainly unauthorized —
/// neither throttles the address, so a signed-out page that keeps asking locks nobody out.
async fn authenticate(
    state: &AppState,
    presented: &Credential<'_>,
    path: &str,
    address: Option<SocketAddr>,
    now: Instant,
) -> Result<Option<(Principal, Option<String>)>, Response> {
    let edge = &state.edge;
    let public = is_public(path);
    match presented {
        Credential::None if public => Ok(None),
        Credential::None => Err(unauthorized(path, edge.mode)),
        Credential::Key(given) => {
            let client = address_key(address);
            if !public && let Err(wait) = edge.failures.check(&client, now) {
                tracing::warn!(%client, %path, "refused: too many wrong keys");
                return Err(TooMany {
                    wait,
                    what: "after wrong keys from this address",
                }
                .into_response());
            }
            match edge.key.as_ref().filter(|key| key.matches(given)) {
                Some(_) => Ok(Some((Principal::Local { via_key: true }, None))),
                None if public => Ok(None),
                None => {
                    edge.failures.record(&client, now);
                    tracing::warn!(%client, %path, "a wrong key");
                    Err(unauthorized(path, edge.mode))
                }
            }
        }
        Credential::BrowserSession(token) => match session_principal(state, token).await {
            Err(e) => Err(e.into_response()),
            Ok(Ok((principal, signin))) => Ok(Some((principal, Some(signin)))),
            // A stale cookie on a sign-in page is no attempt at anything.
            Ok(Err(_)) if public => Ok(None),
            Ok(Err(why)) => {
                tracing::debug!(%path, why = why.as_str(), "signed out");
                Err(signed_out(path, why))
            }
        },
        Credential::Ticket(ticket) => {
            // A ticket of someone removed, or of a sign-in that ended since, opens nothing.
            let ended = |signin: &Option<String>| match (signin, edge.signins.get()) {
                (Some(id), Some(signins)) => signins.is_ended(id),
                _ => false,
            };
            let redeemed = edge
                .tickets
                .redeem(ticket, now)
                .filter(|(principal, signin)| {
                    let active = match principal {
                        Principal::Person { id, .. } => state.runtime.people().active(id).is_some(),
                        Principal::Local { .. } => true,
                    };
                    active && !ended(signin)
                });
            match redeemed {
                Some(principal) => Ok(Some(principal)),
                None if public => Ok(None),
                None => {
                    tracing::debug!(%path, "a WebSocket ticket that is used, expired or unknown");
                    Err(unauthorized(path, edge.mode))
                }
            }
        }
    }
}

/// Why a session cookie no longer signs anyone in: what the page is told, once, before it goes
/// to the sign-in page (which says it again, from the same cookie).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignedOut {
    /// The person was removed (or their session ended after they were).
    Removed,
    /// The session was ended: signed out.
    Ended,
    Expired,
    /// This server never signed it, or it no longer verifies (a new API key, another database).
    Invalid,
}

impl SignedOut {
    pub fn as_str(self) -> &'static str {
        match self {
            SignedOut::Removed => "removed",
            SignedOut::Ended => "ended",
            SignedOut::Expired => "expired",
            SignedOut::Invalid => "invalid",
        }
    }

    /// What the person reads.
    pub fn message(self) -> &'static str {
        match self {
            SignedOut::Removed => {
                "You were removed from this server: you can no longer sign in here. Ask an admin \
                 for a new invitation if that is a mistake."
            }
            SignedOut::Ended => "You were signed out. Sign in again to go on.",
            SignedOut::Expired => "Your sign-in expired. Sign in again to go on.",
            SignedOut::Invalid => {
                "Your sign-in is no longer valid on this server (its key or database changed). \
                 Sign in again to go on."
            }
        }
    }
}

/// Whom the session cookie `token` signs in now (with the sign-in session's id), or why it
/// signs nobody in.
pub async fn session_principal(
    state: &AppState,
    token: &str,
) -> Result<Result<(Principal, String), SignedOut>, ApiError> {
    let Some(signins) = state.edge.signins(state).await? else {
        return Ok(Err(SignedOut::Invalid));
    };
    let people = state.runtime.people();
    let removed = |person: &str| people.active(person).is_none();
    Ok(match signins.verify(token, state.runtime.clock.now_ms()) {
        Ok(session) => match session.person {
            None => Ok((Principal::Local { via_key: true }, session.id)),
            // Someone removed since they signed in is signed out.
            Some(person) => state
                .runtime
                .active_person(&person)
                .await
                .map(|p| (Principal::of(&p, session.passkey), session.id))
                .ok_or(SignedOut::Removed),
        },
        Err(e) => {
            // An ended or expired session of someone removed since says that they were.
            let of_removed = signins
                .open(token)
                .ok()
                .and_then(|s| s.person)
                .is_some_and(|person| removed(&person));
            Err(match e {
                _ if of_removed => SignedOut::Removed,
                BrowserSessionError::Ended => SignedOut::Ended,
                BrowserSessionError::Expired => SignedOut::Expired,
                BrowserSessionError::Malformed | BrowserSessionError::BadSignature => {
                    SignedOut::Invalid
                }
            })
        }
    })
}

/// 401 `signed_out` for the API (the page goes to the sign-in page, which says why), the
/// sign-in page for a page.
fn signed_out(path: &str, why: SignedOut) -> Response {
    if is_api(path) {
        ApiError::new(StatusCode::UNAUTHORIZED, "signed_out", why.message()).into_response()
    } else {
        Redirect::to(&crate::common::url::signin_url(path)).into_response()
    }
}

/// 401 for the API, the sign-in page for a page.
fn unauthorized(path: &str, mode: SignInMode) -> Response {
    if is_api(path) {
        let message = if mode == SignInMode::Passkeys {
            "sign in with your passkey at /signin (scripts: the API key, as `Authorization: \
             Bearer <key>` or `X-API-Key`; a browser's WebSocket on another origin: `?ticket=` \
             from POST /api/live/ticket)"
        } else {
            "this server needs its API key: send `Authorization: Bearer <key>` or `X-API-Key`, \
             or sign in at /signin (a browser's WebSocket: sign in, or add `?ticket=` from \
             POST /api/live/ticket)"
        };
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response()
    } else {
        Redirect::to(&crate::common::url::signin_url(path)).into_response()
    }
}

/// Applies the per-chat limit (called by `POST /api/chat` once it knows the chat id).
pub fn check_chat_rate(state: &AppState, chat_id: &str) -> Result<(), TooMany> {
    state
        .edge
        .by_chat
        .take(chat_id, Instant::now())
        .map_err(|wait| {
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

/// Headers from name-value pairs (the edge's unit tests).
#[cfg(test)]
pub(crate) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, axum::http::HeaderValue::from_str(v).unwrap());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn credentials_are_read_from_headers_the_cookie_or_an_upgrades_ticket() {
        let key = "a-key-of-sixteen-or-more";
        assert_eq!(
            credential(
                &headers(&[("authorization", &format!("Bearer {key}"))]),
                None,
                false
            ),
            Credential::Key(key)
        );
        assert_eq!(
            credential(&headers(&[("x-api-key", key)]), None, false),
            Credential::Key(key)
        );
        assert_eq!(
            credential(
                &headers(&[("cookie", "a=b; countersign_session=v1.x.1.y")]),
                None,
                false
            ),
            Credential::BrowserSession("v1.x.1.y")
        );
        assert_eq!(
            credential(
                &headers(&[("cookie", "__Host-countersign_session=t")]),
                None,
                false
            ),
            Credential::BrowserSession("t")
        );
        assert_eq!(
            credential(&HeaderMap::new(), Some("ticket=abc&x=1"), true),
            Credential::Ticket("abc".into())
        );
        assert_eq!(
            credential(&HeaderMap::new(), Some("ticket=abc"), false),
            Credential::None,
            "a ticket only opens a WebSocket"
        );
        assert_eq!(credential(&HeaderMap::new(), None, true), Credential::None);
    }
}
