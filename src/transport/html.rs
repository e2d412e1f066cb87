//! The few pages the server writes without the Leptos app (sign-in, the tools list): plain HTML
//! that costs the browser's bundle nothing.

use axum::response::Html;

use crate::state::AppState;

/// Text made safe inside HTML (element content and double-quoted attributes).
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape(r#"<a href="x">&</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }
}
