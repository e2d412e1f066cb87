//! Scenario tests of the agent runtime against the offline demo model: the exact chunk sequence
//! of every approval, browser-tool, interrupt and error scenario, plus the gate's refusals.
//!
//! Ids are deterministic (`SequentialIds`) and time is tokio's paused clock, so each sequence is
//! asserted exactly; text content is checked separately where it carries meaning.
#![cfg(feature = "ssr")]

use std::{sync::Arc, time::Duration};

use countersign::models::demo::DemoModel;
use countersign::{
    agent::{
        ApprovalDecision, BrowserResult, InputError, PersonInput, Runtime, RuntimeSettings,
        TextTiming, TurnEntry, TurnError, UserTurn,
        clock::{SequentialIds, TokioClock},
        history::{HistoryItem, Outcome, is_well_formed},
        session::{SessionRecord, TurnLog, TurnStatus},
        store::delegate::{Call, Delegate, Hook},
        store::{AuditEvent, AuditKind, MemoryStore, SessionStore, StoreError},
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    },
    protocol::{Chunk, Dialect},
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

const APPROVAL_TIMEOUT: Duration = Duration::from_secs(60);
const BROWSER_TIMEOUT: Duration = Duration::from_secs(10);

#[path = "runtime_scenarios/approvals.rs"]
mod approvals;
#[path = "runtime_scenarios/browser.rs"]
mod browser;
#[path = "runtime_scenarios/commits.rs"]
mod commits;
#[path = "runtime_scenarios/interrupts.rs"]
mod interrupts;
#[path = "runtime_scenarios/memory.rs"]
mod memory;
#[path = "runtime_scenarios/refusals.rs"]
mod refusals;

fn runtime_with(timing: TextTiming, delay: Duration) -> Arc<Runtime> {
    let tools = ToolRegistry::standard(&ToolSettings {
        approval_timeout: APPROVAL_TIMEOUT,
        browser_timeout: BROWSER_TIMEOUT,
        weather: WeatherSource::Offline,
    });
    Runtime::new(
        Arc::new(DemoModel::new(delay)),
        tools,
        Arc::new(TokioClock::starting_at(1_800_000_000_000)),
        Arc::new(SequentialIds::default()),
        Arc::new(MemoryStore::default()),
        RuntimeSettings {
            text_timing: timing,
            ..RuntimeSettings::default()
        },
    )
}

fn runtime() -> Arc<Runtime> {
    runtime_with(TextTiming::Hold, Duration::ZERO)
}

/// A compact, readable line per log entry; consecutive text deltas are joined into one line.
fn describe(entries: &[TurnEntry]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for entry in entries {
        let line = match entry {
            TurnEntry::Pause => "PAUSE".to_string(),
            TurnEntry::End => "END".to_string(),
            TurnEntry::Chunk(chunk) => match chunk {
                Chunk::TextDelta(d) => {
                    let head = format!("text {}", d.id);
                    if lines.last().is_some_and(|l| l == &head) {
                        continue;
                    }
                    head
                }
                Chunk::ReasoningDelta(d) => format!("reasoning {}", d.id),
                other => {
                    let mut v = other.to_value(Dialect::Full).unwrap_or(Value::Null);
                    // Keys by name, whatever order the server's maps keep.
                    v.sort_all_objects();
                    let kind = v["type"].as_str().unwrap_or("?").to_string();
                    match other {
                        Chunk::Start(_) => {
                            format!("start {}", v["messageId"].as_str().unwrap_or(""))
                        }
                        Chunk::TextStart(_) | Chunk::TextEnd(_) => {
                            format!("{kind} {}", v["id"].as_str().unwrap_or(""))
                        }
                        Chunk::ToolInputStart(_) => format!(
                            "tool-input-start {} {}",
                            v["toolCallId"].as_str().unwrap_or(""),
                            v["toolName"].as_str().unwrap_or("")
                        ),
                        Chunk::ToolInputAvailable(_) => format!(
                            "tool-input-available {} {}",
                            v["toolCallId"].as_str().unwrap_or(""),
                            v["input"]
                        ),
                        Chunk::ToolInputError(_) => format!(
                            "tool-input-error {}: {}",
                            v["toolCallId"].as_str().unwrap_or(""),
                            v["errorText"].as_str().unwrap_or("")
                        ),
                        Chunk::ToolApprovalRequest(_) => format!(
                            "tool-approval-request {} {}",
                            v["approvalId"].as_str().unwrap_or(""),
                            v["toolCallId"].as_str().unwrap_or("")
                        ),
                        Chunk::ToolApprovalResponse(_) => {
                            let head = format!(
                                "tool-approval-response {} {}",
                                v["approvalId"].as_str().unwrap_or(""),
                                if v["approved"] == true {
                                    "approved"
                                } else {
                                    "denied"
                                }
                            );
                            match v["reason"].as_str() {
                                Some(reason) => format!("{head}: {reason}"),
                                None => head,
                            }
                        }
                        Chunk::ToolOutputAvailable(_) => format!(
                            "tool-output-available {}",
                            v["toolCallId"].as_str().unwrap_or("")
                        ),
                        Chunk::ToolOutputError(_) => format!(
                            "tool-output-error {}: {}",
                            v["toolCallId"].as_str().unwrap_or(""),
                            v["errorText"].as_str().unwrap_or("")
                        ),
                        Chunk::ToolOutputDenied(_) => format!(
                            "tool-output-denied {}",
                            v["toolCallId"].as_str().unwrap_or("")
                        ),
                        Chunk::Finish(_) => {
                            format!("finish {}", v["finishReason"].as_str().unwrap_or(""))
                        }
                        Chunk::Abort(_) => format!("abort: {}", v["reason"].as_str().unwrap_or("")),
                        Chunk::Error(_) => {
                            format!("error: {}", v["errorText"].as_str().unwrap_or(""))
                        }
                        _ => kind,
                    }
                }
            },
        };
        lines.push(line);
    }
    lines
}

/// Reads the log from `from` until a pause or the end (inclusive); returns the entries.
async fn read_segment(log: &Arc<TurnLog>, from: usize) -> Vec<TurnEntry> {
    let mut reader = log.subscribe(from);
    let mut out = Vec::new();
    while let Some(entry) = tokio::time::timeout(Duration::from_secs(3600), reader.next())
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

/// Reads the whole log of a turn, from its first entry to its end.
async fn read_all(log: &Arc<TurnLog>) -> Vec<TurnEntry> {
    let mut reader = log.subscribe(0);
    let mut out = Vec::new();
    while let Some(entry) = tokio::time::timeout(Duration::from_secs(3600), reader.next())
        .await
        .expect("the turn made no progress")
    {
        out.push(entry);
    }
    out
}

/// All text of the entries, concatenated.
fn text_of(entries: &[TurnEntry]) -> String {
    entries
        .iter()
        .filter_map(|e| match e {
            TurnEntry::Chunk(Chunk::TextDelta(d)) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect()
}

fn output_of(entries: &[TurnEntry], call: &str) -> Value {
    entries
        .iter()
        .find_map(|e| match e {
            TurnEntry::Chunk(c @ Chunk::ToolOutputAvailable(_)) => {
                let v = c.to_value(Dialect::Full)?;
                (v["toolCallId"] == call).then(|| v["output"].clone())
            }
            _ => None,
        })
        .unwrap_or(Value::Null)
}

/// Whether a tool output is among the entries.
fn has_output(entries: &[TurnEntry]) -> bool {
    entries
        .iter()
        .any(|e| matches!(e, TurnEntry::Chunk(Chunk::ToolOutputAvailable(_))))
}

fn lines(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn start(rt: &Arc<Runtime>, chat: &str, text: &str) -> (Arc<TurnLog>, Vec<TurnEntry>) {
    let started = rt
        .start_turn(
            chat,
            UserTurn {
                text: text.into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .expect("turn starts");
    let first = read_segment(&started.log, 0).await;
    (started.log, first)
}

fn approve(id: &str) -> PersonInput {
    PersonInput::Approval {
        approval_id: id.into(),
        decision: ApprovalDecision::Approve,
        step_up: None,
    }
}

fn deny(id: &str, reason: Option<&str>) -> PersonInput {
    PersonInput::Approval {
        approval_id: id.into(),
        decision: ApprovalDecision::Deny {
            reason: reason.map(str::to_string),
        },
        step_up: None,
    }
}

async fn answer(rt: &Arc<Runtime>, chat: &str, inputs: &[PersonInput]) -> Vec<TurnEntry> {
    let receipt = rt.submit(chat, inputs).await.expect("input accepted");
    read_segment(&receipt.log, receipt.from).await
}

/// Waits (without letting time pass) until `chat`'s turn has parked: it paused and its task
/// returned. Fails if it does not park within 100 scheduler turns.
async fn parked(rt: &Arc<Runtime>, chat: &str) {
    let session = rt.session(chat).await.unwrap();
    for _ in 0..100 {
        if session.is_parked() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the turn of {chat} did not park");
}

async fn history(rt: &Arc<Runtime>, chat: &str) -> Vec<HistoryItem> {
    rt.session(chat)
        .await
        .unwrap()
        .snapshot()
        .history
        .to_vec()
        .unwrap()
}

const FINAL_TEXT: [&str; 7] = [
    "start-step",
    "text-start txt-1",
    "text txt-1",
    "text-end txt-1",
    "finish-step",
    "finish stop",
    "END",
];

fn with_final(mut head: Vec<String>) -> Vec<String> {
    head.extend(lines(&FINAL_TEXT));
    head
}
