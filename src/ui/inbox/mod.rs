//! `/approvals`: the inbox — every approval the signed-in person may decide, across chats, live —
//! and `/approvals/{id}`, one approval on its own (the link to open on another device; a phone
//! layout). ADR 0024.
//!
//! The page's reads and actions are Leptos server functions: `inbox_view` (the list as HTML
//! written on the server, answered when it changes: long polling on the inbox's version),
//! `decide_approval` (approve or deny, through the same gate as the chat), `step_up_options`
//! (a passkey challenge bound to the approval and its exact arguments) and `chat_news` (the
//! chat page's wait for decisions made elsewhere). The list is one escaped HTML string with its
//! clicks handled where they bubble to (ADR 0022).

use leptos::{prelude::*, server_fn::codec::Json as JsonCodec, task::spawn_local};
use serde::{Deserialize, Serialize};

use super::FnError;
use serde_json::Value;

#[cfg(feature = "ssr")]
mod list;

/// How long a read waits for a change before it answers with the same version (seconds).
pub const LONG_POLL_SECS: u64 = 20;

/// The inbox as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxList {
    /// The inbox's version this shows: ask again with it to wait for the next change.
    pub version: u64,
    pub html: String,
    /// How many approvals the person may act on now.
    pub count: u32,
    /// The server's clock (countdowns are in its time).
    pub now_ms: i64,
}

/// The inbox of the signed-in person (`focus`: one approval only), as soon as it differs from
/// `since` (at once when `since` is `None`, else within [`LONG_POLL_SECS`]).
#[server(prefix = "/api/fn", endpoint = "inbox_view", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn inbox_view(since: Option<u64>, focus: Option<String>) -> Result<InboxList, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    let inbox = &state.runtime.inbox;
    let version = match since {
        Some(known) => {
            let wait = inbox.changed_since(known, std::time::Duration::from_secs(LONG_POLL_SECS));
            crate::transport::people::unless_removed(&state, wait).await?
        }
        None => inbox.version(),
    };
    let me = crate::ui::api::principal();
    let (html, count) = list::inbox_html(&state, &me, focus.as_deref()).await?;
    Ok(InboxList {
        version,
        html,
        count,
        now_ms: state.runtime.clock.now_ms(),
    })
}

/// Approves (`approve`) or denies (with `reason`) approval `approval_id` as the signed-in person;
/// `edit`: the edit form's fields, to approve with changed arguments; `step_up`: the passkey
/// assertion when the rule asks for one. Answers how it stands now.
#[server(prefix = "/api/fn", endpoint = "decide_approval", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn decide_approval(
    approval_id: String,
    approve: bool,
    reason: Option<String>,
    step_up: Option<Value>,
    edit: Option<Vec<(String, String)>>,
) -> Result<String, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    list::decide(&state, approval_id, approve, reason, step_up, edit).await
}

/// A passkey challenge for approving `approval_id` with `args` (the arguments it would run), or
/// with the edit form's fields `edit`, or as they stand — bound to the approval and them.
#[server(prefix = "/api/fn", endpoint = "step_up_options", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn step_up_options(
    approval_id: String,
    args: Option<Value>,
    edit: Option<Vec<(String, String)>>,
) -> Result<Value, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    list::step_up_options(&state, approval_id, args, edit).await
}

/// The version of `chat_id`'s waiting approvals, as soon as it differs from `known` (or after
/// [`LONG_POLL_SECS`]): a chat page that is not connected hears of decisions made elsewhere.
#[server(prefix = "/api/fn", endpoint = "chat_news", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn chat_news(chat_id: String, known: Option<u64>) -> Result<u64, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    let me = crate::ui::api::principal();
    crate::transport::access::may_touch_chat_of(&state, &me, &chat_id)
        .await
        .map_err(FnError::from)?;
    let inbox = &state.runtime.inbox;
    Ok(match known {
        Some(known) => {
            let wait = inbox.chat_changed_since(
                &chat_id,
                known,
                std::time::Duration::from_secs(LONG_POLL_SECS),
            );
            crate::transport::people::unless_removed(&state, wait).await?
        }
        None => inbox.chat_version(&chat_id),
    })
}

/// Approves `approval_id` with a passkey confirmation: asks the server for a challenge bound to
/// `args`, has the browser's authenticator sign it (`public/passkey.js`), and returns the
/// assertion to send with the approval.
pub async fn confirm_with_passkey(
    approval_id: &str,
    args: Option<Value>,
    edit: Option<Vec<(String, String)>>,
) -> Result<Value, String> {
    let options = step_up_options(approval_id.to_owned(), args, edit)
        .await
        .map_err(|e| e.to_string())?;
    super::platform::passkey_assert(&options).await
}

/// Hydrates the inbox page: with a split wasm its code is loaded on this page only (ADR 0030).
#[cfg(feature = "hydrate")]
#[cfg_attr(wasm_split, leptos::lazy(inbox_page))]
pub async fn hydrate(focus: Option<String>) {
    super::hydrate_in_frame(move || view! { <InboxPage focus/> });
}

/// The inbox page; `focus` is one approval's id (`/approvals/{id}`).
#[component]
pub fn InboxPage(focus: Option<String>) -> impl IntoView {
    let html = RwSignal::new("<p class=\"muted\">Loading…</p>".to_owned());
    // What the last action said, as HTML above the list.
    let notice_text = RwSignal::new(String::new());
    let notice = move |ok: bool, text: String| {
        notice_text.set(format!(
            "<p class=\"{}\" role=\"status\" data-testid=\"inbox-notice\">{}</p>",
            if ok { "inbox-notice" } else { "edit-error" },
            super::html::escape(&text)
        ))
    };
    let version = StoredValue::new(None::<u64>);
    let offset = StoredValue::new(0i64);
    let focus = StoredValue::new(focus);
    let alive = StoredValue::new(true);
    on_cleanup(move || alive.set_value(false));
    // Loads the list, then waits for its next change, for as long as the page lives.
    let follow = move || {
        spawn_local(async move {
            let mut failures = 0;
            // A page whose sign-in ended stops asking (it goes to the sign-in page).
            while alive.get_value() && !super::platform::is_signed_out() {
                match inbox_view(version.get_value(), focus.get_value()).await {
                    Ok(view) => {
                        failures = 0;
                        offset.set_value(view.now_ms - super::platform::now_ms());
                        if version.get_value() != Some(view.version) {
                            html.set(view.html);
                            super::platform::tick_countdowns(offset.get_value());
                        }
                        version.set_value(Some(view.version));
                    }
                    // Signed out: the page is on its way to the sign-in page, which says why.
                    Err(_) if super::platform::is_signed_out() => return,
                    Err(e) => {
                        failures += 1;
                        html.set(super::grants::error_html(&e.to_string()));
                        super::platform::sleep(1_000 * failures.min(10)).await;
                    }
                }
            }
        });
    };
    Effect::new(move |_| {
        follow();
        super::platform::every(1_000, move || {
            super::platform::tick_countdowns(offset.get_value())
        });
    });
    let act = move |approval_id: String,
                    approve: bool,
                    step_up: bool,
                    reason: Option<String>,
                    edit: Option<Vec<(String, String)>>| {
        notice(true, "Working…".into());
        spawn_local(async move {
            let assertion = if step_up && approve {
                notice(true, "Confirm with your passkey…".into());
                match confirm_with_passkey(&approval_id, None, edit.clone()).await {
                    Ok(assertion) => Some(assertion),
                    Err(e) => {
                        notice(false, e);
                        return;
                    }
                }
            } else {
                None
            };
            match decide_approval(approval_id, approve, reason, assertion, edit).await {
                Ok(words) => notice(true, words),
                Err(e) => notice(false, e.to_string()),
            }
        });
    };
    let on_click = move |ev: leptos::ev::MouseEvent| {
        let Some(action) = super::platform::action_of(&ev) else {
            return;
        };
        if let Some(link) = action.strip_prefix("copy:") {
            super::platform::copy(link);
            notice(true, "Link copied.".into());
        } else if let Some(rest) = action.strip_prefix("approve:") {
            let (step_up, id) = match rest.strip_prefix("step-up:") {
                Some(id) => (true, id),
                None => (false, rest),
            };
            act(id.to_owned(), true, step_up, None, None);
        }
    };
    // Deny carries the reason typed in its own little form.
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let entries = super::platform::form_entries(&ev);
        let field = |name: &str| {
            entries
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.trim().to_owned())
        };
        if let Some(id) = field("deny") {
            act(
                id,
                false,
                false,
                field("reason").filter(|r| !r.is_empty()),
                None,
            );
        } else if let Some(id) = field("edit") {
            // The fields as typed; the server reads them against the tool's schema.
            let fields: Vec<(String, String)> = entries
                .iter()
                .filter(|(n, _)| n != "edit" && n != "step-up")
                .cloned()
                .collect();
            let step_up = field("step-up").is_some();
            act(id, true, step_up, None, Some(fields));
        }
    };
    let title = if focus.get_value().is_some() {
        "Approval"
    } else {
        "Approvals"
    };
    view! {
        <main class="inbox-page" data-testid="inbox">
            <h1>{title}</h1>
            <p class="muted inbox-intro">
                "What you may decide, from every chat: approvals a rule asks more people for, and your own. "
                "This page follows them live."
            </p>
            <div inner_html=move || notice_text.get()></div>
            <div on:click=on_click on:submit=on_submit inner_html=move || html.get()></div>
        </main>
    }
}
