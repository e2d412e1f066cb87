//! A tool defined only here, in one place, goes through everything a built-in tool does: the
//! model is told about it (its declaration, and the system prompt written from the registry),
//! the gate asks the person before it runs, the sentence they countersign comes from its own
//! presentation, and the state it keeps between calls is in the session record and survives a
//! restart of the runtime on the same database. Nothing outside this file names it.
#![cfg(feature = "ssr")]

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use async_trait::async_trait;
use countersign::{
    agent::{
        ApprovalDecision, PersonInput, Runtime, RuntimeSettings, Transport, TurnEntry, UserTurn,
        clock::{SequentialIds, SystemClock},
        history::{HistoryItem, Outcome, ToolCall},
        model::{Model, ModelEvent, ModelRequest, ModelStream, Usage},
        store::{AuditKind, sqlite::SqliteStore},
        tools::{
            ApprovalPolicy, Executor, ServerTool, ToolContext, ToolEffects, ToolError,
            ToolLocation, ToolRegistry, ToolSpec,
        },
    },
    protocol::{Chunk, FinishReason, ToolPresentation},
};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool: keeps notes for the person, one per call, after they agree.
struct Notebook;

/// What the notebook keeps between calls.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Notes {
    kept: Vec<String>,
}

impl Notebook {
    fn spec() -> ToolSpec {
        ToolSpec {
            name: "keep_note".into(),
            description: "Keep a short note for the person. Needs their approval.".into(),
            purpose: "keep notes for the person".into(),
            presentation: ToolPresentation::new("Notebook", "Keep the note “{text}”")
                .label("count", "notes kept"),
            parameters: json!({
                "type": "object",
                "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200}},
                "required": ["text"],
                "additionalProperties": false
            }),
            location: ToolLocation::Server,
            approval: ApprovalPolicy::Always,
            approval_timeout: Duration::from_secs(60),
            result_timeout: Duration::from_secs(10),
            acknowledgment: None,
            server: None,
            pays: None,
            names: Vec::new(),
            effects: ToolEffects::InRecord,
        }
    }
}

#[async_trait]
impl ServerTool for Notebook {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let text = args["text"].as_str().unwrap_or_default().to_owned();
        let count = ctx.with_state(|notes: &mut Notes| {
            notes.kept.push(text);
            notes.kept.len()
        })?;
        Ok(json!({"count": count}))
    }
}

/// A model that asks for a note on the person's words and then reports the count; it records
/// what it was told.
#[derive(Default)]
struct Scribe {
    told: Mutex<Vec<ModelRequest>>,
}

impl Model for Scribe {
    fn label(&self) -> String {
        "scribe".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let reply = match request.history.last() {
            Some(HistoryItem::User { text, .. }) => ModelEvent::ToolCall(ToolCall {
                id: String::new(),
                name: "keep_note".into(),
                args: json!({"text": text}),
                provider_data: None,
            }),
            Some(HistoryItem::ToolResults { results }) => match &results[0].outcome {
                Outcome::Output { output } => {
                    ModelEvent::TextDelta(format!("You have {} notes.", output["count"]))
                }
                other => ModelEvent::TextDelta(format!("Not kept: {other:?}")),
            },
            _ => ModelEvent::TextDelta("?".into()),
        };
        self.told.lock().unwrap().push(request);
        futures::stream::iter([
            Ok(reply),
            Ok(ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage::default(),
            }),
        ])
        .boxed()
    }
}

fn runtime(model: Arc<Scribe>, store: SqliteStore) -> Arc<Runtime> {
    let mut tools = ToolRegistry::default();
    tools.register(Notebook::spec(), Executor::Server(Arc::new(Notebook)));
    Runtime::new(
        model,
        tools,
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        Arc::new(store),
        RuntimeSettings::default(),
    )
}

/// Reads the log from `from` to the next pause or the end.
async fn segment(log: &Arc<countersign::agent::TurnLog>, from: usize) -> Vec<TurnEntry> {
    let mut reader = log.subscribe(from);
    let mut out = Vec::new();
    while let Some(entry) = tokio::time::timeout(Duration::from_secs(10), reader.next())
        .await
        .expect("the turn made no progress")
    {
        let stop = matches!(entry, TurnEntry::Pause | TurnEntry::End);
        out.push(entry);
        if stop {
            break;
        }
    }
    out
}

/// Sends `text`, approves the note and returns the model's answer.
async fn note(rt: &Arc<Runtime>, text: &str) -> String {
    let started = rt
        .start_turn(
            "notes",
            UserTurn {
                message_id: None,
                text: text.into(),
                attachments: Vec::new(),
                transport: Transport::Sse,
                ask_again: None,
            },
            None,
        )
        .await
        .expect("the turn starts");
    let asked = segment(&started.log, 0).await;
    let (approval_id, input) = asked
        .iter()
        .find_map(|e| match e {
            TurnEntry::Chunk(Chunk::ToolApprovalRequest(r)) => Some(r.approval_id.clone()),
            _ => None,
        })
        .zip(asked.iter().find_map(|e| match e {
            TurnEntry::Chunk(Chunk::ToolInputAvailable(c)) => Some(c.input.clone()),
            _ => None,
        }))
        .expect("the note waits for the person");
    assert_eq!(
        Notebook::spec().presentation.sentence(&input),
        format!("Keep the note “{text}”")
    );
    let receipt = rt
        .submit(
            "notes",
            &[PersonInput::Approval {
                approval_id,
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .expect("the approval is accepted");
    segment(&receipt.log, receipt.from)
        .await
        .iter()
        .filter_map(|e| match e {
            TurnEntry::Chunk(Chunk::TextDelta(d)) => Some(d.delta.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_defined_in_one_place_is_told_gated_presented_and_keeps_its_state() {
    let path = std::env::temp_dir().join(format!("countersign-own-tool-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let model = Arc::new(Scribe::default());

    let rt = runtime(model.clone(), SqliteStore::open(&path).unwrap());
    assert_eq!(note(&rt, "buy milk").await, "You have 1 notes.");
    assert_eq!(note(&rt, "call Ken").await, "You have 2 notes.");
    {
        let told = model.told.lock().unwrap();
        let first = &told[0];
        assert_eq!(first.tools.len(), 1);
        assert_eq!(first.tools[0].name, "keep_note");
        assert!(
            first
                .system
                .contains("You can keep notes for the person (keep_note)."),
            "{}",
            first.system
        );
        assert!(
            first
                .system
                .contains("Calls to keep_note always need the person's approval"),
            "{}",
            first.system
        );
    }
    let audit = rt
        .store
        .audit(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.event.tool == "keep_note")
        .map(|r| r.event.kind)
        .collect::<Vec<_>>();
    assert!(audit.contains(&AuditKind::Approved), "{audit:?}");
    drop(rt);

    // The same database after a restart: the notebook still has both notes.
    let rt = runtime(model.clone(), SqliteStore::open(&path).unwrap());
    let record = rt.session("notes").await.unwrap().snapshot();
    assert_eq!(
        record.tool_state["keep_note"],
        json!({"kept": ["buy milk", "call Ken"]})
    );
    assert_eq!(note(&rt, "water plants").await, "You have 3 notes.");
    drop(rt);
    let _ = std::fs::remove_file(&path);
}
