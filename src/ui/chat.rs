//! The chat page: toolbar, conversation, composer, banners, chunk log, conversations.

use leptos::{ev, prelude::*};

use super::{
    Composer,
    controller::{CONVERSATION_ID, ChatCtl, Mode},
};

/// Example prompts of the empty state: one per tool, in English and Japanese.
const EXAMPLES: &[&str] = &[
    "What's the weather in Tokyo?",
    "Send $50 to Hanako",
    "Where am I?",
    "Switch the music to track 2",
    "東京の天気は?",
    "花子さんに50ドル送金してください",
    "Pay Alice 30 dollars and Bob 40 dollars",
    "check the weather in Paris, then send Bob $5",
];

/// The chat page.
#[component]
pub fn ChatPage() -> impl IntoView {
    let ctl = ChatCtl::new();
    provide_context(ctl);
    // Effects run only in the browser, after hydration.
    // Once: nothing start-up reads may make it run again (a chat opened there reads signals).
    Effect::new(move |_| untrack(move || ctl.start()));
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| expose_test_hooks(ctl));

    let panels = Panels::new();
    let streaming = Signal::derive(move || ctl.busy());
    let ids = Memo::new(move |_| {
        ctl.messages
            .with(|ms| ms.iter().map(|m| m.id.clone()).collect::<Vec<_>>())
    });
    // Only the browser renders the messages and the grants panel (the server renders the page
    // before any chat is loaded, with every panel closed), from code loaded when they are first
    // shown: a part of the wasm of its own when it is split (ui::deferred, ADR 0030).
    let messages = move || {
        let list = NodeRef::<leptos::html::Ol>::new();
        #[cfg(feature = "hydrate")]
        super::deferred::deferred(list, move |list| super::message::build_messages(list, ids));
        view! { <ol class="messages" aria-live="polite" node_ref=list></ol> }
    };
    let grants_panel = move || {
        let host = NodeRef::<leptos::html::Div>::new();
        #[cfg(feature = "hydrate")]
        super::deferred::deferred(host, move |host| {
            super::grants::build_panel(host, Callback::new(move |_| panels.grants.set(false)))
        });
        view! { <div class="part" node_ref=host></div> }
    };
    // BIDI's voice bar: built by code loaded when BIDI mode first shows it (ADR 0037).
    let voice_bar = move || {
        let host = NodeRef::<leptos::html::Div>::new();
        #[cfg(feature = "hydrate")]
        super::deferred::deferred(host, super::voice::build_voice_bar);
        view! { <div class="part" node_ref=host></div> }
    };
    // The messages' part is needed with the first message: fetch it now that the page works.
    #[cfg(wasm_split)]
    Effect::new(move |_| leptos::task::spawn_local(super::message::__preload_build_messages()));

    let on_keydown = move |ev: ev::KeyboardEvent| {
        if ev.key() == "Escape" && streaming.get_untracked() {
            ev.prevent_default();
            ctl.stop();
        }
    };

    view! {
        <main class="chat" on:keydown=on_keydown>
            <Toolbar panels=panels/>
            <ToolsPanel panel=panels.tools/>
            <Show when=move || panels.grants.get()>{grants_panel()}</Show>
            <Show when=move || panels.chats.get()>
                <ChatList/>
            </Show>

            <ErrorBanner/>

            <section class="conversation" id=CONVERSATION_ID aria-label="Conversation"
                aria-busy=move || (ctl.loading.get() > 0).to_string()>
                <Show when=move || !ids.with(Vec::is_empty) fallback=move || view! { <EmptyState/> }>
                    {messages()}
                </Show>
            </section>

            <Show when=move || panels.log.get()>
                <ChunkLog/>
            </Show>

            <Show when=move || ctl.mode.get() == Mode::Bidi>{voice_bar()}</Show>
            <Composer
                on_send=Callback::new(move |(text, files): (String, Vec<super::platform::PickedFile>)| ctl.send(text, files))
                busy=streaming
                on_stop=Callback::new(move |_| ctl.stop())
                max_attachment_bytes=Signal::derive(move || ctl.max_attachment_bytes())
                on_error=Callback::new(move |message: String| ctl.report(message))
            />
        </main>
    }
}

/// Which of the chat page's panels are open (`Copy`, so every handler can hold it).
#[derive(Clone, Copy)]
struct Panels {
    log: RwSignal<bool>,
    chats: RwSignal<bool>,
    grants: RwSignal<bool>,
    /// The Tools panel: the server's own list (`/tools?panel`), fetched each time it opens.
    tools: RwSignal<Option<String>>,
}

impl Panels {
    fn new() -> Self {
        Panels {
            log: RwSignal::new(false),
            chats: RwSignal::new(false),
            grants: RwSignal::new(false),
            tools: RwSignal::new(None),
        }
    }

    /// The Tools link's click: opens the panel (fetching the list) or closes it.
    fn toggle_tools(self, ev: ev::MouseEvent) {
        // A modified click opens the page (a new tab) as links do.
        if ev.ctrl_key() || ev.meta_key() || ev.shift_key() || ev.button() != 0 {
            return;
        }
        ev.prevent_default();
        let tools_panel = self.tools;
        if tools_panel.get_untracked().is_some() {
            tools_panel.set(None);
            return;
        }
        tools_panel.set(Some("<p class=\"muted\">Loading…</p>".into()));
        leptos::task::spawn_local(async move {
            let html = tools_panel_html().await;
            if tools_panel.get_untracked().is_some() {
                tools_panel.set(Some(html));
            }
        });
    }
}

/// The tools panel's HTML, written by the server (`GET /tools?panel`), or why it is missing.
/// With a split wasm (ADR 0030) this is a part of its own, loaded when the panel first opens.
#[cfg_attr(wasm_split, leptos::lazy(tools_panel))]
async fn tools_panel_html() -> String {
    match super::platform::get_text("/tools?panel").await {
        Ok(html) => html,
        Err(e) => format!(
            "<p class=\"edit-error\" role=\"alert\">{}</p>",
            super::html::escape(&e.to_string())
        ),
    }
}

/// The chat's controls: the transport, the model, the music, the panels, a new chat.
#[component]
fn Toolbar(panels: Panels) -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    let Panels {
        log: show_log,
        chats: show_chats,
        grants: show_grants,
        tools: tools_panel,
    } = panels;
    view! {
        <div class="toolbar" role="toolbar" aria-label="Chat controls">
            <div class="mode-switch" role="group" aria-label="Transport">
                <button type="button" data-testid="mode-sse" aria-pressed=move || (ctl.mode.get() == Mode::Sse).to_string()
                    on:click=move |_| ctl.set_mode(Mode::Sse) title="One HTTP request per turn (AI SDK compatible)">"SSE"</button>
                <button type="button" data-testid="mode-bidi" aria-pressed=move || (ctl.mode.get() == Mode::Bidi).to_string()
                    on:click=move |_| ctl.set_mode(Mode::Bidi) title="One WebSocket for the whole chat">"BIDI"</button>
            </div>
            <Show when=move || ctl.mode.get() == Mode::Bidi>
                <span class=move || format!("connection {}", ctl.link.get().label().to_ascii_lowercase()) data-testid="connection-status" role="status">
                    {move || ctl.link.get().label()}
                </span>
            </Show>
            <span class="model" title="The model answering">{move || ctl.model.get()}</span>
            <span class="spacer"></span>
            <button type="button" class="bgm" data-testid="bgm-control"
                data-playing=move || ctl.bgm.get().is_some().to_string()
                aria-pressed=move || ctl.bgm.get().is_some().to_string()
                on:click=move |_| ctl.toggle_bgm()>
                <super::icons::NoteIcon/>
                {move || if ctl.bgm.get().is_some() { " Pause" } else { " Play" }}
            </button>
            <span class="bgm-track" data-testid="bgm-track">
                {move || ctl.bgm.get().map(|t| format!("Track {t}")).unwrap_or_else(|| "Off".into())}
            </span>
            <button type="button" data-testid="chunk-log-toggle" aria-expanded=move || show_log.get().to_string()
                on:click=move |_| show_log.update(|v| *v = !*v)>"Chunk log"</button>
            <a class="toolbar-link" href="/tools" data-testid="tools-link" title="The tools the model may call, and what each needs"
                aria-expanded=move || tools_panel.with(Option::is_some).to_string() on:click=move |ev| panels.toggle_tools(ev)>"Tools"</a>
            <button type="button" data-testid="grants-toggle" aria-expanded=move || show_grants.get().to_string()
                title="Approvals you asked to remember, with revoke"
                on:click=move |_| show_grants.update(|v| *v = !*v)>"Grants"</button>
            <button type="button" data-testid="chat-list-toggle" aria-expanded=move || show_chats.get().to_string()
                on:click=move |_| show_chats.update(|v| *v = !*v)>"Chats"</button>
            <button type="button" class="primary" data-testid="new-chat" on:click=move |_| ctl.new_chat()>"New chat"</button>
        </div>
    }
}

/// The server's list of tools (`/tools?panel`), while the Tools panel is open.
#[component]
fn ToolsPanel(panel: RwSignal<Option<String>>) -> impl IntoView {
    move || {
        panel.get().map(|html| {
            view! {
                <aside class="tools-panel" data-testid="tools-panel" aria-label="Tools">
                    <header>
                        <strong>"Tools"</strong>
                        <a href="/tools" target="_blank">"Open as a page"</a>
                        <button type="button" class="link-button" data-testid="tools-panel-close"
                            on:click=move |_| panel.set(None)>"Close"</button>
                    </header>
                    <div inner_html=html></div>
                </aside>
            }
        })
    }
}

/// The person's chats, to open one.
#[component]
fn ChatList() -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    view! {
        <nav class="chat-list" data-testid="chat-list" aria-label="Your chats">
            <ul>
                <For each=move || ctl.chats.get() key=|c| c.id.clone() children=move |c| {
                    let id = c.id.clone();
                    let current = {
                        let id = id.clone();
                        move || ctl.chat_id.get() == id
                    };
                    view! {
                        <li>
                            <button type="button" data-testid="chat-item" aria-current=move || current().then_some("true")
                                on:click=move |_| ctl.open_chat(id.clone())>{c.title.clone()}</button>
                        </li>
                    }
                }/>
            </ul>
            <Show when=move || ctl.chats.with(Vec::is_empty)>
                <p class="muted">"No chats yet."</p>
            </Show>
        </nav>
    }
}

/// What went wrong, with Try again when it may help.
#[component]
fn ErrorBanner() -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    move || {
        ctl.banner.get().map(|banner| {
            view! {
                <div class="error-banner" data-testid="error-banner" role="alert">
                    <span>{banner.message}</span>
                    {banner.retry.then(|| view! {
                        <button type="button" data-testid="error-retry" on:click=move |_| ctl.retry()>"Try again"</button>
                    })}
                    <button type="button" class="link-button" aria-label="Dismiss" on:click=move |_| ctl.banner.set(None)>"×"</button>
                </div>
            }
        })
    }
}

#[component]
fn EmptyState() -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    view! {
        <div class="empty-state" data-testid="empty-state">
            <h1>"Ask the agent for something"</h1>
            <p>
                "It can look up the weather, send a payment, find where you are and change the "
                "music. Anything sensitive waits for your countersignature: approve, deny or edit."
            </p>
            <ul class="examples">
                {EXAMPLES.iter().map(|prompt| {
                    let text = prompt.to_string();
                    view! {
                        <li>
                            <button type="button" class="example" data-testid="example-prompt"
                                disabled=move || !ctl.hydrated.get()
                                on:click=move |_| ctl.send_text(text.clone())>{*prompt}</button>
                        </li>
                    }
                }).collect_view()}
            </ul>
        </div>
    }
}

/// The raw chunks of this page, newest last, with a JSONL download.
#[component]
fn ChunkLog() -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    view! {
        <aside class="chunk-log" data-testid="chunk-log" aria-label="Chunk log">
            <header>
                <strong>"Chunk log"</strong>
                <span class="muted">{move || format!("{} entries", ctl.log.with(Vec::len))}</span>
                <button type="button" data-testid="chunk-log-download" on:click=move |_| ctl.download_log()>"Download JSONL"</button>
            </header>
            <ol>
                <For each=move || ctl.log.get() key=|e| e.sequence_number children=|e| {
                    let text = e.chunk.to_string();
                    let short: String = text.chars().take(300).collect();
                    view! {
                        <li data-testid="chunk-log-row" class=format!("dir-{}", e.direction)>
                            <span class="seq">{e.sequence_number}</span>
                            <span class="dir">{if e.direction == "in" { "↓" } else { "↑" }}</span>
                            <span class="mode">{e.mode}</span>
                            <code>{short}</code>
                        </li>
                    }
                }/>
            </ol>
        </aside>
    }
}

/// `window.__countersign` hooks for browser tests (drop the socket as a network failure would).
#[cfg(feature = "hydrate")]
fn expose_test_hooks(ctl: ChatCtl) {
    use wasm_bindgen::{JsCast, JsValue, closure::Closure};
    let Some(window) = web_sys::window() else {
        return;
    };
    let hooks = js_sys::Object::new();
    let drop_socket = Closure::<dyn Fn()>::new(move || ctl.drop_socket());
    let _ = js_sys::Reflect::set(
        &hooks,
        &JsValue::from_str("dropSocket"),
        drop_socket.as_ref().unchecked_ref(),
    );
    drop_socket.forget();
    let _ = js_sys::Reflect::set(&window, &JsValue::from_str("__countersign"), &hooks);
}
