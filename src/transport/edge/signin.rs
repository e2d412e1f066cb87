//! Signing in and out with the API key, and WebSocket tickets.
//!
//! * `GET /signin`: the key form (plain HTML: it works before the app's code has loaded), or,
//!   with a valid session, a "signed in" page with a sign-out button.
//! * `POST /signin`: checks the key (throttled like every other attempt), starts a session and
//!   sets its cookie: `HttpOnly`, `SameSite=Strict`, `Path=/`, and over HTTPS `Secure` under the
//!   `__Host-` name.
//! * `POST /signout`: ends the session (for good, also across restarts) and clears the cookie.
//! * `POST /api/live/ticket` (authenticated): a single-use ticket for a browser's WebSocket on
//!   another origin, valid for a minute: `/api/live?ticket=…`.

use std::time::Instant;

use axum::{
    Json,
    extract::{Query, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{Html, IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use serde_json::json;

use super::{
    Client,
    auth::{SECURE_SESSION_COOKIE, SESSION_COOKIE, TICKET_LIFETIME},
    limits::{TooMany, address_key},
};
use crate::{
    agent::people::{Principal, SignInMode},
    transport::state::AppState,
    transport::{ApiError, html::escape},
};

/// The session cookie's value, whichever name it goes by.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE || *name == SECURE_SESSION_COOKIE)
        .map(|(_, value)| value)
}

/// Whether the browser reached the server over HTTPS: the page's origin says so, or the reverse
/// proxy in front (`X-Forwarded-Proto`).
fn over_https(headers: &HeaderMap) -> bool {
    let forwarded = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|o| o.starts_with("https://"));
    forwarded || origin
}

/// The `Set-Cookie` value that stores `token` for `max_age_secs` (0: deletes it).
pub(crate) fn session_set_cookie(headers: &HeaderMap, token: &str, max_age_secs: i64) -> String {
    if over_https(headers) {
        format!(
            "{SECURE_SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age={max_age_secs}"
        )
    } else {
        format!(
            "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_secs}"
        )
    }
}

/// The longest `next` followed (a path of this site is never longer).
const MAX_NEXT: usize = 2048;

/// Where to go after signing in: `next` if it is a path of this site, else `/` — the one rule
/// for every place that follows a `next` (the key form's redirect, the passkey sign-in's answer,
/// which `public/passkey.js` follows as it is, and the pages' hidden fields).
///
/// `next` is parsed as a URL relative to the site, as a browser would (tabs and newlines
/// dropped, `\` read as `/`, `//host` and `scheme:` leaving the site), and kept only if its
/// origin is still the site's; what is kept is the parsed URL's path, query and fragment,
/// percent-encoded ASCII, so it is always a valid `Location` that no browser reads as another
/// host. Control characters and anything longer than [`MAX_NEXT`] are refused outright.
pub fn local_path(next: Option<&str>) -> String {
    const HOME: &str = "/";
    let Some(next) = next.filter(|n| n.len() <= MAX_NEXT && !n.chars().any(char::is_control))
    else {
        return HOME.to_owned();
    };
    // An origin of our own making: only what a browser would resolve to it stays.
    let Ok(site) = url::Url::parse("http://countersign.invalid/") else {
        return HOME.to_owned();
    };
    let Ok(target) = site.join(next) else {
        return HOME.to_owned();
    };
    if target.origin() != site.origin() {
        return HOME.to_owned();
    }
    let mut path = target.path().to_owned();
    if let Some(query) = target.query() {
        path.push('?');
        path.push_str(query);
    }
    if let Some(fragment) = target.fragment() {
        path.push('#');
        path.push_str(fragment);
    }
    // A path that starts with `//` (from `/.//host`) would name a host as a `Location`.
    if !path.starts_with('/') || path.starts_with("//") {
        return HOME.to_owned();
    }
    path
}

#[derive(Debug, Deserialize)]
pub struct SignInQuery {
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct SignInForm {
    key: String,
    next: Option<String>,
}

/// Whether `headers` carry a session that verifies now.
async fn signed_in(state: &AppState, headers: &HeaderMap) -> Option<super::auth::BrowserSession> {
    let token = session_cookie(headers)?;
    let signins = state.edge.signins(state).await.ok()??;
    signins.verify(token, state.runtime.clock.now_ms()).ok()
}

/// `GET /signin`: the sign-in form; with a cookie that still signs someone in, who that is; with
/// one that no longer does, why (removed, signed out, expired) above the form. The stale cookie
/// is left as it is: every page of this browser that still runs is told the same, and the next
/// sign-in replaces it.
pub async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<SignInQuery>,
) -> Response {
    if state.edge.mode == SignInMode::Open {
        return Redirect::to("/").into_response();
    }
    let next = local_path(query.next.as_deref());
    let notice = match session_cookie(&headers) {
        None => None,
        Some(token) => match super::session_principal(&state, token).await {
            Err(e) => return e.into_response(),
            Ok(Ok((Principal::Person { name, .. }, _))) => {
                return signed_in_html(&state, &next, &format!("as {name}")).into_response();
            }
            Ok(Ok((Principal::Local { .. }, _))) => {
                return signed_in_html(&state, &next, "with the API key").into_response();
            }
            Ok(Err(why)) => Some(Notice::SignedOut(why)),
        },
    };
    signin_html(&state, &next, notice).into_response()
}

/// `POST /signin`.
pub async fn submit(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    form: Result<axum::Form<SignInForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let axum::Form(form) = match form {
        Ok(form) => form,
        Err(rejection) => {
            return ApiError::from_body_rejection(rejection.status(), &rejection).into_response();
        }
    };
    let next = local_path(form.next.as_deref());
    let Some(key) = &state.edge.key else {
        return Redirect::to(&next).into_response();
    };
    let now = Instant::now();
    let address = address_key(client.address);
    if let Err(wait) = state.edge.failures.check(&address, now) {
        tracing::warn!(client = %address, "sign-in refused: too many failed attempts");
        return TooMany {
            wait,
            what: "after failed sign-ins from this address",
        }
        .into_response();
    }
    if !key.matches(&form.key) {
        state.edge.failures.record(&address, now);
        tracing::warn!(client = %address, "sign-in with a wrong key");
        let mut response = signin_html(&state, &next, Some(Notice::WrongKey)).into_response();
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        return response;
    }
    let signins = match state.edge.signins(&state).await {
        Ok(Some(signins)) => signins,
        Ok(None) => return Redirect::to(&next).into_response(),
        Err(e) => return e.into_response(),
    };
    let now_ms = state.runtime.clock.now_ms();
    let (session, token) = match signins.issue(now_ms, Some(address.clone()), None).await {
        Ok(issued) => issued,
        Err(e) => return ApiError::from(e).into_response(),
    };
    tracing::info!(client = %address, session = %session.id, "signed in");
    let max_age = (session.expires_ms - now_ms) / 1000;
    let mut response = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&session_set_cookie(&headers, &token, max_age)) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

/// `POST /signout`.
pub async fn signout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(session) = signed_in(&state, &headers).await
        && let Ok(Some(signins)) = state.edge.signins(&state).await
    {
        if let Err(e) = signins.end(&session, state.runtime.clock.now_ms()).await {
            return ApiError::from(e).into_response();
        }
        // What this sign-in holds open here ends now; on other instances, with the news.
        let ended = state.runtime.people().holds().end_signin(&session.id);
        tracing::info!(session = %session.id, ended, "signed out");
    }
    let mut response = Redirect::to("/signin").into_response();
    if let Ok(v) = HeaderValue::from_str(&session_set_cookie(&headers, "", 0)) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

/// `POST /api/live/ticket`: a ticket for one WebSocket upgrade, as whoever asks (the guard
/// already checked the caller's key or session).
pub async fn ticket(
    State(state): State<AppState>,
    client: Client,
) -> Result<Json<serde_json::Value>, ApiError> {
    let ticket = state
        .edge
        .tickets
        .issue(Instant::now(), client.principal(), client.signin.clone())
        .map_err(|e| {
            tracing::error!(error = %e, "cannot issue a WebSocket ticket");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "ticket_unavailable",
                "No ticket can be issued right now. Try again.",
            )
        })?;
    Ok(Json(json!({
        "ticket": ticket,
        "expiresInSeconds": TICKET_LIFETIME.as_secs(),
    })))
}

fn document(state: &AppState, body: &str) -> Html<String> {
    crate::transport::people::page(state, "Sign in", body)
}

/// What the sign-in page says above its form.
#[derive(Debug, Clone, Copy)]
enum Notice {
    WrongKey,
    SignedOut(super::SignedOut),
}

fn signin_html(state: &AppState, next: &str, notice: Option<Notice>) -> Html<String> {
    let error = match notice {
        None => String::new(),
        Some(Notice::WrongKey) => {
            "<p class=\"signin-error\" role=\"alert\">That key is not right.</p>".to_owned()
        }
        Some(Notice::SignedOut(why)) => format!(
            "<p class=\"signin-error\" role=\"alert\" data-testid=\"signed-out\" \
             data-reason=\"{}\">{}</p>",
            why.as_str(),
            escape(why.message())
        ),
    };
    let key_form = |autofocus: &str| {
        format!(
            "<form method=\"post\" action=\"/signin\">\
             <label for=\"key\">Key</label>\
             <input id=\"key\" name=\"key\" type=\"password\" autocomplete=\"current-password\" required{autofocus}>\
             <input type=\"hidden\" name=\"next\" value=\"{next}\">\
             <button type=\"submit\">Sign in</button></form>",
            next = escape(next),
        )
    };
    if state.edge.mode != SignInMode::Passkeys {
        return document(
            state,
            &format!(
                "<p>This server is protected by a key. Ask whoever runs it.</p>{error}{}",
                key_form(" autofocus")
            ),
        );
    }
    let key = if state.edge.key.is_some() {
        format!(
            "<details class=\"key-signin\"><summary>Sign in with the API key</summary>{}</details>",
            key_form("")
        )
    } else {
        String::new()
    };
    document(
        state,
        &format!(
            "<p>Sign in with the passkey you made from your invitation link.</p>{error}\
             <form data-passkey=\"signin\" data-next=\"{next}\" class=\"passkey-form\">\
             <button type=\"submit\" data-testid=\"passkey-signin\" autofocus>Sign in with a passkey</button>\
             <p class=\"passkey-status\" role=\"status\" aria-live=\"polite\"></p></form>\
             <p class=\"muted\">No passkey here yet? Ask an admin for an invitation link, or \
             open a link to add this device from a browser where you are signed in.</p>{key}",
            next = escape(next),
        ),
    )
}

fn signed_in_html(state: &AppState, next: &str, who: &str) -> Html<String> {
    document(
        state,
        &format!(
            "<p data-testid=\"signed-in\">You are signed in {who} on this browser.</p>\
             <p><a href=\"{next}\">Continue</a></p>\
             <form method=\"post\" action=\"/signout\">\
             <button type=\"submit\" data-testid=\"signout\">Sign out</button></form>",
            who = escape(who),
            next = escape(next),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::edge::headers;

    #[test]
    fn only_a_path_of_this_site_is_followed_after_signing_in() {
        let long = format!("/{}", "a".repeat(MAX_NEXT));
        #[rustfmt::skip]
        let cases: &[(Option<&str>, &str)] = &[
            // Paths of the site stay, as the browser would send them (percent-encoded ASCII).
            (Some("/audit?x=1"), "/audit?x=1"),
            (Some("/approvals/apv-1#top"), "/approvals/apv-1#top"),
            (Some("/%2F%2Fevil"), "/%2F%2Fevil"),
            (Some("/a b"), "/a%20b"),
            (Some("/caf\u{e9}?q=\u{2713}"), "/caf%C3%A9?q=%E2%9C%93"),
            (Some("/./audit"), "/audit"),
            (Some("/../audit"), "/audit"),
            (Some("audit"), "/audit"),
            (Some("?x=1"), "/?x=1"),
            (None, "/"),
            (Some(""), "/"),
            // Other hosts, however written.
            (Some("//evil.example"), "/"),
            (Some("///evil.example"), "/"),
            (Some("/\\evil"), "/"),
            (Some("\\\\evil"), "/"),
            (Some("/\\/evil"), "/"),
            (Some("https://evil.example"), "/"),
            (Some("https:evil"), "/"),
            (Some("HTTPS://evil.example/x"), "/"),
            (Some("javascript:alert(1)"), "/"),
            (Some("data:text/html,<script>alert(1)</script>"), "/"),
            (Some("/.//evil.example"), "/"),
            (Some("/x/..//evil.example"), "/"),
            (Some("http://countersign.invalid@evil.example/"), "/"),
            (Some("//\u{ff0f}evil.example"), "/"),
            (Some("/\u{3000}/evil.example"), "/%E3%80%80/evil.example"),
            // Control characters (a browser drops tabs and newlines: `/\t/evil` is `//evil`).
            (Some("/\t/evil.example"), "/"),
            (Some("/\n/x"), "/"),
            (Some("/\r\n/x"), "/"),
            (Some("/x\u{0}"), "/"),
            (Some("/x\u{7f}"), "/"),
            (Some("/x\u{85}"), "/"),
            (Some(" //evil.example"), "/"),
            // Overlong.
            (Some(long.as_str()), "/"),
        ];
        for (next, expected) in cases {
            let followed = local_path(*next);
            assert_eq!(&followed, expected, "{next:?}");
            // Whatever it is, it is a valid Location that stays on the site.
            assert!(HeaderValue::from_str(&followed).is_ok(), "{next:?}");
            assert!(followed.starts_with('/') && !followed.starts_with("//"));
            assert!(!followed.contains('\\'));
        }
        assert_eq!(
            local_path(Some(&format!("/{}", "a".repeat(MAX_NEXT - 1)))).len(),
            MAX_NEXT
        );
    }

    #[test]
    fn the_cookie_is_secure_under_its_host_name_over_https() {
        let plain = session_set_cookie(&HeaderMap::new(), "t", 60);
        assert_eq!(
            plain,
            "countersign_session=t; Path=/; HttpOnly; SameSite=Strict; Max-Age=60"
        );
        for https in [
            headers(&[("origin", "https://chat.example")]),
            headers(&[("x-forwarded-proto", "https")]),
        ] {
            let cookie = session_set_cookie(&https, "t", 60);
            assert!(
                cookie.starts_with("__Host-countersign_session=t;"),
                "{cookie}"
            );
            assert!(
                cookie.contains("; Secure;") && cookie.contains("Path=/"),
                "{cookie}"
            );
            assert!(!cookie.contains("Domain"));
        }
        assert_eq!(
            session_cookie(&headers(&[("cookie", "x=1; countersign_session=abc")])),
            Some("abc")
        );
        assert_eq!(
            session_cookie(&headers(&[("cookie", "countersign_sessionx=abc")])),
            None
        );
    }
}
