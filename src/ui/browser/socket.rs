//! BIDI mode in the browser: one WebSocket, frames in SSE form (and the agent's speech as
//! binary frames), events to the controller.
//!
//! This type only connects, sends and reports; reconnecting and resuming (with the count of
//! frames received) is the controller's decision, because only it knows which turn it follows.

use std::{cell::RefCell, rc::Rc};

use wasm_bindgen::{JsCast, closure::Closure};

use crate::{protocol::Chunk, ui::platform::SocketEvent};

struct Inner {
    ws: web_sys::WebSocket,
    by_us: bool,
    _on_open: Closure<dyn FnMut()>,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_close: Closure<dyn FnMut(web_sys::CloseEvent)>,
}

/// A WebSocket to `/api/live`.
#[derive(Clone)]
pub struct LiveSocket {
    inner: Rc<RefCell<Option<Inner>>>,
}

/// Decodes one server text frame.
fn decode(text: &str) -> Option<SocketEvent> {
    if let Some(data) = text.strip_prefix("data: ") {
        let data = data.trim_end();
        if data == "[DONE]" {
            return Some(SocketEvent::Done);
        }
        let raw: serde_json::Value = serde_json::from_str(data).ok()?;
        return Chunk::from_value(raw.clone())
            .ok()
            .map(|c| SocketEvent::Chunk(c, raw));
    }
    serde_json::from_str(text).ok().map(SocketEvent::Control)
}

impl LiveSocket {
    /// Opens `url`; every event goes to `on_event`.
    pub fn connect(url: &str, on_event: Rc<dyn Fn(SocketEvent)>) -> Result<Self, String> {
        let ws = web_sys::WebSocket::new(url).map_err(|_| format!("cannot open {url}"))?;
        let inner: Rc<RefCell<Option<Inner>>> = Rc::new(RefCell::new(None));

        let events = on_event.clone();
        let on_open = Closure::<dyn FnMut()>::new(move || events(SocketEvent::Open));
        let events = on_event.clone();
        let on_message =
            Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |e: web_sys::MessageEvent| {
                let data = e.data();
                if let Some(text) = data.as_string() {
                    if let Some(event) = decode(&text) {
                        events(event);
                    }
                } else if let Some(buffer) = data.dyn_ref::<js_sys::ArrayBuffer>() {
                    events(SocketEvent::Audio(js_sys::Uint8Array::new(buffer).to_vec()));
                }
            });
        let events = on_event;
        let state = inner.clone();
        let on_close =
            Closure::<dyn FnMut(web_sys::CloseEvent)>::new(move |e: web_sys::CloseEvent| {
                let by_us = state.borrow().as_ref().is_some_and(|i| i.by_us);
                events(SocketEvent::Closed {
                    code: e.code(),
                    reason: e.reason(),
                    by_us,
                });
            });
        ws.set_binary_type(web_sys::BinaryType::Arraybuffer);
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        *inner.borrow_mut() = Some(Inner {
            ws,
            by_us: false,
            _on_open: on_open,
            _on_message: on_message,
            _on_close: on_close,
        });
        Ok(LiveSocket { inner })
    }

    pub fn is_open(&self) -> bool {
        self.inner
            .borrow()
            .as_ref()
            .is_some_and(|i| i.ws.ready_state() == web_sys::WebSocket::OPEN)
    }

    pub fn send(&self, text: &str) -> Result<(), String> {
        self.send_with(|ws| ws.send_with_str(text))
    }

    /// A binary frame (the microphone's PCM).
    pub fn send_bytes(&self, bytes: &[u8]) -> Result<(), String> {
        self.send_with(|ws| ws.send_with_u8_array(bytes))
    }

    fn send_with(
        &self,
        send: impl FnOnce(&web_sys::WebSocket) -> Result<(), wasm_bindgen::JsValue>,
    ) -> Result<(), String> {
        match self.inner.borrow().as_ref() {
            Some(inner) if inner.ws.ready_state() == web_sys::WebSocket::OPEN => {
                send(&inner.ws).map_err(|_| "the connection is not open".to_string())
            }
            _ => Err("the connection is not open".into()),
        }
    }

    /// Closes on purpose (mode switch, new chat).
    pub fn close(&self) {
        if let Some(inner) = self.inner.borrow_mut().as_mut() {
            inner.by_us = true;
            let _ = inner.ws.close();
        }
    }

    /// Closes as if the network dropped (for tests: the controller must reconnect).
    pub fn drop_abnormally(&self) {
        if let Some(inner) = self.inner.borrow().as_ref() {
            let _ = inner
                .ws
                .close_with_code_and_reason(4999, "dropped for a test");
        }
    }
}
