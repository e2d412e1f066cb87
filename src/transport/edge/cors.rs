//! A frontend on another origin, on purpose (`COUNTERSIGN_ALLOWED_ORIGINS`).
//!
//! The original system's Next.js frontend runs on its own origin and calls the backend with
//! `fetch` (header `X-API-Key`) and a WebSocket. Browsers ask first (a CORS preflight,
//! `OPTIONS` without credentials), so preflights are answered here, before authentication, and
//! only origins on the list get `Access-Control-Allow-*` headers; any other origin's page is left
//! to the browser's same-origin policy. Cookies cross origins only with
//! `COUNTERSIGN_CORS_CREDENTIALS=true`.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

/// The CORS layer for `allowed_origins` (`https://app.example`, no trailing slash).
pub fn layer(allowed_origins: &[String], credentials: bool) -> CorsLayer {
    let origins: Vec<HeaderValue> = allowed_origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
        // Whatever the page asks to send (content-type, X-API-Key, the AI SDK's own headers,
        // `x-countersign-*`): only listed origins get an answer at all.
        .allow_headers(AllowHeaders::mirror_request())
        .allow_credentials(credentials)
        .expose_headers([
            header::RETRY_AFTER,
            header::CONTENT_TYPE,
            HeaderName::from_static("x-vercel-ai-ui-message-stream"),
        ])
        .max_age(Duration::from_secs(600))
}
