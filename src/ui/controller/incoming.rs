//! What the server tells the page, folded into the chat state: chunks from either transport,
//! the chat snapshot loaded on opening a chat, and approvals whose deadline passed.

use leptos::{prelude::*, task::spawn_local};
use serde_json::Value;

use super::{CONVERSATION_ID, ChatCtl, state};
use crate::{
    protocol::{Chunk, Conversation},
    ui::{api::ChatSnapshot, platform},
};

/// How long an approval waits when its tool does not say (the server's default).
const DEFAULT_APPROVAL_TIMEOUT_SECS: u64 = 300;

/// Loads chat `id` from the server and shows it ([`ChatCtl::reload`]), unless a newer load was
/// asked for meanwhile (`load`: this one's number). Two loads can be under way at once (a
/// decision and the turn it let finish both move the chat's version), and their answers can
/// come back in either order: an older snapshot shown last would put back a card that was
/// already decided, with nothing left to wake the page. With a split wasm (ADR 0030) reading a
/// chat's JSON into messages is a part of its own, loaded when a chat is first opened.
#[cfg_attr(wasm_split, leptos::lazy(restore))]
async fn restore(ctl: ChatCtl, id: String, load: u64) {
    let loaded = crate::ui::api::load_chat(id).await;
    if ctl.loads.get_value() == load {
        match loaded {
            Ok(snapshot) => ctl.apply_snapshot(snapshot),
            Err(e) => ctl.show_error(format!("Cannot load this chat: {e}"), false),
        }
    }
    ctl.loading.update(|n| *n = n.saturating_sub(1));
}

impl ChatCtl {
    /// Loads the current chat from the server (its messages, pending approvals, deadlines).
    pub(super) fn reload(self) {
        let id = self.chat_id.get_untracked();
        self.loading.update(|n| *n += 1);
        let load = self.loads.get_value() + 1;
        self.loads.set_value(load);
        spawn_local(restore(self, id, load));
    }

    /// Decisions made elsewhere on chat `chat_id` are followed from `version` on (the loop starts
    /// once per chat).
    pub(super) fn follow_from(self, chat_id: &str, version: u64) {
        self.news.set_value(version);
        if self.followed.with_value(|f| f != chat_id) {
            self.followed.set_value(chat_id.to_owned());
            self.follow_decisions(chat_id.to_owned());
        }
    }

    pub(super) fn apply_snapshot(self, snapshot: ChatSnapshot) {
        if snapshot.chat_id != self.chat_id.get_untracked() {
            return;
        }
        self.follow_from(&snapshot.chat_id, snapshot.version);
        let skew = platform::now_ms() - snapshot.server_now_ms;
        self.deadlines.update(|d| {
            for p in &snapshot.pending {
                d.insert(p.approval_id.clone(), p.deadline_ms + skew);
            }
        });
        // Calls that already ran are not run again by this browser.
        self.executed
            .update_value(|e| e.extend(state::finished_calls(&snapshot.messages)));
        // A turn this page streams now is newer than the snapshot (the decisions above still
        // hold: which chat it follows, from which version).
        if self.conversation.with_value(|c| c.active().is_some()) {
            return;
        }
        // What this page sent after the snapshot was taken stays shown.
        let messages = self
            .conversation
            .with_value(|c| state::merge_snapshot(c.messages(), snapshot.messages));
        self.conversation
            .set_value(Conversation::new(messages.clone()));
        self.messages.set(messages);
        let waiting = self.messages.with_untracked(|m| state::waits_for_person(m));
        let transport = self.transport();
        if snapshot.streaming || (waiting && transport.follows_waiting_turns()) {
            // Follow the turn live again: SSE re-attaches to a streaming turn; BIDI replays the
            // waiting turn from its start, then sees its expiry or continuation as it happens.
            transport.resume(self);
        }
    }

    /// Every second: a pending approval whose deadline passed while nothing is streaming has
    /// expired on the server; fetch what the server did (SSE holds no connection meanwhile).
    pub(super) fn check_deadlines(self) {
        if self.conversation.with_value(|c| c.active().is_some()) {
            return;
        }
        let now = platform::now_ms();
        let overdue = self.messages.with_untracked(|messages| {
            self.deadlines
                .with_untracked(|deadlines| state::overdue_approvals(messages, deadlines, now))
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

    /// Folds one chunk that arrived over transport `mode` into the conversation, and reacts to
    /// what it asks of the page: an approval card to focus, a browser tool to run, an error.
    /// `raw`: the chunk's JSON as it came (for the chunk log).
    pub(super) fn on_chunk(self, chunk: Chunk, raw: Value, mode: &'static str) {
        self.status.set(super::Status::Streaming);
        self.log_in(raw, mode);
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
                let timeout = tool
                    .map(|t| t.approval_timeout_secs)
                    .unwrap_or(DEFAULT_APPROVAL_TIMEOUT_SECS) as i64;
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
            Chunk::Start(_) => self.on_message_start(),
            Chunk::Data(data) if data.name == crate::protocol::voice::VOICE_PART => {
                self.on_voice_state(&data.data)
            }
            _ => {}
        }
        if platform::is_near_bottom(CONVERSATION_ID) {
            platform::scroll_to_bottom(CONVERSATION_ID);
        }
    }

    /// Copies the conversation's messages into the signal the page renders.
    pub(super) fn publish(self) {
        let messages = self.conversation.with_value(|c| c.messages().to_vec());
        self.messages.set(messages);
    }
}
