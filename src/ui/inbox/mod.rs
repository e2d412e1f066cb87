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
    crate::transport::access::may_touch_chat(&state.runtime, me.id(), &chat_id)
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
    let list = Following {
        html: RwSignal::new("<p class=\"muted\">Loading…</p>".to_owned()),
        version: StoredValue::new(None::<u64>),
        offset: StoredValue::new(0i64),
        focus: StoredValue::new(focus),
        alive: StoredValue::new(true),
    };
    // What the last action said, as HTML above the list.
    let notice = Notice(RwSignal::new(String::new()));
    on_cleanup(move || list.alive.set_value(false));
    Effect::new(move |_| {
        spawn_local(list.follow());
        super::platform::every(1_000, move || {
            super::platform::tick_countdowns(list.offset.get_value())
        });
    });
    let on_click = move |ev: leptos::ev::MouseEvent| {
        let Some(action) = super::platform::action_of(&ev) else {
            return;
        };
        if let Some(link) = action.strip_prefix("copy:") {
            super::platform::copy(link);
            notice.say(true, "Link copied.".into());
        } else if let Some(decision) = Decision::clicked(&action) {
            decision.send(notice);
        }
    };
    // Deny carries the reason typed in its own little form.
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if let Some(decision) = Decision::submitted(&super::platform::form_entries(&ev)) {
            decision.send(notice);
        }
    };
    let title = if list.focus.get_value().is_some() {
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
            <div inner_html=move || notice.0.get()></div>
            <div on:click=on_click on:submit=on_submit inner_html=move || list.html.get()></div>
        </main>
    }
}

/// The list the page shows, as the server last wrote it, and what following it needs.
#[derive(Clone, Copy)]
struct Following {
    html: RwSignal<String>,
    /// The inbox's version `html` shows.
    version: StoredValue<Option<u64>>,
    /// The server's clock minus the browser's (countdowns are in the server's time).
    offset: StoredValue<i64>,
    focus: StoredValue<Option<String>>,
    /// The page is still shown.
    alive: StoredValue<bool>,
}

impl Following {
    /// Loads the list, then waits for its next change, for as long as the page lives.
    async fn follow(self) {
        let Following {
            html,
            version,
            offset,
            focus,
            alive,
        } = self;
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
    }
}

/// What the last action said, as HTML above the list.
#[derive(Clone, Copy)]
struct Notice(RwSignal<String>);

impl Notice {
    fn say(self, ok: bool, text: String) {
        self.0.set(format!(
            "<p class=\"{}\" role=\"status\" data-testid=\"inbox-notice\">{}</p>",
            if ok { "inbox-notice" } else { "edit-error" },
            super::html::escape(&text)
        ))
    }
}

/// A decision the person made on the list: a click on Approve, or a Deny or Edit form sent.
#[derive(Debug, PartialEq)]
struct Decision {
    approval_id: String,
    approve: bool,
    /// The rule asks for a passkey: the approval is confirmed with one.
    step_up: bool,
    reason: Option<String>,
    /// The edit form's fields, as typed.
    edit: Option<Vec<(String, String)>>,
}

impl Decision {
    /// A click's `data-action` (`approve:{id}` or `approve:step-up:{id}`).
    fn clicked(action: &str) -> Option<Decision> {
        let rest = action.strip_prefix("approve:")?;
        let (step_up, id) = match rest.strip_prefix("step-up:") {
            Some(id) => (true, id),
            None => (false, rest),
        };
        Some(Decision {
            approval_id: id.to_owned(),
            approve: true,
            step_up,
            reason: None,
            edit: None,
        })
    }

    /// A form's entries: Deny with its reason, or Edit with its fields.
    fn submitted(entries: &[(String, String)]) -> Option<Decision> {
        let field = |name: &str| {
            entries
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.trim().to_owned())
        };
        if let Some(id) = field("deny") {
            Some(Decision {
                approval_id: id,
                approve: false,
                step_up: false,
                reason: field("reason").filter(|r| !r.is_empty()),
                edit: None,
            })
        } else if let Some(id) = field("edit") {
            // The fields as typed; the server reads them against the tool's schema.
            let fields: Vec<(String, String)> = entries
                .iter()
                .filter(|(n, _)| n != "edit" && n != "step-up")
                .cloned()
                .collect();
            let step_up = field("step-up").is_some();
            Some(Decision {
                approval_id: id,
                approve: true,
                step_up,
                reason: None,
                edit: Some(fields),
            })
        } else {
            None
        }
    }

    /// Sends the decision (confirmed with a passkey first when the rule asks for one) and puts
    /// what the server answered in `notice`.
    fn send(self, notice: Notice) {
        let Decision {
            approval_id,
            approve,
            step_up,
            reason,
            edit,
        } = self;
        notice.say(true, "Working…".into());
        spawn_local(async move {
            let assertion = if step_up && approve {
                notice.say(true, "Confirm with your passkey…".into());
                match confirm_with_passkey(&approval_id, None, edit.clone()).await {
                    Ok(assertion) => Some(assertion),
                    Err(e) => {
                        notice.say(false, e);
                        return;
                    }
                }
            } else {
                None
            };
            match decide_approval(approval_id, approve, reason, assertion, edit).await {
                Ok(words) => notice.say(true, words),
                Err(e) => notice.say(false, e.to_string()),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::Decision;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn clicks_and_forms_on_the_list_read_as_the_decisions_they_are() {
        let approve = Decision::clicked("approve:a1").expect("an approval");
        assert_eq!(
            (
                approve.approval_id.as_str(),
                approve.approve,
                approve.step_up
            ),
            ("a1", true, false)
        );
        let confirmed = Decision::clicked("approve:step-up:a2").expect("an approval");
        assert_eq!(
            (confirmed.approval_id.as_str(), confirmed.step_up),
            ("a2", true)
        );
        assert_eq!(Decision::clicked("copy:/approvals/a1"), None);

        let deny = Decision::submitted(&entries(&[("deny", " a3 "), ("reason", " too much ")]))
            .expect("a denial");
        assert_eq!(
            deny,
            Decision {
                approval_id: "a3".into(),
                approve: false,
                step_up: false,
                reason: Some("too much".into()),
                edit: None,
            }
        );
        let blank =
            Decision::submitted(&entries(&[("deny", "a3"), ("reason", "  ")])).expect("a denial");
        assert_eq!(blank.reason, None, "a blank reason is no reason");

        let edit = Decision::submitted(&entries(&[
            ("edit", "a4"),
            ("step-up", "1"),
            ("amount", " 12 "),
        ]))
        .expect("an edit");
        assert_eq!(
            edit,
            Decision {
                approval_id: "a4".into(),
                approve: true,
                step_up: true,
                reason: None,
                edit: Some(entries(&[("amount", " 12 ")])),
            },
            "the fields go as typed; the server reads them"
        );
        assert_eq!(Decision::submitted(&entries(&[("other", "x")])), None);
    }
}
