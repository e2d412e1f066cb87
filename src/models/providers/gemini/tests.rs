//! Gemini REST against an in-process fake that speaks the `alt=sse` wire format (CRLF framing,
//! no `[DONE]`, the chunk shapes of the `@ai-sdk/google` Gemini 2.5/3 fixtures).

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use super::decode::map_finish_reason;
use super::request::{DataUrl, is_gemini_3_or_later};
use super::*;
use crate::agent::history::{Outcome, ToolResult};
use crate::models::providers::testing::{After, FakeServer, Reply, collect, quick_http};

fn model_at(server: &FakeServer, model: &str, http: ProviderHttp) -> GeminiModel {
    GeminiModel::new(GeminiConfig {
        api_key: ProviderKey::new("test-key"),
        base_url: format!("{}/v1beta", server.base_url),
        model: model.into(),
        include_thoughts: true,
        http,
    })
    .expect("model")
}

fn gemini(server: &FakeServer) -> GeminiModel {
    model_at(server, "gemini-2.5-flash", quick_http())
}

fn weather_tool() -> ToolDeclaration {
    ToolDeclaration {
        name: "get_weather".into(),
        description: "Current weather for a place.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"]
        }),
    }
}

fn request(history: Vec<HistoryItem>) -> ModelRequest {
    ModelRequest {
        session_id: "chat-1".into(),
        system: "Be brief.".into(),
        history: history.into(),
        tools: vec![weather_tool()],
    }
}

fn chunk(parts: Value) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1"
    })
}

fn last_chunk(parts: Value, finish: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "thoughtsTokenCount": 8,
                          "totalTokenCount": 20,
                          "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}]},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1"
    })
}

fn text_reply() -> Reply {
    Reply::events(&[
        chunk(json!([{"text": "Hello"}])),
        chunk(json!([{"text": ", wor"}])),
        last_chunk(json!([{"text": "ld!"}]), "STOP"),
    ])
}

fn usage() -> Usage {
    Usage {
        input_tokens: Some(9),
        output_tokens: Some(11),
        total_tokens: Some(20),
    }
}

fn text(s: &str) -> ModelEvent {
    ModelEvent::TextDelta(s.into())
}

fn finish(reason: FinishReason) -> ModelEvent {
    ModelEvent::Finish {
        reason,
        usage: usage(),
    }
}

fn text_events() -> Vec<ModelEvent> {
    vec![
        text("Hello"),
        text(", wor"),
        text("ld!"),
        finish(FinishReason::Stop),
    ]
}

fn sig(signature: &str) -> Option<Value> {
    Some(json!({"google": {"thoughtSignature": signature}}))
}

#[tokio::test]
async fn streams_text_with_usage_and_finish_and_sends_a_well_formed_request() {
    let server = FakeServer::start(vec![text_reply()]).await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        sent.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    );
    assert_eq!(sent.query.as_deref(), Some("alt=sse"));
    assert_eq!(sent.headers["x-goog-api-key"], "test-key");
    assert_eq!(
        sent.body,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{
                "name": "get_weather",
                "description": "Current weather for a place.",
                "parametersJsonSchema": weather_tool().parameters
            }]}],
            "generationConfig": {"thinkingConfig": {"includeThoughts": true}}
        })
    );
}

#[tokio::test]
async fn thought_parts_stream_as_reasoning_with_their_signature() {
    let server = FakeServer::start(vec![Reply::events(&[
        chunk(json!([{"text": "**Weighing** the", "thought": true}])),
        chunk(json!([{"text": " options", "thought": true, "thoughtSignature": "sig-thought"}])),
        last_chunk(json!([{"text": "Take the train."}]), "STOP"),
    ])])
    .await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Train?")]))).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta {
                text: "**Weighing** the".into(),
                provider_data: None
            },
            ModelEvent::ReasoningDelta {
                text: " options".into(),
                provider_data: sig("sig-thought")
            },
            text("Take the train."),
            finish(FinishReason::Stop),
        ]
    );
}

#[tokio::test]
async fn a_function_call_keeps_its_signature_and_finishes_with_tool_calls() {
    // The Gemini 3 fixture shape: the signed call, then an empty text part with finishReason.
    let server = FakeServer::start(vec![Reply::events(&[
        chunk(
            json!([{"functionCall": {"name": "get_weather", "args": {"location": "Tokyo"}},
                      "thoughtSignature": "EpEgCo4gAb4+9vvW=="}]),
        ),
        last_chunk(json!([{"text": ""}]), "STOP"),
    ])])
    .await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Tokyo?")]))).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::ToolCall(ToolCall {
                id: String::new(),
                name: "get_weather".into(),
                args: json!({"location": "Tokyo"}),
                provider_data: sig("EpEgCo4gAb4+9vvW=="),
            }),
            finish(FinishReason::ToolCalls),
        ]
    );
}

/// The first step of the approval scenario: a signed thought, then three parallel calls of
/// which (as Gemini 3 does) only the first is signed; the calls carry Gemini ids.
fn parallel_calls_reply() -> Reply {
    Reply::events(&[
        chunk(
            json!([{"text": "Weather first, then the payments.", "thought": true,
                      "thoughtSignature": "sig-thought"}]),
        ),
        chunk(json!([
            {"functionCall": {"id": "fc-1", "name": "get_weather", "args": {"location": "Tokyo"}},
             "thoughtSignature": "sig-call"},
            {"functionCall": {"id": "fc-2", "name": "process_payment", "args": {"amount": 20}}}
        ])),
        last_chunk(
            json!([{"functionCall": {"id": "fc-3", "name": "process_payment", "args": {"amount": 5}}}]),
            "STOP",
        ),
    ])
}

#[tokio::test]
async fn parallel_calls_in_one_step_are_separate_events() {
    let server = FakeServer::start(vec![parallel_calls_reply()]).await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Go")]))).await;
    assert_eq!(error, None);
    let calls: Vec<&ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall(call) => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[0].provider_data,
        Some(json!({"google": {"thoughtSignature": "sig-call", "id": "fc-1"}}))
    );
    assert_eq!(
        calls[1].provider_data,
        Some(json!({"google": {"id": "fc-2"}}))
    );
    assert_eq!(calls[2].args, json!({"amount": 5}));
    assert_eq!(events.last(), Some(&finish(FinishReason::ToolCalls)));
}

/// Folds a step's events into the assistant item the runner would record: contiguous reasoning
/// merged (keeping the last provider data), our own call ids.
fn record_step(events: &[ModelEvent]) -> HistoryItem {
    let mut parts = Vec::new();
    let mut n = 0;
    for event in events {
        match event {
            ModelEvent::ReasoningDelta {
                text,
                provider_data,
            } => match parts.last_mut() {
                Some(AssistantPart::Reasoning {
                    text: t,
                    provider_data: p,
                }) => {
                    t.push_str(text);
                    if provider_data.is_some() {
                        *p = provider_data.clone();
                    }
                }
                _ => parts.push(AssistantPart::Reasoning {
                    text: text.clone(),
                    provider_data: provider_data.clone(),
                }),
            },
            ModelEvent::TextDelta(delta) => match parts.last_mut() {
                Some(AssistantPart::Text { text, .. }) => text.push_str(delta),
                _ => parts.push(AssistantPart::Text {
                    text: delta.clone(),
                    provider_data: None,
                }),
            },
            ModelEvent::TextData(data) => match parts.last_mut() {
                Some(AssistantPart::Text { provider_data, .. }) => {
                    *provider_data = Some(data.clone())
                }
                _ => parts.push(AssistantPart::Text {
                    text: String::new(),
                    provider_data: Some(data.clone()),
                }),
            },
            ModelEvent::ToolCall(call) => {
                n += 1;
                let mut call = call.clone();
                call.id = format!("call-{n}");
                parts.push(AssistantPart::ToolCall { call });
            }
            ModelEvent::Finish { .. } | ModelEvent::Audio(_) | ModelEvent::Interrupted => {}
        }
    }
    HistoryItem::Assistant { parts }
}

#[tokio::test]
async fn an_approval_wait_and_a_restart_replay_signatures_and_every_outcome() {
    let server = FakeServer::start(vec![parallel_calls_reply(), text_reply()]).await;
    let model = model_at(&server, "gemini-3-flash-preview", quick_http());
    let user = HistoryItem::user("Weather in Tokyo, then pay 20 and 5.");
    let (events, error) = collect(model.stream(request(vec![user.clone()]))).await;
    assert_eq!(error, None);

    // The person answers: the weather ran (a non-object output), one payment was denied, the
    // other approval expired.
    let history = vec![
        user,
        record_step(&events),
        HistoryItem::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "call-1".into(),
                    name: "get_weather".into(),
                    outcome: Outcome::Output {
                        output: json!("sunny, 21 °C"),
                    },
                    edited_args: None,
                },
                ToolResult {
                    call_id: "call-2".into(),
                    name: "process_payment".into(),
                    outcome: Outcome::Denied {
                        reason: Some("too much".into()),
                        by: None,
                    },
                    edited_args: None,
                },
                ToolResult {
                    call_id: "call-3".into(),
                    name: "process_payment".into(),
                    outcome: Outcome::Expired,
                    edited_args: None,
                },
            ],
        },
    ];
    assert!(crate::agent::history::is_well_formed(&history));
    // The server restarts while the approvals wait: history goes to disk and back.
    let stored = serde_json::to_string(&history).expect("serialise");
    let restored: Vec<HistoryItem> = serde_json::from_str(&stored).expect("deserialise");
    assert_eq!(restored, history);

    // A new model instance, as after a restart.
    let model = model_at(&server, "gemini-3-flash-preview", quick_http());
    let (events, error) = collect(model.stream(request(restored))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());

    let sent = &server.requests()[1].body;
    let denied = Outcome::Denied {
        reason: Some("too much".into()),
        by: None,
    }
    .model_view();
    assert_eq!(denied["denied"], true);
    assert_eq!(
        sent["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Weather in Tokyo, then pay 20 and 5."}]},
            {"role": "model", "parts": [
                {"text": "Weather first, then the payments.", "thought": true,
                 "thoughtSignature": "sig-thought"},
                {"functionCall": {"id": "fc-1", "name": "get_weather", "args": {"location": "Tokyo"}},
                 "thoughtSignature": "sig-call"},
                {"functionCall": {"id": "fc-2", "name": "process_payment", "args": {"amount": 20}}},
                {"functionCall": {"id": "fc-3", "name": "process_payment", "args": {"amount": 5}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "fc-1", "name": "get_weather",
                                      "response": {"result": "sunny, 21 °C"}}},
                {"functionResponse": {"id": "fc-2", "name": "process_payment", "response": denied}},
                {"functionResponse": {"id": "fc-3", "name": "process_payment",
                                      "response": Outcome::Expired.model_view()}}
            ]}
        ])
    );
}

/// Gemini 3 signs the last part of a step without calls, often an empty text part: the signature
/// is kept with the text in history, survives storage, and goes back on the same part.
#[tokio::test]
async fn a_signed_text_part_keeps_its_signature_through_history() {
    let server = FakeServer::start(vec![
        Reply::events(&[
            chunk(json!([{"text": "Take the train."}])),
            last_chunk(
                json!([{"text": "", "thoughtSignature": "sig-text"}]),
                "STOP",
            ),
        ]),
        text_reply(),
    ])
    .await;
    let model = model_at(&server, "gemini-3-flash-preview", quick_http());
    let user = HistoryItem::user("Train?");
    let (events, error) = collect(model.stream(request(vec![user.clone()]))).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            text("Take the train."),
            ModelEvent::TextData(json!({"google": {"thoughtSignature": "sig-text"}})),
            finish(FinishReason::Stop),
        ]
    );
    let history = vec![user, record_step(&events), HistoryItem::user("And back?")];
    let stored = serde_json::to_string(&history).expect("serialise");
    let restored: Vec<HistoryItem> = serde_json::from_str(&stored).expect("deserialise");
    let (_, error) = collect(model.stream(request(restored))).await;
    assert_eq!(error, None);
    assert_eq!(
        server.requests()[1].body["contents"][1],
        json!({"role": "model", "parts": [{"text": "Take the train.", "thoughtSignature": "sig-text"}]})
    );
}

#[test]
fn unsigned_calls_get_the_documented_sentinel_on_gemini_3_only() {
    let call = |id: &str| AssistantPart::ToolCall {
        call: ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            args: json!({"location": "Oslo"}),
            provider_data: None,
        },
    };
    let history = vec![
        HistoryItem::user("Oslo and Bergen?"),
        HistoryItem::Assistant {
            parts: vec![call("a"), call("b")],
        },
        HistoryItem::ToolResults {
            results: ["a", "b"]
                .into_iter()
                .map(|id| ToolResult {
                    call_id: id.into(),
                    name: "get_weather".into(),
                    outcome: Outcome::Interrupted,
                    edited_args: None,
                })
                .collect(),
        },
        // A new message after the interruption joins the results' user content.
        HistoryItem::user("Never mind."),
    ];
    let body = |model: &str| {
        serde_json::to_value(build_request(&request(history.clone()), model, false)).expect("json")
    };
    let gemini3 = body("gemini-3-pro-preview");
    let parts = &gemini3["contents"][1]["parts"];
    assert_eq!(parts[0]["thoughtSignature"], SKIP_SIGNATURE_VALIDATOR);
    assert_eq!(parts[1].get("thoughtSignature"), None);
    assert_eq!(gemini3["contents"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        gemini3["contents"][2]["parts"][2],
        json!({"text": "Never mind."})
    );
    assert_eq!(
        gemini3["contents"][2]["parts"][0]["functionResponse"],
        json!({"name": "get_weather", "response": Outcome::Interrupted.model_view()})
    );
    assert_eq!(gemini3.get("generationConfig"), None);

    let gemini25 = body("gemini-2.5-flash");
    assert_eq!(
        gemini25["contents"][1]["parts"][0].get("thoughtSignature"),
        None
    );
    assert!(is_gemini_3_or_later("gemini-3.1-flash-lite"));
    assert!(!is_gemini_3_or_later("gemini-2.5-pro"));
    assert!(!is_gemini_3_or_later("gemini-flash-latest"));
}

#[tokio::test]
async fn rate_limits_carry_the_retry_delay_and_are_not_retried() {
    let body = json!({"error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
             "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34.4s"}
        ]
    }});
    let server = FakeServer::start(vec![Reply::status(429, body.to_string())]).await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert!(events.is_empty());
    match error {
        Some(ModelError::RateLimited {
            retry_after,
            message,
        }) => {
            assert_eq!(retry_after, Some(Duration::from_millis(34_400)));
            assert!(
                message.starts_with("RESOURCE_EXHAUSTED: You exceeded"),
                "{message}"
            );
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

fn internal(code: u16, status: &str) -> String {
    json!({"error": {"code": code, "message": "Internal error encountered.", "status": status}})
        .to_string()
}

#[tokio::test]
async fn a_server_error_is_retried_and_the_retry_streams_normally() {
    let server = FakeServer::start(vec![
        Reply::status(500, internal(500, "INTERNAL")),
        text_reply(),
    ])
    .await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].body, requests[1].body,
        "the retry sends the same request"
    );
}

#[tokio::test]
async fn persistent_server_errors_fail_after_every_attempt() {
    let server = FakeServer::start(vec![Reply::status(503, internal(503, "UNAVAILABLE"))]).await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert!(events.is_empty());
    assert_eq!(
        error,
        Some(ModelError::Provider {
            status: 503,
            message: "UNAVAILABLE: Internal error encountered.".into()
        })
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_the_step_without_a_retry() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![
            format!("data: {}\r\n\r\n", chunk(json!([{"text": "Hel"}]))),
            format!("data: {}\r\n\r\n", internal(500, "INTERNAL")),
        ],
        then: After::Close,
    }])
    .await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(events, vec![text("Hel")]);
    assert_eq!(
        error,
        Some(ModelError::Provider {
            status: 500,
            message: "INTERNAL: Internal error encountered.".into()
        })
    );
    assert_eq!(
        server.requests().len(),
        1,
        "text was already shown: no retry"
    );
}

#[tokio::test]
async fn a_raw_error_object_without_data_prefix_is_not_lost() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![
            format!("data: {}\r\n\r\n", chunk(json!([{"text": "Hel"}]))),
            "{\r\n  \"error\": {\r\n    \"code\": 503,\r\n".into(),
            "    \"message\": \"The model is overloaded.\",\r\n    \"status\": \"UNAVAILABLE\"\r\n  }\r\n}\r\n".into(),
        ],
        then: After::Close,
    }])
    .await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(events, vec![text("Hel")]);
    assert_eq!(
        error,
        Some(ModelError::Provider {
            status: 503,
            message: "UNAVAILABLE: The model is overloaded.".into()
        })
    );
}

#[tokio::test]
async fn invalid_json_is_a_protocol_error() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec!["data: {\"candidates\": [{\"content\": \r\n\r\n".into()],
        then: After::Close,
    }])
    .await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert!(events.is_empty());
    assert!(
        matches!(&error, Some(ModelError::Protocol(m)) if m.contains("invalid Gemini stream event")),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 1, "a broken answer is not retried");
}

#[tokio::test]
async fn an_empty_body_is_a_protocol_error() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![": nothing here\r\n\r\n".into()],
        then: After::Close,
    }])
    .await;
    let (_, error) = collect(gemini(&server).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert!(matches!(error, Some(ModelError::Protocol(_))), "{error:?}");
}

#[tokio::test]
async fn a_stalled_stream_times_out_instead_of_hanging() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![format!("data: {}\r\n\r\n", chunk(json!([{"text": "Hel"}])))],
        then: After::Stall,
    }])
    .await;
    let mut http = quick_http();
    http.idle_timeout = Duration::from_millis(200);
    let started = std::time::Instant::now();
    let (events, error) = collect(
        model_at(&server, "gemini-2.5-flash", http).stream(request(vec![HistoryItem::user("Hi")])),
    )
    .await;
    assert_eq!(events, vec![text("Hel")]);
    assert!(
        matches!(&error, Some(ModelError::Transport(m)) if m.contains("stalled")),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_after_every_attempt() {
    let server = FakeServer::start(vec![Reply::Silence]).await;
    let mut http = quick_http();
    http.response_timeout = Duration::from_millis(150);
    http.retry.attempts = 2;
    let (events, error) = collect(
        model_at(&server, "gemini-2.5-flash", http).stream(request(vec![HistoryItem::user("Hi")])),
    )
    .await;
    assert!(events.is_empty());
    assert!(
        matches!(&error, Some(ModelError::Transport(m)) if m.contains("no response within 150 ms")),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![format!("data: {}\r\n\r\n", chunk(json!([{"text": "Hel"}])))],
        then: After::Ping,
    }])
    .await;
    let mut stream = gemini(&server).stream(request(vec![HistoryItem::user("Hi")]));
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    assert!(
        matches!(first, Ok(Some(Ok(ModelEvent::TextDelta(_))))),
        "{first:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.closed_streams(), 0, "the stream is still open");
    drop(stream);
    assert!(
        server.stream_closed(Duration::from_secs(5)).await,
        "the server saw the connection close"
    );
}

#[tokio::test]
async fn a_blocked_prompt_finishes_with_content_filter() {
    let server = FakeServer::start(vec![Reply::events(&[json!({
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}
    })])])
    .await;
    let (events, error) =
        collect(gemini(&server).stream(request(vec![HistoryItem::user("…")]))).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![ModelEvent::Finish {
            reason: FinishReason::ContentFilter,
            usage: Usage {
                input_tokens: Some(9),
                output_tokens: None,
                total_tokens: Some(9)
            }
        }]
    );
}

#[test]
fn finish_reasons_map_like_the_ai_sdk() {
    let cases = [
        ("STOP", false, FinishReason::Stop),
        ("STOP", true, FinishReason::ToolCalls),
        ("MAX_TOKENS", false, FinishReason::Length),
        ("MAX_TOKENS", true, FinishReason::Length),
        ("SAFETY", false, FinishReason::ContentFilter),
        ("RECITATION", false, FinishReason::ContentFilter),
        ("BLOCKLIST", false, FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", false, FinishReason::ContentFilter),
        ("SPII", false, FinishReason::ContentFilter),
        ("MALFORMED_FUNCTION_CALL", false, FinishReason::Error),
        ("LANGUAGE", false, FinishReason::Other),
        ("UNEXPECTED_TOOL_CALL", true, FinishReason::ToolCalls),
    ];
    for (wire, calls, expected) in cases {
        assert_eq!(map_finish_reason(wire, calls), expected, "{wire} {calls}");
    }
}

#[test]
fn attachments_become_inline_data_or_file_data() {
    let history = vec![HistoryItem::User {
        text: "What is in these?".into(),
        attachments: vec![
            Attachment {
                media_type: "image/png".into(),
                url: "data:image/png;base64,iVBORw0KGgo=".into(),
                filename: Some("dot.png".into()),
            },
            Attachment {
                media_type: "text/plain".into(),
                url: "data:text/plain,hi%20there".into(),
                filename: None,
            },
            Attachment {
                media_type: "application/pdf".into(),
                url: "https://example.com/a.pdf".into(),
                filename: None,
            },
        ],
    }];
    let body = serde_json::to_value(build_request(&request(history), "gemini-2.5-flash", true))
        .expect("json");
    assert_eq!(
        body["contents"][0]["parts"],
        json!([
            {"text": "What is in these?"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
            {"inlineData": {"mimeType": "text/plain", "data": "aGkgdGhlcmU="}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}}
        ])
    );
}

#[test]
fn a_plain_data_url_is_sent_as_base64() {
    let url = DataUrl::parse("data:text/plain,hello%20world%21").unwrap();
    assert_eq!(url.media_type, "text/plain");
    assert_eq!(url.base64(), "aGVsbG8gd29ybGQh");
    let url = DataUrl::parse("data:image/png;base64,AAAA").unwrap();
    assert_eq!(url.base64(), "AAAA");
}

/// A client's copy of earlier messages (ADR 0020) goes as plain user and model text, the
/// person's message after it, and no function parts at all.
#[test]
fn client_context_is_plain_text_turns() {
    use crate::agent::history::{CONTEXT_MARKER, ContextRole, context_items};
    let mut history = context_items([
        (ContextRole::User, "What time is it?".to_owned()),
        (
            ContextRole::Assistant,
            "[The tool get_current_time was called with {} and returned {\"time\":\"10:00\"}]"
                .to_owned(),
        ),
    ]);
    history.push(HistoryItem::user("Thanks"));
    let body = serde_json::to_value(build_request(&request(history), "gemini-2.5-flash", true))
        .expect("json");
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": format!("{CONTEXT_MARKER}\nWhat time is it?")}]},
            {"role": "model", "parts": [{"text": "[The tool get_current_time was called with {} and returned {\"time\":\"10:00\"}]"}]},
            {"role": "user", "parts": [{"text": "Thanks"}]}
        ])
    );
}
