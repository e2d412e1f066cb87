//! SSE mode: one `POST /api/chat` per turn segment (the AI SDK `useChat` body), the answer read
//! as a stream of chunks; `GET /api/chat/{id}/stream` re-attaches to a turn still generating.
//!
//! The server's turn ends when it waits for the person, so answers are batched: the next request
//! goes out by itself once the step is fully answered, and never twice for the same answers
//! (`protocol::answers_to_send`).

use std::{cell::RefCell, collections::HashSet, rc::Rc};

use leptos::{prelude::*, task::spawn_local};
use serde_json::Value;

use super::ChatTransport;
use crate::{
    protocol::{
        ChatRequest, StreamItem, Trigger, UiMessage, answers_to_send,
        sse::{DIALECT_HEADER, TEXT_TIMING_HEADER},
    },
    ui::{
        controller::{Banner, ChatCtl, Mode, Status},
        platform::{self, FetchError},
        url::encode,
    },
};

const CHAT_URL: &str = "/api/chat";

/// Opt-ins of Countersign's own client: keys newer than ai@6.0.0, text streamed as it comes.
const HEADERS: [(&str, &str); 2] = [
    (DIALECT_HEADER, "full"),
    (TEXT_TIMING_HEADER, "progressive"),
];

/// SSE follows a turn only while it generates: one waiting for the person ends the request.
pub(super) const FOLLOWS_WAITING_TURNS: bool = false;

/// Requests are large enough for any image the composer accepts.
pub(super) const MAX_ATTACHMENT_BYTES: u64 = 10 * 1024 * 1024;

/// The SSE transport. With a split wasm (ADR 0030) its code (reading the stream, folding the
/// chunks into messages, the requests' JSON) is a part of its own: the page is interactive
/// before it arrives, and it is fetched as the page opens its first chat (`connect`).
#[cfg_attr(wasm_split, leptos::lazy(sse))]
pub(super) async fn transport() -> Rc<dyn ChatTransport> {
    let transport: Rc<dyn ChatTransport> = Rc::new(SseTransport::default());
    transport
}

/// A handle on the SSE transport's state (cloned into the request it runs).
#[derive(Clone, Default)]
pub(in crate::ui::controller) struct SseTransport(Rc<SseState>);

#[derive(Default)]
struct SseState {
    /// The last request's body, for "Try again".
    last_request: RefCell<Option<String>>,
    /// Fingerprints of the answer sets already sent in this chat.
    sent: RefCell<HashSet<String>>,
}

impl SseTransport {
    /// `POST /api/chat` with the new message only: the person's, or the assistant message that
    /// carries the answers (`message_id` names it). The server keeps the conversation and reads
    /// earlier messages only as what a new chat adopts (ADR 0020), and this page's chats begin
    /// on the server, so a request costs the same after a thousand turns as after one (what
    /// AI SDK's `prepareSendMessagesRequest` does for a stock client; the socket does the same).
    fn request(&self, ctl: ChatCtl, message_id: Option<String>) {
        let last = ctl
            .conversation
            .with_value(|c| c.messages().last().cloned());
        let request = ChatRequest {
            id: ctl.chat_id.get_untracked(),
            messages: ctl.outgoing(last.into_iter().collect()),
            trigger: Some(Trigger::SubmitMessage),
            message_id,
        };
        let body = serde_json::to_string(&request).unwrap_or_default();
        *self.0.last_request.borrow_mut() = Some(body.clone());
        self.run(ctl, "POST", CHAT_URL.into(), Some(body));
    }

    /// Sends one request and folds the stream it answers; a `GET` resumes the turn.
    fn run(&self, ctl: ChatCtl, method: &'static str, url: String, body: Option<String>) {
        let resume = method == "GET";
        ctl.conversation.update_value(|c| {
            if resume {
                c.begin_resume(platform::random_id("m"))
            } else {
                c.begin_stream(Trigger::SubmitMessage, platform::random_id("m"))
            }
        });
        if let Some(body) = &body {
            ctl.log_out(serde_json::from_str(body).unwrap_or(Value::Null));
        }
        ctl.status.set(Status::Submitted);
        let this = self.clone();
        spawn_local(async move {
            let result = platform::stream(method, &url, body, &HEADERS, |frame, raw| {
                if let StreamItem::Chunk(chunk) = frame {
                    ctl.on_chunk(chunk, raw, Mode::Sse.as_str());
                }
            })
            .await;
            ctl.conversation.update_value(|c| {
                c.end_stream();
            });
            ctl.publish();
            ctl.status.set(Status::Ready);
            if let Err(error) = result {
                ctl.banner.set(Some(failure_banner(error)));
            }
            // Answers given meanwhile go out now, unless the page switched to BIDI (where each
            // answer went out on the socket as it was given).
            if ctl.mode.get_untracked() == Mode::Sse {
                this.auto_send(ctl);
            }
        });
    }

    /// Sends the answers once the last step is fully answered, and never the same answers twice.
    fn auto_send(&self, ctl: ChatCtl) {
        if matches!(
            ctl.status.get_untracked(),
            Status::Submitted | Status::Streaming
        ) {
            return;
        }
        let answers = ctl.tools.with_untracked(|tools| {
            let runs_in_browser =
                |name: &str| tools.iter().any(|t| t.name == name && t.runs_in_browser);
            ctl.conversation
                .with_value(|c| answers_to_send(c.messages(), runs_in_browser))
        });
        let Some(answers) = answers else {
            return;
        };
        let fresh = self.0.sent.borrow_mut().insert(answers.fingerprint);
        if fresh {
            self.request(ctl, Some(answers.message_id));
        }
    }
}

/// `/api/chat/{chat}/{action}`, the chat id percent-encoded (it may come from the page's URL).
fn chat_url(chat: &str, action: &str) -> String {
    format!("{CHAT_URL}/{}/{action}", encode(chat))
}

/// What the person sees when a request failed: a refused request is final unless the server was
/// overloaded or failed (429, 5xx); a network failure is worth another try.
fn failure_banner(error: FetchError) -> Banner {
    match error {
        FetchError::Http {
            status, message, ..
        } => Banner {
            message,
            retry: status == 429 || status >= 500,
        },
        e @ FetchError::Network(_) => Banner {
            message: e.to_string(),
            retry: true,
        },
        e @ FetchError::Protocol(_) => Banner {
            message: e.to_string(),
            retry: false,
        },
    }
}

impl ChatTransport for SseTransport {
    fn connect(&self, _ctl: ChatCtl) {}

    fn disconnect(&self, _ctl: ChatCtl) {}

    fn forget_chat(&self) {
        self.0.sent.borrow_mut().clear();
        // "Try again" must never resend another chat's request.
        self.0.last_request.borrow_mut().take();
    }

    fn follows_waiting_turns(&self) -> bool {
        FOLLOWS_WAITING_TURNS
    }

    fn max_attachment_bytes(&self) -> u64 {
        MAX_ATTACHMENT_BYTES
    }

    fn send_message(&self, ctl: ChatCtl, _message: &UiMessage) {
        self.request(ctl, None);
    }

    fn send_answer(&self, ctl: ChatCtl, browser_runs_it: bool) {
        if !browser_runs_it {
            self.auto_send(ctl);
        }
    }

    fn send_tool_result(&self, ctl: ChatCtl, _call_id: &str, _result: Result<Value, String>) {
        self.auto_send(ctl);
    }

    fn resume(&self, ctl: ChatCtl) {
        let chat = ctl.chat_id.get_untracked();
        self.run(ctl, "GET", chat_url(&chat, "stream"), None);
    }

    fn stop(&self, ctl: ChatCtl) {
        let chat = ctl.chat_id.get_untracked();
        spawn_local(async move {
            let url = chat_url(&chat, "stop");
            if let Err(e) = platform::post(&url, None).await {
                ctl.show_error(format!("Could not stop: {e}"), false);
            }
        });
    }

    fn retry(&self, ctl: ChatCtl) {
        let body = self.0.last_request.borrow().clone();
        if let Some(body) = body {
            self.run(ctl, "POST", CHAT_URL.into(), Some(body));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_ids_are_one_path_segment() {
        assert_eq!(chat_url("chat-1", "stop"), "/api/chat/chat-1/stop");
        assert_eq!(
            chat_url("a/../b?c#d", "stream"),
            "/api/chat/a%2F..%2Fb%3Fc%23d/stream"
        );
    }

    #[test]
    fn only_failures_that_may_pass_offer_to_try_again() {
        let http = |status| FetchError::Http {
            status,
            code: "x".into(),
            message: format!("answered {status}"),
        };
        for (status, retry) in [(400, false), (403, false), (413, false), (429, true)] {
            assert_eq!(failure_banner(http(status)).retry, retry, "{status}");
        }
        for status in [500, 502, 503] {
            assert!(failure_banner(http(status)).retry, "{status}");
        }
        assert_eq!(failure_banner(http(404)).message, "answered 404");
        let network = failure_banner(FetchError::Network("reset".into()));
        assert_eq!(
            network,
            Banner {
                message: "The connection failed: reset".into(),
                retry: true
            }
        );
        assert!(!failure_banner(FetchError::Protocol("bad".into())).retry);
    }
}
