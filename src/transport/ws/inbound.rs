//! What a client sends on a socket, read in one place for every socket route (`/api/live`,
//! `/live`, and ai@7's `GET /api/chat`): the frame rate every socket is held to
//! ([`FrameLimiter`]), a ping answered, a pong taken, a close answered, the keep-alive, and a
//! text frame read — off the async workers when it is large — into the route's typed client
//! frame ([`Inbound::Frame`]).
//!
//! What the routes do differently stays theirs: the type a text frame reads as (ai@7's
//! `ChatSocketRequest`; the BIDI routes' `ClientFrame`, read with their client profile's
//! manners), what a binary frame is (microphone audio on the BIDI routes, refused on ai@7's),
//! and what a client sending too fast is told.

use std::time::{Duration, Instant};

use tokio::time::{Interval, MissedTickBehavior};

use super::{
    close,
    frame::{Message, OpCode},
    limiter::{FrameLimiter, STRIKES_BEFORE_CLOSE},
    socket::{Socket, SocketError},
};
use crate::transport::request::off_thread;

/// What a socket's loop does after handling something.
pub(super) enum Next {
    Continue,
    /// Close with this code and reason.
    Close(u16, String),
    /// The client closed (with its code): answer and end.
    ClientClosed(Option<(u16, String)>),
    /// The connection is gone; nothing more can be sent.
    Gone,
}

impl Next {
    /// What a send's result means for the socket.
    pub(super) fn sent<E>(result: Result<(), E>) -> Next {
        match result {
            Ok(()) => Next::Continue,
            Err(_) => Next::Gone,
        }
    }

    /// Ends the socket as this says: our close, the answer to the client's, or nothing (gone).
    pub(super) async fn end(self, socket: Socket) {
        match self {
            Next::Close(code, reason) => socket.close(code, &reason).await,
            Next::ClientClosed(close) => socket.answer_close(close).await,
            Next::Continue | Next::Gone => {}
        }
    }
}

/// A client's message as its route sees it.
pub(super) enum Inbound<F> {
    /// A text frame, read as the route's frame.
    Frame(F),
    /// A binary frame.
    Binary(Vec<u8>),
    /// A frame over the rate, dropped (the socket is closed after [`STRIKES_BEFORE_CLOSE`]).
    /// `first`: the first one dropped; `text`: the dropped frame's text, if it was text.
    Dropped { first: bool, text: Option<String> },
    /// Nothing for the route: the socket's own business (a ping answered, a pong, part of a
    /// fragmented message), or its end.
    Socket(Next),
}

/// The keep-alive of a socket: a ping every third of the idle time, and a client heard from in
/// none of it closed (`COUNTERSIGN_WS_IDLE`).
pub(super) struct Keepalive {
    idle: Duration,
    ping: Interval,
    last_heard: Instant,
}

impl Keepalive {
    pub(super) fn new(idle: Duration) -> Self {
        let period = idle / 3;
        let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Keepalive {
            idle,
            ping,
            last_heard: Instant::now(),
        }
    }

    /// Waits for the next time to check on the client (a small future: idle sockets wait in it).
    pub(super) async fn tick(&mut self) {
        self.ping.tick().await;
    }

    /// Checks on the client: closed if it was not heard from for the idle time, else pinged.
    pub(super) async fn check(&self, socket: &mut Socket) -> Next {
        if self.last_heard.elapsed() >= self.idle {
            Next::Close(close::GOING_AWAY, "idle timeout".into())
        } else {
            Next::sent(socket.send(OpCode::Ping, &[]).await)
        }
    }
}

/// Reads what the client sent once `socket` is readable: the one path from a socket's messages
/// to its route's typed frames. `read` turns a text frame into the route's frame; it runs on a
/// blocking thread when the frame is large.
pub(super) async fn receive<F: Send + 'static>(
    socket: &mut Socket,
    limiter: &mut FrameLimiter,
    keepalive: &mut Keepalive,
    read: impl FnOnce(String) -> F + Send + 'static,
) -> Inbound<F> {
    let message = match socket.next_message() {
        Ok(None) => return Inbound::Socket(Next::Continue),
        Ok(Some(message)) => message,
        Err(SocketError::Frame(e)) => {
            return Inbound::Socket(Next::Close(e.close_code(), e.to_string()));
        }
        Err(SocketError::Eof | SocketError::Io(_)) => return Inbound::Socket(Next::Gone),
    };
    keepalive.last_heard = Instant::now();
    if !matches!(message, Message::Close(_)) && !limiter.allow(Instant::now()) {
        if limiter.strikes > STRIKES_BEFORE_CLOSE {
            // One log line (the close), however many frames the flood had.
            return Inbound::Socket(Next::Close(close::POLICY, "too many frames".into()));
        }
        return Inbound::Dropped {
            first: limiter.strikes == 1,
            text: match message {
                Message::Text(text) => Some(text),
                _ => None,
            },
        };
    }
    match message {
        Message::Text(text) => {
            let size = text.len();
            match off_thread(text, size, read).await {
                Ok(frame) => Inbound::Frame(frame),
                Err(e) => Inbound::Socket(Next::Close(close::INTERNAL, e.message)),
            }
        }
        Message::Binary(bytes) => Inbound::Binary(bytes),
        Message::Close(close) => Inbound::Socket(Next::ClientClosed(close)),
        Message::Ping(payload) => {
            Inbound::Socket(Next::sent(socket.send(OpCode::Pong, &payload).await))
        }
        Message::Pong(_) => Inbound::Socket(Next::Continue),
    }
}
