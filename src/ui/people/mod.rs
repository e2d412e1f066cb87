//! `/people`: who may sign in and what they may countersign (ADR 0024). Everyone sees
//! themselves — their roles, their passkeys, a one-time link to add a passkey on another device;
//! admins also see everyone, invite people with one-time links, change roles and remove people.
//!
//! Reads and actions are Leptos server functions (the page's HTML is written on the server; its
//! clicks and forms are handled where they bubble to, ADR 0022). Scripts call the same functions
//! with the API key: `POST /api/fn/invite_person {"name": "Ana", "roles": "admin approver"}`.

use leptos::{prelude::*, server_fn::codec::Json as JsonCodec, task::spawn_local};

#[cfg(feature = "ssr")]
mod list;

use super::FnError;

/// The page's content, for the signed-in person.
#[server(prefix = "/api/fn", endpoint = "people_view", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn people_view() -> Result<String, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    Ok(list::people_html(&state, &crate::ui::api::principal()))
}

/// A one-time link inviting someone (suggested `name`, `roles` separated by spaces or commas);
/// admins and the API key only.
#[server(prefix = "/api/fn", endpoint = "invite_person", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn invite_person(name: Option<String>, roles: String) -> Result<String, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    list::invite(&state, name, roles).await
}

/// Gives `person` exactly `roles` (admins only).
#[server(prefix = "/api/fn", endpoint = "set_person_roles", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn set_person_roles(person: String, roles: String) -> Result<(), FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    list::set_roles(&state, person, roles).await
}

/// Removes `person`: they can no longer sign in, and their signatures stop counting (admins
/// only).
#[server(prefix = "/api/fn", endpoint = "remove_person", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn remove_person(person: String) -> Result<(), FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    list::remove(&state, person).await
}

/// A one-time link (15 minutes) that adds a passkey for the signed-in person on another device.
#[server(prefix = "/api/fn", endpoint = "device_link", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn device_link() -> Result<String, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    list::device_link(&state).await
}

/// A notice above the page's content, as escaped HTML.
fn notice_html(ok: bool, text: &str) -> String {
    format!(
        "<p class=\"{}\" role=\"status\" data-testid=\"people-notice\">{}</p>",
        if ok { "inbox-notice" } else { "edit-error" },
        super::html::escape(text)
    )
}

/// A one-time link to hand over, as escaped HTML (with Copy).
fn link_html(url: &str) -> String {
    let url = super::html::escape(url);
    format!(
        "<p class=\"one-time-link\" data-testid=\"one-time-link\">One-time link (send it to them; \
         it works once): <a href=\"{url}\" data-testid=\"one-time-link-url\">{url}</a> \
         <button type=\"button\" class=\"link-button\" data-action=\"copy:{url}\">Copy</button></p>"
    )
}

/// Hydrates the people page: with a split wasm its code is loaded on this page only (ADR 0030).
#[cfg(feature = "hydrate")]
#[cfg_attr(wasm_split, leptos::lazy(people_page))]
pub async fn hydrate() {
    super::hydrate_in_frame(|| view! { <PeoplePage/> });
}

/// The people page: one block of HTML written on the server (and a notice or a link above it),
/// its clicks and forms handled where they bubble to.
#[component]
pub fn PeoplePage() -> impl IntoView {
    let html = RwSignal::new("<p class=\"muted\">Loading…</p>".to_owned());
    let above = RwSignal::new(String::new());
    let load = move || {
        spawn_local(async move {
            match people_view().await {
                Ok(view) => html.set(view),
                Err(e) => html.set(super::grants::error_html(&e.to_string())),
            }
        });
    };
    Effect::new(move |_| load());
    let done = move |result: Result<String, FnError>| match result {
        Ok(text) => {
            above.set(notice_html(true, &text));
            load();
        }
        Err(e) => above.set(notice_html(false, &e.to_string())),
    };
    let linked = move |result: Result<String, FnError>| match result {
        Ok(url) => above.set(link_html(&url)),
        Err(e) => above.set(notice_html(false, &e.to_string())),
    };
    let on_click = move |ev: leptos::ev::MouseEvent| {
        let Some(action) = super::platform::action_of(&ev) else {
            return;
        };
        if let Some(person) = action.strip_prefix("remove:") {
            let person = person.to_owned();
            spawn_local(async move {
                done(remove_person(person).await.map(|()| "Removed.".to_owned()));
            });
        } else if action == "device-link" {
            spawn_local(async move { linked(device_link().await) });
        } else if let Some(url) = action.strip_prefix("copy:") {
            super::platform::copy(url);
            above.set(notice_html(true, "Link copied."));
        }
    };
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let entries = super::platform::form_entries(&ev);
        let field = |name: &str| {
            entries
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.trim().to_owned())
        };
        match field("form").as_deref() {
            Some("invite") => {
                let name = field("name").filter(|n| !n.is_empty());
                let roles = entries
                    .iter()
                    .filter(|(n, _)| n == "role" || n == "roles")
                    .map(|(_, v)| v.as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                spawn_local(async move { linked(invite_person(name, roles).await) });
            }
            Some("roles") => {
                let (Some(person), roles) = (field("person"), field("roles").unwrap_or_default())
                else {
                    return;
                };
                spawn_local(async move {
                    done(
                        set_person_roles(person, roles)
                            .await
                            .map(|()| "Roles saved.".to_owned()),
                    );
                });
            }
            _ => {}
        }
    };
    view! {
        <main class="people-page" data-testid="people">
            <h1>"People"</h1>
            <div on:click=on_click inner_html=move || above.get()></div>
            <div on:click=on_click on:submit=on_submit inner_html=move || html.get()></div>
        </main>
    }
}
