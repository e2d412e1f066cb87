//! The browser implementation: thin adapters over `crate::ui::browser`.

use std::rc::Rc;

use serde_json::Value;

use super::{FetchError, SocketEvent};
use crate::{protocol::StreamItem, ui::browser};

pub use browser::{
    dom::{
        action_of, copy, download, every, focus, form_entries, is_near_bottom, is_signed_out,
        location, now_ms, person_name, random_id, scroll_to_bottom, signed_in, signed_out, sleep,
        storage_get, storage_set, tick_countdowns, ws_base,
    },
    passkey::assert as passkey_assert,
};

/// The browser sets the status; the page only renders.
pub fn respond_not_found() {}

pub async fn stream(
    method: &str,
    url: &str,
    body: Option<String>,
    headers: &[(&str, &str)],
    on_frame: impl FnMut(StreamItem, Value),
) -> Result<bool, FetchError> {
    browser::fetch::stream(method, url, body, headers, on_frame).await
}

/// A `POST` whose answer only matters by its status.
pub async fn post(url: &str, body: Option<String>) -> Result<(), FetchError> {
    browser::fetch::post(url, body).await
}

/// `GET url` and its body as text.
pub async fn get_text(url: &str) -> Result<String, FetchError> {
    browser::fetch::get_text(url).await
}

/// `GET url` and its JSON body.
pub async fn get_json<T: serde::de::DeserializeOwned>(url: &str) -> Result<T, FetchError> {
    browser::fetch::get_json(url).await
}

pub async fn read_picked(event: &leptos::ev::Event) -> Vec<Result<super::PickedFile, String>> {
    browser::files::read_picked(event).await
}

/// The Geolocation API; with a split wasm (ADR 0030) its code loads when first used.
#[cfg_attr(wasm_split, leptos::lazy(geolocation))]
pub async fn locate() -> Result<Value, String> {
    browser::geo::locate().await
}

/// Plays a BGM track; with a split wasm (ADR 0030) the player's code loads when first used.
#[cfg_attr(wasm_split, leptos::lazy(music))]
pub async fn bgm_play(track: u8) -> Result<(), String> {
    browser::audio::play(track).await
}

pub fn bgm_stop() {
    browser::audio::stop();
}

pub fn bgm_unlock() {
    browser::audio::unlock();
}

/// The microphone and the agent's speech (BIDI's voice, ADR 0037): only the voice bar makes it,
/// so with a split wasm (ADR 0030) its code is the bar's part.
pub fn voice_engine() -> Rc<dyn super::VoiceEngine> {
    browser::voice::engine()
}

/// The BIDI socket.
#[derive(Clone)]
pub struct Socket(browser::socket::LiveSocket);

impl Socket {
    pub fn connect(url: &str, on_event: Rc<dyn Fn(SocketEvent)>) -> Result<Self, String> {
        browser::socket::LiveSocket::connect(url, on_event).map(Socket)
    }

    pub fn send(&self, text: &str) -> Result<(), String> {
        self.0.send(text)
    }

    /// A binary frame (the microphone's PCM).
    pub fn send_bytes(&self, bytes: &[u8]) -> Result<(), String> {
        self.0.send_bytes(bytes)
    }

    pub fn is_open(&self) -> bool {
        self.0.is_open()
    }

    pub fn close(&self) {
        self.0.close();
    }

    pub fn drop_abnormally(&self) {
        self.0.drop_abnormally();
    }
}
