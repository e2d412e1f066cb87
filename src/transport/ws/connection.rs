//! One socket's connection on `/api/live` or `/live`: what it holds while it lives, what wakes
//! it, and the loop that waits (on small futures only: most sockets are idle, waiting for a
//! person) and reads the client's frames. What a frame does is [`super::dispatch`]'s.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures::future::Either;
use tokio_util::sync::CancellationToken;

use super::{
    ChatScope, close,
    forward::Forwarding,
    inbound::{self, Inbound, Keepalive, Next},
    limiter::FrameLimiter,
    socket::{Socket, Upgrade},
    voice,
};
use crate::{
    agent::people::{Ending, Hold},
    agent::{Runtime, TextTiming, followers::Following, session::Read},
    protocol::{
        Chunk, ClientFrame, Dialect, EnvelopeError,
        envelope::{ReadError, ReadLimits},
    },
    transport::{
        edge::Client,
        profile::{Encoder, FrameOf, Profile},
        request::{read_limits, too_many_messages},
        state::AppState,
    },
};

/// Connection numbers, for the logs.
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// One WebSocket connection. Everything here lives as long as the socket, idle or not, so it
/// holds handles and small settings, not the whole `AppState`.
pub(super) struct Connection {
    pub(super) runtime: Arc<Runtime>,
    pub(super) idle: Duration,
    pub(super) timing: Option<TextTiming>,
    /// What the client speaks.
    pub(super) profile: Profile,
    /// The chunk keys it takes.
    pub(super) keys: Dialect,
    /// What writes the forwarded turn's frames.
    pub(super) encoder: Box<dyn Encoder>,
    pub(super) scope: ChatScope,
    pub(super) id: u64,
    pub(super) chat: Option<Arc<str>>,
    /// This socket as its chat's follower (set once it knows its chat).
    pub(super) following: Option<Following>,
    /// The turn this socket forwards.
    pub(super) turn: Option<Forwarding>,
    pub(super) limiter: FrameLimiter,
    /// How much of a `message` frame's messages is read.
    pub(super) limits: ReadLimits,
    /// Who is on the other end, as the directory has them at the last frame.
    pub(super) client: Client,
    /// Ends when they are removed or their sign-in ends: the socket closes.
    pub(super) hold: Hold,
    /// Cancelled when the server shuts down.
    pub(super) shutdown: CancellationToken,
    /// Microphone audio in and the agent's speech out.
    pub(super) voice: voice::Voice,
}

/// What woke an idle connection.
pub(super) enum Wake {
    /// The client sent something (or closed).
    Readable,
    /// The forwarded turn has a new entry, or ended.
    Entry,
    /// The chat has news, or another socket took it over.
    Signal,
    /// Time to check on the client.
    Ping,
    /// The server is shutting down.
    Shutdown,
    /// Whoever opened the socket may no longer be signed in.
    SignedOut(Ending),
}

/// Why a BIDI text frame could not be read as a [`ClientFrame`].
enum Unread {
    /// Not JSON, or too many messages.
    Json(ReadError),
    /// JSON, but no frame this server reads.
    Frame(EnvelopeError),
}

/// A BIDI route's text frame as its [`ClientFrame`]: read once (what a server keeps of it),
/// a frame of the client's own shape made ours by its profile ([`Profile::frame`]: the seed's
/// looser `message` frames), then typed.
fn read_frame(
    text: &str,
    limits: ReadLimits,
    profile: &Profile,
    on: FrameOf<'_>,
) -> Result<ClientFrame, Unread> {
    let value = ClientFrame::value_for_server(text, limits).map_err(Unread::Json)?;
    let value = (profile.frame)(value, on);
    ClientFrame::from_value(value).map_err(Unread::Frame)
}

impl Connection {
    pub(super) fn new(
        state: &AppState,
        timing: Option<TextTiming>,
        profile: Profile,
        keys: Dialect,
        scope: ChatScope,
        client: Client,
        hold: Hold,
    ) -> Self {
        Connection {
            runtime: state.runtime.clone(),
            idle: state.edge_settings.ws_idle,
            timing,
            profile,
            keys,
            encoder: profile.encoder(keys),
            scope,
            id: CONNECTIONS.fetch_add(1, Ordering::Relaxed) + 1,
            chat: None,
            following: None,
            turn: None,
            limiter: FrameLimiter::new(state.edge_settings.ws_rate, Instant::now()),
            limits: read_limits(state),
            client,
            hold,
            shutdown: state.edge.shutdown.clone(),
            voice: voice::Voice::new(&state.edge_settings, false, Instant::now()),
        }
    }

    /// The connection's life. What every idle socket holds is this task waiting in [`wait`],
    /// so that waits on small futures only; handling what woke it happens in a box that exists
    /// only while it runs.
    #[allow(clippy::manual_async_fn)] // see below
    pub(super) fn run(mut self, upgrade: Upgrade) -> impl Future<Output = ()> + Send + 'static {
        // A block, not an `async fn`: an async fn's arguments are moved into locals and the
        // task would keep room for the connection twice.
        async move {
            let Some(mut socket) = upgrade.socket().await else {
                return;
            };
            let mut keepalive = Keepalive::new(self.idle);
            let next = loop {
                let Some(wake) = wait(
                    &self.turn,
                    &self.following,
                    &socket,
                    &mut keepalive,
                    &self.shutdown,
                    &self.hold,
                )
                .await
                else {
                    break Next::Gone;
                };
                match Box::pin(self.on_wake(wake, &mut socket, &mut keepalive)).await {
                    Next::Continue => {}
                    next => break next,
                }
            };
            // Done with the chat, whatever the close handshake takes.
            if let (Some(chat), Some(following)) = (&self.chat, &self.following) {
                self.runtime.followers.leave(chat, following.id);
            }
            if let Next::Close(code, reason) = &next {
                tracing::info!(connection = self.id, chat = ?self.chat, code, %reason, "closing socket");
            }
            Box::pin(next.end(socket)).await;
        }
    }

    async fn on_wake(
        &mut self,
        wake: Wake,
        socket: &mut Socket,
        keepalive: &mut Keepalive,
    ) -> Next {
        match wake {
            Wake::Readable => self.on_readable(socket, keepalive).await,
            Wake::Entry => {
                let read = match self.turn.as_mut().and_then(|t| t.reader.as_mut()) {
                    Some(reader) => reader.try_next(),
                    None => Read::Nothing,
                };
                match read {
                    Read::Entry(entry) => self.forward(Some(entry), socket).await,
                    Read::End => self.forward(None, socket).await,
                    Read::Nothing => Next::Continue,
                }
            }
            Wake::Signal => {
                if self
                    .following
                    .as_ref()
                    .is_some_and(|f| f.signal.is_replaced())
                {
                    Next::Close(
                        close::REPLACED,
                        "another connection took over this chat".into(),
                    )
                } else {
                    self.catch_up().await;
                    Next::Continue
                }
            }
            Wake::Shutdown => Next::Close(close::GOING_AWAY, "the server is shutting down".into()),
            Wake::SignedOut(why) => Next::Close(close::SIGNED_OUT, why.words().into()),
            Wake::Ping => keepalive.check(socket).await,
        }
    }

    /// What the client sent, through the one path every socket reads its client by
    /// ([`inbound::receive`]).
    async fn on_readable(&mut self, socket: &mut Socket, keepalive: &mut Keepalive) -> Next {
        let (limits, chat, connection, profile) =
            (self.limits, self.chat.clone(), self.id, self.profile);
        let read = move |text: String| {
            let on = FrameOf {
                chat: chat.as_deref(),
                connection,
            };
            read_frame(&text, limits, &profile, on)
        };
        match inbound::receive(socket, &mut self.limiter, keepalive, read).await {
            Inbound::Frame(read) => self.on_read(read, socket).await,
            // Microphone audio: PCM16LE mono 16 kHz.
            Inbound::Binary(pcm) => self.on_audio(pcm, socket).await,
            // Said once, and not logged: a flood is one log line, its close.
            Inbound::Dropped { first: true, .. } => {
                let chunk = Chunk::error("Too many frames: slow down (rate limit).");
                self.send_chunk(socket, &chunk).await
            }
            Inbound::Dropped { .. } => Next::Continue,
            Inbound::Socket(next) => next,
        }
    }

    /// A text frame, read or not: what cannot be read is answered as the client's profile says.
    async fn on_read(&mut self, read: Result<ClientFrame, Unread>, socket: &mut Socket) -> Next {
        match read {
            Ok(frame) => self.on_frame(frame, socket).await,
            Err(Unread::Json(ReadError::TooManyMessages { max })) => {
                self.send_api_error(socket, too_many_messages(max)).await
            }
            Err(Unread::Json(ReadError::Json(e))) if self.profile.socket.close_on_bad_json => {
                Next::Close(close::PROTOCOL_ERROR, format!("Invalid JSON: {e}"))
            }
            Err(Unread::Json(ReadError::Json(e))) => {
                self.send_error(socket, &format!("The frame is not valid JSON: {e}"))
                    .await
            }
            Err(Unread::Frame(e)) if self.profile.socket.ignore_unknown_frames => {
                tracing::warn!(connection = self.id, chat = ?self.chat, error = %e, "frame ignored");
                Next::Continue
            }
            Err(Unread::Frame(EnvelopeError::UnknownType { type_name })) => {
                self.send_error(socket, &format!("Unknown frame type {type_name:?}."))
                    .await
            }
            Err(Unread::Frame(e)) => {
                self.send_error(socket, &format!("The frame cannot be read: {e}"))
                    .await
            }
        }
    }
}

/// What wakes an idle connection next (`None`: the connection failed). Only small futures: this
/// is what ten thousand idle sockets wait in.
async fn wait(
    turn: &Option<Forwarding>,
    following: &Option<Following>,
    socket: &Socket,
    keepalive: &mut Keepalive,
    shutdown: &CancellationToken,
    hold: &Hold,
) -> Option<Wake> {
    let entry = match turn.as_ref().and_then(|t| t.reader.as_ref()) {
        Some(reader) => Either::Left(reader.ready()),
        None => Either::Right(std::future::pending()),
    };
    let signal = match following {
        Some(following) => Either::Left(following.signal.wait()),
        None => Either::Right(std::future::pending()),
    };
    tokio::select! {
        ready = socket.readable() => ready.ok().map(|()| Wake::Readable),
        () = entry => Some(Wake::Entry),
        () = signal => Some(Wake::Signal),
        () = keepalive.tick() => Some(Wake::Ping),
        () = shutdown.cancelled() => Some(Wake::Shutdown),
        why = hold.ended() => Some(Wake::SignedOut(why)),
    }
}
