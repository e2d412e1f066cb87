//! In-process fake model servers for the provider tests: an axum app on `127.0.0.1:0` that
//! records every request (path, query, headers, JSON body) and answers the n-th request with the
//! n-th scripted [`Reply`] (the last one repeats).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::Notify;

use super::http::{ProviderHttp, RetryPolicy};
use crate::agent::model::{ModelError, ModelEvent, ModelStream};

/// One recorded request.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
}

/// How the fake answers one request.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// `200 text/event-stream`: each piece is written separately (a few ms apart, so the client
    /// sees separate reads), then `then`.
    Stream { pieces: Vec<String>, then: After },
    /// A complete response.
    Full {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: String,
    },
    /// Never sends the response headers.
    Silence,
}

/// What the fake does once the pieces of a [`Reply::Stream`] are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// Ends the body.
    Close,
    /// Keeps the connection open and sends nothing more.
    Stall,
    /// Keeps the connection open with an SSE comment every 20 ms (so a closed socket is noticed
    /// on the next write).
    Ping,
}

impl Reply {
    /// An SSE stream of these JSON events, CRLF-framed like Gemini's, then the body closes.
    pub(crate) fn events(events: &[Value]) -> Self {
        Reply::Stream {
            pieces: events
                .iter()
                .map(|e| format!("data: {e}\r\n\r\n"))
                .collect(),
            then: After::Close,
        }
    }

    pub(crate) fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Full {
            status,
            headers: vec![("content-type", "application/json")],
            body: body.into(),
        }
    }
}

struct Shared {
    replies: Vec<Reply>,
    requests: Mutex<Vec<Recorded>>,
    /// Streamed bodies that were dropped by the server (the client went away, or they ended).
    closed: AtomicUsize,
    closed_notify: Notify,
}

pub(crate) struct FakeServer {
    pub base_url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeServer {
    pub(crate) async fn start(replies: Vec<Reply>) -> Self {
        let shared = Arc::new(Shared {
            replies,
            requests: Mutex::new(Vec::new()),
            closed: AtomicUsize::new(0),
            closed_notify: Notify::new(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a local port");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base_url: format!("http://{addr}"),
            shared,
            task,
        }
    }

    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    pub(crate) fn closed_streams(&self) -> usize {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Waits until a streamed body is dropped by the server.
    pub(crate) async fn stream_closed(&self, within: Duration) -> bool {
        tokio::time::timeout(within, self.shared.closed_notify.notified())
            .await
            .is_ok()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 16 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let index = {
        let mut requests = shared.requests.lock().expect("requests lock");
        requests.push(Recorded {
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers: parts.headers.clone(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        });
        requests.len() - 1
    };
    let reply = shared
        .replies
        .get(index)
        .or(shared.replies.last())
        .cloned()
        .unwrap_or(Reply::Silence);
    match reply {
        Reply::Silence => std::future::pending().await,
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut response = Response::builder().status(status);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response
                .body(Body::from(body))
                .unwrap_or_else(|_| internal_error())
        }
        Reply::Stream { pieces, then } => {
            let guard = CloseGuard(shared.clone());
            let state = (VecDeque::from(pieces), then, guard, false);
            let body =
                futures::stream::unfold(state, |(mut pieces, then, guard, started)| async move {
                    if started {
                        tokio::time::sleep(Duration::from_millis(3)).await;
                    }
                    if let Some(piece) = pieces.pop_front() {
                        return Some((
                            Ok::<_, Infallible>(Bytes::from(piece)),
                            (pieces, then, guard, true),
                        ));
                    }
                    match then {
                        After::Close => None,
                        After::Stall => std::future::pending().await,
                        After::Ping => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            Some((
                                Ok(Bytes::from_static(b": ping\n\n")),
                                (pieces, then, guard, true),
                            ))
                        }
                    }
                })
                .boxed();
            Response::builder()
                .status(200)
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(body))
                .unwrap_or_else(|_| internal_error())
        }
    }
}

fn internal_error() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}

/// Lives inside a streamed body; the server drops the body when the client goes away.
struct CloseGuard(Arc<Shared>);

impl Drop for CloseGuard {
    fn drop(&mut self) {
        self.0.closed.fetch_add(1, Ordering::SeqCst);
        self.0.closed_notify.notify_one();
    }
}

/// Short timeouts and near-zero backoff, so failure tests take milliseconds.
pub(crate) fn quick_http() -> ProviderHttp {
    ProviderHttp {
        connect_timeout: Duration::from_secs(2),
        response_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
    }
}

/// A step's events up to and including its `Finish`: a step that fails, ends without one or
/// is silent for 5 s fails the test.
pub(crate) async fn until_finish(stream: &mut ModelStream) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for a model event after {events:?}"));
        match next {
            Some(Ok(event)) => {
                let done = matches!(event, ModelEvent::Finish { .. });
                events.push(event);
                if done {
                    return events;
                }
            }
            Some(Err(error)) => panic!("step failed: {error} (after {events:?})"),
            None => panic!("stream ended without Finish: {events:?}"),
        }
    }
}

/// The text a step said (its `TextDelta`s, joined).
pub(crate) fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// Drains a model stream: its events and the error that ended it, if any. Bounded in time so a
/// broken provider fails the test instead of hanging it.
pub(crate) async fn collect(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ModelError>) {
    let drain = async {
        let mut events = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => events.push(event),
                Err(error) => {
                    assert!(stream.next().await.is_none(), "nothing may follow an error");
                    return (events, Some(error));
                }
            }
        }
        (events, None)
    };
    tokio::time::timeout(Duration::from_secs(20), drain)
        .await
        .expect("the model stream ended in time")
}
