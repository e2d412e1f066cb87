//! Isomorphic Leptos components: the server renders them to HTML, the wasm client hydrates the
//! same tree. Everything a person sees lives here.

pub mod api;
mod audit;
mod chat;
mod composer;
pub mod controller;
pub mod markdown;
mod message;
pub mod platform;

use leptos::prelude::*;
use leptos_router::{
    StaticSegment,
    components::{Route, Router, Routes},
};

pub use chat::ChatPage;
pub use composer::Composer;

/// The HTML document around the app (server only renders it; the client hydrates `<body>`).
/// The head is static, written here rather than with leptos_meta (its client side was ~7 KB
/// of wasm for tags that never change).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <title>"Countersign"</title>
                <meta name="description" content="An agent chat where no sensitive tool runs until you countersign it."/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <link id="leptos" rel="stylesheet" href="/pkg/countersign.css"/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The application: header, routes, and the page a route selects.
#[component]
pub fn App() -> impl IntoView {
    view! {
        <Router>
            <div class="app">
                <Header/>
                <Routes fallback=NotFound>
                    <Route path=StaticSegment("") view=ChatPage/>
                    <Route path=StaticSegment("audit") view=audit::AuditPage/>
                </Routes>
            </div>
        </Router>
    }
}

#[component]
fn Header() -> impl IntoView {
    view! {
        <header class="app-header">
            // Full page loads between the chat and the audit log (rel="external": the router lets
            // them through): the chat's socket, timers and browser tools belong to its page and
            // end with it, instead of outliving a client-side route change.
            <a class="brand" href="/" rel="external">
                <span class="brand-mark" aria-hidden="true">"✍"</span>
                <span class="brand-name">"Countersign"</span>
            </a>
            <p class="tagline">"Nothing sensitive runs until you countersign it."</p>
            <nav class="app-nav" aria-label="Pages">
                <a href="/" rel="external">"Chat"</a>
                <a href="/audit" rel="external" data-testid="nav-audit">"Audit log"</a>
            </nav>
        </header>
    }
}

#[component]
fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    {
        if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(axum::http::StatusCode::NOT_FOUND);
        }
    }
    view! {
        <main class="not-found">
            <h1>"Page not found"</h1>
            <p><a href="/">"Back to the chat"</a></p>
        </main>
    }
}
