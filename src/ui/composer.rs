//! The message composer: a text box, Send, and Stop while a turn streams.
//!
//! Enter sends, Shift+Enter inserts a newline, and Send is disabled while the box holds only
//! white space or a turn is streaming. The disabled state is reactive, so a Send button that
//! enables while typing is also the visible proof that the page has hydrated.

use leptos::{ev, prelude::*};

/// A composer that calls `on_send` with the trimmed text and clears itself.
#[component]
pub fn Composer(
    /// Receives the text to send (never empty).
    #[prop(into)]
    on_send: Callback<String>,
    /// A turn is streaming: Send is disabled and Stop is shown.
    #[prop(into, default = Signal::derive(|| false))]
    busy: Signal<bool>,
    /// Stop the streaming turn.
    #[prop(into, optional)]
    on_stop: Option<Callback<()>>,
    /// Placeholder shown in the empty box.
    #[prop(into, default = "Message the agent… (Enter sends, Shift+Enter for a new line)".into())]
    placeholder: String,
) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let is_empty = move || text.with(|t| t.trim().is_empty());

    let send = move || {
        if busy.get_untracked() {
            return;
        }
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
            {move || match (busy.get(), on_stop) {
                (true, Some(stop)) => view! {
                    <button type="button" class="stop" data-testid="stop" on:click=move |_| stop.run(())>
                        "Stop"
                    </button>
                }
                .into_any(),
                _ => ().into_any(),
            }}
            <button
                type="submit"
                class="send"
                data-testid="send"
                disabled=move || is_empty() || busy.get()
            >
                "Send"
            </button>
        </form>
    }
}
