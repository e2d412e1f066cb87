//! SSE mode: `POST /api/chat`, one HTTP request per segment of a turn, exactly as the AI SDK's
//! `useChat` + `DefaultChatTransport` talk (protocols.md §A.5–A.8, seed ADR 0003).
//!
//! A request either starts a turn (its last message is a new user message) or continues the
//! chat's waiting turn with the person's answers (its last message is the assistant message with
//! approval responses or browser outputs). The response streams the turn's log from that point:
//! a continuation opens with `start` carrying the *same* assistant message id, so AI SDK clients
//! extend the message instead of adding one; a turn that stops to wait for the person ends the
//! response with `finish` (reason `tool-calls`) and `[DONE]`. A client that disconnects does not
//! cancel the turn (it finishes on the server and can be resumed); only `POST
//! /api/chat/{id}/stop` does.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    body::{Body, Bytes},
    extract::{Path, State, rejection::BytesRejection},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use futures::stream;
use serde_json::{Value, json};

use super::{
    answers::extract,
    edge::{Client, check_chat_rate},
    error::ApiError,
    request::ChatCommand,
    seed,
};
use crate::{
    agent::{
        SessionRecord, TextTiming, Transport, TurnEntry, TurnLog, TurnStatus, session::LogReader,
        store::Actor,
    },
    protocol::{
        ChatRequest, Chunk, Dialect, FinishReason,
        sse::{DONE_FRAME, KEEP_ALIVE_FRAME, UI_MESSAGE_STREAM_HEADERS, encode_chunk},
    },
    state::AppState,
};

/// Header with which a client asks for chunk keys newer than `ai@6.0.0` (value `full`).
pub const DIALECT_HEADER: &str = "x-countersign-dialect";
/// Header with which a client asks for progressive text (value `progressive`) or held text
/// (`hold`) for this turn (ADR 0004). Without it `/api/chat` streams text progressively and the
/// seed's `/stream` follows `COUNTERSIGN_TEXT_TIMING` (default `hold`).
pub const TEXT_TIMING_HEADER: &str = "x-countersign-text";

/// The SSE routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/chat", post(chat))
        .route("/api/chat/{id}/stream", get(resume))
        .route("/api/chat/{id}/stop", post(stop))
        .route("/stream", post(seed_stream))
}

async fn chat(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(body_error)?;
    let request: ChatRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            "invalid_request",
            format!("the body is not a chat request {{id, messages, trigger, messageId}}: {e}"),
        )
    })?;
    run(
        &state,
        request,
        Transport::Sse,
        dialect(&headers),
        // Our own route streams text as it is generated unless the client asks to hold it.
        Some(timing(&headers).unwrap_or(TextTiming::Progressive)),
        client.actor(Transport::Sse),
    )
    .await
}

/// Starts or continues the turn of `request.id` and streams the response.
async fn run(
    state: &AppState,
    request: ChatRequest,
    transport: Transport,
    dialect: Dialect,
    timing: Option<TextTiming>,
    actor: Actor,
) -> Result<Response, ApiError> {
    let command = ChatCommand::decode(request, transport)?;
    let chat_id = command.chat_id().to_owned();
    let chat_id = chat_id.as_str();
    if let Err(limited) = check_chat_rate(state, chat_id) {
        return Ok(limited.into_response());
    }
    let keep_alive = state.http.keep_alive;
    let runtime = &state.runtime;
    let user = match command {
        ChatCommand::Answer { message, .. } => {
            let session = runtime
                .existing_session(chat_id)
                .await
                .map_err(store_error)?;
            let record = session
                .as_ref()
                .map(|s| s.snapshot())
                .unwrap_or_else(|| SessionRecord::new(chat_id, 0));
            let inputs = extract(&message, &record)?;
            if inputs.is_empty() {
                return Err(nothing_to_continue(&record));
            }
            let receipt = runtime.submit_as(chat_id, &inputs, &actor).await?;
            tracing::info!(chat = chat_id, answers = inputs.len(), "continuing turn");
            return Ok(stream_response(
                receipt.log,
                receipt.from,
                Some(receipt.message_id),
                dialect,
                keep_alive,
                false,
            ));
        }
        ChatCommand::Start { user, .. } => user,
    };
    let started = runtime.start_turn(chat_id, user, timing).await?;
    tracing::info!(chat = chat_id, turn = %started.turn_id, "turn started");
    Ok(stream_response(
        started.log,
        0,
        None,
        dialect,
        keep_alive,
        false,
    ))
}

fn nothing_to_continue(record: &SessionRecord) -> ApiError {
    match record.turn.as_ref().map(|t| t.status) {
        Some(TurnStatus::Running) => ApiError::conflict(
            "turn_in_progress",
            "the turn is still running; follow it with GET /api/chat/{id}/stream",
        ),
        Some(TurnStatus::AwaitingPerson) => ApiError::conflict(
            "nothing_to_continue",
            "the request answers none of the pending approvals or browser calls",
        ),
        _ => ApiError::conflict(
            "no_active_turn",
            "this chat has no turn waiting for an answer",
        ),
    }
}

/// `GET /api/chat/{id}/stream`: re-attaches to a turn that is still streaming. The replay starts
/// at the turn's `start` and covers the whole assistant message (a resuming AI SDK client starts
/// from an empty message, §A.8), then follows the live stream. 204 when nothing is streaming.
async fn resume(
    State(state): State<AppState>,
    Path(chat_id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Some(session) = state
        .runtime
        .existing_session(&chat_id)
        .await
        .map_err(store_error)?
    else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let Some(log) = session.current_log() else {
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let entries = log.entries_from(0);
    match entries.last() {
        None | Some(TurnEntry::End) | Some(TurnEntry::Pause) => {
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Some(_) => Ok(stream_response(
            log,
            0,
            None,
            dialect(&headers),
            state.http.keep_alive,
            true,
        )),
    }
}

/// `POST /api/chat/{id}/stop`: cancels the chat's running or waiting turn.
async fn stop(State(state): State<AppState>, Path(chat_id): Path<String>) -> Json<Value> {
    let stopped = state
        .runtime
        .interrupt(&chat_id, "stopped by the person")
        .await;
    tracing::info!(chat = %chat_id, stopped, "stop requested");
    Json(json!({ "stopped": stopped }))
}

/// The seed system's `POST /stream`: its request shape (`content` strings, ADK confirmation
/// parts, `tool-result` parts). Its `X-API-Key` header is checked by the edge guard.
async fn seed_stream(
    State(state): State<AppState>,
    client: Client,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(body_error)?;
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("the body is not JSON: {e}")))?;
    let request = seed::request(&value)?;
    run(
        &state,
        request,
        Transport::Seed,
        Dialect::V6Strict,
        timing(&headers),
        client.actor(Transport::Seed),
    )
    .await
}

fn dialect(headers: &HeaderMap) -> Dialect {
    match headers.get(DIALECT_HEADER).and_then(|v| v.to_str().ok()) {
        Some(v) if v.eq_ignore_ascii_case("full") => Dialect::Full,
        _ => Dialect::V6Strict,
    }
}

fn timing(headers: &HeaderMap) -> Option<TextTiming> {
    match headers
        .get(TEXT_TIMING_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        Some(v) if v.eq_ignore_ascii_case("progressive") => Some(TextTiming::Progressive),
        Some(v) if v.eq_ignore_ascii_case("hold") => Some(TextTiming::Hold),
        _ => None,
    }
}

fn body_error(rejection: BytesRejection) -> ApiError {
    ApiError::from_body_rejection(rejection.status(), &rejection)
}

fn store_error(e: crate::agent::store::StoreError) -> ApiError {
    ApiError::from(e)
}

/// Where the response stream is.
enum Phase {
    Prefix(Option<String>, LogReader),
    Reading(LogReader),
    Done,
}

/// Streams `log` from `from` as SSE until the turn pauses or ends.
///
/// `continuation`: the assistant message id to open with (`start`), when the log segment does
/// not begin with the turn's own `start`. `replay`: skip earlier pauses (a resume replays the
/// whole message).
pub fn stream_response(
    log: Arc<TurnLog>,
    from: usize,
    continuation: Option<String>,
    dialect: Dialect,
    keep_alive: Duration,
    replay: bool,
) -> Response {
    let replay_until = if replay { log.len() } else { 0 };
    let reader = log.subscribe(from);
    let phase = Phase::Prefix(continuation, reader);
    let body = stream::unfold(phase, move |phase| async move {
        let mut reader = match phase {
            Phase::Done => return None,
            Phase::Prefix(Some(message_id), reader) => {
                let frame = encode_chunk(&Chunk::start(message_id), dialect).unwrap_or_default();
                return Some((
                    Ok::<_, Infallible>(Bytes::from(frame)),
                    Phase::Reading(reader),
                ));
            }
            Phase::Prefix(None, reader) | Phase::Reading(reader) => reader,
        };
        loop {
            let next = match tokio::time::timeout(keep_alive, reader.next()).await {
                Err(_) => {
                    return Some((
                        Ok(Bytes::from_static(KEEP_ALIVE_FRAME.as_bytes())),
                        Phase::Reading(reader),
                    ));
                }
                Ok(next) => next,
            };
            match next {
                None | Some(TurnEntry::End) => {
                    return Some((Ok(Bytes::from_static(DONE_FRAME.as_bytes())), Phase::Done));
                }
                Some(TurnEntry::Pause) if reader.position() <= replay_until => continue,
                Some(TurnEntry::Pause) => {
                    let finish = encode_chunk(&Chunk::finish(FinishReason::ToolCalls), dialect)
                        .unwrap_or_default();
                    return Some((Ok(Bytes::from(finish + DONE_FRAME)), Phase::Done));
                }
                Some(TurnEntry::Chunk(chunk)) => {
                    if let Some(frame) = encode_chunk(&chunk, dialect) {
                        return Some((Ok(Bytes::from(frame)), Phase::Reading(reader)));
                    }
                }
            }
        }
    });
    let mut response = Response::new(Body::from_stream(body));
    for (name, value) in UI_MESSAGE_STREAM_HEADERS {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert(name, value);
        }
    }
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_choose_dialect_and_text_timing() {
        let mut headers = HeaderMap::new();
        assert_eq!(dialect(&headers), Dialect::V6Strict);
        assert_eq!(timing(&headers), None);
        headers.insert(DIALECT_HEADER, HeaderValue::from_static("full"));
        headers.insert(TEXT_TIMING_HEADER, HeaderValue::from_static("progressive"));
        assert_eq!(dialect(&headers), Dialect::Full);
        assert_eq!(timing(&headers), Some(TextTiming::Progressive));
    }
}
