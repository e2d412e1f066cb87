//! Isomorphic Leptos components: the server renders them to HTML, the wasm client hydrates the
//! same tree. Everything a person sees lives here.

pub mod api;
mod audit;
/// The browser side (client only): web-sys transports and the tools the browser runs, behind
/// [`platform`].
#[cfg(feature = "hydrate")]
pub mod browser;
mod chat;
mod composer;
pub mod controller;
#[cfg(feature = "hydrate")]
mod deferred;
mod form;
pub mod grants;
mod icons;
pub mod inbox;
pub mod markdown;
// Messages and their cards are rendered by the browser only (ui::deferred).
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
mod message;
pub mod people;
pub mod platform;
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
mod question;
// The voice bar is built by the browser only (ui::deferred), in BIDI mode.
#[cfg_attr(not(feature = "hydrate"), allow(dead_code))]
mod voice;

use leptos::{either::EitherOf5, prelude::*};

pub use crate::common::fn_error::FnError;
/// The text helpers ui writes with (they live below every layer: `crate::common`).
pub(crate) use crate::common::{html, url};
pub use chat::ChatPage;
pub use composer::Composer;

/// The HTML document around the app (server only renders it; the client hydrates `<body>`).
/// The head is static, written here rather than with leptos_meta (its client side was ~7 KB
/// of wasm for tags that never change). `stylesheet` is the CSS bundle's URL path (its name
/// carries a content hash in release builds).
pub fn shell(options: LeptosOptions, stylesheet: std::sync::Arc<str>) -> impl IntoView {
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
                {platform::signed_in().then(|| view! { <meta name="countersign-session" content="signed-in"/> })}
                {platform::person_name().map(|name| view! { <meta name="countersign-person" content=name/> })}
                // The passkey script confirms approvals (step-up): only someone signed in with a
                // passkey can be asked for that, so nobody else loads it.
                {platform::person_name().is_some().then(|| view! { <script src="/passkey.js" defer></script> })}
                <link id="leptos" rel="stylesheet" href=stylesheet.to_string()/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The pages. A page is chosen by the path of a full page load: every link between pages is one
/// (there is no client-side router), so a chat's socket, timers and browser tools belong to its
/// page and end with it, and the wasm carries no router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    Chat,
    Audit,
    /// The inbox: every approval the person may decide.
    Approvals,
    /// One approval (the link to open on another device).
    Approval(String),
    People,
    NotFound,
}

impl Page {
    /// The paths the server renders as pages (any other renders `NotFound` with a 404), as
    /// axum routes.
    pub const PATHS: [&'static str; 5] =
        ["/", "/audit", "/approvals", "/approvals/{id}", "/people"];

    pub fn for_path(path: &str) -> Page {
        match path {
            "/" | "" => Page::Chat,
            "/audit" => Page::Audit,
            "/approvals" => Page::Approvals,
            "/people" => Page::People,
            _ => match path.strip_prefix("/approvals/") {
                Some(id) if !id.is_empty() && !id.contains('/') => Page::Approval(url::decode(id)),
                _ => Page::NotFound,
            },
        }
    }
}

/// The application: the header and the page the location selects. The server renders it; the
/// browser hydrates the page it rendered with [`hydrate`].
#[component]
pub fn App() -> impl IntoView {
    let (path, query) = platform::location();
    frame(match Page::for_path(&path) {
        Page::Chat => EitherOf5::A(view! { <ChatPage/> }),
        Page::Audit => EitherOf5::B(view! { <audit::AuditPage query/> }),
        Page::Approvals => EitherOf5::C(view! { <inbox::InboxPage focus=None/> }),
        Page::Approval(id) => EitherOf5::C(view! { <inbox::InboxPage focus=Some(id)/> }),
        Page::People => EitherOf5::D(view! { <people::PeoplePage/> }),
        Page::NotFound => EitherOf5::E(view! { <NotFound/> }),
    })
}

/// Every page: the header, then the page (a plain function, not a component with children:
/// children would erase the page's type, and an erased view carries a second, asynchronous
/// copy of its hydration code).
fn frame(page: impl IntoView) -> impl IntoView {
    view! {
        <div class="app">
            <Header/>
            {page}
        </div>
    }
}

/// Hydrates the page the server rendered, as [`App`] would have it.
///
/// The chat hydrates at once: its code is the main wasm module. Every other page's code is a
/// part of the wasm loaded on that page only when the wasm is split (`cargo leptos build
/// --split`, ADR 0030): the page hydrates once its part has arrived, and the chat page never
/// fetches it. Without `--split` the module is whole and every page hydrates at once.
#[cfg(feature = "hydrate")]
pub fn hydrate() {
    let (path, query) = platform::location();
    match Page::for_path(&path) {
        Page::Chat => leptos::mount::hydrate_body(|| frame(view! { <ChatPage/> })),
        Page::NotFound => leptos::mount::hydrate_body(|| frame(view! { <NotFound/> })),
        page => {
            // Leptos' executor starts with `hydrate_body`, once this page's code has loaded.
            wasm_bindgen_futures::spawn_local(async move {
                match page {
                    Page::Audit => audit::hydrate(query).await,
                    Page::Approvals => inbox::hydrate(None).await,
                    Page::Approval(id) => inbox::hydrate(Some(id)).await,
                    Page::People => people::hydrate().await,
                    Page::Chat | Page::NotFound => {}
                }
            });
        }
    }
}

/// Room in the read-only data for the split (ADR 0037). wasm-split (`cargo leptos build --split`)
/// lays each part's data out again inside the space the whole module's data took; bytes two parts
/// both reach are written twice and each part's block is aligned, so once the split outgrows that
/// space it gives up and puts *all* data in the main module (`Overlong segment 0 … putting it in
/// main module`: +44 KB on the chat page when the voice part landed). These bytes are kept by the
/// linker (`#[used]`) and reached by no part, so the split drops them and its layout fits again.
#[cfg(all(feature = "hydrate", wasm_split))]
#[used]
static SPLIT_DATA_ROOM: [u8; 1024] = [0x5a; 1024];

/// Hydrates `page` in the frame: what each lazily loaded page's part of the wasm runs.
#[cfg(feature = "hydrate")]
fn hydrate_in_frame<V: IntoView + 'static>(page: impl FnOnce() -> V + 'static) {
    leptos::mount::hydrate_body(move || frame(page()));
}

#[component]
fn Header() -> impl IntoView {
    view! {
        <header class="app-header">
            <a class="brand" href="/">
                <span class="brand-mark" aria-hidden="true"><icons::PenIcon/></span>
                <span class="brand-name">"Countersign"</span>
            </a>
            <p class="tagline">"Nothing sensitive runs until you countersign it."</p>
            <nav class="app-nav" aria-label="Pages">
                <a href="/">"Chat"</a>
                <a href="/approvals" data-testid="nav-approvals">"Approvals"</a>
                <a href="/people" data-testid="nav-people">"People"</a>
                <a href="/audit" data-testid="nav-audit">"Audit log"</a>
                {platform::person_name().map(|name| view! {
                    <span class="signed-in-as" data-testid="signed-in-as">{name}</span>
                })}
                {platform::signed_in().then(|| view! {
                    <form method="post" action="/signout" class="signout">
                        <button type="submit" class="link-button" data-testid="header-signout">"Sign out"</button>
                    </form>
                })}
            </nav>
        </header>
    }
}

#[component]
fn NotFound() -> impl IntoView {
    platform::respond_not_found();
    view! {
        <main class="not-found">
            <h1>"Page not found"</h1>
            <p><a href="/">"Back to the chat"</a></p>
        </main>
    }
}

#[cfg(test)]
mod tests {
    use super::Page;

    #[test]
    fn pages_are_chosen_by_exact_path() {
        assert_eq!(Page::for_path("/"), Page::Chat);
        assert_eq!(Page::for_path("/audit"), Page::Audit);
        assert_eq!(Page::for_path("/approvals"), Page::Approvals);
        assert_eq!(Page::for_path("/people"), Page::People);
        assert_eq!(
            Page::for_path("/approvals/apv-1"),
            Page::Approval("apv-1".into())
        );
        for path in [
            "/audit/",
            "/audit/x",
            "/chat",
            "/AUDIT",
            "//",
            "/approvals/",
            "/approvals/a/b",
        ] {
            assert_eq!(Page::for_path(path), Page::NotFound, "{path}");
        }
        for path in Page::PATHS {
            let path = path.replace("{id}", "x");
            assert_ne!(Page::for_path(&path), Page::NotFound, "{path}");
        }
    }
}
