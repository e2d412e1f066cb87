//! The server build of the platform interface: the server renders HTML only. Apart from
//! `location`, `respond_not_found` and `respond_status` (which the server's render and its server
//! functions use), none of these is reached there: they are called from event handlers and
//! effects, which run in the browser.

use std::rc::Rc;

use serde_json::Value;

use super::{FetchError, SocketEvent};
use crate::protocol::StreamItem;

const NOT_IN_A_BROWSER: &str = "only available in the browser";

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The path and query (without `?`) of the request being rendered.
pub fn location() -> (String, String) {
    leptos::prelude::use_context::<axum::http::request::Parts>()
        .map(|parts| {
            let uri = &parts.uri;
            (
                uri.path().to_owned(),
                uri.query().unwrap_or_default().to_owned(),
            )
        })
        .unwrap_or_else(|| ("/".to_owned(), String::new()))
}

/// Whether the request being rendered carries a sign-in session (the page offers to sign out).
/// A page is only rendered for an authenticated request, so the cookie is a valid one.
pub fn signed_in() -> bool {
    leptos::prelude::use_context::<axum::http::request::Parts>().is_some_and(|parts| {
        crate::transport::edge::signin::session_cookie(&parts.headers).is_some()
    })
}

/// The name of the person signed in with a passkey for the request being rendered (the header
/// shows it).
pub fn person_name() -> Option<String> {
    match crate::transport::people::caller()? {
        crate::agent::people::Principal::Person { name, .. } => Some(name),
        crate::agent::people::Principal::Local { .. } => None,
    }
}

/// A page's sign-in ends in the browser (a 401 there); the server renders for a signed-in request.
pub fn signed_out() {}

pub fn is_signed_out() -> bool {
    false
}

/// Countdowns tick only in the browser.
pub fn tick_countdowns(_offset_ms: i64) {}

/// Passkeys are used only in the browser.
pub async fn passkey_assert(_options: &Value) -> Result<Value, String> {
    Err(NOT_IN_A_BROWSER.into())
}

/// Marks the response being rendered as 404 Not Found.
pub fn respond_not_found() {
    respond_status(404);
}

/// Sets the status of the response being rendered or answered (a server function's refusal).
pub fn respond_status(status: u16) {
    if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>()
        && let Ok(status) = axum::http::StatusCode::from_u16(status)
    {
        response.set_status(status);
    }
}

pub fn storage_get(_key: &str) -> Option<String> {
    None
}

pub fn storage_set(_key: &str, _value: &str) {}

pub fn download(_filename: &str, _text: &str, _media_type: &str) -> Result<(), String> {
    Err(NOT_IN_A_BROWSER.into())
}

pub fn copy(_text: &str) {}

pub fn ws_base() -> String {
    String::new()
}

pub fn every(_ms: i32, _f: impl Fn() + 'static) {}

pub async fn sleep(_ms: i32) {}

pub fn random_id(prefix: &str) -> String {
    format!("{prefix}-{}", now_ms())
}

pub fn focus(_element_id: &str) {}

/// Clicks happen only in the browser.
pub fn action_of(_event: &leptos::ev::Event) -> Option<String> {
    None
}

/// Forms are submitted only in the browser.
pub fn form_entries(_event: &leptos::ev::Event) -> Vec<(String, String)> {
    Vec::new()
}

pub fn scroll_to_bottom(_element_id: &str) {}

pub fn is_near_bottom(_element_id: &str) -> bool {
    true
}

pub async fn stream(
    _method: &str,
    _url: &str,
    _body: Option<String>,
    _headers: &[(&str, &str)],
    _on_frame: impl FnMut(StreamItem, serde_json::Value),
) -> Result<bool, FetchError> {
    Err(FetchError::Network(NOT_IN_A_BROWSER.into()))
}

pub async fn post(_url: &str, _body: Option<String>) -> Result<(), FetchError> {
    Err(FetchError::Network(NOT_IN_A_BROWSER.into()))
}

pub async fn get_text(_url: &str) -> Result<String, FetchError> {
    Err(FetchError::Network(NOT_IN_A_BROWSER.into()))
}

pub async fn get_json<T: serde::de::DeserializeOwned>(_url: &str) -> Result<T, FetchError> {
    Err(FetchError::Network(NOT_IN_A_BROWSER.into()))
}

pub async fn read_picked(_event: &leptos::ev::Event) -> Vec<Result<super::PickedFile, String>> {
    Vec::new()
}

pub async fn locate() -> Result<Value, String> {
    Err(NOT_IN_A_BROWSER.into())
}

pub async fn bgm_play(_track: u8) -> Result<(), String> {
    Err(NOT_IN_A_BROWSER.into())
}

pub fn bgm_stop() {}

pub fn bgm_unlock() {}

/// The server has no microphone and no speakers.
struct NoVoice;

impl super::VoiceEngine for NoVoice {
    fn open_mic(
        &self,
        _on_batch: Rc<dyn Fn(Vec<f32>)>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), super::MicError>>>> {
        Box::pin(async { Err(super::MicError::Unsupported(NOT_IN_A_BROWSER.into())) })
    }

    fn close_mic(&self, done: Box<dyn FnOnce()>) {
        done();
    }

    fn play(&self, _pcm: &[u8]) {}

    fn stop_playback(&self) {}

    fn playing(&self) -> bool {
        false
    }
}

pub fn voice_engine() -> Rc<dyn super::VoiceEngine> {
    Rc::new(NoVoice)
}

/// The BIDI socket (never opened on the server).
#[derive(Clone)]
pub struct Socket;

impl Socket {
    pub fn connect(_url: &str, _on_event: Rc<dyn Fn(SocketEvent)>) -> Result<Self, String> {
        Err(NOT_IN_A_BROWSER.into())
    }

    pub fn send(&self, _text: &str) -> Result<(), String> {
        Err(NOT_IN_A_BROWSER.into())
    }

    pub fn send_bytes(&self, _bytes: &[u8]) -> Result<(), String> {
        Err(NOT_IN_A_BROWSER.into())
    }

    pub fn is_open(&self) -> bool {
        false
    }

    pub fn close(&self) {}

    pub fn drop_abnormally(&self) {}
}
