//! The chat controller: the page's state and everything that changes it.
//!
//! All state is reactive signals, so components only read; every change goes through a method
//! here. Chunks from either transport are folded by the one `protocol` reducer
//! ([`Conversation`]) into the messages the page renders.
//!
//! The auto-send rule (SSE mode): the next request goes out exactly when every approval of the
//! last assistant message's last step has an answer and every browser tool of that step has its
//! output — and never twice for the same answers (the seed system looped here, ADR 0006/0007).
//! In BIDI mode each answer goes out on the socket the moment it is given: the server's turn is
//! alive and waiting, so there is nothing to batch.

use std::collections::{HashMap, HashSet};

use leptos::{prelude::*, task::spawn_local};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    api::{ChatSnapshot, ToolInfo},
    platform::{self, FetchError, Socket, SocketEvent},
};
use crate::protocol::{
    ChatRequest, Chunk, Conversation, Frame, Role, ToolPart, ToolState, Trigger, UiMessage, UiPart,
};

/// Which transport the page uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    Sse,
    Bidi,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sse => "sse",
            Mode::Bidi => "bidi",
        }
    }
}

/// Where the current request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ready,
    /// Sent; nothing received yet.
    Submitted,
    Streaming,
}

/// The BIDI socket's state, as the connection indicator shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Offline,
    Connecting,
    Live,
    Reconnecting,
}

impl Link {
    pub fn label(self) -> &'static str {
        match self {
            Link::Offline => "Offline",
            Link::Connecting => "Connecting",
            Link::Live => "Live",
            Link::Reconnecting => "Reconnecting",
        }
    }
}

/// An error the person can act on.
#[derive(Debug, Clone, PartialEq)]
pub struct Banner {
    pub message: String,
    /// Whether "Try again" re-sends the last request.
    pub retry: bool,
}

/// One line of the chunk log (the same shape as the server's `COUNTERSIGN_CHUNK_LOG`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoggedChunk {
    pub timestamp: i64,
    pub session: String,
    pub mode: &'static str,
    pub direction: &'static str,
    pub sequence_number: u64,
    pub chunk: Value,
}

/// A chat this browser has had.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatEntry {
    pub id: String,
    pub title: String,
    pub updated: i64,
}

/// The person's answer to an approval card.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Approve,
    ApproveWithEdits(Value),
    Deny(Option<String>),
}

const MODE_KEY: &str = "countersign.mode";
const CHAT_KEY: &str = "countersign.chat";
const CHATS_KEY: &str = "countersign.chats";
/// The conversation's scroll container.
pub const CONVERSATION_ID: &str = "conversation";

/// The controller; `Copy`, so every handler can hold it.
#[derive(Clone, Copy)]
pub struct ChatCtl {
    pub chat_id: RwSignal<String>,
    pub messages: RwSignal<Vec<UiMessage>>,
    pub status: RwSignal<Status>,
    pub mode: RwSignal<Mode>,
    pub link: RwSignal<Link>,
    pub banner: RwSignal<Option<Banner>>,
    pub log: RwSignal<Vec<LoggedChunk>>,
    /// Approval id → deadline on this browser's clock.
    pub deadlines: RwSignal<HashMap<String, i64>>,
    pub tools: RwSignal<Vec<ToolInfo>>,
    pub model: RwSignal<String>,
    /// The BGM track playing, if any.
    pub bgm: RwSignal<Option<u8>>,
    /// This browser's clock, ticking every second (countdowns).
    pub now: RwSignal<i64>,
    pub chats: RwSignal<Vec<ChatEntry>>,
    /// The newest approval card, to receive focus.
    pub focus_approval: RwSignal<Option<String>>,
    /// The page has hydrated (the wasm is running).
    pub hydrated: RwSignal<bool>,
    conversation: StoredValue<Conversation>,
    socket: StoredValue<Option<Socket>, LocalStorage>,
    /// Frames sent while the socket was connecting.
    outbox: StoredValue<Vec<String>>,
    /// Answer sets already sent (SSE), so nothing is sent twice.
    sent: StoredValue<HashSet<String>>,
    /// Browser tool calls already started.
    executed: StoredValue<HashSet<String>>,
    /// Approval id → the arguments the person edited (sent as `approval.editedInput`).
    edits: StoredValue<HashMap<String, Value>>,
    /// Overdue approvals already refreshed from the server.
    refreshed: StoredValue<HashSet<String>>,
    /// BIDI: frames of the current turn received, and whether a turn is open.
    turn_frames: StoredValue<u64>,
    turn_open: StoredValue<bool>,
    /// The last SSE request, for "Try again".
    last_request: StoredValue<Option<(String, Option<String>)>>,
    sequence: StoredValue<u64>,
    reconnects: StoredValue<u32>,
}

impl ChatCtl {
    pub fn new() -> Self {
        ChatCtl {
            chat_id: RwSignal::new(String::new()),
            messages: RwSignal::new(Vec::new()),
            status: RwSignal::new(Status::Ready),
            mode: RwSignal::new(Mode::Sse),
            link: RwSignal::new(Link::Offline),
            banner: RwSignal::new(None),
            log: RwSignal::new(Vec::new()),
            deadlines: RwSignal::new(HashMap::new()),
            tools: RwSignal::new(Vec::new()),
            model: RwSignal::new(String::new()),
            bgm: RwSignal::new(None),
            now: RwSignal::new(0),
            chats: RwSignal::new(Vec::new()),
            focus_approval: RwSignal::new(None),
            hydrated: RwSignal::new(false),
            conversation: StoredValue::new(Conversation::new(Vec::new())),
            socket: StoredValue::new_local(None),
            outbox: StoredValue::new(Vec::new()),
            sent: StoredValue::new(HashSet::new()),
            executed: StoredValue::new(HashSet::new()),
            edits: StoredValue::new(HashMap::new()),
            refreshed: StoredValue::new(HashSet::new()),
            turn_frames: StoredValue::new(0),
            turn_open: StoredValue::new(false),
            last_request: StoredValue::new(None),
            sequence: StoredValue::new(0),
            reconnects: StoredValue::new(0),
        }
    }

    // ----- start-up ---------------------------------------------------------------------------

    /// Runs once in the browser after hydration.
    pub fn start(self) {
        self.hydrated.set(true);
        self.now.set(platform::now_ms());
        platform::every(1000, move || {
            self.now.set(platform::now_ms());
            self.check_deadlines();
        });
        if platform::storage_get(MODE_KEY).as_deref() == Some("bidi") {
            self.mode.set(Mode::Bidi);
        }
        let chats: Vec<ChatEntry> = platform::storage_get(CHATS_KEY)
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        self.chats.set(chats);
        let chat = platform::storage_get(CHAT_KEY).unwrap_or_else(|| platform::random_id("chat"));
        self.open_chat(chat);
        spawn_local(async move {
            match super::api::get_app_info().await {
                Ok(info) => {
                    self.model.set(info.model);
                    self.tools.set(info.tools);
                }
                Err(e) => self.show_error(format!("Cannot load the tools: {e}"), false),
            }
        });
    }

    /// Shows chat `id` (loading it from the server).
    pub fn open_chat(self, id: String) {
        self.close_socket();
        platform::storage_set(CHAT_KEY, &id);
        self.chat_id.set(id.clone());
        self.reset_local();
        if self.mode.get_untracked() == Mode::Bidi {
            self.ensure_socket();
        }
        self.reload();
    }

    /// Loads the current chat from the server (its messages, pending approvals, deadlines).
    fn reload(self) {
        let id = self.chat_id.get_untracked();
        spawn_local(async move {
            match super::api::load_chat(id).await {
                Ok(snapshot) => self.apply_snapshot(snapshot),
                Err(e) => self.show_error(format!("Cannot load this chat: {e}"), false),
            }
        });
    }

    /// Starts an empty chat.
    pub fn new_chat(self) {
        self.open_chat(platform::random_id("chat"));
    }

    fn reset_local(self) {
        self.conversation.set_value(Conversation::new(Vec::new()));
        self.messages.set(Vec::new());
        self.deadlines.set(HashMap::new());
        self.sent.set_value(HashSet::new());
        self.executed.set_value(HashSet::new());
        self.status.set(Status::Ready);
        self.banner.set(None);
        self.turn_open.set_value(false);
        self.turn_frames.set_value(0);
    }

    fn apply_snapshot(self, snapshot: ChatSnapshot) {
        if snapshot.chat_id != self.chat_id.get_untracked() {
            return;
        }
        let skew = platform::now_ms() - snapshot.server_now_ms;
        self.deadlines.update(|d| {
            for p in &snapshot.pending {
                d.insert(p.approval_id.clone(), p.deadline_ms + skew);
            }
        });
        // Calls that already ran are not run again by this browser.
        self.executed.update_value(|e| {
            for message in &snapshot.messages {
                for tool in message.tool_parts() {
                    if matches!(
                        tool.state,
                        ToolState::OutputAvailable
                            | ToolState::OutputError
                            | ToolState::OutputDenied
                    ) {
                        e.insert(tool.tool_call_id.clone());
                    }
                }
            }
        });
        self.conversation
            .set_value(Conversation::new(snapshot.messages.clone()));
        self.messages.set(snapshot.messages);
        let waiting = self.has_waiting_turn();
        if snapshot.streaming || (waiting && self.mode.get_untracked() == Mode::Bidi) {
            // Follow the turn live again: SSE re-attaches to a streaming turn; BIDI replays the
            // waiting turn from its start, then sees its expiry or continuation as it happens.
            self.resume();
        }
    }

    /// Every second: a pending approval whose deadline passed while nothing is streaming has
    /// expired on the server; fetch what the server did (SSE holds no connection meanwhile).
    fn check_deadlines(self) {
        if self.conversation.with_value(|c| c.active().is_some()) {
            return;
        }
        let now = platform::now_ms();
        let overdue: Vec<String> = self.messages.with_untracked(|messages| {
            let deadlines = self.deadlines.get_untracked();
            messages
                .last()
                .map(|m| {
                    m.tool_parts()
                        .filter(|t| t.state == ToolState::ApprovalRequested)
                        .filter_map(|t| t.approval.as_ref().map(|a| a.id.clone()))
                        .filter(|id| deadlines.get(id).is_some_and(|d| now > d + 1000))
                        .collect()
                })
                .unwrap_or_default()
        });
        let fresh: Vec<String> = overdue
            .into_iter()
            .filter(|id| {
                self.refreshed
                    .try_update_value(|r| r.insert(id.clone()))
                    .unwrap_or(false)
            })
            .collect();
        if !fresh.is_empty() {
            self.reload();
        }
    }

    // ----- sending ----------------------------------------------------------------------------

    /// Whether a request is in flight and the person cannot send a new message.
    pub fn busy(self) -> bool {
        let waiting = self.has_waiting_turn();
        matches!(self.status.get(), Status::Submitted | Status::Streaming) && !waiting
    }

    /// Whether the last assistant message waits for the person.
    fn has_waiting_turn(self) -> bool {
        self.messages.with(|m| {
            m.last().is_some_and(|last| {
                last.role == Role::Assistant
                    && last
                        .tool_parts()
                        .any(|t| t.state == ToolState::ApprovalRequested)
            })
        })
    }

    /// Sends the person's message (an example prompt).
    pub fn send_text(self, text: String) {
        self.send(text, Vec::new());
    }

    /// The largest image the current transport carries: a WebSocket message is capped at 1 MiB
    /// by default, and a `data:` URL is a third larger than the file.
    pub fn max_attachment_bytes(self) -> u64 {
        match self.mode.get() {
            Mode::Bidi => 700 * 1024,
            Mode::Sse => 10 * 1024 * 1024,
        }
    }

    /// Shows a problem the person can fix (e.g. a file too large).
    pub fn report(self, message: String) {
        self.show_error(message, false);
    }

    /// Sends the person's message with its attached images.
    pub fn send(self, text: String, files: Vec<platform::PickedFile>) {
        let text = text.trim().to_string();
        if (text.is_empty() && files.is_empty()) || self.busy() {
            return;
        }
        platform::bgm_unlock();
        self.banner.set(None);
        let mut message = UiMessage::user_text(platform::random_id("u"), text.clone());
        if text.is_empty() {
            message.parts.clear();
        }
        for file in files {
            message
                .parts
                .push(UiPart::File(crate::protocol::message::FilePart {
                    media_type: file.media_type,
                    url: file.url,
                    filename: Some(file.name),
                    provider_metadata: None,
                }));
        }
        let text = if text.is_empty() {
            "(image)".to_string()
        } else {
            text
        };
        self.conversation.update_value(|c| c.push(message.clone()));
        self.publish();
        self.remember_chat(&text);
        match self.mode.get_untracked() {
            Mode::Sse => self.sse_request(None),
            Mode::Bidi => {
                self.conversation.update_value(|c| {
                    c.begin_stream(Trigger::SubmitMessage, platform::random_id("m"))
                });
                self.turn_frames.set_value(0);
                self.turn_open.set_value(true);
                self.status.set(Status::Submitted);
                let frame = json!({
                    "type": "message",
                    "id": self.chat_id.get_untracked(),
                    "trigger": "submit-message",
                    "messages": [message],
                });
                self.socket_send(frame);
            }
        }
    }

    /// Stop (the button, or Esc): the server cancels the turn and ends its stream.
    pub fn stop(self) {
        let chat = self.chat_id.get_untracked();
        self.log_out(json!({"type": "stop"}));
        match self.mode.get_untracked() {
            Mode::Sse => spawn_local(async move {
                if let Err(e) =
                    platform::stream("POST", &format!("/api/chat/{chat}/stop"), None, &[], |_| {})
                        .await
                {
                    self.show_error(format!("Could not stop: {e}"), false);
                }
            }),
            Mode::Bidi => self.socket_send(json!({"type": "interrupt", "reason": "user_abort"})),
        }
    }

    /// Switches the transport; the conversation stays (the server owns it).
    pub fn set_mode(self, mode: Mode) {
        if self.mode.get_untracked() == mode {
            return;
        }
        platform::storage_set(MODE_KEY, mode.as_str());
        self.mode.set(mode);
        match mode {
            Mode::Sse => self.close_socket(),
            Mode::Bidi => self.ensure_socket(),
        }
    }

    /// "Try again": re-sends the last SSE request.
    pub fn retry(self) {
        self.banner.set(None);
        if let Some((body, _)) = self.last_request.get_value() {
            self.run_sse("POST", "/api/chat".into(), Some(body));
        }
    }

    fn sse_request(self, message_id: Option<String>) {
        let request = ChatRequest {
            id: self.chat_id.get_untracked(),
            messages: self.outgoing(self.conversation.with_value(|c| c.messages().to_vec())),
            trigger: Some(Trigger::SubmitMessage),
            message_id: message_id.clone(),
        };
        let body = serde_json::to_string(&request).unwrap_or_default();
        self.last_request
            .set_value(Some((body.clone(), message_id)));
        self.run_sse("POST", "/api/chat".into(), Some(body));
    }

    fn resume(self) {
        match self.mode.get_untracked() {
            Mode::Sse => {
                let chat = self.chat_id.get_untracked();
                self.run_sse("GET", format!("/api/chat/{chat}/stream"), None);
            }
            Mode::Bidi => {
                self.conversation
                    .update_value(|c| c.begin_resume(platform::random_id("m")));
                self.turn_frames.set_value(0);
                self.turn_open.set_value(true);
                if self
                    .socket
                    .with_value(|s| s.as_ref().is_some_and(Socket::is_open))
                {
                    self.send_resume();
                } else {
                    self.ensure_socket();
                }
            }
        }
    }

    /// BIDI: asks the server for the frames of the current turn after those received.
    fn send_resume(self) {
        let frame = json!({
            "type": "resume",
            "id": self.chat_id.get_untracked(),
            "received": self.turn_frames.get_value(),
        });
        self.log_out(frame.clone());
        self.socket.with_value(|s| {
            if let Some(s) = s {
                let _ = s.send(&frame.to_string());
            }
        });
    }

    fn run_sse(self, method: &'static str, url: String, body: Option<String>) {
        let resume = method == "GET";
        self.conversation.update_value(|c| {
            if resume {
                c.begin_resume(platform::random_id("m"))
            } else {
                c.begin_stream(Trigger::SubmitMessage, platform::random_id("m"))
            }
        });
        if let Some(body) = &body {
            self.log_out(serde_json::from_str(body).unwrap_or(Value::Null));
        }
        self.status.set(Status::Submitted);
        spawn_local(async move {
            let headers = [
                ("x-countersign-dialect", "full"),
                ("x-countersign-text", "progressive"),
            ];
            let result = platform::stream(method, &url, body, &headers, |frame| {
                if let Frame::Chunk(chunk) = frame {
                    self.on_chunk(chunk, "sse");
                }
            })
            .await;
            self.conversation.update_value(|c| {
                c.end_stream();
            });
            self.publish();
            self.status.set(Status::Ready);
            match result {
                Ok(_) => {}
                Err(FetchError::Http {
                    status, message, ..
                }) => {
                    let retry = status == 429 || status >= 500;
                    self.show_error(message, retry);
                }
                Err(e @ FetchError::Network(_)) => self.show_error(e.to_string(), true),
                Err(e) => self.show_error(e.to_string(), false),
            }
            self.after_stream();
        });
    }

    // ----- chunks -----------------------------------------------------------------------------

    fn on_chunk(self, chunk: Chunk, mode: &'static str) {
        self.status.set(Status::Streaming);
        let value = serde_json::to_value(&chunk).unwrap_or(Value::Null);
        self.log_in(value, mode);
        let applied = self.conversation.try_update_value(|c| c.apply(&chunk));
        match applied {
            Some(Err(e)) => {
                self.show_error(format!("The stream broke the protocol: {e}"), false);
                return;
            }
            None => return,
            Some(Ok(_)) => {}
        }
        self.publish();
        match &chunk {
            Chunk::ToolApprovalRequest(request) => {
                let tool = self.tool_of_call(&request.tool_call_id);
                let timeout = tool.map(|t| t.approval_timeout_secs).unwrap_or(300) as i64;
                let deadline = platform::now_ms() + timeout * 1000;
                let id = request.approval_id.clone();
                self.deadlines.update(|d| {
                    d.entry(id.clone()).or_insert(deadline);
                });
                self.focus_approval.set(Some(id));
            }
            Chunk::ToolInputAvailable(input) => {
                // A browser tool that needs no approval runs as soon as its input is complete.
                if let Some(tool) = self.tool_info(&input.tool_name)
                    && tool.runs_in_browser
                    && !tool.needs_approval
                {
                    self.run_browser_tool(
                        input.tool_call_id.clone(),
                        input.tool_name.clone(),
                        input.input.clone(),
                    );
                }
            }
            Chunk::Error(error) => self.show_error(error.error_text.clone(), false),
            _ => {}
        }
        if platform::is_near_bottom(CONVERSATION_ID) {
            platform::scroll_to_bottom(CONVERSATION_ID);
        }
    }

    /// Copies the conversation's messages into the signal the page renders.
    fn publish(self) {
        let messages = self.conversation.with_value(|c| c.messages().to_vec());
        self.messages.set(messages);
    }

    fn after_stream(self) {
        if self.mode.get_untracked() == Mode::Sse {
            self.maybe_auto_send();
        }
    }

    // ----- answers ----------------------------------------------------------------------------

    /// The person answered approval card `approval_id`.
    pub fn answer(self, approval_id: String, answer: Answer) {
        let approved = !matches!(answer, Answer::Deny(_));
        let reason = match &answer {
            Answer::Deny(reason) => reason.clone().filter(|r| !r.trim().is_empty()),
            _ => None,
        };
        let edited = match &answer {
            Answer::ApproveWithEdits(args) => Some(args.clone()),
            _ => None,
        };
        let call: Option<(String, String, Value)> = self.conversation.with_value(|c| {
            c.messages().last().and_then(|m| {
                m.tool_parts()
                    .find(|t| t.approval.as_ref().is_some_and(|a| a.id == approval_id))
                    .map(|t| {
                        (
                            t.tool_call_id.clone(),
                            t.tool_name.clone(),
                            edited
                                .clone()
                                .or_else(|| t.input.clone())
                                .unwrap_or(Value::Null),
                        )
                    })
            })
        });
        if let Some(args) = &edited {
            self.edits.update_value(|e| {
                e.insert(approval_id.clone(), args.clone());
            });
        }
        self.conversation.update_value(|c| {
            c.add_tool_approval_response(&approval_id, approved, reason.clone());
        });
        self.publish();
        self.banner.set(None);
        let Some((call_id, tool_name, args)) = call else {
            self.show_error("That approval is no longer pending.".into(), false);
            return;
        };
        if self.mode.get_untracked() == Mode::Bidi {
            self.send_last_message();
        }
        let runs_in_browser = self
            .tool_info(&tool_name)
            .is_some_and(|t| t.runs_in_browser);
        if approved && runs_in_browser {
            self.run_browser_tool(call_id, tool_name, args);
        } else if self.mode.get_untracked() == Mode::Sse {
            self.maybe_auto_send();
        }
    }

    /// The messages as they are sent: our `editedInput` extension added to edited approvals.
    fn outgoing(self, mut messages: Vec<UiMessage>) -> Vec<UiMessage> {
        let edits = self.edits.get_value();
        if let Some(last) = messages.last_mut() {
            for part in &mut last.parts {
                if let Some(approval) = part.as_tool_mut().and_then(|t| t.approval.as_mut())
                    && let Some(args) = edits.get(&approval.id)
                {
                    approval.edited_input = Some(args.clone());
                }
            }
        }
        messages
    }

    /// BIDI: sends the last assistant message (it carries the answers).
    fn send_last_message(self) {
        let last = self
            .conversation
            .with_value(|c| c.messages().last().cloned());
        if let Some(last) = self.outgoing(last.into_iter().collect()).pop() {
            self.socket_send(
                json!({"type": "message", "id": self.chat_id.get_untracked(), "messages": [last]}),
            );
        }
    }

    /// Runs a browser tool once and reports its result.
    fn run_browser_tool(self, call_id: String, tool: String, args: Value) {
        let fresh = self
            .executed
            .try_update_value(|e| e.insert(call_id.clone()))
            .unwrap_or(false);
        if !fresh {
            return;
        }
        spawn_local(async move {
            let result: Result<Value, String> = match tool.as_str() {
                "get_location" => platform::locate().await,
                "change_bgm" => {
                    let track = args["track"].as_u64().unwrap_or(0) as u8;
                    match platform::bgm_play(track).await {
                        Ok(()) => {
                            self.bgm.set(Some(track));
                            Ok(json!({"track": track, "playing": true}))
                        }
                        Err(e) => Err(e),
                    }
                }
                other => Err(format!("This browser cannot run {other}.")),
            };
            self.conversation.update_value(|c| match &result {
                Ok(output) => {
                    c.add_tool_output(&call_id, output.clone());
                }
                Err(message) => {
                    c.add_tool_error(&call_id, message.clone());
                }
            });
            self.publish();
            match self.mode.get_untracked() {
                Mode::Bidi => {
                    let result = match result {
                        Ok(output) => output,
                        Err(message) => json!({"success": false, "error": message}),
                    };
                    self.socket_send(
                        json!({"type": "tool_result", "toolCallId": call_id, "result": result}),
                    );
                }
                Mode::Sse => self.maybe_auto_send(),
            }
        });
    }

    /// SSE: sends the answers once the last step is fully answered (and never twice).
    fn maybe_auto_send(self) {
        if matches!(
            self.status.get_untracked(),
            Status::Submitted | Status::Streaming
        ) {
            return;
        }
        let tools = self.tools.get_untracked();
        let browser = |name: &str| tools.iter().any(|t| t.name == name && t.runs_in_browser);
        let decision = self.conversation.with_value(|c| {
            let last = c.messages().last()?;
            if last.role != Role::Assistant {
                return None;
            }
            let step: Vec<&ToolPart> = last
                .last_step_parts()
                .iter()
                .filter_map(UiPart::as_tool)
                .collect();
            let mut answered = Vec::new();
            for tool in &step {
                match tool.state {
                    ToolState::ApprovalRequested | ToolState::InputStreaming => return None,
                    ToolState::InputAvailable if browser(&tool.tool_name) => return None,
                    ToolState::ApprovalResponded => {
                        let approved =
                            tool.approval.as_ref().and_then(|a| a.approved) == Some(true);
                        if approved && browser(&tool.tool_name) {
                            return None;
                        }
                        answered.push(format!("{}:{}", tool.tool_call_id, approved));
                    }
                    ToolState::OutputAvailable | ToolState::OutputError
                        if browser(&tool.tool_name) =>
                    {
                        answered.push(format!("{}:out", tool.tool_call_id));
                    }
                    _ => {}
                }
            }
            if answered.is_empty() {
                return None;
            }
            answered.sort();
            Some((
                last.id.clone(),
                format!("{}|{}", last.id, answered.join(",")),
            ))
        });
        let Some((message_id, key)) = decision else {
            return;
        };
        let fresh = self
            .sent
            .try_update_value(|s| s.insert(key))
            .unwrap_or(false);
        if fresh {
            self.sse_request(Some(message_id));
        }
    }

    // ----- BIDI socket ------------------------------------------------------------------------

    fn ensure_socket(self) {
        let open = self
            .socket
            .with_value(|s| s.as_ref().is_some_and(Socket::is_open));
        if open || matches!(self.link.get_untracked(), Link::Connecting) {
            return;
        }
        self.link.set(if self.reconnects.get_value() > 0 {
            Link::Reconnecting
        } else {
            Link::Connecting
        });
        let url = format!(
            "{}/api/live?text=progressive&dialect=full",
            platform::ws_base()
        );
        let handler: std::rc::Rc<dyn Fn(SocketEvent)> =
            std::rc::Rc::new(move |event| self.on_socket(event));
        match Socket::connect(&url, handler) {
            Ok(socket) => self.socket.set_value(Some(socket)),
            Err(e) => {
                self.link.set(Link::Offline);
                self.show_error(format!("Cannot open the live connection: {e}"), false);
            }
        }
    }

    fn close_socket(self) {
        if let Some(socket) = self.socket.try_update_value(|s| s.take()).flatten() {
            socket.close();
        }
        self.link.set(Link::Offline);
        self.outbox.set_value(Vec::new());
    }

    /// Closes the socket as a network drop would (tests: `window.__countersign.dropSocket()`).
    pub fn drop_socket(self) {
        self.socket.with_value(|s| {
            if let Some(socket) = s {
                socket.drop_abnormally();
            }
        });
    }

    fn socket_send(self, frame: Value) {
        self.log_out(frame.clone());
        let text = frame.to_string();
        let sent = self
            .socket
            .with_value(|s| s.as_ref().filter(|s| s.is_open()).map(|s| s.send(&text)));
        match sent {
            Some(Ok(())) => {}
            _ => {
                self.outbox.update_value(|o| o.push(text));
                self.ensure_socket();
            }
        }
    }

    fn on_socket(self, event: SocketEvent) {
        match event {
            SocketEvent::Open => {
                self.link.set(Link::Live);
                let reconnected = self.reconnects.get_value() > 0;
                self.reconnects.set_value(0);
                if self.turn_open.get_value()
                    && (reconnected || self.outbox.with_value(Vec::is_empty))
                {
                    self.send_resume();
                }
                let queued = self
                    .outbox
                    .try_update_value(std::mem::take)
                    .unwrap_or_default();
                self.socket.with_value(|s| {
                    if let Some(s) = s {
                        for text in &queued {
                            let _ = s.send(text);
                        }
                    }
                });
            }
            SocketEvent::Frame(Frame::Chunk(chunk)) => {
                let is_announce =
                    matches!(&chunk, Chunk::Data(d) if d.name == "countersign-pending");
                if is_announce {
                    let value = serde_json::to_value(&chunk).unwrap_or(Value::Null);
                    self.log_in(value, "bidi");
                    return;
                }
                self.turn_frames.update_value(|n| *n += 1);
                let active = self.conversation.with_value(|c| c.active().is_some());
                if !active {
                    self.conversation.update_value(|c| {
                        c.begin_stream(Trigger::SubmitMessage, platform::random_id("m"))
                    });
                }
                self.on_chunk(chunk, "bidi");
            }
            SocketEvent::Frame(Frame::Done) => {
                self.turn_frames.update_value(|n| *n += 1);
                self.turn_open.set_value(false);
                self.log_in(json!("[DONE]"), "bidi");
                self.conversation.update_value(|c| {
                    c.end_stream();
                });
                self.publish();
                self.status.set(Status::Ready);
            }
            SocketEvent::Control(value) => self.log_in(value, "bidi"),
            SocketEvent::Closed {
                code,
                reason,
                by_us,
            } => {
                self.socket.set_value(None);
                if by_us || self.mode.get_untracked() != Mode::Bidi {
                    self.link.set(Link::Offline);
                    return;
                }
                if code == 4001 {
                    self.link.set(Link::Offline);
                    self.show_error("This chat was opened in another tab or window; this page stopped following it.".into(), false);
                    return;
                }
                tracing_log(&format!("socket closed {code} {reason}; reconnecting"));
                self.link.set(Link::Reconnecting);
                let attempt = self.reconnects.try_update_value(|n| {
                    *n += 1;
                    *n
                });
                let delay = 250 * 2i32.pow(attempt.unwrap_or(1).min(5));
                spawn_local(async move {
                    platform::sleep(delay.min(5000)).await;
                    if self.mode.get_untracked() == Mode::Bidi
                        && self.socket.with_value(Option::is_none)
                    {
                        self.link.set(Link::Offline);
                        self.ensure_socket();
                        self.link.set(Link::Reconnecting);
                    }
                });
            }
        }
    }

    // ----- helpers ----------------------------------------------------------------------------

    pub fn tool_info(self, name: &str) -> Option<ToolInfo> {
        self.tools
            .with_untracked(|t| t.iter().find(|t| t.name == name).cloned())
    }

    fn tool_of_call(self, call_id: &str) -> Option<ToolInfo> {
        let name = self.conversation.with_value(|c| {
            c.messages()
                .last()
                .and_then(|m| m.find_tool_part(call_id))
                .map(|t| t.tool_name.clone())
        })?;
        self.tool_info(&name)
    }

    fn show_error(self, message: String, retry: bool) {
        self.banner.set(Some(Banner { message, retry }));
    }

    fn next_sequence(self) -> u64 {
        self.sequence
            .try_update_value(|n| {
                *n += 1;
                *n
            })
            .unwrap_or(0)
    }

    fn log_in(self, chunk: Value, mode: &'static str) {
        self.push_log(chunk, mode, "in");
    }

    fn log_out(self, chunk: Value) {
        let mode = self.mode.get_untracked().as_str();
        self.push_log(chunk, mode, "out");
    }

    fn push_log(self, chunk: Value, mode: &'static str, direction: &'static str) {
        let entry = LoggedChunk {
            timestamp: platform::now_ms(),
            session: self.chat_id.get_untracked(),
            mode,
            direction,
            sequence_number: self.next_sequence(),
            chunk,
        };
        self.log.update(|l| l.push(entry));
    }

    /// Downloads the chunk log as JSONL.
    pub fn download_log(self) {
        let text = self.log.with_untracked(|l| {
            l.iter()
                .filter_map(|e| serde_json::to_string(e).ok())
                .collect::<Vec<_>>()
                .join("\n")
        });
        let name = format!("countersign-{}.jsonl", self.chat_id.get_untracked());
        if let Err(e) = platform::download(&name, &text, "application/x-ndjson") {
            self.show_error(format!("Cannot download the log: {e}"), false);
        }
    }

    /// The BGM control: pause, or play track 1.
    pub fn toggle_bgm(self) {
        platform::bgm_unlock();
        if self.bgm.get_untracked().is_some() {
            platform::bgm_stop();
            self.bgm.set(None);
        } else {
            spawn_local(async move {
                match platform::bgm_play(1).await {
                    Ok(()) => self.bgm.set(Some(1)),
                    Err(e) => self.show_error(e, false),
                }
            });
        }
    }

    fn remember_chat(self, text: &str) {
        let id = self.chat_id.get_untracked();
        let now = platform::now_ms();
        self.chats.update(|chats| {
            match chats.iter_mut().find(|c| c.id == id) {
                Some(entry) => entry.updated = now,
                None => chats.insert(
                    0,
                    ChatEntry {
                        id: id.clone(),
                        title: text.chars().take(60).collect(),
                        updated: now,
                    },
                ),
            }
            chats.sort_by_key(|c| std::cmp::Reverse(c.updated));
            chats.truncate(50);
            platform::storage_set(CHATS_KEY, &serde_json::to_string(chats).unwrap_or_default());
        });
    }
}

impl Default for ChatCtl {
    fn default() -> Self {
        Self::new()
    }
}

fn tracing_log(message: &str) {
    leptos::logging::log!("{message}");
}
