//! The message composer: a text box and a Send button.
//!
//! Enter sends, Shift+Enter inserts a newline, and Send is disabled while the box holds only
//! white space. The disabled state is reactive, so a Send button that enables while typing is
//! also the visible proof that the page has hydrated.

use leptos::{ev, prelude::*};

/// A composer that calls `on_send` with the trimmed text and clears itself.
#[component]
pub fn Composer(
    /// Receives the text to send (never empty).
    #[prop(into)]
    on_send: Callback<String>,
    /// Placeholder shown in the empty box.
    #[prop(into, default = "Message the agent… (Enter sends, Shift+Enter for a new line)".into())]
    placeholder: String,
) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let is_empty = move || text.with(|t| t.trim().is_empty());

    let send = move || {
        let value = text.get_untracked();
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return;
        }
        on_send.run(trimmed.to_string());
        text.set(String::new());
    };

    let on_keydown = move |ev: ev::KeyboardEvent| {
        // Composition (IME) keeps Enter for the input method: Japanese input commits with Enter.
        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
            ev.prevent_default();
            send();
        }
    };

    view! {
        <form
            class="composer"
            on:submit=move |ev: ev::SubmitEvent| {
                ev.prevent_default();
                send();
            }
        >
            <label class="visually-hidden" for="composer-input">"Message"</label>
            <textarea
                id="composer-input"
                data-testid="composer-input"
                rows="1"
                placeholder=placeholder
                prop:value=move || text.get()
                on:input=move |ev| text.set(event_target_value(&ev))
                on:keydown=on_keydown
            ></textarea>
            <button
                type="submit"
                class="send"
                data-testid="send"
                disabled=is_empty
            >
                "Send"
            </button>
        </form>
    }
}
