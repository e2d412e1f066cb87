//! A real MCP server nobody here wrote (`@modelcontextprotocol/server-filesystem` from npm, over
//! stdio, against a temp directory) under Countersign's gate, driven by a scripted
//! OpenAI-compatible model that picks its tools from the request's `tools` (so they were
//! advertised): a read-only tool runs without asking (trusted annotations), `write_file` waits
//! for the person, approve writes exactly once (a replayed approval writes nothing more), deny
//! writes nothing, forged and foreign approvals change nothing, and a pending MCP approval
//! survives kill -9 of the server. `@modelcontextprotocol/server-everything` asks the person a
//! question mid-call (a 2025 `elicitation/create`): it reaches the chat as a `data-question`
//! part, answers that do not fit its form are refused, and the answer reaches the server; a page to
//! open is a link (and a script link is declined, never shown). The
//! real binary, as a person runs it.
#![cfg(all(feature = "ssr", unix))]

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Json, Router, extract::State, response::IntoResponse, routing::post};
use serde_json::{Value, json};

/// The filesystem server's entry point, installed by scripts/setup.sh.
fn filesystem_server() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    );
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh (it installs tests/mcp-servers)",
        path.display()
    );
    path
}

/// The everything server's entry point, installed by scripts/setup.sh.
fn everything_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    )
}

/// What the scripted model was asked, request by request.
type Seen = Arc<Mutex<Vec<Value>>>;

/// A scripted OpenAI-compatible model. The last user message says what to do: `read <path>`
/// calls the advertised tool ending in `__read_text_file`, `write <path> <text>` the one ending
/// in `__write_file`, `ask` the one ending in `__trigger-elicitation-request`; after a tool result it answers with that result in words.
async fn fake_model() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (format!("http://{addr}/v1"), seen)
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

async fn complete(State(seen): State<Seen>, Json(request): Json<Value>) -> impl IntoResponse {
    seen.lock().unwrap().push(request.clone());
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let tool_named = |suffix: &str| -> Option<String> {
        request["tools"]
            .as_array()?
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .find(|n| n.ends_with(suffix))
            .map(str::to_owned)
    };
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let events = if last["role"] == "tool" {
        let result = text_of(&last);
        vec![
            chunk(
                json!({"role": "assistant", "content": format!("Done: {result}")}),
                Value::Null,
            ),
            chunk(json!({}), json!("stop")),
        ]
    } else {
        let said = text_of(&last);
        let mut words = said.splitn(3, ' ');
        let (verb, path, rest) = (words.next(), words.next(), words.next());
        let call = match (verb, path) {
            (Some("read"), Some(path)) => {
                tool_named("__read_text_file").map(|name| (name, json!({"path": path})))
            }
            (Some("write"), Some(path)) => tool_named("__write_file")
                .map(|name| (name, json!({"path": path, "content": rest.unwrap_or("")}))),
            (Some("ask"), _) => {
                tool_named("__trigger-elicitation-request").map(|name| (name, json!({})))
            }
            (Some("open"), Some(url)) => tool_named("__trigger-url-elicitation")
                .map(|name| (name, json!({"url": url, "message": "Sign in to continue."}))),
            (Some("long"), Some(seconds)) => {
                tool_named("__trigger-long-running-operation").map(|name| {
                    (
                        name,
                        json!({"duration": seconds.parse::<f64>().unwrap_or(1.0), "steps": 1}),
                    )
                })
            }
            _ => None,
        };
        match call {
            Some((name, args)) => vec![
                chunk(
                    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]}),
                    Value::Null,
                ),
                chunk(json!({}), json!("tool_calls")),
            ],
            None => vec![
                chunk(
                    json!({"role": "assistant", "content": "I have no such tool."}),
                    Value::Null,
                ),
                chunk(json!({}), json!("stop")),
            ],
        }
    };
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], body)
}

use crate::common;
use common::stream::user;

use common::{
    binary::Binary,
    stream::{chat_stream, next_of, reply},
};

/// The server binary with the scripted `model` and the MCP servers of `config`, on `db`.
async fn start(db: &Path, model: &str, config: &Path) -> Binary {
    Binary::start(&[
        ("COUNTERSIGN_DB", db.display().to_string()),
        ("OPENAI_BASE_URL", model.to_owned()),
        ("COUNTERSIGN_MODEL", "openai:scripted".to_owned()),
        ("COUNTERSIGN_MCP_CONFIG", config.display().to_string()),
        ("COUNTERSIGN_TEXT_TIMING", "hold".to_owned()),
    ])
    .await
}

async fn get(server: &Binary, path: &str) -> Value {
    reqwest::get(format!("{}{path}", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A temp directory the filesystem server may use, the config naming it, and a database path.
struct Fixture {
    root: PathBuf,
    config: PathBuf,
    db: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let base =
            std::env::temp_dir().join(format!("countersign-mcp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("files");
        std::fs::create_dir_all(&root).unwrap();
        // The server resolves symlinks (macOS /tmp); so must the paths the model sends.
        let root = root.canonicalize().unwrap();
        std::fs::write(root.join("hello.txt"), "hello from disk").unwrap();
        let config = base.join("mcp.json");
        std::fs::write(
            &config,
            json!({"mcpServers": {"files": {
                "command": "node",
                "args": [filesystem_server(), root],
                "trustAnnotations": true
            }}})
            .to_string(),
        )
        .unwrap();
        Fixture {
            db: base.join("db.sqlite"),
            root,
            config,
        }
    }

    fn path(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }
}

/// (approval id, tool call id, message id, tool name, input) of a paused response.
fn approval_of(chunks: &[Value]) -> (String, String, String, String, Value) {
    let request = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .expect("an approval request");
    let call = request["toolCallId"].as_str().unwrap().to_owned();
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available" && c["toolCallId"] == call.as_str())
        .unwrap();
    let message = chunks.iter().find(|c| c["type"] == "start").unwrap()["messageId"]
        .as_str()
        .unwrap()
        .to_owned();
    (
        request["approvalId"].as_str().unwrap().to_owned(),
        call,
        message,
        input["toolName"].as_str().unwrap().to_owned(),
        input["input"].clone(),
    )
}

fn answer(
    chat: &str,
    text: &str,
    approval: &(String, String, String, String, Value),
    approved: bool,
) -> Value {
    let (approval_id, call, message, tool, input) = approval;
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]},
        {"id": message, "role": "assistant", "parts": [
            {"type": format!("tool-{tool}"), "toolCallId": call, "state": "approval-responded",
             "input": input, "approval": {"id": approval_id, "approved": approved}}
        ]}
    ]})
}

#[tokio::test]
async fn a_real_mcp_server_is_advertised_gated_and_countersigned() {
    let fx = Fixture::new("gate");
    let (model, seen) = fake_model().await;
    let server = start(&fx.db, &model, &fx.config).await;

    // Its status, and its tools offered to the model under the server's name.
    let mcp = get(&server, "/api/mcp").await;
    let files = &mcp["servers"][0];
    assert_eq!(files["name"], "files");
    assert_eq!(files["state"], "connected", "{mcp}");
    let tools: Vec<&str> = files["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"files__write_file") && tools.contains(&"files__read_text_file"),
        "{tools:?}"
    );

    // Read-only, annotations trusted: runs without asking.
    let read = format!("read {}", fx.path("hello.txt"));
    let (status, chunks, text) = server.chat(user("read", &read)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        !chunks.iter().any(|c| c["type"] == "tool-approval-request"),
        "{text}"
    );
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .expect(&text);
    assert_eq!(output["output"]["content"], "hello from disk", "{output}");
    // The model was offered the tool (it chose it from the request's `tools`) and told of the
    // server in its instruction.
    let first = seen.lock().unwrap()[0].clone();
    assert!(first["tools"].to_string().contains("files__read_text_file"));

    // write_file asks; nothing is written before the person says yes.
    let target = fx.root.join("note.txt");
    let write = format!("write {} countersigned", fx.path("note.txt"));
    let (status, chunks, text) = server.chat(user("write", &write)).await;
    assert_eq!(status, 200, "{text}");
    let approval = approval_of(&chunks);
    assert_eq!(approval.3, "files__write_file");
    assert!(!target.exists(), "nothing is written before the approval");

    // A forged approval id, and one of another chat, change nothing.
    let mut forged = approval.clone();
    forged.0 = "apv_forged".into();
    let (status, _, text) = server.chat(answer("write", &write, &forged, true)).await;
    assert!((400..500).contains(&status), "{status} {text}");
    let (status, _, text) = server.chat(answer("read", &write, &approval, true)).await;
    assert!((400..500).contains(&status), "{status} {text}");
    assert!(!target.exists());

    // Approved: written once. The same approval again writes nothing more.
    let (status, chunks, text) = server.chat(answer("write", &write, &approval, true)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        chunks.iter().any(|c| c["type"] == "tool-output-available"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "countersigned");
    std::fs::write(&target, "changed since").unwrap();
    let (status, _, _) = server.chat(answer("write", &write, &approval, true)).await;
    assert_eq!(status, 409);
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "changed since",
        "not written twice"
    );

    // Denied: nothing written, the model is told.
    let other = fx.root.join("never.txt");
    let deny = format!("write {} no", fx.path("never.txt"));
    let (_, chunks, _) = server.chat(user("deny", &deny)).await;
    let approval = approval_of(&chunks);
    let (status, chunks, text) = server.chat(answer("deny", &deny, &approval, false)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        chunks.iter().any(|c| c["type"] == "tool-output-denied"),
        "{text}"
    );
    assert!(!other.exists());

    // The audit log has the server's tool like any other.
    let audit = reqwest::get(format!("{}/api/audit/export?session=write", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        audit.contains("files__write_file") && audit.contains("approved"),
        "{audit}"
    );
}

#[tokio::test]
async fn a_pending_mcp_approval_survives_kill_9() {
    let fx = Fixture::new("restart");
    let (model, _) = fake_model().await;
    let target = fx.root.join("after-restart.txt");
    let write = format!("write {} durable", fx.path("after-restart.txt"));

    let first = start(&fx.db, &model, &fx.config).await;
    let (_, chunks, text) = first.chat(user("durable", &write)).await;
    let approval = approval_of(&chunks);
    assert_eq!(approval.3, "files__write_file", "{text}");
    first.kill9();
    assert!(!target.exists());

    let second = start(&fx.db, &model, &fx.config).await;
    let (status, chunks, text) = second
        .chat(answer("durable", &write, &approval, true))
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        chunks.iter().any(|c| c["type"] == "tool-output-available"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "durable");
}

#[tokio::test]
async fn a_pending_approval_of_a_server_down_after_a_restart_is_answered_clearly() {
    let fx = Fixture::new("down-after");
    let (model, _) = fake_model().await;
    let target = fx.root.join("later.txt");
    let write = format!("write {} later", fx.path("later.txt"));
    let first = start(&fx.db, &model, &fx.config).await;
    let (_, chunks, text) = first.chat(user("later", &write)).await;
    let approval = approval_of(&chunks);
    assert_eq!(approval.3, "files__write_file", "{text}");
    first.kill9();

    // The same server, now unable to start.
    std::fs::write(
        &fx.config,
        json!({"mcpServers": {"files": {"command": "/nonexistent/mcp-server", "trustAnnotations": true}}})
            .to_string(),
    )
    .unwrap();
    let second = start(&fx.db, &model, &fx.config).await;
    // Its tools as it last listed them, while it is down.
    let mcp = get(&second, "/api/mcp").await;
    let files = &mcp["servers"][0];
    assert_eq!(files["state"], "down", "{mcp}");
    assert_eq!(files["remembered"], true, "{mcp}");
    assert!(
        files["tools"].to_string().contains("files__write_file"),
        "{mcp}"
    );
    let page = reqwest::get(format!("{}/tools", second.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("as it last listed them"), "{page}");

    // Approved: the person is told the server is down; nothing was written.
    let (status, chunks, text) = second.chat(answer("later", &write, &approval, true)).await;
    assert_eq!(status, 200, "{text}");
    let error = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-error")
        .expect(&text);
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("MCP server files is not connected"),
        "{error}"
    );
    assert!(!target.exists());
}

#[tokio::test]
async fn a_server_that_cannot_start_leaves_the_app_usable_and_says_why() {
    let fx = Fixture::new("down");
    std::fs::write(
        &fx.config,
        json!({"mcpServers": {"broken": {"command": "/nonexistent/mcp-server"}}}).to_string(),
    )
    .unwrap();
    let (model, _) = fake_model().await;
    let server = start(&fx.db, &model, &fx.config).await;
    let mcp = get(&server, "/api/mcp").await;
    assert_eq!(mcp["servers"][0]["state"], "down", "{mcp}");
    assert!(
        mcp["servers"][0]["error"]
            .as_str()
            .unwrap()
            .contains("cannot start"),
        "{mcp}"
    );
    let (status, chunks, text) = server.chat(user("still", "hello")).await;
    assert_eq!(status, 200, "{text}");
    assert!(chunks.iter().any(|c| c["type"] == "text-delta"), "{text}");
}

/// SIGKILLs every process whose command line contains `needle`; how many.
fn kill_processes_naming(needle: &str) -> usize {
    let mut killed = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(needle) && pid != std::process::id() as i32 {
            // SAFETY: kill(2) with a pid read from /proc and a valid signal number.
            if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
                killed += 1;
            }
        }
    }
    killed
}

#[tokio::test]
async fn a_crashed_stdio_server_is_restarted_and_its_tools_work_again() {
    let fx = Fixture::new("crash");
    let (model, _) = fake_model().await;
    let server = start(&fx.db, &model, &fx.config).await;
    let read = format!("read {}", fx.path("hello.txt"));
    // The filesystem server dies (its command line names this fixture's directory).
    let killed = kill_processes_naming(&fx.root.display().to_string());
    assert_eq!(killed, 1, "the MCP server process was found and killed");
    // Restarted by its supervisor: connected again, and the read works.
    let deadline = Instant::now() + Duration::from_secs(20);
    for attempt in 0.. {
        let (_, chunks, _) = server.chat(user(&format!("again-{attempt}"), &read)).await;
        if let Some(output) = chunks.iter().find(|c| c["type"] == "tool-output-available") {
            assert_eq!(output["output"]["content"], "hello from disk");
            break;
        }
        // Meanwhile a call fails with a clear error, not a hang.
        let error = chunks
            .iter()
            .find(|c| c["type"] == "tool-output-error")
            .expect("an error while it is down");
        assert!(
            error["errorText"]
                .as_str()
                .unwrap()
                .contains("MCP server files"),
            "{error}"
        );
        assert!(Instant::now() < deadline, "the server was not restarted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_real_servers_question_reaches_the_person_and_their_answer_the_server() {
    let fx = Fixture::new("ask");
    std::fs::write(
        &fx.config,
        json!({"mcpServers": {"everything": {
            "command": "node",
            "args": [everything_server(), "stdio"],
            "tools": {
                "trigger-elicitation-request": {"approval": "never"},
                "trigger-url-elicitation": {"approval": "never"}
            }
        }}})
        .to_string(),
    )
    .unwrap();
    let (model, _) = fake_model().await;
    let server = start(&fx.db, &model, &fx.config).await;
    // The server offers its question tool only to a client that says it can ask the person.
    let tool = "everything__trigger-elicitation-request";
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mcp = get(&server, "/api/mcp").await;
        if mcp["servers"][0]["tools"].to_string().contains(tool) {
            break;
        }
        assert!(Instant::now() < deadline, "{tool} never offered: {mcp}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let mut chunks = chat_stream(&server.base, user("ask", "ask"));
    let asked = next_of(&mut chunks, "data-question", Some("open")).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    assert_eq!(asked["data"]["source"], "MCP server everything");
    assert_eq!(
        asked["data"]["message"],
        "Please provide inputs for the following fields:"
    );
    let schema = &asked["data"]["schema"];
    assert_eq!(schema["required"], json!(["name"]), "{schema}");
    assert_eq!(schema["properties"]["email"]["format"], "email");

    // What does not fit the form is refused, and the question stays open.
    let (status, body) = reply(
        &server.base,
        "ask",
        &id,
        json!({"action": "accept", "content": {"check": true}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = reply(
        &server.base,
        "ask",
        &id,
        json!({"action": "accept", "content": {"name": "Ada", "email": "ada-at-example"}}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_answer")),
        "{body}"
    );
    let (status, body) = reply(
        &server.base,
        "ask",
        &id,
        json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true,
            "email": "ada@example.org", "integer": 7, "untitledSingleSelectEnum": "Joey",
            "titledMultipleSelectEnum": ["fish-2"]}}),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    next_of(&mut chunks, "data-question", Some("answered")).await;
    let output = next_of(&mut chunks, "tool-output-available", None).await;
    let text = output["output"].to_string();
    assert!(
        text.contains("- Name: Ada Lovelace") && text.contains("- Email: ada@example.org"),
        "{output}"
    );
    assert!(text.contains("- Favorite Integer: 7"), "{output}");

    // A page to open: a link (the card opens it in a new tab), answered by opening it.
    let mut chunks = chat_stream(
        &server.base,
        user("open", "open https://auth.example.org/consent?step=1"),
    );
    let asked = next_of(&mut chunks, "data-question", Some("open")).await;
    assert_eq!(
        asked["data"]["url"],
        "https://auth.example.org/consent?step=1"
    );
    assert_eq!(asked["data"]["message"], "Sign in to continue.");
    assert!(asked["data"].get("schema").is_none(), "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    let (status, _) = reply(&server.base, "open", &id, json!({"action": "accept"})).await;
    assert_eq!(status, 204);
    let output = next_of(&mut chunks, "tool-output-available", None).await;
    assert!(
        output["output"]
            .to_string()
            .contains("User completed the URL elicitation flow"),
        "{output}"
    );

    // A link that is not http(s) is never shown: declined on the person's behalf.
    let (status, chunks, text) = server
        .chat(user("script", "open javascript:alert(1)"))
        .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        !chunks.iter().any(|c| c["type"] == "data-question"),
        "{text}"
    );
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .expect(&text);
    assert!(
        output["output"]
            .to_string()
            .contains("declined to open the URL"),
        "{output}"
    );
}

/// The parts of chat `chat`'s last message, as the server holds them.
async fn last_parts(server: &Binary, chat: &str) -> Vec<Value> {
    let snapshot = get(server, &format!("/api/chats/{chat}")).await;
    snapshot["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["parts"].as_array())
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn an_mcp_call_cut_short_by_kill_9_is_not_repeated() {
    let fx = Fixture::new("cut-short");
    let (model, _) = fake_model().await;
    // Its annotations say read-only and idempotent, but they are not trusted: nobody vouches
    // that running it twice is harmless.
    std::fs::write(
        &fx.config,
        json!({"mcpServers": {"everything": {
            "command": "node",
            "args": [everything_server(), "stdio"],
            "tools": {"trigger-long-running-operation": {"approval": "never"}}
        }}})
        .to_string(),
    )
    .unwrap();
    let tool = "everything__trigger-long-running-operation";
    let first = start(&fx.db, &model, &fx.config).await;
    let mut chunks = chat_stream(&first.base, user("cut", "long 3"));
    let call = next_of(&mut chunks, "tool-input-available", None).await;
    assert_eq!(call["toolName"], tool);
    // Well into the 3 s operation (the call is on disk as running before it starts).
    tokio::time::sleep(Duration::from_millis(700)).await;
    first.kill9();

    let second = start(&fx.db, &model, &fx.config).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let part = loop {
        let parts = last_parts(&second, "cut").await;
        let calls: Vec<&Value> = parts
            .iter()
            .filter(|p| p["type"].as_str().is_some_and(|t| t.ends_with(tool)))
            .collect();
        assert!(calls.len() <= 1, "the model was asked again: {parts:?}");
        if let Some(part) = calls
            .first()
            .filter(|p| p["state"] == "output-error" || p["state"] == "output-available")
        {
            break (*part).clone();
        }
        assert!(
            Instant::now() < deadline,
            "the call never ended: {}",
            get(&second, "/api/chats/cut").await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // It may have taken effect, so it is not repeated, and the model is told.
    assert_eq!(
        part["toolCallId"], call["toolCallId"],
        "the very call, not a new one"
    );
    assert_eq!(part["state"], "output-error", "{part}");
    assert!(
        part["errorText"]
            .as_str()
            .unwrap()
            .contains("may or may not have taken effect"),
        "{part}"
    );
}
