//! The few pages the server writes without the Leptos app (sign-in, the tools list): plain HTML
//! that costs the browser's bundle nothing.

use axum::response::Html;

use crate::transport::state::AppState;

pub use crate::common::html::escape;

/// A whole page: the site's stylesheet, `title`, and `body` (already HTML) in `<main class>`.
pub fn document(state: &AppState, title: &str, main_class: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} · Countersign</title><link rel=\"stylesheet\" href=\"{css}\">\
         <link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">\
         </head><body><main class=\"{main_class}\">{body}</main></body></html>",
        title = escape(title),
        css = escape(&state.site.css_href()),
        main_class = escape(main_class),
    ))
}
