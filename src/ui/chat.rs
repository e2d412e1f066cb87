//! The chat page: the conversation and the composer.

use leptos::prelude::*;

use super::Composer;

/// One message the person sent in this page.
#[derive(Clone, Debug, PartialEq)]
struct SentMessage {
    id: usize,
    text: String,
}

/// The chat page. Until the agent runtime is connected, a sent message is kept on the page and
/// a notice says plainly that nothing will answer yet: no fake replies.
#[component]
pub fn ChatPage() -> impl IntoView {
    let messages = RwSignal::new(Vec::<SentMessage>::new());
    let on_send = move |text: String| {
        messages.update(|list| {
            let id = list.len();
            list.push(SentMessage { id, text });
        });
    };

    view! {
        <main class="chat">
            <section class="conversation" aria-label="Conversation" aria-live="polite">
                <Show
                    when=move || !messages.with(Vec::is_empty)
                    fallback=|| view! { <EmptyState/> }
                >
                    <ol class="messages">
                        <For
                            each=move || messages.get()
                            key=|m| m.id
                            children=|m| view! {
                                <li class="message user" data-testid="user-message">
                                    <p class="message-text">{m.text}</p>
                                </li>
                            }
                        />
                    </ol>
                    <p class="notice" role="status" data-testid="agent-not-connected">
                        "The agent is not connected yet, so nothing will answer. "
                        "Your message stays here."
                    </p>
                </Show>
            </section>
            <Composer on_send=on_send/>
        </main>
    }
}

#[component]
fn EmptyState() -> impl IntoView {
    view! {
        <div class="empty-state" data-testid="empty-state">
            <h1>"Ask the agent for something"</h1>
            <p>
                "It can look up the weather, send a payment, find where you are and change the "
                "music. Anything sensitive waits for your countersignature: approve, deny or edit."
            </p>
        </div>
    }
}
