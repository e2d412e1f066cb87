//! What one client's connections may hold of the server: how many there are, how long they may
//! sit idle, how slowly they may send a body, and how long a write to them may wait.
//!
//! * **Caps.** At most `COUNTERSIGN_MAX_CONNECTIONS_PER_ADDRESS` open connections per client
//!   address (IPv6 by /64) and `COUNTERSIGN_MAX_CONNECTIONS` in all (by default the process's
//!   descriptor limit less a reserve for the database, the log and outgoing requests). A
//!   connection over a cap is closed as soon as it is accepted, so a flood from one address
//!   never takes the descriptors another needs. An upgraded WebSocket keeps its place.
//! * **Idle connections** are closed after `COUNTERSIGN_IDLE_TIMEOUT_SECS` without a request
//!   (hyper's header-read timeout, which also runs between keep-alive requests).
//! * **Bodies** must arrive at `COUNTERSIGN_BODY_MIN_RATE` bytes a second on average once
//!   `COUNTERSIGN_BODY_GRACE_SECS` have passed ([`MinRateBody`]); a body trickled in slower is
//!   cut off with 408.
//! * **Writes** that the client does not take for `COUNTERSIGN_WRITE_TIMEOUT_SECS` fail
//!   ([`WriteDeadline`]): a client that stops reading loses its connection, never holds a task.

use std::{
    collections::HashMap,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    time::{Instant, Sleep},
};

use super::limits::address_key;
use crate::agent::lock;

/// Open connections, in all and per client address.
#[derive(Debug)]
pub struct ConnectionLimits {
    max_total: usize,
    max_per_address: usize,
    total: AtomicUsize,
    per_address: Mutex<HashMap<String, usize>>,
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAdmitted {
    /// The server holds as many connections as it may.
    Full,
    /// This address holds as many as one address may.
    AddressFull,
}

/// A connection's place; given back when the last holder (the connection, or the WebSocket it
/// became) drops it.
#[derive(Debug)]
pub struct Admission {
    limits: Arc<ConnectionLimits>,
    key: String,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.limits.total.fetch_sub(1, Ordering::Relaxed);
        let mut per_address = lock(&self.limits.per_address);
        if let Some(count) = per_address.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                per_address.remove(&self.key);
            }
        }
    }
}

impl ConnectionLimits {
    /// `max_total` connections in all and `max_per_address` per address (0: no limit).
    pub fn new(max_total: usize, max_per_address: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            max_total: if max_total == 0 {
                usize::MAX
            } else {
                max_total
            },
            max_per_address: if max_per_address == 0 {
                usize::MAX
            } else {
                max_per_address
            },
            total: AtomicUsize::new(0),
            per_address: Mutex::new(HashMap::new()),
        })
    }

    /// A place for a connection from `peer`, or why there is none.
    pub fn admit(self: &Arc<Self>, peer: SocketAddr) -> Result<Arc<Admission>, NotAdmitted> {
        let key = address_key(Some(peer));
        let mut per_address = lock(&self.per_address);
        let count = per_address.get(&key).copied().unwrap_or(0);
        if count >= self.max_per_address {
            return Err(NotAdmitted::AddressFull);
        }
        if self.total.load(Ordering::Relaxed) >= self.max_total {
            return Err(NotAdmitted::Full);
        }
        self.total.fetch_add(1, Ordering::Relaxed);
        per_address.insert(key.clone(), count + 1);
        Ok(Arc::new(Admission {
            limits: self.clone(),
            key,
        }))
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

/// An I/O stream whose writes fail once they have waited `timeout` for the client to take
/// them. Idle (nothing being written) it holds no timer.
#[derive(Debug)]
pub struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    pending: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            pending: None,
        }
    }

    /// The stream inside (after an upgrade, the WebSocket takes it over with its own deadline).
    pub fn into_inner(self) -> S {
        self.inner
    }

    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.pending = None;
                Poll::Ready(result)
            }
            Poll::Pending => {
                let timeout = self.timeout;
                let sleep = self
                    .pending
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        self.pending = None;
                        Poll::Ready(Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the client did not take a write in time",
                        )))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// How slowly a body may arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyPace {
    /// Time allowed before the rate counts.
    pub grace: Duration,
    /// Bytes a second, on average, after that.
    pub min_rate: u64,
}

/// The body read too slowly (a 408).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body arrived too slowly (less than {min_rate} bytes a second)")]
pub struct BodyTooSlow {
    pub min_rate: u64,
}

/// A request body that fails with [`BodyTooSlow`] when, `grace` after it began, fewer than
/// `min_rate` bytes a second have arrived on average.
pub struct MinRateBody {
    inner: Body,
    pace: BodyPace,
    started: Instant,
    received: u64,
    deadline: Pin<Box<Sleep>>,
}

impl MinRateBody {
    pub fn new(inner: Body, pace: BodyPace) -> Self {
        let started = Instant::now();
        MinRateBody {
            inner,
            pace,
            started,
            received: 0,
            deadline: Box::pin(tokio::time::sleep_until(started + pace.grace)),
        }
    }

    /// When the bytes received so far stop being enough.
    fn next_deadline(&self) -> Instant {
        let earned =
            Duration::from_secs_f64(self.received as f64 / self.pace.min_rate.max(1) as f64);
        self.started + self.pace.grace + earned
    }
}

impl http_body::Body for MinRateBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.received += data.len() as u64;
                    let deadline = self.next_deadline();
                    self.deadline.as_mut().reset(deadline);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.deadline.as_mut().poll(cx));
                Poll::Ready(Some(Err(axum::Error::new(BodyTooSlow {
                    min_rate: self.pace.min_rate,
                }))))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `error` (from reading a body) is a [`BodyTooSlow`].
pub fn is_too_slow(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.is::<BodyTooSlow>() {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::SinkExt;
    use http_body_util::BodyExt;

    type Sender = futures::channel::mpsc::Sender<Result<Bytes, std::io::Error>>;

    /// A body fed by hand, like a client sending it.
    fn channel() -> (Sender, Body) {
        let (tx, rx) = futures::channel::mpsc::channel(1);
        (tx, Body::from_stream(rx))
    }

    #[test]
    fn one_address_cannot_take_every_place() {
        let limits = ConnectionLimits::new(4, 2);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let a2: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:1".parse().unwrap();
        let c: SocketAddr = "127.0.0.3:1".parse().unwrap();
        let first = limits.admit(a).unwrap();
        let _second = limits.admit(a2).unwrap();
        assert_eq!(limits.admit(a).unwrap_err(), NotAdmitted::AddressFull);
        let _b1 = limits.admit(b).unwrap();
        let _b2 = limits.admit(b).unwrap();
        assert_eq!(limits.admit(c).unwrap_err(), NotAdmitted::Full);
        assert_eq!(limits.open(), 4);
        drop(first);
        assert_eq!(limits.open(), 3);
        assert!(limits.admit(c).is_ok());
        assert!(
            ConnectionLimits::new(0, 0).admit(a).is_ok(),
            "0 is no limit"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickled_body_is_cut_off_and_a_steady_one_is_not() {
        let pace = BodyPace {
            grace: Duration::from_secs(2),
            min_rate: 100,
        };
        // One byte a second: fine during the grace, too slow after it.
        let (mut tx, body) = channel();
        let mut slow = MinRateBody::new(body, pace);
        let sender = tokio::spawn(async move {
            for _ in 0..10 {
                if tx.send(Ok(Bytes::from_static(b"x"))).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let mut got = 0;
        let error = loop {
            match slow.frame().await {
                Some(Ok(frame)) => got += frame.into_data().map(|d| d.len()).unwrap_or(0),
                Some(Err(e)) => break e,
                None => panic!("the body ended"),
            }
        };
        assert!(is_too_slow(&error), "{error}");
        assert!(got <= 3, "cut off right after the grace: {got}");
        sender.abort();

        // 200 bytes a second for 5 seconds: never too slow.
        let (mut tx, body) = channel();
        let steady = MinRateBody::new(body, pace);
        tokio::spawn(async move {
            for _ in 0..5 {
                let _ = tx.send(Ok(Bytes::from(vec![0u8; 200]))).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let all = steady.collect().await.unwrap().to_bytes();
        assert_eq!(all.len(), 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_client_does_not_take_fails_after_the_deadline() {
        use tokio::io::AsyncWriteExt;
        // A pipe whose reader never reads: its buffer fills, then writes wait.
        let (client, server) = tokio::io::duplex(64);
        let mut stream = WriteDeadline::new(server, Duration::from_secs(5));
        let started = Instant::now();
        let result = stream.write_all(&[0u8; 1024]).await;
        let error = result.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(5));
        drop(client);
    }
}
