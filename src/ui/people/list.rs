//! The people page on the server: its HTML and its actions.

use std::collections::BTreeSet;

use axum::http::StatusCode;

use crate::{
    agent::people::{ADMIN, InviteKind, Person, Principal, SignInMode, role_names},
    transport::people::{people_refusal, refuse, signed_in},
    transport::state::AppState,
    ui::{FnError, html::escape},
};

/// The roles the page offers as checkboxes besides those people have.
const SUGGESTED_ROLES: [&str; 3] = [ADMIN, "approver", "finance"];

fn when(ms: i64) -> String {
    crate::agent::clock::rfc3339(ms)
        .get(..16)
        .unwrap_or_default()
        .replace('T', " ")
}

fn roles_html(roles: &BTreeSet<String>) -> String {
    if roles.is_empty() {
        return "<span class=\"muted\">no roles</span>".to_owned();
    }
    roles
        .iter()
        .map(|r| format!("<span class=\"role\">{}</span>", escape(r)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The page for `principal`.
pub fn people_html(state: &AppState, principal: &Principal) -> String {
    let people = state.runtime.people();
    if people.mode() != SignInMode::Passkeys {
        return format!(
            "<p data-testid=\"people-off\">This server has one local person and {}. To let \
             several people sign in with passkeys and countersign each other's requests, start it \
             with <code>COUNTERSIGN_SIGN_IN=passkeys</code> (README: People and \
             countersignatures).</p>",
            if people.mode() == SignInMode::Key {
                "the API key"
            } else {
                "no sign-in"
            }
        );
    }
    let mut html = String::new();
    if let Principal::Person { id, .. } = principal
        && let Some(me) = people.person(id)
    {
        html.push_str(&me_html(state, &me));
    }
    if principal.may_manage_people() {
        html.push_str(&everyone_html(state, principal));
        html.push_str(&invite_html(state));
    }
    html
}

fn me_html(state: &AppState, me: &Person) -> String {
    let keys: String = state
        .runtime
        .people()
        .passkeys_of(&me.id)
        .iter()
        .map(|k| {
            format!(
                "<li data-testid=\"my-passkey\">{} · added {}{}</li>",
                escape(&k.label),
                when(k.created_ms),
                k.last_used_ms
                    .map(|t| format!(" · last used {}", when(t)))
                    .unwrap_or_default()
            )
        })
        .collect();
    format!(
        "<section class=\"people-me\"><h2>You</h2><p data-testid=\"me\"><strong>{name}</strong> \
         · {roles}</p><h3>Your passkeys</h3><ul>{keys}</ul>\
         <p><button type=\"button\" data-action=\"device-link\" data-testid=\"device-link\">Add a \
         passkey on another device</button> <span class=\"muted\">a link that works once, for 15 \
         minutes: open it on your phone to decide approvals there.</span></p>\
         <form method=\"post\" action=\"/signout\"><button type=\"submit\" class=\"link-button\" \
         data-testid=\"people-signout\">Sign out</button></form></section>",
        name = escape(&me.name),
        roles = roles_html(&me.roles),
    )
}

fn everyone_html(state: &AppState, principal: &Principal) -> String {
    let people = state.runtime.people();
    let rows: String = people
        .list()
        .iter()
        .map(|p| {
            let keys = people.passkeys_of(&p.id).len();
            let status = match p.revoked_ms {
                Some(at) => format!("<span class=\"muted\">removed {}</span>", when(at)),
                None if p.id == principal.id() => "<span class=\"muted\">you</span>".to_owned(),
                None => format!(
                    "<button type=\"button\" class=\"link-button\" data-action=\"remove:{}\" \
                     data-testid=\"remove-person\">Remove</button>",
                    escape(&p.id)
                ),
            };
            let roles = if p.is_active() {
                format!(
                    "<form class=\"roles-form\"><input type=\"hidden\" name=\"form\" \
                     value=\"roles\"><input type=\"hidden\" name=\"person\" value=\"{id}\">\
                     <input name=\"roles\" value=\"{roles}\" aria-label=\"Roles of {name}\" \
                     data-testid=\"roles-input\"> <button type=\"submit\" class=\"link-button\" \
                     data-testid=\"roles-save\">Save</button></form>",
                    id = escape(&p.id),
                    roles = escape(&p.roles.iter().cloned().collect::<Vec<_>>().join(" ")),
                    name = escape(&p.name),
                )
            } else {
                roles_html(&p.roles)
            };
            format!(
                "<tr data-testid=\"person-row\" data-person=\"{id}\"><td>{name}</td><td>{roles}</td>\
                 <td>{keys}</td><td>{since}</td><td>{status}</td></tr>",
                id = escape(&p.id),
                name = escape(&p.name),
                since = when(p.created_ms),
            )
        })
        .collect();
    format!(
        "<section class=\"people-all\"><h2>Everyone</h2><table class=\"people-table\"><thead><tr>\
         <th>Name</th><th>Roles</th><th>Passkeys</th><th>Since</th><th></th></tr></thead>\
         <tbody>{rows}</tbody></table><p class=\"muted\">Roles are words a policy rule names: \
         <code>@role(\"approver\")</code> asks for people with the role approver. \
         <code>admin</code> manages people.</p></section>"
    )
}

fn invite_html(state: &AppState) -> String {
    let mut roles: BTreeSet<String> = SUGGESTED_ROLES.iter().map(|r| r.to_string()).collect();
    for p in state.runtime.people().list() {
        roles.extend(p.roles);
    }
    let boxes: String = roles
        .iter()
        .map(|r| {
            format!(
                "<label class=\"role-choice\"><input type=\"checkbox\" name=\"role\" value=\"{r}\" \
                 data-testid=\"invite-role-{r}\"> {r}</label>",
                r = escape(r)
            )
        })
        .collect();
    format!(
        "<section class=\"people-invite\"><h2>Invite someone</h2><form class=\"invite-form\">\
         <input type=\"hidden\" name=\"form\" value=\"invite\"><label>Name <input name=\"name\" \
         maxlength=\"60\" placeholder=\"they can change it\" data-testid=\"invite-name\"></label>\
         <fieldset><legend>Roles</legend>{boxes}<label>Other roles <input name=\"roles\" \
         placeholder=\"e.g. treasury\" data-testid=\"invite-roles\"></label></fieldset>\
         <button type=\"submit\" data-testid=\"invite\">Make an invitation link</button></form>\
         <p class=\"muted\">The link works once and for 7 days; whoever opens it makes a passkey \
         and signs in with these roles.</p></section>"
    )
}

fn link(state: &AppState, token: &str) -> String {
    let public = state.edge.public_url.clone();
    format!("{public}/welcome/{token}")
}

/// An invitation link.
pub async fn invite(
    state: &AppState,
    name: Option<String>,
    roles: String,
) -> Result<String, FnError> {
    let principal = signed_in()?;
    let roles = role_names(&roles).map_err(people_refusal)?;
    let people = state.runtime.people();
    let (token, invite) = people
        .invite(
            &principal,
            InviteKind::Person,
            name.as_deref(),
            roles,
            state.runtime.clock.now_ms(),
        )
        .await
        .map_err(people_refusal)?;
    tracing::info!(by = %principal.id(), roles = ?invite.roles, "invitation link made");
    Ok(link(state, &token))
}

/// New roles for a person: signatures that needed a role they lost stop counting.
pub async fn set_roles(state: &AppState, person: String, roles: String) -> Result<(), FnError> {
    let principal = signed_in()?;
    let roles = role_names(&roles).map_err(people_refusal)?;
    state
        .runtime
        .set_person_roles(&principal, &actor(&principal), &person, roles)
        .await
        .map_err(people_refusal)?;
    Ok(())
}

/// Removes a person: they are signed out everywhere, what they hold open closes, their grants
/// are revoked and their signatures on approvals still waiting stop counting.
pub async fn remove(state: &AppState, person: String) -> Result<(), FnError> {
    let principal = signed_in()?;
    if principal.id() == person {
        return Err(refuse(
            StatusCode::CONFLICT,
            "cannot_remove_yourself",
            "you cannot remove yourself; ask another admin",
        ));
    }
    state
        .runtime
        .remove_person(&principal, &actor(&principal), &person)
        .await
        .map_err(people_refusal)?;
    Ok(())
}

/// How the audit log names `principal` acting on the people page.
fn actor(principal: &Principal) -> crate::agent::store::Actor {
    let client = leptos::prelude::use_context::<axum::http::request::Parts>()
        .as_ref()
        .map(crate::transport::edge::Client::from_parts)
        .unwrap_or_default();
    crate::transport::edge::actor_of(principal, "people", client.address, client.user_agent)
}

/// A link that adds a passkey for the signed-in person on another device.
pub async fn device_link(state: &AppState) -> Result<String, FnError> {
    let principal = signed_in()?;
    let (token, _) = state
        .runtime
        .people()
        .invite(
            &principal,
            InviteKind::Device,
            None,
            BTreeSet::new(),
            state.runtime.clock.now_ms(),
        )
        .await
        .map_err(people_refusal)?;
    Ok(link(state, &token))
}
