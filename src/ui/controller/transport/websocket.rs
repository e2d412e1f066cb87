//! BIDI mode: one WebSocket to `/api/live` for the whole chat (`?audio=binary`: the agent's
//! speech arrives and the microphone's leaves as binary frames, ADR 0037). Frames sent while it is not open
//! wait in an outbox; a dropped socket reconnects with backoff and resumes the turn it followed
//! by the count of frames already received (decisions in [`super::reconnect`]).

use std::{
    cell::{Cell, RefCell},
    rc::{Rc, Weak},
};

use leptos::{prelude::*, task::spawn_local};
use serde_json::{Value, json};

use super::{
    ChatTransport,
    reconnect::{self, AfterClose},
};
use crate::{
    protocol::{Chunk, ClientFrame, Trigger, UiMessage, countersign::PENDING_PART},
    ui::{
        controller::{ChatCtl, Link, Mode, Status},
        platform::{self, Socket, SocketEvent},
    },
};

/// A turn that waits for the person is followed live: the server's turn is alive and waiting.
pub(super) const FOLLOWS_WAITING_TURNS: bool = true;

/// A WebSocket message is capped at 1 MiB by default, and a `data:` URL is a third larger than
/// the file.
pub(super) const MAX_ATTACHMENT_BYTES: u64 = 700 * 1024;

/// The WebSocket transport. With a split wasm (ADR 0030) its code is a part of its own, loaded
/// when BIDI mode is first used.
#[cfg_attr(wasm_split, leptos::lazy(websocket))]
pub(super) async fn transport() -> Rc<dyn ChatTransport> {
    let transport: Rc<dyn ChatTransport> = Rc::new(WebSocketTransport::default());
    transport
}

/// A handle on the WebSocket transport's state (the socket's event handler holds a weak one).
#[derive(Clone, Default)]
pub(in crate::ui::controller) struct WebSocketTransport(Rc<SocketState>);

#[derive(Default)]
struct SocketState {
    socket: RefCell<Option<Socket>>,
    /// Frames sent while the socket was not open.
    outbox: RefCell<Vec<String>>,
    /// Whether a turn is being followed, and how many of its frames arrived.
    turn_open: Cell<bool>,
    turn_frames: Cell<u64>,
    /// Reconnect attempts since the socket was last open.
    reconnects: Cell<u32>,
    /// Which socket is the current one: events of a socket this page already let go of (its
    /// close arriving after a new chat opened a new one) are ignored.
    generation: Cell<u64>,
}

impl WebSocketTransport {
    fn is_open(&self) -> bool {
        self.0.socket.borrow().as_ref().is_some_and(Socket::is_open)
    }

    /// Opens the socket unless it is open or opening.
    fn ensure_socket(&self, ctl: ChatCtl) {
        if self.is_open() || matches!(ctl.link.get_untracked(), Link::Connecting) {
            return;
        }
        ctl.link
            .set(reconnect::opening_link(self.0.reconnects.get()));
        let url = format!(
            "{}/api/live?text=progressive&dialect=full&audio=binary",
            platform::ws_base()
        );
        let generation = self.0.generation.get() + 1;
        self.0.generation.set(generation);
        let state: Weak<SocketState> = Rc::downgrade(&self.0);
        let handler: Rc<dyn Fn(SocketEvent)> = Rc::new(move |event| {
            if let Some(state) = state.upgrade()
                && state.generation.get() == generation
            {
                WebSocketTransport(state).on_event(ctl, event);
            }
        });
        match Socket::connect(&url, handler) {
            Ok(socket) => *self.0.socket.borrow_mut() = Some(socket),
            Err(e) => {
                ctl.link.set(Link::Offline);
                ctl.show_error(format!("Cannot open the live connection: {e}"), false);
            }
        }
    }

    fn close_socket(&self, ctl: ChatCtl) {
        // What the closed socket still reports (its close, a late frame) is no longer news.
        self.0.generation.set(self.0.generation.get() + 1);
        let socket = self.0.socket.borrow_mut().take();
        if let Some(socket) = socket {
            socket.close();
        }
        ctl.link.set(Link::Offline);
        self.0.outbox.borrow_mut().clear();
    }

    /// Sends `frame` now, or queues it and opens the socket.
    fn send(&self, ctl: ChatCtl, frame: ClientFrame) {
        let Some(frame) = frame_value(&frame) else {
            return;
        };
        ctl.log_out(frame.clone());
        let text = frame.to_string();
        let sent = self
            .0
            .socket
            .borrow()
            .as_ref()
            .filter(|s| s.is_open())
            .map(|s| s.send(&text));
        if sent != Some(Ok(())) {
            self.0.outbox.borrow_mut().push(text);
            self.ensure_socket(ctl);
        }
    }

    /// Asks the server for the frames of the current turn after those received.
    fn send_resume(&self, ctl: ChatCtl) {
        let resume = ClientFrame::Resume {
            id: ctl.chat_id.get_untracked(),
            received: self.0.turn_frames.get(),
        };
        let Some(frame) = frame_value(&resume) else {
            return;
        };
        ctl.log_out(frame.clone());
        if let Some(socket) = self.0.socket.borrow().as_ref() {
            let _ = socket.send(&frame.to_string());
        }
    }

    /// A new turn (or a resumed one) is followed from its first frame.
    fn follow_turn(&self) {
        self.0.turn_frames.set(0);
        self.0.turn_open.set(true);
    }

    fn count_frame(&self) {
        self.0.turn_frames.set(self.0.turn_frames.get() + 1);
    }

    fn on_event(&self, ctl: ChatCtl, event: SocketEvent) {
        match event {
            SocketEvent::Open => self.on_open(ctl),
            SocketEvent::Chunk(chunk, raw) => {
                if matches!(&chunk, Chunk::Data(d) if d.name == PENDING_PART) {
                    ctl.log_in(raw, Mode::Bidi.as_str());
                    return;
                }
                self.count_frame();
                if let Chunk::Data(d) = &chunk
                    && let Some((id, words)) = crate::protocol::voice::heard(d)
                {
                    ctl.log_in(raw, Mode::Bidi.as_str());
                    if let Some(id) = id {
                        ctl.on_heard(id, words);
                    }
                    return;
                }
                let active = ctl.conversation.with_value(|c| c.active().is_some());
                if !active {
                    ctl.conversation.update_value(|c| {
                        c.begin_stream(Trigger::SubmitMessage, platform::random_id("m"))
                    });
                }
                ctl.on_chunk(chunk, raw, Mode::Bidi.as_str());
            }
            SocketEvent::Done => {
                self.count_frame();
                self.0.turn_open.set(false);
                ctl.log_in(json!("[DONE]"), Mode::Bidi.as_str());
                ctl.conversation.update_value(|c| {
                    c.end_stream();
                });
                ctl.publish();
                ctl.status.set(Status::Ready);
            }
            SocketEvent::Control(value) => ctl.log_in(value, Mode::Bidi.as_str()),
            // The agent's speech, for the message streaming now (not a chunk: the turn's frame
            // count, which a resume asks from, does not include it).
            SocketEvent::Audio(pcm) => ctl.on_speech(pcm),
            SocketEvent::Closed {
                code,
                reason,
                by_us,
            } => self.on_closed(ctl, code, &reason, by_us),
        }
    }

    fn on_open(&self, ctl: ChatCtl) {
        ctl.link.set(Link::Live);
        let reconnected = self.0.reconnects.replace(0) > 0;
        let outbox_empty = self.0.outbox.borrow().is_empty();
        if reconnect::resume_on_open(self.0.turn_open.get(), reconnected, outbox_empty) {
            self.send_resume(ctl);
        }
        let queued = std::mem::take(&mut *self.0.outbox.borrow_mut());
        if let Some(socket) = self.0.socket.borrow().as_ref() {
            for text in &queued {
                let _ = socket.send(text);
            }
        }
    }

    fn on_closed(&self, ctl: ChatCtl, code: u16, reason: &str, by_us: bool) {
        *self.0.socket.borrow_mut() = None;
        let in_use = ctl.mode.get_untracked() == Mode::Bidi;
        match reconnect::after_close(code, by_us, in_use) {
            AfterClose::Offline => ctl.link.set(Link::Offline),
            AfterClose::TakenOver => {
                ctl.link.set(Link::Offline);
                ctl.show_error(
                    "This chat was opened in another tab or window; this page stopped following it."
                        .into(),
                    false,
                );
            }
            AfterClose::SignedOut => {
                ctl.link.set(Link::Offline);
                // The reason says why: "signed out: you were removed".
                let why = reason.strip_prefix("signed out").unwrap_or("");
                ctl.show_error(format!("Signed out{why}. Sign in again to go on."), false);
            }
            AfterClose::Reconnect => {
                leptos::logging::log!("socket closed {code} {reason}; reconnecting");
                ctl.link.set(Link::Reconnecting);
                let attempt = self.0.reconnects.get() + 1;
                self.0.reconnects.set(attempt);
                let this = self.clone();
                spawn_local(async move {
                    platform::sleep(reconnect::reconnect_delay_ms(attempt)).await;
                    // A socket that keeps failing to open may be refused (its sign-in ended: a
                    // WebSocket cannot say 401). A plain request finds out, and a 401 takes the
                    // page to the sign-in page; then nothing reconnects.
                    if reconnect::check_session_first(attempt) {
                        let _ = platform::get_text("/api/app").await;
                    }
                    if platform::is_signed_out() {
                        ctl.link.set(Link::Offline);
                        return;
                    }
                    let closed = this.0.socket.borrow().is_none();
                    if ctl.mode.get_untracked() == Mode::Bidi && closed {
                        ctl.link.set(Link::Offline);
                        this.ensure_socket(ctl);
                        ctl.link.set(Link::Reconnecting);
                    }
                });
            }
        }
    }
}

impl ChatTransport for WebSocketTransport {
    fn connect(&self, ctl: ChatCtl) {
        self.ensure_socket(ctl);
    }

    fn disconnect(&self, ctl: ChatCtl) {
        self.close_socket(ctl);
    }

    fn forget_chat(&self) {
        self.0.turn_open.set(false);
        self.0.turn_frames.set(0);
    }

    fn follows_waiting_turns(&self) -> bool {
        FOLLOWS_WAITING_TURNS
    }

    fn max_attachment_bytes(&self) -> u64 {
        MAX_ATTACHMENT_BYTES
    }

    fn send_message(&self, ctl: ChatCtl, message: &UiMessage) {
        ctl.conversation
            .update_value(|c| c.begin_stream(Trigger::SubmitMessage, platform::random_id("m")));
        self.follow_turn();
        ctl.status.set(Status::Submitted);
        let frame = ClientFrame::Message {
            id: ctl.chat_id.get_untracked(),
            messages: vec![message.clone()],
            trigger: Some(Trigger::SubmitMessage),
            message_id: None,
        };
        self.send(ctl, frame);
    }

    /// Sends the last assistant message: it carries the answer.
    fn send_answer(&self, ctl: ChatCtl, _browser_runs_it: bool) {
        let last = ctl
            .conversation
            .with_value(|c| c.messages().last().cloned());
        if let Some(last) = ctl.outgoing(last.into_iter().collect()).pop() {
            let frame = ClientFrame::Message {
                id: ctl.chat_id.get_untracked(),
                messages: vec![last],
                trigger: None,
                message_id: None,
            };
            self.send(ctl, frame);
        }
    }

    fn send_tool_result(&self, ctl: ChatCtl, call_id: &str, result: Result<Value, String>) {
        let result = match result {
            Ok(output) => output,
            Err(message) => json!({"success": false, "error": message}),
        };
        let frame = ClientFrame::ToolResult {
            tool_call_id: call_id.to_owned(),
            result,
        };
        self.send(ctl, frame);
    }

    /// Replays the turn from its start (the server sends the frames after `received: 0`).
    fn resume(&self, ctl: ChatCtl) {
        ctl.conversation
            .update_value(|c| c.begin_resume(platform::random_id("m")));
        self.follow_turn();
        if self.is_open() {
            self.send_resume(ctl);
        } else {
            self.ensure_socket(ctl);
        }
    }

    fn stop(&self, ctl: ChatCtl) {
        let frame = ClientFrame::Interrupt {
            reason: Some("user_abort".into()),
        };
        self.send(ctl, frame);
    }

    fn send_audio(&self, _ctl: ChatCtl, pcm: Vec<u8>) {
        if let Some(socket) = self.0.socket.borrow().as_ref().filter(|s| s.is_open()) {
            let _ = socket.send_bytes(&pcm);
        }
    }

    fn send_audio_control(&self, ctl: ChatCtl, frame: ClientFrame) {
        self.send(ctl, frame);
    }

    fn drop_connection(&self) {
        if let Some(socket) = self.0.socket.borrow().as_ref() {
            socket.drop_abnormally();
        }
    }
}

/// `frame` as the JSON the socket carries: the protocol's own shape of it (one home for the
/// wire's names). Our types always serialize; were one not to, the frame is not sent, and
/// the console says why.
fn frame_value(frame: &ClientFrame) -> Option<Value> {
    serde_json::to_value(frame)
        .inspect_err(|e| leptos::logging::error!("a socket frame could not be written: {e}"))
        .ok()
}
