//! Signing people in with passkeys (ADR 0024): the one-time link's page (`GET /welcome/{token}`)
//! and the four WebAuthn ceremony steps, as Leptos server functions that `public/passkey.js`
//! calls (they run before anyone is signed in, so the edge lets them through; each is rate
//! limited like every POST). Nothing an anonymous caller does here is kept: sign-in options are
//! stateless (ADR 0024), registration needs an open one-time link.
//!
//! * `passkey_register_begin {token, name}` → creation options; `passkey_register_finish
//!   {credential}` → the new person (or their new passkey) is kept, the link is used up, and
//!   they are signed in (a `Set-Cookie`);
//! * `passkey_signin_begin {}` → request options for any passkey of this server;
//!   `passkey_signin_finish {credential, next}` → signed in.

use axum::{
    extract::{Path, State},
    http::{HeaderValue, StatusCode, header},
    response::{Html, IntoResponse, Response},
};
use leptos::{prelude::*, server_fn::codec::Json as JsonCodec};
use serde_json::Value;

use super::{
    edge::signin::{local_path, session_set_cookie},
    html::{self, escape},
};
use crate::{
    agent::people::{
        InviteKind, PeopleError, Person, Principal, passkeys::Registered, person_name,
    },
    common::fn_error::FnError,
    transport::state::AppState,
};

/// The server functions anyone may call (the edge lets them through unauthenticated).
pub const PUBLIC_FUNCTIONS: [&str; 4] = [
    "/api/fn/passkey_register_begin",
    "/api/fn/passkey_register_finish",
    "/api/fn/passkey_signin_begin",
    "/api/fn/passkey_signin_finish",
];

/// A refusal a server function answers with `status` and `code` (the message says why, for
/// people).
pub fn refuse(status: StatusCode, code: &str, message: impl std::fmt::Display) -> FnError {
    FnError::new(status.as_u16(), code, message.to_string())
}

/// A people error as a server function's refusal.
pub fn people_refusal(e: PeopleError) -> FnError {
    let (status, code) = match &e {
        PeopleError::Off => (StatusCode::NOT_FOUND, "people_off"),
        PeopleError::NotAllowed(_) => (StatusCode::FORBIDDEN, "not_allowed"),
        PeopleError::InvalidRole(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_role"),
        PeopleError::InvalidName => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_name"),
        PeopleError::InviteNotValid => (StatusCode::NOT_FOUND, "invite_not_valid"),
        PeopleError::UnknownPerson => (StatusCode::NOT_FOUND, "person_not_found"),
        PeopleError::LastAdmin(_) => (StatusCode::CONFLICT, "last_admin"),
        PeopleError::Passkey(_) => (StatusCode::FORBIDDEN, "passkey_refused"),
        PeopleError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
    };
    refuse(status, code, e)
}

/// The request's headers and client address (server functions run inside the request).
fn request_parts() -> Result<axum::http::request::Parts, FnError> {
    use_context::<axum::http::request::Parts>().ok_or_else(|| {
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "no request in context",
        )
    })
}

/// Who calls a server function (the edge's principal; `None` before sign-in).
pub fn caller() -> Option<Principal> {
    use_context::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>().cloned())
}

/// Who calls, or a 401 refusal.
pub fn signed_in() -> Result<Principal, FnError> {
    caller().ok_or_else(|| refuse(StatusCode::UNAUTHORIZED, "unauthorized", "sign in first"))
}

/// Waits for `wait` (a long poll) unless the caller is removed first — here, or on another
/// instance — and then answers 401 `signed_out` at once, as the next request would be answered:
/// no open request outlives a removed person's power, and their page goes to the sign-in page
/// without waiting out the poll. A sign-out is the browser's own (`POST /signout`, which
/// navigates away): its polls end with the page, and a poll it left open in another tab is
/// refused at the next request, so that tab does not race the sign-out's own redirect.
pub async fn unless_removed<T>(
    state: &AppState,
    wait: impl Future<Output = T>,
) -> Result<T, FnError> {
    let parts = request_parts()?;
    let hold = super::edge::hold(state, &super::edge::Client::from_parts(&parts));
    let removed = async {
        if hold.ended().await != crate::agent::people::Ending::Removed {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        biased;
        () = removed => Err(refuse(
            StatusCode::UNAUTHORIZED,
            "signed_out",
            super::edge::SignedOut::Removed.message(),
        )),
        value = wait => Ok(value),
    }
}

/// Starts a session for `person` and sets its cookie on the response.
async fn sign_in(state: &AppState, person: &Person, passkey: &str) -> Result<(), FnError> {
    let parts = request_parts()?;
    let signins = state
        .edge
        .signins(state)
        .await
        .map_err(FnError::from)?
        .ok_or_else(|| people_refusal(PeopleError::Off))?;
    let now = state.runtime.clock.now_ms();
    let address = super::edge::Client::from_parts(&parts)
        .address
        .map(|a| super::edge::limits::address_key(Some(a)));
    let (session, token) = signins
        .issue(now, address, Some((&person.id, passkey)))
        .await
        .map_err(|e| people_refusal(e.into()))?;
    let max_age = (session.expires_ms - now) / 1000;
    if let (Some(response), Ok(cookie)) = (
        use_context::<leptos_axum::ResponseOptions>(),
        HeaderValue::from_str(&session_set_cookie(&parts.headers, &token, max_age)),
    ) {
        response.insert_header(header::SET_COOKIE, cookie);
    }
    tracing::info!(person = %person.id, session = %session.id, "signed in with a passkey");
    Ok(())
}

/// Options for registering a passkey from the one-time link `token`; `name` is the new person's
/// (ignored for a device link: the person has one).
#[server(prefix = "/api/fn", endpoint = "passkey_register_begin", input = JsonCodec)]
pub async fn passkey_register_begin(token: String, name: Option<String>) -> Result<Value, FnError> {
    let state = expect_context::<AppState>();
    let people = state.runtime.people();
    let now = state.runtime.clock.now_ms();
    let invite = people
        .open_invite(&token, now)
        .await
        .map_err(people_refusal)?;
    let passkeys = people.passkeys().map_err(people_refusal)?;
    let (person, name, existing) = match (&invite.kind, &invite.person) {
        (InviteKind::Device, Some(person)) => {
            let person = people
                .active(person)
                .ok_or_else(|| people_refusal(PeopleError::InviteNotValid))?;
            let existing = people.passkeys_of(&person.id);
            (person.id, person.name, existing)
        }
        _ => {
            let name = name
                .as_deref()
                .or(invite.name.as_deref())
                .ok_or_else(|| people_refusal(PeopleError::InvalidName))?;
            let name = person_name(name).map_err(people_refusal)?;
            (uuid::Uuid::new_v4().to_string(), name, Vec::new())
        }
    };
    passkeys
        .begin_registration(&person, &name, &existing, &invite.digest, now)
        .await
        .map_err(people_refusal)
}

/// Keeps the passkey the authenticator made, uses the link up and signs the person in.
/// Answers where to go next.
#[server(prefix = "/api/fn", endpoint = "passkey_register_finish", input = JsonCodec)]
pub async fn passkey_register_finish(credential: Value) -> Result<String, FnError> {
    let state = expect_context::<AppState>();
    let people = state.runtime.people();
    let now = state.runtime.clock.now_ms();
    let passkeys = people.passkeys().map_err(people_refusal)?;
    let Registered {
        invite,
        person,
        name,
        passkey,
    } = passkeys
        .finish_registration(&credential, now)
        .await
        .map_err(people_refusal)?;
    let invite = state
        .runtime
        .people()
        .open_invite_by_digest(&invite, now)
        .await
        .map_err(people_refusal)?;
    let label = format!(
        "Passkey added {}",
        crate::agent::clock::rfc3339(now)
            .get(..10)
            .unwrap_or("today")
    );
    let stored = crate::agent::people::passkeys::stored(&passkey, &person, label, now)
        .map_err(people_refusal)?;
    let new_person = Person {
        id: person.clone(),
        name,
        roles: invite.roles.clone(),
        created_ms: now,
        invited_by: invite.created_by.clone(),
        revoked_ms: None,
    };
    let person = people
        .enrol(&invite, new_person, stored.clone(), now)
        .await
        .map_err(people_refusal)?;
    let person = people.person(&person.id).unwrap_or(person);
    tracing::info!(person = %person.id, kind = invite.kind.as_str(), "a passkey was registered from a one-time link");
    sign_in(&state, &person, &stored.id).await?;
    Ok(if invite.kind == InviteKind::Setup {
        "/people".to_owned()
    } else {
        "/".to_owned()
    })
}

/// Options for signing in with any passkey registered here (nothing is kept: anyone may ask).
#[server(prefix = "/api/fn", endpoint = "passkey_signin_begin", input = JsonCodec)]
pub async fn passkey_signin_begin() -> Result<Value, FnError> {
    let state = expect_context::<AppState>();
    let people = state.runtime.people();
    people
        .passkeys()
        .map_err(people_refusal)?
        .begin_signin(state.runtime.clock.now_ms())
        .map_err(people_refusal)
}

/// Checks the assertion and signs the person in; answers where to go: `next` if it is a path of
/// this site (`local_path`, which `public/passkey.js` follows as given), else `/`.
#[server(prefix = "/api/fn", endpoint = "passkey_signin_finish", input = JsonCodec)]
pub async fn passkey_signin_finish(
    credential: Value,
    next: Option<String>,
) -> Result<String, FnError> {
    let state = expect_context::<AppState>();
    let people = state.runtime.people();
    let now = state.runtime.clock.now_ms();
    let passkeys = people.passkeys().map_err(people_refusal)?;
    // A refused answer does not count against the address: an assertion cannot be guessed, and
    // counting refusals let anyone at a shared address keep everyone there from signing in.
    let (person, used) = passkeys
        .finish_signin(&credential, people, now)
        .await
        .map_err(|e| {
            tracing::info!(error = %e, "a passkey sign-in was refused");
            people_refusal(e)
        })?;
    let passkey = used.id.clone();
    people.used_passkey(used, now).await;
    sign_in(&state, &person, &passkey).await?;
    Ok(local_path(next.as_deref()))
}

/// `GET /welcome/{token}`: the page of a one-time link — who invited whom, with what roles —
/// and the button that makes a passkey (`public/passkey.js`).
pub async fn welcome(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    let people = state.runtime.people();
    let now = state.runtime.clock.now_ms();
    let invite = match people.open_invite(&token, now).await {
        Ok(invite) => invite,
        Err(e @ PeopleError::Off) => {
            return (
                StatusCode::NOT_FOUND,
                page(&state, "Not here", &escape(&e.to_string())),
            )
                .into_response();
        }
        Err(e) => {
            let body = format!(
                "<h1>This link does not work</h1><p role=\"alert\" data-testid=\"welcome-error\">{}</p>\
                 <p>Ask whoever sent it for a new one. <a href=\"/signin\">Sign in</a> if you \
                 have a passkey here already.</p>",
                escape(&e.to_string())
            );
            return (StatusCode::NOT_FOUND, page(&state, "Link not valid", &body)).into_response();
        }
    };
    let roles = if invite.roles.is_empty() {
        "no roles yet".to_owned()
    } else {
        invite
            .roles
            .iter()
            .map(|r| format!("<span class=\"role\">{}</span>", escape(r)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let inviter = invite
        .created_by
        .as_deref()
        .map(|id| people.name_of(id))
        .unwrap_or_else(|| "the server's operator".to_owned());
    let (heading, intro, name_field) = match invite.kind {
        InviteKind::Setup => (
            "Set up Countersign".to_owned(),
            "You are the first person here: you will be its admin, who invites the others and \
             gives them roles."
                .to_owned(),
            true,
        ),
        InviteKind::Person => (
            "You are invited".to_owned(),
            format!("{} invites you to countersign here.", escape(&inviter)),
            true,
        ),
        InviteKind::Device => {
            let name = invite
                .person
                .as_deref()
                .map(|p| people.name_of(p))
                .unwrap_or_default();
            (
                "Add this device".to_owned(),
                format!(
                    "Make a passkey on this device for {}: you can then sign in and decide \
                     approvals here too.",
                    escape(&name)
                ),
                false,
            )
        }
    };
    let name_input = if name_field {
        format!(
            "<label for=\"name\">Your name</label><input id=\"name\" name=\"name\" required \
             maxlength=\"60\" autocomplete=\"name\" value=\"{}\" data-testid=\"welcome-name\">",
            escape(invite.name.as_deref().unwrap_or_default())
        )
    } else {
        String::new()
    };
    let body = format!(
        "<h1>{heading}</h1><p>{intro}</p><p>Roles: {roles}</p>\
         <form data-passkey=\"register\" data-token=\"{token}\" class=\"passkey-form\">{name_input}\
         <button type=\"submit\" data-testid=\"create-passkey\">Create a passkey</button>\
         <p class=\"passkey-status\" role=\"status\" aria-live=\"polite\"></p></form>\
         <p class=\"muted\">A passkey lives on this device (or your password manager) and is \
         confirmed with your fingerprint, face or PIN. This link works once and expires {expires}.</p>",
        heading = escape(&heading),
        token = escape(&token),
        expires = crate::agent::clock::rfc3339(invite.expires_ms)
            .get(..16)
            .unwrap_or_default()
            .replace('T', " "),
    );
    page(&state, &heading, &body).into_response()
}

/// A plain page with the passkey script.
pub fn page(state: &AppState, title: &str, body: &str) -> Html<String> {
    let Html(mut document) = html::document(
        state,
        title,
        "signin",
        &format!("<h1 class=\"brand-line\">Countersign</h1>{body}"),
    );
    if let Some(at) = document.find("</body>") {
        document.insert_str(at, "<script src=\"/passkey.js\" defer></script>");
    }
    Html(document)
}
