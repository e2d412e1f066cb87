//! What the two HTTP providers share: timeouts, retry with backoff, reading an SSE body with our
//! own [`SseDecoder`], and turning that into a [`ModelStream`].
//!
//! A provider supplies a prepared request ([`PreparedRequest`]), a fresh [`WireDecoder`] per
//! attempt (its wire format: one SSE `data` payload in, [`ModelEvent`]s out) and a function that
//! maps an HTTP error response to a [`ModelError`]. [`sse_stream`] does the rest:
//!
//! * **Timeouts, so nothing hangs.** `response_timeout` bounds the wait for the response headers
//!   (and for reading an error body); `idle_timeout` bounds every wait for the next body bytes, so
//!   a server that stops sending mid-stream becomes a [`ModelError::Transport`], never a hang.
//!   `connect_timeout` is the TCP/TLS connect bound of the client.
//! * **Retries only before the first event.** A 5xx answer, a transport failure (connect error,
//!   timeout, broken body) or a 5xx error object in the stream is retried with exponential
//!   backoff as long as no event has been yielded yet: the runner has then seen nothing, so a
//!   retry is invisible. After the first event a retry would duplicate text, so the error is
//!   returned. A 429 is never retried here: it becomes [`ModelError::RateLimited`] with the
//!   provider's retry delay and the caller decides. Backoff has no jitter, on purpose (one
//!   person's session, deterministic tests).
//! * **Cancellation by drop.** The stream is a plain state machine over the `reqwest` response
//!   (no spawned task): dropping it drops the body, which closes the connection, which is how
//!   the provider learns the person pressed Stop.
//! * **Stray JSON.** Some servers put an error object *without* a `data:` prefix into the body
//!   (Gemini mid-stream, python-genai handles it; an OpenAI-compatible server that answers a
//!   streaming request with a plain JSON body). SSE parsing ignores such lines, so a small
//!   side-scanner ([`StrayJson`]) collects them and hands complete JSON values to the decoder.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::agent::model::{ModelError, ModelEvent, ModelStream};
use crate::protocol::{SseDecoder, SseEvent};

/// Timeouts and retries of a provider's HTTP calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderHttp {
    /// Bound on establishing the TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Bound on the wait for the response headers (and for reading an error body).
    pub response_timeout: Duration,
    /// Bound on the silence between two reads of the streamed body. Thinking models can be quiet
    /// for a long time before their first token, so the default is generous.
    pub idle_timeout: Duration,
    pub retry: RetryPolicy,
}

impl Default for ProviderHttp {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
        }
    }
}

/// Exponential backoff for failures before the first event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first included (1 = no retry).
    pub attempts: u32,
    /// Delay after the first failed attempt; doubled after each further one.
    pub base_delay: Duration,
    /// Cap on a single delay.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// The delay after the `failed`-th failed attempt (1-based): base, 2×base, 4×base, … capped.
    pub fn delay(&self, failed: u32) -> Duration {
        let factor = 1u32
            .checked_shl(failed.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }
}

/// Builds the HTTP client a provider keeps for its lifetime (connection pool, TLS config).
pub(crate) fn client(settings: &ProviderHttp) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .build()
}

/// Whether an error before the first event is worth another attempt.
pub(crate) fn is_retryable(error: &ModelError) -> bool {
    match error {
        ModelError::Transport(_) => true,
        ModelError::Provider { status, .. } => *status >= 500,
        ModelError::RateLimited { .. } | ModelError::Protocol(_) => false,
    }
}

/// A provider's wire format, seen from the driver. One decoder lives for one attempt.
pub(crate) trait WireDecoder: Send + 'static {
    /// One SSE event's data (never `[DONE]`).
    fn data(&mut self, data: &str) -> Result<Vec<ModelEvent>, ModelError>;
    /// `data: [DONE]`: the step is over; return the final events (the stream ends after them).
    fn done(&mut self) -> Result<Vec<ModelEvent>, ModelError>;
    /// The body ended without `[DONE]`; return the final events or say why that is an error.
    fn end(&mut self) -> Result<Vec<ModelEvent>, ModelError>;
    /// A complete JSON value found outside any SSE `data:` line (see [`StrayJson`]).
    fn stray_json(&mut self, value: Value) -> Result<Vec<ModelEvent>, ModelError>;
}

/// Maps a non-2xx response (status, headers, body text) to an error.
pub(crate) type ErrorMapper = fn(StatusCode, &HeaderMap, &str) -> ModelError;

/// One request, ready to be sent as often as retries need.
pub(crate) struct PreparedRequest {
    pub client: reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// Longest error body we read; error objects are small, a misconfigured proxy's HTML page is not.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Starts the request and streams its events (see the module docs for the rules).
pub(crate) fn sse_stream<D: WireDecoder>(
    request: PreparedRequest,
    settings: ProviderHttp,
    new_decoder: fn() -> D,
    map_error: ErrorMapper,
) -> ModelStream {
    let driver = Driver {
        request,
        settings,
        new_decoder,
        map_error,
        attempts: 0,
        yielded: false,
        phase: Phase::Connect,
    };
    futures::stream::unfold(driver, |mut driver| async move {
        let item = driver.next().await?;
        Some((item, driver))
    })
    .boxed()
}

/// A stream that fails at once, for requests that cannot even be built.
pub(crate) fn failed(error: ModelError) -> ModelStream {
    futures::stream::once(async move { Err(error) }).boxed()
}

struct Driver<D> {
    request: PreparedRequest,
    settings: ProviderHttp,
    new_decoder: fn() -> D,
    map_error: ErrorMapper,
    /// Attempts started so far.
    attempts: u32,
    /// Whether any event reached the caller (after that, nothing is retried).
    yielded: bool,
    phase: Phase<D>,
}

enum Phase<D> {
    Connect,
    Reading(Box<Reading<D>>),
    Finished,
}

struct Reading<D> {
    /// The response whose body is being read; dropping it closes the connection.
    response: reqwest::Response,
    sse: SseDecoder,
    stray: StrayJson,
    decoder: D,
    /// Decoded but not yet yielded; an `Err` ends the stream (or triggers a retry).
    queue: VecDeque<Result<ModelEvent, ModelError>>,
    /// Nothing more is read: the queue is the rest of the stream.
    ending: bool,
}

impl<D: WireDecoder> Driver<D> {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            match &mut self.phase {
                Phase::Finished => return None,
                Phase::Connect => {
                    self.attempts += 1;
                    let opened = open(
                        &self.request,
                        &self.settings,
                        self.new_decoder,
                        self.map_error,
                    )
                    .await;
                    match opened {
                        Ok(reading) => self.phase = Phase::Reading(Box::new(reading)),
                        Err(error) => {
                            if let Some(error) = self.retry_or(error).await {
                                return Some(Err(error));
                            }
                        }
                    }
                }
                Phase::Reading(reading) => match reading.queue.pop_front() {
                    Some(Ok(event)) => {
                        self.yielded = true;
                        return Some(Ok(event));
                    }
                    Some(Err(error)) => {
                        if let Some(error) = self.retry_or(error).await {
                            return Some(Err(error));
                        }
                    }
                    None if reading.ending => {
                        self.phase = Phase::Finished;
                        return None;
                    }
                    None => reading.read(self.settings.idle_timeout).await,
                },
            }
        }
    }

    /// After a failure: waits and goes back to [`Phase::Connect`] when the error may be retried,
    /// else finishes and returns the error.
    async fn retry_or(&mut self, error: ModelError) -> Option<ModelError> {
        let policy = &self.settings.retry;
        if !self.yielded && is_retryable(&error) && self.attempts < policy.attempts {
            let delay = policy.delay(self.attempts);
            tracing::warn!(
                attempt = self.attempts,
                of = policy.attempts,
                ?delay,
                %error,
                "model request failed; retrying"
            );
            self.phase = Phase::Connect;
            tokio::time::sleep(delay).await;
            None
        } else {
            self.phase = Phase::Finished;
            Some(error)
        }
    }
}

/// Sends the request and checks the status; the body is read later. A free function over the
/// parts it needs, so the future does not borrow the whole driver (which is `Send`, not `Sync`).
async fn open<D: WireDecoder>(
    request: &PreparedRequest,
    settings: &ProviderHttp,
    new_decoder: fn() -> D,
    map_error: ErrorMapper,
) -> Result<Reading<D>, ModelError> {
    let builder = request
        .client
        .post(&request.url)
        .headers(request.headers.clone())
        .body(request.body.clone());
    let response = tokio::time::timeout(settings.response_timeout, builder.send())
        .await
        .map_err(|_| {
            ModelError::Transport(format!(
                "no response within {} ms",
                settings.response_timeout.as_millis()
            ))
        })?
        .map_err(|e| ModelError::Transport(describe(&e)))?;
    let status = response.status();
    if !status.is_success() {
        let headers = response.headers().clone();
        let body = tokio::time::timeout(
            settings.response_timeout,
            read_capped(response, MAX_ERROR_BODY),
        )
        .await
        .unwrap_or_default();
        return Err(map_error(status, &headers, &body));
    }
    Ok(Reading {
        response,
        sse: SseDecoder::new(),
        stray: StrayJson::default(),
        decoder: new_decoder(),
        queue: VecDeque::new(),
        ending: false,
    })
}

impl<D: WireDecoder> Reading<D> {
    /// Reads the next piece of the body and decodes whatever it completes into the queue.
    async fn read(&mut self, idle_timeout: Duration) {
        match tokio::time::timeout(idle_timeout, self.response.chunk()).await {
            Err(_) => self.fail(ModelError::Transport(format!(
                "the model stream stalled: no data for {} ms",
                idle_timeout.as_millis()
            ))),
            Ok(Err(e)) => self.fail(ModelError::Transport(describe(&e))),
            Ok(Ok(Some(bytes))) => {
                let stray = self.stray.push(&bytes);
                let events = self.sse.push(&bytes);
                self.decode(stray, events);
            }
            Ok(Ok(None)) => {
                let stray = self.stray.finish();
                let events = self.sse.finish();
                self.decode(stray, events);
                if !self.ending {
                    let end = self.decoder.end();
                    self.enqueue(end);
                    self.ending = true;
                }
            }
        }
    }

    fn decode(
        &mut self,
        stray: Vec<Value>,
        events: Vec<Result<SseEvent, crate::protocol::SseError>>,
    ) {
        for value in stray {
            if self.ending {
                return;
            }
            let decoded = self.decoder.stray_json(value);
            self.enqueue(decoded);
        }
        for event in events {
            if self.ending {
                return;
            }
            match event {
                Ok(SseEvent::Data(data)) => {
                    let decoded = self.decoder.data(&data);
                    self.enqueue(decoded);
                }
                Ok(SseEvent::Done) => {
                    let decoded = self.decoder.done();
                    self.enqueue(decoded);
                    self.ending = true;
                }
                Err(e) => self.fail(ModelError::Protocol(e.to_string())),
            }
        }
    }

    fn enqueue(&mut self, decoded: Result<Vec<ModelEvent>, ModelError>) {
        match decoded {
            Ok(events) => self.queue.extend(events.into_iter().map(Ok)),
            Err(error) => self.fail(error),
        }
    }

    fn fail(&mut self, error: ModelError) {
        self.queue.push_back(Err(error));
        self.ending = true;
    }
}

/// Reads at most `cap` bytes of a body as (lossy) UTF-8; a read error just ends the text.
async fn read_capped(mut response: reqwest::Response, cap: usize) -> String {
    let mut bytes = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = cap.saturating_sub(bytes.len());
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if bytes.len() >= cap {
            break;
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A `reqwest` error with its causes ("error sending request … : connection refused"): the top
/// level alone rarely says what went wrong. URLs carry no secrets (keys travel in headers).
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        format!("timed out: {error}")
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Longest provider message we pass on; the person sees it in the chat.
const MAX_MESSAGE: usize = 500;

/// Trims a provider's error text to something fit for the chat.
pub(crate) fn short_message(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_MESSAGE) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The `retry-after` header in seconds (also fractional), or `retry-after-ms`, if present.
/// An HTTP-date value is ignored (no provider we talk to sends one).
pub(crate) fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    read("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| read("retry-after").map(Duration::from_secs_f64))
}

/// Collects lines that are not SSE (they start with `{` or `[`, and what follows until the
/// value is complete) and parses them as JSON.
///
/// The SSE decoder treats such a line as a field with an unknown name and drops it, which
/// would silently lose an error object a server printed raw into the stream. A line that starts
/// with `{` can never be one of the SSE fields we read (they start with `data`), so the two
/// scanners never disagree about a line. Memory is capped; an over-long or unparseable
/// collection is dropped.
#[derive(Debug, Default)]
pub(crate) struct StrayJson {
    /// The current, unterminated line.
    line: Vec<u8>,
    /// The collected lines of a JSON value in progress.
    collected: String,
    collecting: bool,
}

/// Longest stray JSON value we collect.
const MAX_STRAY_JSON: usize = 64 * 1024;

impl StrayJson {
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<Value> {
        let mut out = Vec::new();
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                let line = std::mem::take(&mut self.line);
                self.end_line(&line, &mut out);
            } else if self.line.len() < MAX_STRAY_JSON {
                self.line.push(b);
            }
        }
        out
    }

    pub(crate) fn finish(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        let line = std::mem::take(&mut self.line);
        self.end_line(&line, &mut out);
        if self.collecting {
            if let Ok(value) = serde_json::from_str(&self.collected) {
                out.push(value);
            } else {
                tracing::debug!(
                    len = self.collected.len(),
                    "dropping unparseable non-SSE text"
                );
            }
        }
        *self = Self::default();
        out
    }

    fn end_line(&mut self, line: &[u8], out: &mut Vec<Value>) {
        let Ok(line) = std::str::from_utf8(line) else {
            return;
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        if !self.collecting {
            if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
                return;
            }
            self.collecting = true;
        } else if line.starts_with("data:") || line.starts_with(':') {
            // Back to SSE without the value ever completing.
            self.collected.clear();
            self.collecting = false;
            return;
        }
        if self.collected.len() + trimmed.len() > MAX_STRAY_JSON {
            self.collected.clear();
            self.collecting = false;
            return;
        }
        self.collected.push_str(line);
        self.collected.push('\n');
        if let Ok(value) = serde_json::from_str::<Value>(&self.collected) {
            out.push(value);
            self.collected.clear();
            self.collecting = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            attempts: 10,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(3),
        };
        let delays: Vec<u128> = (1..=5).map(|n| policy.delay(n).as_millis()).collect();
        assert_eq!(delays, vec![500, 1000, 2000, 3000, 3000]);
        assert_eq!(policy.delay(200), Duration::from_secs(3));
    }

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after_header(&headers), None);
        headers.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after_header(&headers), Some(Duration::from_secs(7)));
        headers.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(
            retry_after_header(&headers),
            Some(Duration::from_millis(1500))
        );
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after_header(&dated), None);
    }

    #[test]
    fn stray_json_finds_raw_objects_between_sse_lines() {
        let mut stray = StrayJson::default();
        let mut found =
            stray.push(b"data: {\"a\":1}\r\n\r\n{\r\n  \"error\": {\r\n    \"code\": 5");
        assert!(found.is_empty());
        found.extend(stray.push(b"00\r\n  }\r\n}\r\ndata: x\n\n"));
        assert_eq!(found, vec![serde_json::json!({"error": {"code": 500}})]);
        // A one-line body without a trailing newline, as a plain JSON answer would be.
        assert!(stray.push(b"{\"error\": \"model not found\"}").is_empty());
        assert_eq!(
            stray.finish(),
            vec![serde_json::json!({"error": "model not found"})]
        );
        // SSE comments, fields and data never count.
        assert!(stray.push(b": ping\nevent: x\ndata: {}\n\n").is_empty());
        assert!(stray.finish().is_empty());
    }

    #[test]
    fn long_messages_are_shortened() {
        let long = "x".repeat(2000);
        assert_eq!(short_message(&long).chars().count(), MAX_MESSAGE + 1);
        assert_eq!(short_message("  short \n"), "short");
    }
}
