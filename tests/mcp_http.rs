//! An MCP server defined here, over streamable HTTP (rmcp's server in axum): its read-only tool
//! runs without asking when annotations are trusted, its destructive tool asks and its `isError`
//! reaches the model as a tool error, a call that hangs is cancelled at the timeout (the server
//! sees the cancellation), a server that goes away fails calls clearly and is reconnected
//! when it comes back, and a question the server asks mid-call (2026-07-28 `input_required`)
//! reaches the person as a `data-question` part and their answer reaches the server.
#![cfg(feature = "ssr")]

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use countersign::{
    agent::{
        history::{HistoryItem, ToolCall},
        model::{Model, ModelEvent, ModelRequest, ModelStream, Usage},
    },
    protocol::FinishReason,
};
use futures::stream;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{
        router::tool::ToolRouter,
        tool::{InputResponses, RequestState},
        wrapper::Parameters,
    },
    model::{
        CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams,
        ElicitationAction, Implementation, InputRequest, InputRequests, InputRequiredResult,
        ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common;

use common::stream::{chat_stream, next_of, reply};

/// How many `hang` calls saw their cancellation.
static HANG_CANCELLED: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(Clone)]
struct Probe {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Probe {
    /// Adds two integers.
    #[tool(annotations(title = "Add numbers", read_only_hint = true))]
    async fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> String {
        (a + b).to_string()
    }

    /// Deletes everything (and always refuses).
    #[tool(annotations(read_only_hint = false, destructive_hint = true))]
    async fn delete_everything(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("refused: nothing was deleted")])
    }

    /// Never answers.
    #[tool(annotations(read_only_hint = true))]
    async fn hang(&self, ct: CancellationToken) -> String {
        tokio::select! {
            () = ct.cancelled() => {
                HANG_CANCELLED.fetch_add(1, Ordering::SeqCst);
                "cancelled".into()
            }
            () = tokio::time::sleep(Duration::from_secs(3600)) => "woke".into(),
        }
    }

    /// Asks the person's name: as `input_required` on 2026-07-28 (what this client speaks with
    /// this server), as `elicitation/create` on a 2025 session.
    #[tool(annotations(read_only_hint = true))]
    async fn ask(
        &self,
        ctx: RequestContext<RoleServer>,
        RequestState(state): RequestState,
        InputResponses(responses): InputResponses,
    ) -> Result<CallToolResponse, ErrorData> {
        if ctx.protocol_version().is_none_or(|v| v.has_initialize()) {
            let result = ctx
                .peer
                .create_elicitation(name_question())
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            let text = match result.action {
                ElicitationAction::Accept => format!(
                    "hello {} (2025)",
                    result.content.unwrap_or_default()["name"]
                ),
                other => format!("no name: {other:?}"),
            };
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
        }
        match (state.as_deref(), responses) {
            (None, _) => {
                let mut requests = InputRequests::new();
                requests.insert(
                    "name".into(),
                    InputRequest::Elicitation(ElicitRequest::new(name_question())),
                );
                Ok(InputRequiredResult::new(Some(requests), Some("ask-1".into())).into())
            }
            (Some("ask-1"), Some(responses)) => {
                let answer = responses.get("name").cloned().unwrap_or_default();
                let text = match answer["action"].as_str() {
                    Some("accept") => format!("hello {} (2026)", answer["content"]["name"]),
                    _ => format!("no name: {}", answer["action"]),
                };
                Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
            }
            (other, _) => Err(ErrorData::invalid_params(
                format!("bad requestState {other:?}"),
                None,
            )),
        }
    }
}

fn name_question() -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "What is your name?".into(),
        requested_schema: serde_json::from_value(json!({
            "type": "object",
            "properties": {"name": {"type": "string", "title": "Name", "minLength": 2}},
            "required": ["name"]
        }))
        .expect("a valid elicitation schema"),
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Probe {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("probe", "1.0.0"))
    }
}

/// Serves the probe on `listener` until `stop` is cancelled.
fn serve_probe(listener: tokio::net::TcpListener, stop: CancellationToken) {
    let service: StreamableHttpService<Probe, LocalSessionManager> = StreamableHttpService::new(
        || {
            Ok(Probe {
                tool_router: Probe::tool_router(),
            })
        },
        Default::default(),
        StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_cancellation_token(stop.child_token()),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled_owned().await })
            .await;
    });
}

/// A model that calls what the person names: `call <tool> <json args>`, then reports the result.
#[derive(Default)]
struct Scripted {
    told: Mutex<Vec<ModelRequest>>,
}

impl Model for Scripted {
    fn label(&self) -> String {
        "scripted".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.told.lock().unwrap().push(request.clone());
        let finish = |reason| ModelEvent::Finish {
            reason,
            usage: Usage::default(),
        };
        let events = match request.history.last() {
            Some(HistoryItem::User { text, .. }) => {
                let mut words = text.splitn(3, ' ');
                match (words.next(), words.next(), words.next()) {
                    (Some("call"), Some(tool), args) => vec![
                        ModelEvent::ToolCall(ToolCall {
                            id: String::new(),
                            name: tool.to_owned(),
                            args: serde_json::from_str(args.unwrap_or("{}")).unwrap_or(json!({})),
                            provider_data: None,
                        }),
                        finish(FinishReason::ToolCalls),
                    ],
                    _ => vec![
                        ModelEvent::TextDelta("ok".into()),
                        finish(FinishReason::Stop),
                    ],
                }
            }
            _ => vec![
                ModelEvent::TextDelta("done".into()),
                finish(FinishReason::Stop),
            ],
        };
        Box::pin(stream::iter(events.into_iter().map(Ok)))
    }
}

struct Setup {
    server: common::Server,
    base: String,
    model: Arc<Scripted>,
    probe_addr: std::net::SocketAddr,
    probe_stop: CancellationToken,
}

async fn setup(name: &str) -> Setup {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let probe_addr = listener.local_addr().unwrap();
    let probe_stop = CancellationToken::new();
    serve_probe(listener, probe_stop.clone());
    let config = std::env::temp_dir().join(format!(
        "countersign-mcp-http-{name}-{}.json",
        std::process::id()
    ));
    std::fs::write(
        &config,
        json!({"mcpServers": {"probe": {"url": format!("http://{probe_addr}/mcp"), "trustAnnotations": true}}})
            .to_string(),
    )
    .unwrap();
    let model = Arc::new(Scripted::default());
    let server = common::start(common::Opts {
        model: Some(model.clone()),
        env: vec![
            (
                "COUNTERSIGN_MCP_CONFIG".into(),
                config.display().to_string(),
            ),
            ("COUNTERSIGN_MCP_CALL_TIMEOUT_SECS".into(), "1".into()),
        ],
        ..common::Opts::default()
    })
    .await;
    let base = format!("http://{}", server.addr);
    wait_for_state(&base, "connected").await;
    Setup {
        server,
        base,
        model,
        probe_addr,
        probe_stop,
    }
}

async fn mcp_status(base: &str) -> Value {
    reqwest::get(format!("{base}/api/mcp"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn wait_for_state(base: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = mcp_status(base).await;
        if status["servers"][0]["state"] == state {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the server never got {state}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn chat(base: &str, chat: &str, text: &str) -> Vec<Value> {
    let body = reqwest::Client::new()
        .post(format!("{base}/api/chat"))
        .json(&json!({"id": chat, "messages": [
            {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

fn find<'a>(chunks: &'a [Value], kind: &str) -> Option<&'a Value> {
    chunks.iter().find(|c| c["type"] == kind)
}

#[tokio::test]
async fn tools_over_streamable_http_run_ask_fail_and_time_out() {
    let s = setup("calls").await;
    let status = mcp_status(&s.base).await;
    let tools = status["servers"][0]["tools"].to_string();
    assert!(
        tools.contains("probe__add") && tools.contains("probe__delete_everything"),
        "{status}"
    );

    // The chat's Tools panel gets the same list without the page around it.
    let panel = reqwest::get(format!("{}/tools?panel", s.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(panel.starts_with("<section"), "{panel}");
    assert!(
        panel.contains(r#"data-tool="probe__add" data-needs="runs""#),
        "{panel}"
    );
    assert!(!panel.contains("<html"), "{panel}");

    // The tools page lists them by server with what each needs, beside Countersign's own.
    let page = reqwest::get(format!("{}/tools", s.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"data-source="probe" data-state="connected""#),
        "{page}"
    );
    assert!(
        page.contains(r#"data-tool="probe__add" data-needs="runs""#),
        "{page}"
    );
    assert!(
        page.contains(r#"data-tool="probe__delete_everything" data-needs="asks""#),
        "{page}"
    );
    assert!(
        page.contains(r#"data-tool="get_weather" data-needs="runs""#),
        "{page}"
    );
    assert!(page.contains("can delete or overwrite data"), "{page}");

    // Read-only and trusted: runs at once, over HTTP.
    let chunks = chat(&s.base, "add", r#"call probe__add {"a": 2, "b": 3}"#).await;
    assert!(
        find(&chunks, "tool-approval-request").is_none(),
        "{chunks:?}"
    );
    assert_eq!(
        find(&chunks, "tool-output-available").unwrap()["output"],
        json!({"text": "5"})
    );
    // The model was offered the server's tools with their schemas.
    let told = s.model.told.lock().unwrap()[0].clone();
    let add = told.tools.iter().find(|t| t.name == "probe__add").unwrap();
    assert_eq!(add.parameters["required"], json!(["a", "b"]));

    // Bad arguments never reach the server: the schema is checked first.
    let chunks = chat(&s.base, "bad", r#"call probe__add {"a": "two"}"#).await;
    assert!(find(&chunks, "tool-input-error").is_some(), "{chunks:?}");

    // Destructive: asks; approved, the server's isError is a tool error.
    let chunks = chat(&s.base, "del", "call probe__delete_everything {}").await;
    let request = find(&chunks, "tool-approval-request").expect("it asks");
    let approval = request["approvalId"].as_str().unwrap();
    let call = request["toolCallId"].as_str().unwrap();
    let message = find(&chunks, "start").unwrap()["messageId"]
        .as_str()
        .unwrap();
    let body = reqwest::Client::new()
        .post(format!("{}/api/chat", s.base))
        .json(&json!({"id": "del", "messages": [
            {"id": "u", "role": "user", "parts": [{"type": "text", "text": "call probe__delete_everything {}"}]},
            {"id": message, "role": "assistant", "parts": [{"type": "tool-probe__delete_everything",
              "toolCallId": call, "state": "approval-responded", "input": {},
              "approval": {"id": approval, "approved": true}}]}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains("tool-output-error") && body.contains("refused: nothing was deleted"),
        "{body}"
    );

    // A call that hangs is cancelled at the timeout, and the server hears of it.
    let before = HANG_CANCELLED.load(Ordering::SeqCst);
    let chunks = chat(&s.base, "hang", "call probe__hang {}").await;
    let error = find(&chunks, "tool-output-error").expect("a timeout error");
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{error}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while HANG_CANCELLED.load(Ordering::SeqCst) == before {
        assert!(
            Instant::now() < deadline,
            "the server never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(s.server);
}

#[tokio::test]
async fn a_server_that_goes_away_fails_calls_clearly_and_is_reconnected() {
    let s = setup("crash").await;
    s.probe_stop.cancel();
    // Gone: a call says so, and nothing hangs.
    let chunks = chat(&s.base, "gone", r#"call probe__add {"a": 1, "b": 1}"#).await;
    let error = find(&chunks, "tool-output-error").expect("a clear error");
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("MCP server probe"),
        "{error}"
    );
    wait_for_state(&s.base, "down").await;
    // Back on the same address: reconnected by the supervisor, and calls work again.
    let listener = loop {
        match tokio::net::TcpListener::bind(s.probe_addr).await {
            Ok(l) => break l,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    serve_probe(listener, CancellationToken::new());
    wait_for_state(&s.base, "connected").await;
    let chunks = chat(&s.base, "back", r#"call probe__add {"a": 1, "b": 1}"#).await;
    assert_eq!(
        find(&chunks, "tool-output-available").unwrap()["output"],
        json!({"text": "2"})
    );
}

fn ask(chat: &str) -> Value {
    json!({"id": chat, "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "call probe__ask {}"}]}]})
}

#[tokio::test]
async fn a_question_mid_call_reaches_the_person_and_their_answer_the_server() {
    let s = setup("questions").await;
    let mut chunks = chat_stream(&s.base, ask("q-chat"));
    let asked = next_of(&mut chunks, "data-question", Some("open")).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    let call_id = asked["data"]["toolCallId"].as_str().unwrap().to_owned();
    assert_eq!(asked["data"]["source"], "MCP server probe");
    assert_eq!(asked["data"]["message"], "What is your name?");
    assert_eq!(
        asked["data"]["schema"]["properties"]["name"]["title"],
        "Name"
    );
    assert!(asked["data"]["deadlineMs"].as_i64().is_some(), "{asked}");

    // Another chat cannot answer it, nor can an answer that does not fit the form.
    let accept = |name: &str| json!({"action": "accept", "content": {"name": name}});
    let (status, body) = reply(&s.base, "other-chat", &id, accept("Eve")).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("question_not_open"))
    );
    let (status, body) = reply(&s.base, "q-chat", &id, accept("A")).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("name"),
        "{body}"
    );
    let (status, _) = reply(&s.base, "q-chat", &id, json!({"action": "perhaps"})).await;
    assert_eq!(status, 400);

    // The person takes longer than the call timeout (1 s): time spent with them does not count.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, body) = reply(&s.base, "q-chat", &id, accept("Ada")).await;
    assert_eq!(status, 204, "{body}");
    let closed = next_of(&mut chunks, "data-question", Some("answered")).await;
    assert_eq!(closed["id"], id.as_str());
    assert_eq!(closed["data"]["answer"], json!({"name": "Ada"}));
    let output = next_of(&mut chunks, "tool-output-available", None).await;
    assert_eq!(output["toolCallId"], call_id.as_str());
    assert_eq!(output["output"]["text"], "hello \"Ada\" (2026)");
    let (status, _) = reply(&s.base, "q-chat", &id, accept("Ada")).await;
    assert_eq!(status, 404, "a question is answered once");
    // Audited: who asked what, and what was answered.
    let audit: Vec<Value> = reqwest::get(format!("{}/api/audit?session=q-chat", s.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let of = |kind: &str| audit.iter().find(|e| e["kind"] == kind).cloned();
    let asked_event = of("asked").expect("an asked event");
    assert_eq!(asked_event["approval_id"], id.as_str(), "{asked_event}");
    assert_eq!(asked_event["tool"], "probe__ask");
    assert_eq!(asked_event["reason"], "What is your name?");
    let answered = of("answered").expect("an answered event");
    assert_eq!(answered["reason"], "answered");
    assert_eq!(answered["outcome"], json!({"name": "Ada"}));

    // Declined: the server hears it and the call goes on.
    let mut chunks = chat_stream(&s.base, ask("q-chat-2"));
    let asked = next_of(&mut chunks, "data-question", Some("open")).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    let (status, _) = reply(&s.base, "q-chat-2", &id, json!({"action": "decline"})).await;
    assert_eq!(status, 204);
    next_of(&mut chunks, "data-question", Some("declined")).await;
    let output = next_of(&mut chunks, "tool-output-available", None).await;
    assert_eq!(output["output"]["text"], "no name: \"decline\"");

    // The person stops the turn while the question is open: it closes, cancelled.
    let mut chunks = chat_stream(&s.base, ask("q-chat-3"));
    let asked = next_of(&mut chunks, "data-question", Some("open")).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    let stopped = reqwest::Client::new()
        .post(format!("{}/api/chat/q-chat-3/stop", s.base))
        .send()
        .await
        .unwrap();
    assert!(stopped.status().is_success(), "{}", stopped.status());
    let closed = next_of(&mut chunks, "data-question", Some("cancelled")).await;
    assert_eq!(closed["id"], id.as_str());
    let (status, _) = reply(&s.base, "q-chat-3", &id, accept("Ada")).await;
    assert_eq!(status, 404);
    s.probe_stop.cancel();
}
