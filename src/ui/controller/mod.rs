//! The chat controller: the page's state and everything that changes it.
//!
//! All state is reactive signals, so components only read; every change goes through a method
//! of [`ChatCtl`]. Chunks from either transport are folded by the one `protocol` reducer
//! ([`Conversation`]) into the messages the page renders.
//!
//! * this file: [`ChatCtl`], its signals, and the verbs the page calls (send, answer, stop,
//!   switch transport, open a chat);
//! * `state`: the page's types and the pure rules over the conversation;
//! * `incoming`: chunks, chat snapshots and expired deadlines folded into the state;
//! * `transport`: the `ChatTransport` trait and its SSE and WebSocket implementations, which
//!   carry requests and chunks and own connections, outbox, reconnect and resume;
//! * `browser_tools`: the tools the browser runs, a registry keyed by tool name;
//! * `voice`: BIDI's voice — the microphone, the agent's speech, barge-in (ADR 0037);
//! * `music`, `storage`, `chunk_log`: the BGM control, what localStorage keeps, the chunk log.
//!
//! When answers go out is the transport's business: SSE batches a step's answers and sends them
//! once the step is fully answered (`protocol::answers_to_send`, never twice for the same
//! answers); BIDI sends each answer the moment it is given, because the server's turn is alive
//! and waiting.

mod browser_tools;
mod chunk_log;
mod incoming;
mod music;
mod state;
mod storage;
mod transport;
pub mod voice;

use std::{
    collections::{HashMap, HashSet},
    rc::Rc,
};

use leptos::{prelude::*, task::spawn_local};
use serde_json::{Value, json};

pub use chunk_log::LoggedChunk;
pub use state::{Answer, Banner, Link, Mode, Status};
pub use storage::ChatEntry;

use super::{api::ToolInfo, platform};
use crate::protocol::{Conversation, UiMessage};
use transport::{ChatTransport, Transports};

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
    /// Who is signed in (the one local person on a server without sign-in).
    pub me: RwSignal<crate::protocol::countersign::Me>,
    /// The BGM track playing, if any.
    pub bgm: RwSignal<Option<u8>>,
    /// This browser's clock, ticking every second (countdowns).
    pub now: RwSignal<i64>,
    pub chats: RwSignal<Vec<ChatEntry>>,
    /// The newest approval card, to receive focus.
    pub focus_approval: RwSignal<Option<String>>,
    /// The page has hydrated (the wasm is running).
    pub hydrated: RwSignal<bool>,
    /// Loads of the chat from the server under way (the conversation is `aria-busy` meanwhile).
    pub loading: RwSignal<u32>,
    /// BIDI's voice: the microphone, the agent's speech.
    pub voice: voice::Voice,
    conversation: StoredValue<Conversation>,
    transports: StoredValue<Transports, LocalStorage>,
    /// Browser tool calls already started.
    executed: StoredValue<HashSet<String>>,
    /// Approval id → what the person added to their answer (sent as Countersign's
    /// extensions of the approval: `editedInput`, `grant`, `dismissed`).
    extensions: StoredValue<HashMap<String, state::Extension>>,
    /// Overdue approvals already refreshed from the server.
    refreshed: StoredValue<HashSet<String>>,
    /// The chunk log's last sequence number.
    sequence: StoredValue<u64>,
    /// The chat whose decisions made elsewhere this page follows, and the version of its
    /// waiting approvals it has shown (`follow_decisions`).
    followed: StoredValue<String>,
    news: StoredValue<u64>,
    /// The number of the newest load of the chat asked for: only its answer is shown.
    loads: StoredValue<u64>,
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
            me: RwSignal::new(Default::default()),
            bgm: RwSignal::new(None),
            now: RwSignal::new(0),
            chats: RwSignal::new(Vec::new()),
            focus_approval: RwSignal::new(None),
            hydrated: RwSignal::new(false),
            loading: RwSignal::new(0),
            voice: voice::Voice::new(),
            conversation: StoredValue::new(Conversation::new(Vec::new())),
            transports: StoredValue::new_local(Transports::new()),
            executed: StoredValue::new(HashSet::new()),
            extensions: StoredValue::new(HashMap::new()),
            refreshed: StoredValue::new(HashSet::new()),
            sequence: StoredValue::new(0),
            followed: StoredValue::new(String::new()),
            news: StoredValue::new(0),
            loads: StoredValue::new(0),
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
        if storage::saved_mode() == Mode::Bidi {
            self.mode.set(Mode::Bidi);
        }
        self.chats.set(storage::saved_chats());
        let (_, query) = platform::location();
        // The chat the address names, or the one open last if it was ever used; else a new one
        // (which the server does not know yet: nothing to load).
        let chat = super::url::query_param(&query, "chat")
            .filter(|c| !c.trim().is_empty())
            .or_else(|| {
                storage::saved_chat()
                    .filter(|id| self.chats.with_untracked(|c| c.iter().any(|e| &e.id == id)))
            });
        match chat {
            Some(chat) => self.open_chat(chat),
            None => self.new_chat(),
        }
        spawn_local(async move {
            match super::api::get_app_info().await {
                Ok(info) => {
                    self.model.set(info.model);
                    self.tools.set(info.tools);
                    self.me.set(info.me);
                }
                Err(e) => self.show_error(format!("Cannot load the tools: {e}"), false),
            }
        });
    }

    /// Shows chat `id` (loading it from the server).
    pub fn open_chat(self, id: String) {
        self.open(id, false);
    }

    /// Starts an empty chat: the server has nothing of it yet, so nothing is loaded.
    pub fn new_chat(self) {
        self.open(platform::random_id("chat"), true);
    }

    fn open(self, id: String, fresh: bool) {
        self.voice_off();
        let transport = self.transport();
        transport.disconnect(self);
        storage::save_chat(&id);
        self.chat_id.set(id.clone());
        self.reset_local();
        transport.connect(self);
        if fresh {
            // Nothing to apply: the chat is empty (`reset_local`) and the server has no version
            // of it yet. (Reading a snapshot is left to the parts that load chats, ADR 0030.)
            self.follow_from(&id, 0);
        } else {
            self.reload();
        }
    }

    fn reset_local(self) {
        self.conversation.set_value(Conversation::new(Vec::new()));
        self.messages.set(Vec::new());
        self.deadlines.set(HashMap::new());
        for transport in self.transports.with_value(Transports::all) {
            transport.forget_chat();
        }
        self.executed.set_value(HashSet::new());
        // Edits and refreshes belong to the chat that was open (approval ids are unique, but
        // nothing of one chat should ride along into another's requests).
        self.extensions.set_value(HashMap::new());
        self.refreshed.set_value(HashSet::new());
        self.status.set(Status::Ready);
        self.banner.set(None);
    }

    // ----- sending ----------------------------------------------------------------------------

    /// Whether a request is in flight and the person cannot send a new message.
    pub fn busy(self) -> bool {
        let waiting = self.messages.with(|m| state::waits_for_person(m));
        matches!(self.status.get(), Status::Submitted | Status::Streaming) && !waiting
    }

    /// Sends the person's message (an example prompt).
    pub fn send_text(self, text: String) {
        self.send(text, Vec::new());
    }

    /// The largest image the current transport carries.
    pub fn max_attachment_bytes(self) -> u64 {
        self.transport_for(self.mode.get()).max_attachment_bytes()
    }

    /// Shows a problem the person can fix (e.g. a file too large).
    pub fn report(self, message: String) {
        self.show_error(message, false);
    }

    /// Sends the person's message with its attached images.
    pub fn send(self, text: String, files: Vec<platform::PickedFile>) {
        let text = text.trim();
        if (text.is_empty() && files.is_empty()) || self.busy() {
            return;
        }
        platform::bgm_unlock();
        self.banner.set(None);
        let message = state::user_message(platform::random_id("u"), text, files);
        self.conversation.update_value(|c| c.push(message.clone()));
        self.publish();
        self.remember_chat(state::chat_title(text));
        self.transport().send_message(self, &message);
    }

    /// "Ask again" on the card of call `call_id` that expired or was set aside: the person's
    /// message says so, and carries the call (`metadata.countersign.askAgain`), which the server
    /// puts before them again — the same tool and arguments, asked as any call is.
    pub fn ask_again(self, call_id: String) {
        if self.busy() {
            return;
        }
        let sentence = self.conversation.with_value(|c| {
            c.messages().iter().rev().find_map(|m| {
                let tool = m.find_tool_part(&call_id)?;
                let input = tool.input.clone().unwrap_or(Value::Null);
                Some(match self.tool_info(&tool.tool_name) {
                    Some(info) => info.presentation.sentence(&input),
                    None => crate::protocol::presentation::unknown_tool_sentence(&tool.tool_name),
                })
            })
        });
        let Some(sentence) = sentence else {
            self.show_error("That call is no longer in this chat.".into(), false);
            return;
        };
        self.banner.set(None);
        let text = format!("Ask me again: {sentence}");
        let mut message = state::user_message(platform::random_id("u"), &text, Vec::new());
        message.set_ask_again(&call_id);
        self.conversation.update_value(|c| c.push(message.clone()));
        self.publish();
        self.transport().send_message(self, &message);
    }

    /// Stop (the button, or Esc): the server cancels the turn and ends its stream.
    pub fn stop(self) {
        self.log_out(json!({"type": "stop"}));
        self.transport().stop(self);
    }

    /// Switches the transport; the conversation stays (the server owns it).
    pub fn set_mode(self, mode: Mode) {
        let previous = self.mode.get_untracked();
        if previous == mode {
            return;
        }
        storage::save_mode(mode);
        if previous == Mode::Bidi {
            self.voice_off();
        }
        self.mode.set(mode);
        self.transport_for(previous).disconnect(self);
        self.transport_for(mode).connect(self);
    }

    /// "Try again": re-sends the last request. Only an HTTP request fails in a way the person
    /// retries (the socket re-sends its outbox by itself), so it is the SSE transport's, even
    /// after a switch to BIDI.
    pub fn retry(self) {
        self.banner.set(None);
        self.transport_for(Mode::Sse).retry(self);
    }

    // ----- answers ----------------------------------------------------------------------------

    /// The person answered approval card `approval_id`.
    pub fn answer(self, approval_id: String, answer: Answer) {
        let approved = answer.approved();
        let call = self
            .conversation
            .with_value(|c| state::call_of_approval(c.messages(), &approval_id, answer.edited()));
        let mut extension = answer.extension();
        self.extensions.update_value(|e| {
            // A passkey confirmation given for this answer stays with it.
            extension.step_up = e.get(&approval_id).and_then(|x| x.step_up.clone());
            if !extension.is_empty() {
                e.insert(approval_id.clone(), extension);
            }
        });
        self.conversation.update_value(|c| {
            c.add_tool_approval_response(&approval_id, approved, answer.reason());
        });
        self.publish();
        self.banner.set(None);
        let Some(call) = call else {
            self.show_error("That approval is no longer pending.".into(), false);
            return;
        };
        let browser_runs_it = approved
            && self
                .tool_info(&call.tool_name)
                .is_some_and(|t| t.runs_in_browser);
        self.transport().send_answer(self, browser_runs_it);
        if browser_runs_it {
            self.run_browser_tool(call.call_id, call.tool_name, call.args);
        }
    }

    /// The person approved approval `approval_id` with a passkey confirmation (`assertion`,
    /// step-up): it travels with the approval as `approval.stepUp`.
    pub fn answer_confirmed(self, approval_id: String, answer: Answer, assertion: Value) {
        self.extensions.update_value(|e| {
            e.entry(approval_id.clone()).or_default().step_up = Some(assertion);
        });
        self.answer(approval_id, answer);
    }

    /// In SSE mode the page holds no connection while a turn waits for people: it waits on the
    /// server (`chat_news`, long polling) for decisions made elsewhere — an approver in the
    /// inbox, another device — and, when one lands while an approval waits here, shows the chat
    /// as the server has it (following the turn if it streams again). BIDI's socket hears them
    /// by itself. One loop per chat shown, from its first snapshot (whose version it starts at,
    /// so nothing between the two is missed); it ends when another chat is opened.
    fn follow_decisions(self, chat: String) {
        spawn_local(wait_for_decisions(self, chat));
    }

    /// The messages as they are sent: Countersign's extensions added to the approvals they
    /// belong to.
    fn outgoing(self, messages: Vec<UiMessage>) -> Vec<UiMessage> {
        self.extensions
            .with_value(|extensions| state::with_extensions(messages, extensions))
    }

    // ----- helpers ----------------------------------------------------------------------------

    /// The transport of the mode the page is in.
    fn transport(self) -> Rc<dyn ChatTransport> {
        self.transport_for(self.mode.get_untracked())
    }

    fn transport_for(self, mode: Mode) -> Rc<dyn ChatTransport> {
        self.transports.with_value(|t| t.get(mode))
    }

    /// Closes the socket as a network drop would (tests: `window.__countersign.dropSocket()`).
    pub fn drop_socket(self) {
        self.transport_for(Mode::Bidi).drop_connection();
    }

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

    pub(super) fn remember_chat(self, text: &str) {
        let id = self.chat_id.get_untracked();
        let now = platform::now_ms();
        self.chats.update(|chats| {
            storage::remember(chats, &id, text, now);
            storage::save_chats(chats);
        });
    }
}

/// The loop of [`ChatCtl::follow_decisions`]. With a split wasm (ADR 0030) its code is a part of
/// its own, loaded when the first chat is shown.
#[cfg_attr(wasm_split, leptos::lazy(chat_news))]
async fn wait_for_decisions(ctl: ChatCtl, chat: String) {
    loop {
        // Another chat is shown, or this page's sign-in ended: stop asking.
        if ctl.followed.with_value(|f| *f != chat) || platform::is_signed_out() {
            return;
        }
        if ctl.mode.get_untracked() != Mode::Sse {
            platform::sleep(2_000).await;
            continue;
        }
        let known = ctl.news.get_value();
        match super::inbox::chat_news(chat.clone(), Some(known)).await {
            Ok(version) if version != known => {
                if ctl.followed.with_value(|f| *f != chat) {
                    return;
                }
                let idle = ctl.conversation.with_value(|c| c.active().is_none())
                    && matches!(ctl.status.get_untracked(), Status::Ready);
                if !idle {
                    // This page's own request is streaming: look again when it ends.
                    platform::sleep(300).await;
                    continue;
                }
                ctl.news.set_value(version);
                if ctl.messages.with_untracked(|m| state::awaits_decision(m)) {
                    ctl.reload();
                }
            }
            Ok(_) => {}
            Err(_) => platform::sleep(5_000).await,
        }
    }
}

impl Default for ChatCtl {
    fn default() -> Self {
        Self::new()
    }
}
