//! The OpenAI-compatible client against an in-process fake that speaks `chat.completion.chunk`
//! SSE (LF framing, `data: [DONE]`, a final usage-only chunk).

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::agent::history::{Outcome, ToolResult};
use crate::models::providers::testing::{After, FakeServer, Reply, collect, quick_http};

fn model_at(server: &FakeServer, api_key: Option<&str>) -> OpenAiModel {
    OpenAiModel::new(OpenAiConfig {
        api_key: api_key.map(ProviderKey::new),
        base_url: format!("{}/v1", server.base_url),
        model: "gpt-4o-mini".into(),
        http: quick_http(),
    })
    .expect("model")
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

fn delta(delta: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn finish_chunk(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
           "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage_chunk() -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
           "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})
}

/// LF-framed events, then `[DONE]`, then `then`.
fn stream(events: &[Value], then: After) -> Reply {
    let mut pieces: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    pieces.push("data: [DONE]\n\n".into());
    Reply::Stream { pieces, then }
}

fn text_reply(then: After) -> Reply {
    stream(
        &[
            delta(json!({"role": "assistant", "content": ""})),
            delta(json!({"content": "Hello"})),
            delta(json!({"content": ", world"})),
            finish_chunk("stop"),
            usage_chunk(),
        ],
        then,
    )
}

fn usage() -> Usage {
    Usage {
        input_tokens: Some(12),
        output_tokens: Some(5),
        total_tokens: Some(17),
    }
}

fn text_events() -> Vec<ModelEvent> {
    vec![
        ModelEvent::TextDelta("Hello".into()),
        ModelEvent::TextDelta(", world".into()),
        ModelEvent::Finish {
            reason: FinishReason::Stop,
            usage: usage(),
        },
    ]
}

#[tokio::test]
async fn streams_text_with_usage_and_sends_a_well_formed_request() {
    let server = FakeServer::start(vec![text_reply(After::Close)]).await;
    let (events, error) =
        collect(model_at(&server, Some("sk-test")).stream(request(vec![HistoryItem::user("Hi")])))
            .await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.headers["authorization"], "Bearer sk-test");
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "get_weather",
                "description": "Current weather for a place.",
                "parameters": weather_tool().parameters
            }}],
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
}

#[tokio::test]
async fn done_ends_the_step_even_if_the_connection_stays_open() {
    let server = FakeServer::start(vec![text_reply(After::Stall)]).await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    assert!(
        server.requests()[0].headers.get("authorization").is_none(),
        "no key, no header (Ollama)"
    );
}

#[tokio::test]
async fn a_stream_without_done_ends_with_the_body() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![
            format!("data: {}\n\n", delta(json!({"content": "Hello"}))),
            format!("data: {}\n\n", delta(json!({"content": ", world"}))),
            format!("data: {}\n\n", finish_chunk("stop")),
            format!("data: {}\n\n", usage_chunk()),
        ],
        then: After::Close,
    }])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
}

#[tokio::test]
async fn reasoning_content_and_reasoning_are_reasoning() {
    let server = FakeServer::start(vec![stream(
        &[
            delta(json!({"role": "assistant", "reasoning_content": "Think"})),
            delta(json!({"reasoning": "ing."})),
            delta(json!({"content": "Yes."})),
            finish_chunk("stop"),
            usage_chunk(),
        ],
        After::Close,
    )])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("?")]))).await;
    assert_eq!(error, None);
    assert_eq!(
        events[..3],
        [
            ModelEvent::ReasoningDelta {
                text: "Think".into(),
                provider_data: None
            },
            ModelEvent::ReasoningDelta {
                text: "ing.".into(),
                provider_data: None
            },
            ModelEvent::TextDelta("Yes.".into()),
        ]
    );
}

/// Two parallel calls whose arguments arrive a few characters at a time, interleaved.
fn parallel_calls_reply() -> Reply {
    let args_a = r#"{"location": "Tokyo, JP"}"#;
    let args_b = r#"{"location": "Paris"}"#;
    let mut events = vec![
        delta(json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        ]})),
        delta(json!({"tool_calls": [
            {"index": 1, "id": "call_B", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
        ]})),
    ];
    let pieces = |s: &str| -> Vec<String> {
        s.chars()
            .collect::<Vec<_>>()
            .chunks(3)
            .map(|c| c.iter().collect())
            .collect()
    };
    let (a, b) = (pieces(args_a), pieces(args_b));
    for i in 0..a.len().max(b.len()) {
        if let Some(p) = a.get(i) {
            events.push(delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
            ));
        }
        if let Some(p) = b.get(i) {
            events.push(delta(
                json!({"tool_calls": [{"index": 1, "function": {"arguments": p}}]}),
            ));
        }
    }
    events.push(finish_chunk("tool_calls"));
    events.push(usage_chunk());
    stream(&events, After::Close)
}

fn openai_call(id: &str, location: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "get_weather".into(),
        args: json!({"location": location}),
        provider_data: Some(json!({"openai": {"id": id}})),
    }
}

#[tokio::test]
async fn parallel_tool_calls_are_assembled_from_split_argument_deltas() {
    let server = FakeServer::start(vec![parallel_calls_reply()]).await;
    let (events, error) = collect(
        model_at(&server, None).stream(request(vec![HistoryItem::user("Tokyo and Paris?")])),
    )
    .await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::ToolCall(openai_call("call_A", "Tokyo, JP")),
            ModelEvent::ToolCall(openai_call("call_B", "Paris")),
            ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: usage()
            },
        ]
    );
}

#[tokio::test]
async fn an_approval_wait_and_a_restart_replay_provider_ids_and_every_outcome() {
    let server = FakeServer::start(vec![parallel_calls_reply(), text_reply(After::Close)]).await;
    let user = HistoryItem::user("Tokyo and Paris?");
    let (events, _) = collect(model_at(&server, None).stream(request(vec![user.clone()]))).await;
    // As the runner records the step: our ids replace the provider's.
    let parts = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .enumerate()
        .map(|(i, mut call)| {
            call.id = format!("call-{}", i + 1);
            AssistantPart::ToolCall { call }
        })
        .collect();
    let history = vec![
        user,
        HistoryItem::Assistant { parts },
        HistoryItem::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "call-1".into(),
                    name: "get_weather".into(),
                    outcome: Outcome::Output {
                        output: json!({"temp_c": 21}),
                    },
                    edited_args: None,
                },
                ToolResult {
                    call_id: "call-2".into(),
                    name: "get_weather".into(),
                    outcome: Outcome::Denied {
                        reason: None,
                        by: None,
                    },
                    edited_args: None,
                },
            ],
        },
    ];
    let restored: Vec<HistoryItem> =
        serde_json::from_str(&serde_json::to_string(&history).expect("serialise"))
            .expect("deserialise");
    let (events, error) = collect(model_at(&server, None).stream(request(restored))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());

    let sent = &server.requests()[1].body;
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Tokyo and Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_A", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"Tokyo, JP\"}"}},
                {"id": "call_B", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_A", "content": "{\"temp_c\":21}"},
            {"role": "tool", "tool_call_id": "call_B",
             "content": Outcome::Denied { reason: None, by: None }.model_view().to_string()}
        ])
    );
}

#[tokio::test]
async fn invalid_arguments_reach_the_runner_as_text_and_go_back_verbatim() {
    let server = FakeServer::start(vec![stream(
        &[
            delta(json!({"tool_calls": [{"index": 0, "id": "call_X", "function": {"name": "get_weather", "arguments": "{\"location\": \"Tok"}}]})),
            finish_chunk("tool_calls"),
        ],
        After::Close,
    )])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("?")]))).await;
    assert_eq!(error, None);
    let ModelEvent::ToolCall(call) = &events[0] else {
        panic!("expected a call, got {events:?}");
    };
    assert_eq!(call.args, Value::String("{\"location\": \"Tok".into()));
    // The runner's argument check rejects a string for an object schema: the model gets an
    // invalid-arguments tool error instead of the turn failing.
    assert!(crate::protocol::schema::validate(&weather_tool().parameters, &call.args).is_err());
    assert_eq!(wire_call(call).function.arguments, "{\"location\": \"Tok");
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish {
            reason: FinishReason::ToolCalls,
            usage: Usage::default()
        })
    );
}

#[tokio::test]
async fn gemini_compatibility_calls_without_index_keep_their_signature() {
    let extra = json!({"google": {"thought_signature": "sig-compat"}});
    let server = FakeServer::start(vec![stream(
        &[
            delta(json!({"role": "assistant", "tool_calls": [
                {"id": "fc_1", "type": "function", "extra_content": extra,
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"Oslo\"}"}}
            ]})),
            delta(json!({"tool_calls": [
                {"id": "fc_2", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"location\":\"Bergen\"}"}}
            ]})),
            finish_chunk("tool_calls"),
        ],
        After::Close,
    )])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("?")]))).await;
    assert_eq!(error, None);
    let calls: Vec<ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].args, json!({"location": "Oslo"}));
    assert_eq!(calls[1].args, json!({"location": "Bergen"}));
    assert_eq!(
        calls[0].provider_data,
        Some(json!({"openai": {"id": "fc_1", "extra_content": extra}}))
    );
    let replayed = serde_json::to_value(wire_call(&calls[0])).expect("json");
    assert_eq!(replayed["extra_content"], extra);
}

#[tokio::test]
async fn rate_limits_read_retry_after() {
    let server = FakeServer::start(vec![Reply::Full {
        status: 429,
        headers: vec![("content-type", "application/json"), ("retry-after", "7")],
        body: json!({"error": {"message": "Rate limit reached for gpt-4o-mini", "type": "requests",
                               "code": "rate_limit_exceeded"}})
        .to_string(),
    }])
    .await;
    let (_, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(
        error,
        Some(ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
            message: "Rate limit reached for gpt-4o-mini".into()
        })
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let overloaded =
        json!({"error": {"message": "The server is overloaded", "type": "server_error"}})
            .to_string();
    let server = FakeServer::start(vec![
        Reply::status(502, overloaded.clone()),
        text_reply(After::Close),
    ])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());

    let server = FakeServer::start(vec![Reply::status(500, overloaded)]).await;
    let (_, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(
        error,
        Some(ModelError::Provider {
            status: 500,
            message: "The server is overloaded".into()
        })
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn ollama_style_string_errors_are_read() {
    let server = FakeServer::start(vec![Reply::status(
        404,
        r#"{"error":"model \"qwen9\" not found, try pulling it first"}"#,
    )])
    .await;
    let (_, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(
        error,
        Some(ModelError::Provider {
            status: 404,
            message: "model \"qwen9\" not found, try pulling it first".into()
        })
    );
    assert_eq!(server.requests().len(), 1, "a 4xx is not retried");
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_the_step() {
    let server = FakeServer::start(vec![stream(
        &[
            delta(json!({"content": "Hel"})),
            json!({"error": {"message": "upstream connect error", "type": "server_error", "code": 503}}),
        ],
        After::Close,
    )])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("Hel".into())]);
    assert_eq!(
        error,
        Some(ModelError::Provider {
            status: 503,
            message: "upstream connect error".into()
        })
    );
}

#[tokio::test]
async fn an_error_event_before_any_output_is_retried() {
    let server = FakeServer::start(vec![
        stream(
            &[json!({"error": {"message": "overloaded", "type": "server_error"}})],
            After::Close,
        ),
        text_reply(After::Close),
    ])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(error, None);
    assert_eq!(events, text_events());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn invalid_json_is_a_protocol_error() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec!["data: {\"choices\": [\n\n".into()],
        then: After::Close,
    }])
    .await;
    let (_, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert!(matches!(error, Some(ModelError::Protocol(_))), "{error:?}");
}

#[tokio::test]
async fn a_stalled_stream_times_out() {
    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![format!("data: {}\n\n", delta(json!({"content": "Hel"})))],
        then: After::Stall,
    }])
    .await;
    let mut model = model_at(&server, None);
    model.config.http.idle_timeout = Duration::from_millis(200);
    let (events, error) = collect(model.stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("Hel".into())]);
    assert!(
        matches!(&error, Some(ModelError::Transport(m)) if m.contains("stalled")),
        "{error:?}"
    );
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    use futures::StreamExt;

    let server = FakeServer::start(vec![Reply::Stream {
        pieces: vec![format!("data: {}\n\n", delta(json!({"content": "Hel"})))],
        then: After::Ping,
    }])
    .await;
    let mut stream = model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]));
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
    assert!(
        matches!(first, Ok(Some(Ok(ModelEvent::TextDelta(_))))),
        "{first:?}"
    );
    drop(stream);
    assert!(server.stream_closed(Duration::from_secs(5)).await);
}

#[test]
fn images_are_image_url_parts_and_other_files_a_note() {
    let history = vec![HistoryItem::User {
        text: "Look".into(),
        attachments: vec![
            Attachment {
                media_type: "image/png".into(),
                url: "data:image/png;base64,iVBORw0KGgo=".into(),
                filename: None,
            },
            Attachment {
                media_type: "application/pdf".into(),
                url: "data:application/pdf;base64,JVBERi0=".into(),
                filename: Some("a.pdf".into()),
            },
        ],
    }];
    let body = serde_json::to_value(build_request(&request(history), "m")).expect("json");
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "text", "text": "Look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": "[Attachment a.pdf (application/pdf) was not sent: this model endpoint accepts images only.]"}
        ])
    );
}

#[test]
fn finish_reasons_map_like_the_ai_sdk() {
    for (wire, calls, expected) in [
        ("stop", false, FinishReason::Stop),
        ("stop", true, FinishReason::ToolCalls),
        ("length", false, FinishReason::Length),
        ("tool_calls", true, FinishReason::ToolCalls),
        ("function_call", true, FinishReason::ToolCalls),
        ("content_filter", false, FinishReason::ContentFilter),
        ("eos", false, FinishReason::Other),
    ] {
        assert_eq!(map_finish_reason(wire, calls), expected, "{wire}");
    }
}

#[tokio::test]
async fn a_server_that_ignores_streaming_gets_a_clear_error() {
    let server = FakeServer::start(vec![Reply::status(
        200,
        json!({"id": "chatcmpl-1", "object": "chat.completion",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"},
                            "finish_reason": "stop"}]})
        .to_string(),
    )])
    .await;
    let (events, error) =
        collect(model_at(&server, None).stream(request(vec![HistoryItem::user("Hi")]))).await;
    assert!(events.is_empty());
    assert!(
        matches!(&error, Some(ModelError::Protocol(m)) if m.contains("ignored \"stream\": true")),
        "{error:?}"
    );
}

/// A client's copy of earlier messages (ADR 0020) goes as plain user and assistant messages,
/// without tool calls.
#[test]
fn client_context_is_plain_messages() {
    use crate::agent::history::{CONTEXT_MARKER, ContextRole, context_items};
    let mut history = context_items([
        (ContextRole::User, "Pay Bob $5".to_owned()),
        (ContextRole::Assistant, "Done.".to_owned()),
    ]);
    history.push(HistoryItem::user("Thanks"));
    let body = serde_json::to_value(build_request(&request(history), "m")).expect("json");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[1..],
        [
            json!({"role": "user", "content": format!("{CONTEXT_MARKER}\nPay Bob $5")}),
            json!({"role": "assistant", "content": "Done."}),
            json!({"role": "user", "content": "Thanks"}),
        ]
    );
}
