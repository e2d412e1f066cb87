//! A BIDI socket following its chat's turns: the chat it is bound to, the current turn's log
//! read from where the socket stopped, and the entries (and errors) written to the client.

use std::sync::Arc;

use super::{connection::Connection, inbound::Next, socket::Socket};
use crate::{
    agent::{
        TurnEntry,
        clock::IdKind,
        session::{LogReader, TurnLog},
    },
    protocol::{Chunk, sse::DONE_FRAME},
    transport::{error::ApiError, profile::Out, request::MAX_CHAT_ID},
};

/// Where a socket is in the turn it forwards. While the turn waits for the person the socket
/// lets go of its log (the turn may leave memory, ADR 0011) and picks it up again when the
/// chat's signal says the turn goes on.
pub(super) struct Forwarding {
    pub(super) turn_id: String,
    /// Entries of the turn's log handled so far (pauses included).
    pub(super) sent: usize,
    /// Reading the log; `None` while the turn waits for the person or after its end.
    pub(super) reader: Option<LogReader>,
}

impl Forwarding {
    /// Reading `turn_id`'s `log` from entry `from` on.
    pub(super) fn at(turn_id: String, log: &Arc<TurnLog>, from: usize) -> Self {
        Forwarding {
            reader: Some(log.subscribe(from)),
            turn_id,
            sent: from,
        }
    }
}

impl Connection {
    /// Forwards `turn_id`'s `log` from entry `from` on. The encoder starts afresh and learns
    /// what the client already has of the turn.
    pub(super) fn follow(&mut self, turn_id: String, log: &Arc<TurnLog>, from: usize) {
        self.encoder = self.profile.encoder(self.keys);
        self.encoder.prime(log, from);
        self.turn = Some(Forwarding::at(turn_id, log, from));
    }

    /// The chat of a [`ChatScope::Connection`](super::ChatScope::Connection) socket: the one it is bound to (its own, or one
    /// it resumed), else a new one named by the server. `client_id` is only logged.
    pub(super) fn connection_chat(&mut self, client_id: &str) -> Arc<str> {
        if let Some(chat) = &self.chat {
            return chat.clone();
        }
        let chat = self.runtime.ids.next_id(IdKind::ConnectionChat);
        let client_id: String = client_id.chars().take(MAX_CHAT_ID).collect();
        tracing::info!(connection = self.id, chat = %chat, client_id = ?client_id, "the connection has its own chat");
        self.bind(&chat);
        Arc::from(chat)
    }

    /// Makes this socket its chat's follower (a previous socket of the chat is replaced).
    pub(super) fn bind(&mut self, chat: &str) {
        if self.chat.as_deref() != Some(chat) {
            if let (Some(old), Some(following)) = (&self.chat, &self.following) {
                self.runtime.followers.leave(old, following.id);
            }
            let chat: Arc<str> = Arc::from(chat);
            self.following = Some(self.runtime.followers.follow(&chat));
            self.chat = Some(chat);
        }
    }

    /// The chat has news: read the current turn from where this socket stopped (or from the
    /// start if it is a new turn). Nothing changes while the socket still reads a turn (it
    /// looks again when that one ends), nor when the turn has nothing new (a paused turn's log
    /// is not held: it may leave memory).
    pub(super) async fn catch_up(&mut self) {
        if self.turn.as_ref().is_some_and(|t| t.reader.is_some()) {
            return;
        }
        let Some(chat) = self.chat.clone() else {
            return;
        };
        // The turn may have paused and left memory again before this socket looked: its log
        // comes back from the store with it. The turn and its log are all this reads: a chat
        // not in memory is loaded with its head only (ADR 0045).
        let session = match self.runtime.session_head(&chat).await {
            Ok(Some(session)) => session,
            Ok(None) => return,
            Err(e) => {
                tracing::error!(connection = self.id, chat = %chat, error = &e as &dyn std::error::Error, "cannot load the chat to follow it");
                return;
            }
        };
        let Some((turn_id, log)) = session.current_turn() else {
            return;
        };
        match &mut self.turn {
            Some(turn) if turn.turn_id == turn_id => {
                if turn.sent < log.len() {
                    turn.reader = Some(log.subscribe(turn.sent));
                }
            }
            _ => self.follow(turn_id, &log, 0),
        }
    }

    /// Stops reading the forwarded turn's log, remembering where.
    pub(super) fn detach(&mut self) {
        if let Some(turn) = &mut self.turn
            && let Some(reader) = turn.reader.take()
        {
            turn.sent = reader.position();
        }
    }

    /// Sends one log entry as the encoder writes it: for the AI SDK's chunks a chunk frame,
    /// nothing for a pause (where the socket lets go of the log if nothing follows yet) and
    /// `[DONE]` at the end of the turn, unless the encoder closes the stream itself (the seed's
    /// approval group at a pause, its own `[DONE]`).
    pub(super) async fn forward(&mut self, entry: Option<TurnEntry>, socket: &mut Socket) -> Next {
        match entry {
            None => {
                self.detach();
                self.catch_up().await;
                Next::Continue
            }
            Some(TurnEntry::Pause) => {
                let frames = self.encoder.pause(None);
                let next = self.send_frames(socket, frames).await;
                if self
                    .turn
                    .as_ref()
                    .and_then(|t| t.reader.as_ref())
                    .is_some_and(LogReader::at_end)
                {
                    self.detach();
                }
                next
            }
            Some(TurnEntry::End) => {
                let mut frames = self.encoder.end();
                if !self.encoder.closes_itself() {
                    frames.push(Out::Frame(DONE_FRAME.to_string()));
                }
                let next = self.send_frames(socket, frames).await;
                // A newer turn of the chat may have begun meanwhile.
                self.detach();
                self.catch_up().await;
                next
            }
            Some(TurnEntry::Chunk(chunk)) => self.send_chunk(socket, &chunk).await,
        }
    }

    pub(super) async fn send_chunk(&mut self, socket: &mut Socket, chunk: &Chunk) -> Next {
        if let Some(next) = self.send_speech(socket, chunk).await {
            return next;
        }
        let frames = self.encoder.chunk(chunk);
        self.send_frames(socket, frames).await
    }

    /// Sends what the encoder wrote, each as one SSE event's text.
    pub(super) async fn send_frames(&mut self, socket: &mut Socket, frames: Vec<Out>) -> Next {
        for frame in frames {
            if let Next::Gone = self.send_text(socket, frame.into_event()).await {
                return Next::Gone;
            }
        }
        Next::Continue
    }

    /// An error with its stable code: the code in the text after the message, the details (if
    /// any) only in the log.
    pub(super) async fn send_api_error(&mut self, socket: &mut Socket, error: ApiError) -> Next {
        let text = format!("{} ({})", error.message, error.code);
        self.send_error(socket, &text).await
    }

    /// A frame refused (voice it cannot take, an answer that says neither yes nor no): an
    /// error chunk, or, for a client whose stream an error would fail (the seed's), a log line,
    /// as its backend did with frames it could not use.
    pub(super) async fn refuse_frame(&mut self, socket: &mut Socket, message: &str) -> Next {
        if self.profile.socket.ignore_unknown_frames {
            tracing::warn!(connection = self.id, chat = ?self.chat, message, "frame refused");
            return Next::Continue;
        }
        self.send_error(socket, message).await
    }

    pub(super) async fn send_error(&mut self, socket: &mut Socket, message: &str) -> Next {
        tracing::warn!(connection = self.id, chat = ?self.chat, message, "frame rejected");
        self.send_chunk(socket, &Chunk::error(message)).await
    }

    pub(super) async fn send_text(&mut self, socket: &mut Socket, text: String) -> Next {
        match socket.send_text(&text).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Gone,
        }
    }
}
