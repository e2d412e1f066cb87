//! How the page talks to the server: one [`ChatTransport`] trait, two implementations.
//!
//! * [`sse::SseTransport`]: one HTTP request per turn segment (`POST /api/chat`, the AI SDK's
//!   `useChat` wire). Answers are batched: the next request goes out when the step is fully
//!   answered (`protocol::answers_to_send`).
//! * [`websocket::WebSocketTransport`]: one socket for the whole chat (`/api/live`), with an
//!   outbox, reconnect and resume by frame count ([`reconnect`] holds its pure decisions). The
//!   server's turn is alive and waiting, so each answer goes out the moment it is given.
//!
//! Both fold what arrives through the controller (`ChatCtl::on_chunk`), so the page renders the
//! same messages whichever carries them. The controller picks the transport by [`Mode`] in one
//! place ([`Transports::get`]) and otherwise only calls the trait.

mod later;
mod reconnect;
mod sse;
mod websocket;

use std::rc::Rc;

use serde_json::Value;

use super::{ChatCtl, Mode};
use crate::protocol::{ClientFrame, UiMessage};

/// What the controller asks of a transport. Every method gets the controller, whose state the
/// transport updates as the server answers.
pub(super) trait ChatTransport {
    /// Opens the connection this transport keeps, if it keeps one.
    fn connect(&self, ctl: ChatCtl);

    /// Closes that connection on purpose and drops what was queued for it.
    fn disconnect(&self, ctl: ChatCtl);

    /// Another chat was opened: what this transport remembered of the previous one is void.
    fn forget_chat(&self);

    /// Whether a turn that waits for the person is followed live after the chat is loaded
    /// (otherwise only a turn still generating is).
    fn follows_waiting_turns(&self) -> bool;

    /// The largest image this transport carries in a message.
    fn max_attachment_bytes(&self) -> u64;

    /// Sends the person's new message (already the conversation's last).
    fn send_message(&self, ctl: ChatCtl, message: &UiMessage);

    /// The person answered an approval (the conversation's last message carries the answer).
    /// `browser_runs_it`: the call was approved and the browser runs it now; its result follows
    /// through [`ChatTransport::send_tool_result`].
    fn send_answer(&self, ctl: ChatCtl, browser_runs_it: bool);

    /// A browser tool finished; its output (or error) is already in the conversation.
    fn send_tool_result(&self, ctl: ChatCtl, call_id: &str, result: Result<Value, String>);

    /// Follows the chat's current turn again (after a reload, or a reconnect).
    fn resume(&self, ctl: ChatCtl);

    /// Asks the server to cancel the turn.
    fn stop(&self, ctl: ChatCtl);

    /// A frame of the microphone's PCM16LE (16 kHz mono, at most 16,000 bytes). Only BIDI
    /// carries voice; audio that cannot go now is dropped (late speech is worth nothing).
    fn send_audio(&self, _ctl: ChatCtl, _pcm: Vec<u8>) {}

    /// An `audio_control` frame (the microphone opened or closed).
    fn send_audio_control(&self, _ctl: ChatCtl, _frame: ClientFrame) {}

    /// "Try again": re-sends the last request that failed, if this transport keeps it.
    fn retry(&self, _ctl: ChatCtl) {}

    /// Breaks the connection as a network failure would (browser tests).
    fn drop_connection(&self) {}
}

/// The page's two transports, kept for its whole life (each keeps state across mode switches:
/// the last request, a turn being followed).
pub(super) struct Transports {
    sse: Rc<dyn ChatTransport>,
    websocket: Rc<dyn ChatTransport>,
}

impl Transports {
    pub(super) fn new() -> Self {
        Transports {
            // Each transport's code loads when it is first used (`connect`, as a chat opens, for
            // SSE, the default mode; BIDI's when that mode is chosen): the page is interactive
            // before either has arrived (ADR 0030).
            sse: Rc::new(later::Later::new(
                || Box::pin(sse::transport()),
                sse::FOLLOWS_WAITING_TURNS,
                sse::MAX_ATTACHMENT_BYTES,
            )),
            websocket: Rc::new(later::Later::new(
                || Box::pin(websocket::transport()),
                websocket::FOLLOWS_WAITING_TURNS,
                websocket::MAX_ATTACHMENT_BYTES,
            )),
        }
    }

    /// The transport of `mode`.
    pub(super) fn get(&self, mode: Mode) -> Rc<dyn ChatTransport> {
        match mode {
            Mode::Sse => self.sse.clone(),
            Mode::Bidi => self.websocket.clone(),
        }
    }

    pub(super) fn all(&self) -> [Rc<dyn ChatTransport>; 2] {
        [self.sse.clone(), self.websocket.clone()]
    }
}
