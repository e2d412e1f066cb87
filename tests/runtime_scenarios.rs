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

#[tokio::test(start_paused = true)]
async fn weather_runs_without_approval_in_one_response() {
    let rt = runtime();
    let (_, entries) = start(&rt, "c", "What's the weather in Tokyo?").await;
    assert_eq!(
        describe(&entries),
        with_final(lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 get_weather",
            r#"tool-input-available call-1 {"location":"Tokyo"}"#,
            "finish-step",
            "tool-output-available call-1",
        ]))
    );
    let output = output_of(&entries, "call-1");
    assert_eq!(output["source"], "offline");
    let text = text_of(&entries);
    assert!(text.contains("Tokyo") && text.contains("18"), "{text}");
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn payment_waits_for_approval_then_runs() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "Send $50 to Hanako").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 process_payment",
            r#"tool-input-available call-1 {"amount":50,"currency":"USD","description":"","recipient":"Hanako"}"#,
            "tool-approval-request apv-1 call-1",
            "finish-step",
            "PAUSE",
        ])
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.turn_status(), Some(TurnStatus::AwaitingPerson));
    assert_eq!(
        session.with_wallet(|w| w.balance_cents),
        100_000,
        "nothing paid before approval"
    );

    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&["tool-output-available call-1"]))
    );
    let output = output_of(&second, "call-1");
    assert_eq!(output["success"], true);
    assert_eq!(output["wallet_balance"], 950);
    assert_eq!(output["transaction_id"], "txn-1");
    assert!(text_of(&second).contains("950"), "{}", text_of(&second));
    assert_eq!(session.with_wallet(|w| w.balance_cents), 95_000);
    assert_eq!(session.turn_status(), Some(TurnStatus::Finished));
    assert!(is_well_formed(&history(&rt, "c").await));
}

/// The inbox's news comes once the store shows it. A page that follows the inbox (long polling
/// `inbox_view`, which reads the store) and is woken by the approval that lets a payment run must
/// then read the approval gone, or be woken again when it is. The regression this guards: the
/// inbox moved when the answer was taken, before the payment's commit removed the approval's
/// row, and not again at that commit, so the page kept showing a decided approval.
#[tokio::test(start_paused = true)]
async fn the_inbox_moves_only_once_the_store_shows_the_decision() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    parked(&rt, "c").await;
    assert!(rt.waiting("apv-1").await.unwrap().is_some());
    // The page shows the approval waiting at this version and waits for the next.
    let mut known = rt.inbox.version();
    let receipt = rt.submit("c", &[approve("apv-1")]).await.expect("accepted");
    loop {
        let now = rt.inbox.changed_since(known, Duration::from_secs(20)).await;
        assert_ne!(
            now, known,
            "the page read the approval still waiting, and no news came after the decision"
        );
        known = now;
        if rt.waiting("apv-1").await.unwrap().is_none() {
            break;
        }
    }
    let rest = read_segment(&receipt.log, receipt.from).await;
    assert_eq!(
        describe(&rest),
        with_final(lines(&["tool-output-available call-1"]))
    );
}

#[tokio::test(start_paused = true)]
async fn denial_with_a_reason_reaches_the_model() {
    let rt = runtime();
    start(&rt, "c", "花子さんに50ドル送金してください").await;
    let second = answer(&rt, "c", &[deny("apv-1", Some("金額が多すぎる"))]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&[
            "tool-approval-response apv-1 denied: 金額が多すぎる",
            "tool-output-denied call-1"
        ]))
    );
    assert!(
        text_of(&second).contains("金額が多すぎる"),
        "{}",
        text_of(&second)
    );
    let history = history(&rt, "c").await;
    let Some(HistoryItem::ToolResults { results }) = history.iter().rev().nth(1) else {
        panic!("results before the final answer: {history:?}");
    };
    assert_eq!(
        results[0].outcome,
        Outcome::Denied {
            reason: Some("金額が多すぎる".into()),
            by: None,
        }
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
}

#[tokio::test(start_paused = true)]
async fn approving_with_an_edited_amount_runs_the_edited_call() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let edited = json!({"amount": 20, "recipient": "Hanako", "currency": "USD", "description": ""});
    let second = answer(
        &rt,
        "c",
        &[PersonInput::Approval {
            approval_id: "apv-1".into(),
            decision: ApprovalDecision::ApproveWithEdits {
                args: edited.clone(),
            },
            step_up: None,
        }],
    )
    .await;
    assert_eq!(
        describe(&second),
        with_final(lines(&["tool-output-available call-1"]))
    );
    assert_eq!(output_of(&second, "call-1")["amount"], 20);
    assert_eq!(output_of(&second, "call-1")["wallet_balance"], 980);
    let text = text_of(&second);
    assert!(text.contains("20"), "{text}");
    let history = history(&rt, "c").await;
    let Some(HistoryItem::ToolResults { results }) = history.iter().rev().nth(1) else {
        panic!("{history:?}");
    };
    assert_eq!(results[0].edited_args, Some(edited));
}

#[tokio::test(start_paused = true)]
async fn an_invalid_edit_is_rejected_and_changes_nothing() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let err = rt
        .submit(
            "c",
            &[PersonInput::Approval {
                approval_id: "apv-1".into(),
                decision: ApprovalDecision::ApproveWithEdits {
                    args: json!({"amount": -20, "recipient": "Hanako"}),
                },
                step_up: None,
            }],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, InputError::InvalidEdit { .. }), "{err}");
    let session = rt.session("c").await.unwrap();
    assert!(session.has_pending_approval("apv-1"));
    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(output_of(&second, "call-1")["amount"], 50);
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_approval_expires_distinctly_from_a_denial() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Process a payment of $100 to Alice").await;
    assert_eq!(describe(&first).last().map(String::as_str), Some("PAUSE"));
    // No task waits for the deadline: the runtime's timer wakes the parked turn.
    parked(&rt, "c").await;
    tokio::time::advance(APPROVAL_TIMEOUT + Duration::from_secs(1)).await;
    let rest = read_segment(&log, first.len()).await;
    assert_eq!(
        describe(&rest),
        with_final(lines(&[
            "tool-output-error call-1: Approval expired: nobody answered within 1 minute. Nothing was done."
        ]))
    );
    let text = text_of(&rest);
    assert!(
        text.to_lowercase().contains("expired") || text.contains("time"),
        "{text}"
    );
    let err = rt.submit("c", &[approve("apv-1")]).await.unwrap_err();
    assert!(
        matches!(
            err,
            InputError::ApprovalExpired { .. } | InputError::NoActiveTurn
        ),
        "{err:?}"
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
    let history = history(&rt, "c").await;
    assert!(history.iter().any(|h| matches!(h, HistoryItem::ToolResults { results } if results[0].outcome == Outcome::Expired)));
}

async fn two_payments(rt: &Arc<Runtime>) -> Vec<TurnEntry> {
    let (_, first) = start(rt, "c", "Pay Alice 30 dollars and Bob 40 dollars").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 process_payment",
            r#"tool-input-available call-1 {"amount":30,"currency":"USD","description":"","recipient":"Alice"}"#,
            "tool-input-start call-2 process_payment",
            r#"tool-input-available call-2 {"amount":40,"currency":"USD","description":"","recipient":"Bob"}"#,
            "tool-approval-request apv-1 call-1",
            "tool-approval-request apv-2 call-2",
            "finish-step",
            "PAUSE",
        ])
    );
    first
}

#[tokio::test(start_paused = true)]
async fn parallel_payments_answered_approve_then_deny() {
    let rt = runtime();
    two_payments(&rt).await;
    let a = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&a),
        lines(&["tool-output-available call-1", "PAUSE"])
    );
    let b = answer(&rt, "c", &[deny("apv-2", None)]).await;
    assert_eq!(
        describe(&b),
        with_final(lines(&[
            "tool-approval-response apv-2 denied",
            "tool-output-denied call-2"
        ]))
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 97_000);
}

#[tokio::test(start_paused = true)]
async fn parallel_payments_answered_in_reverse_order() {
    let rt = runtime();
    two_payments(&rt).await;
    let b = answer(&rt, "c", &[deny("apv-2", Some("not Bob"))]).await;
    assert_eq!(
        describe(&b),
        lines(&[
            "tool-approval-response apv-2 denied: not Bob",
            "tool-output-denied call-2",
            "PAUSE"
        ])
    );
    let a = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&a),
        with_final(lines(&["tool-output-available call-1"]))
    );
    let text = text_of(&a);
    assert!(text.contains("Alice") && text.contains("not Bob"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn parallel_payments_both_denied_in_one_answer() {
    let rt = runtime();
    two_payments(&rt).await;
    let both = answer(&rt, "c", &[deny("apv-1", None), deny("apv-2", None)]).await;
    assert_eq!(
        describe(&both),
        with_final(lines(&[
            "tool-approval-response apv-1 denied",
            "tool-output-denied call-1",
            "tool-approval-response apv-2 denied",
            "tool-output-denied call-2"
        ]))
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
}

#[tokio::test(start_paused = true)]
async fn a_sequential_chain_asks_in_its_second_step_and_holds_text_until_the_end() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "check the weather in Paris, then send Bob $5").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 get_weather",
            r#"tool-input-available call-1 {"location":"Paris"}"#,
            "finish-step",
            "tool-output-available call-1",
            "start-step",
            "tool-input-start call-2 process_payment",
            r#"tool-input-available call-2 {"amount":5,"currency":"USD","description":"","recipient":"Bob"}"#,
            "tool-approval-request apv-1 call-2",
            "finish-step",
            "PAUSE",
        ])
    );
    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&["tool-output-available call-2"]))
    );
    let text = text_of(&second);
    assert!(text.contains("Paris") && text.contains("Bob"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn location_approved_then_the_browser_answers() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "Where am I?").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 get_location",
            "tool-input-available call-1 {}",
            "tool-approval-request apv-1 call-1",
            "finish-step",
            "PAUSE",
        ])
    );
    // Pattern B: the approval and the browser's result arrive separately.
    let approved = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(describe(&approved), lines(&["PAUSE"]));
    let result = answer(
        &rt,
        "c",
        &[PersonInput::BrowserResult {
            tool_call_id: "call-1".into(),
            result: BrowserResult::Output {
                output: json!({"latitude": 48.8566, "longitude": 2.3522, "accuracy": 25, "city": "Paris"}),
            },
        }],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&["tool-output-available call-1"]))
    );
    assert!(text_of(&result).contains("Paris"), "{}", text_of(&result));
}

#[tokio::test(start_paused = true)]
async fn location_approval_and_result_in_one_answer() {
    let rt = runtime();
    start(&rt, "c", "私の位置を教えて").await;
    let result = answer(
        &rt,
        "c",
        &[
            approve("apv-1"),
            PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output {
                    output: json!({"latitude": 35.68, "longitude": 139.76, "accuracy": 20}),
                },
            },
        ],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&["tool-output-available call-1"]))
    );
}

#[tokio::test(start_paused = true)]
async fn location_approved_then_the_browser_refuses() {
    let rt = runtime();
    start(&rt, "c", "Where am I?").await;
    answer(&rt, "c", &[approve("apv-1")]).await;
    let result = answer(
        &rt,
        "c",
        &[PersonInput::BrowserResult {
            tool_call_id: "call-1".into(),
            result: BrowserResult::Error {
                message: "User denied Geolocation".into(),
            },
        }],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&[
            "tool-output-error call-1: User denied Geolocation"
        ]))
    );
    assert!(!text_of(&result).is_empty());
}

#[tokio::test(start_paused = true)]
async fn location_denied_never_reaches_the_browser() {
    let rt = runtime();
    start(&rt, "c", "Where am I?").await;
    let result = answer(&rt, "c", &[deny("apv-1", None)]).await;
    assert_eq!(
        describe(&result),
        with_final(lines(&[
            "tool-approval-response apv-1 denied",
            "tool-output-denied call-1"
        ]))
    );
    let err = rt
        .submit(
            "c",
            &[PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output { output: json!({}) },
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(err, InputError::NoActiveTurn);
}

#[tokio::test(start_paused = true)]
async fn a_browser_result_before_approval_is_rejected() {
    let rt = runtime();
    start(&rt, "c", "Where am I?").await;
    let err = rt
        .submit(
            "c",
            &[PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output { output: json!({}) },
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        InputError::NotApprovedYet {
            tool_call_id: "call-1".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn change_bgm_waits_for_the_browser() {
    let rt = runtime();
    let (_, first) = start(&rt, "c", "Switch the music to track 2").await;
    assert_eq!(
        describe(&first),
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 change_bgm",
            r#"tool-input-available call-1 {"track":2}"#,
            "finish-step",
            "PAUSE",
        ])
    );
    let result = answer(
        &rt,
        "c",
        &[PersonInput::BrowserResult {
            tool_call_id: "call-1".into(),
            result: BrowserResult::Output {
                output: json!({"track": 2, "playing": true}),
            },
        }],
    )
    .await;
    assert_eq!(
        describe(&result),
        with_final(lines(&["tool-output-available call-1"]))
    );
    assert!(text_of(&result).contains('2'));
}

#[tokio::test(start_paused = true)]
async fn a_parked_turn_wakes_for_each_answer_of_parallel_approvals() {
    let rt = runtime();
    let first = two_payments(&rt).await;
    parked(&rt, "c").await;
    let log = rt.session("c").await.unwrap().current_log().unwrap();
    let second = answer(&rt, "c", &[approve("apv-2")]).await;
    assert_eq!(
        describe(&second),
        lines(&["tool-output-available call-2", "PAUSE"])
    );
    parked(&rt, "c").await;
    let third = answer(&rt, "c", &[deny("apv-1", None)]).await;
    assert_eq!(describe(&third).last().map(String::as_str), Some("END"));
    // One log from `start` to the end: the parked turn went on where it paused.
    let all = read_all(&log).await;
    assert_eq!(all.len(), first.len() + second.len() + third.len());
    assert_eq!(
        all.iter()
            .filter(|e| matches!(e, TurnEntry::Chunk(Chunk::Start(_))))
            .count(),
        1
    );
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn parked_turns_expire_each_at_their_own_deadline() {
    let rt = runtime();
    // A payment (60 s to answer) parks first; a browser call (10 s) parks after it with an
    // earlier deadline, which the runtime's one timer must not sleep past.
    start(&rt, "pay", "Send $50 to Hanako").await;
    parked(&rt, "pay").await;
    let (music, first) = start(&rt, "music", "Switch the music to track 2").await;
    parked(&rt, "music").await;
    tokio::time::advance(BROWSER_TIMEOUT + Duration::from_secs(1)).await;
    let rest = read_segment(&music, first.len()).await;
    // Ids are the runtime's: the payment's call was call-1.
    assert_eq!(
        describe(&rest)[0],
        "tool-output-error call-2: The browser did not return a result within 10 s."
    );
    let pay = rt.session("pay").await.unwrap();
    assert!(pay.has_pending_approval("apv-1"));
    assert!(pay.is_parked());
    tokio::time::advance(APPROVAL_TIMEOUT).await;
    let pay_log = pay.current_log().unwrap();
    let ended = read_all(&pay_log).await;
    assert!(
        describe(&ended)
            .iter()
            .any(|l| l.contains("Approval expired")),
        "{:?}",
        describe(&ended)
    );
    assert!(!pay.has_pending_approval("apv-1"));
}

#[tokio::test(start_paused = true)]
async fn a_silent_browser_times_out() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "トラック1に変更して").await;
    tokio::time::advance(BROWSER_TIMEOUT + Duration::from_secs(1)).await;
    let rest = read_segment(&log, first.len()).await;
    assert_eq!(
        describe(&rest),
        with_final(lines(&[
            "tool-output-error call-1: The browser did not return a result within 10 s."
        ]))
    );
}

#[tokio::test(start_paused = true)]
async fn interrupt_while_streaming_ends_the_turn_cleanly() {
    let rt = runtime_with(TextTiming::Progressive, Duration::from_millis(30));
    let started = rt
        .start_turn(
            "c",
            UserTurn {
                text: "/lorem 200".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap();
    let mut reader = started.log.subscribe(0);
    let mut seen = 0;
    while let Some(entry) = reader.next().await {
        if matches!(entry, TurnEntry::Chunk(Chunk::TextDelta(_))) {
            seen += 1;
            if seen == 5 {
                break;
            }
        }
    }
    assert!(rt.interrupt("c", "user pressed Stop").await);
    let rest = read_segment(&started.log, reader.position()).await;
    let described = describe(&rest);
    let tail: Vec<&str> = described.iter().map(String::as_str).rev().take(5).collect();
    assert_eq!(
        tail,
        [
            "END",
            "finish other",
            "abort: user pressed Stop",
            "finish-step",
            "text-end txt-1"
        ]
    );
    let words = text_of(&started.log.entries_from(0))
        .split_whitespace()
        .count();
    assert!(words < 200, "stopped early ({words} words)");
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.turn_status(), Some(TurnStatus::Interrupted));
    assert!(is_well_formed(&history(&rt, "c").await));
    // The session stays usable.
    let (_, next) = start(&rt, "c", "What's the weather in Tokyo?").await;
    assert_eq!(describe(&next).last().map(String::as_str), Some("END"));
}

#[tokio::test(start_paused = true)]
async fn interrupt_while_waiting_for_approval_closes_the_call() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Send $50 to Hanako").await;
    parked(&rt, "c").await;
    assert!(rt.interrupt("c", "user pressed Stop").await);
    let rest = read_segment(&log, first.len()).await;
    assert_eq!(
        describe(&rest),
        lines(&[
            "tool-output-error call-1: Interrupted (user pressed Stop) before it ran.",
            "abort: user pressed Stop",
            "finish other",
            "END",
        ])
    );
    assert!(is_well_formed(&history(&rt, "c").await));
    assert_eq!(
        rt.submit("c", &[approve("apv-1")]).await.unwrap_err(),
        InputError::NoActiveTurn
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
}

#[tokio::test(start_paused = true)]
async fn a_new_message_supersedes_a_waiting_turn() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Send $50 to Hanako").await;
    parked(&rt, "c").await;
    let (_, next) = start(&rt, "c", "What's the weather in Paris?").await;
    let old = describe(&read_segment(&log, first.len()).await);
    assert_eq!(old.last().map(String::as_str), Some("END"));
    assert!(
        old.iter()
            .any(|l| l.contains("superseded by a new message")),
        "{old:?}"
    );
    assert_eq!(describe(&next).last().map(String::as_str), Some("END"));
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn a_second_message_while_generating_is_refused() {
    let rt = runtime_with(TextTiming::Progressive, Duration::from_millis(30));
    rt.start_turn(
        "c",
        UserTurn {
            text: "/lorem 100".into(),
            ..UserTurn::default()
        },
        None,
    )
    .await
    .unwrap();
    let err = rt
        .start_turn(
            "c",
            UserTurn {
                text: "hello".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err, TurnError::Busy);
    let empty = rt
        .start_turn(
            "d",
            UserTurn {
                text: "  ".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(empty, TurnError::EmptyMessage);
}

#[tokio::test(start_paused = true)]
async fn insufficient_funds_is_a_tool_error_the_model_reports() {
    let rt = runtime();
    start(&rt, "c", "Send $5000 to Bob").await;
    let second = answer(&rt, "c", &[approve("apv-1")]).await;
    assert_eq!(
        describe(&second),
        with_final(lines(&[
            "tool-output-error call-1: Insufficient funds: the balance is 1000.00 USD, the payment needs 5000.00 USD."
        ]))
    );
    let text = text_of(&second);
    assert!(
        text.to_lowercase().contains("insufficient") || text.contains("1000"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_arguments_become_a_tool_error_without_asking_anyone() {
    let rt = runtime();
    let (_, entries) = start(&rt, "c", "Send $2000000000 to Bob").await;
    let described = describe(&entries);
    assert_eq!(
        described[0..3],
        lines(&[
            "start msg-1",
            "start-step",
            "tool-input-start call-1 process_payment"
        ])
    );
    assert_eq!(
        described[3],
        "tool-input-error call-1: Invalid arguments for process_payment: $.amount: must be at most 1000000000"
    );
    assert!(
        !described
            .iter()
            .any(|l| l.starts_with("tool-approval-request"))
    );
    assert_eq!(described.last().map(String::as_str), Some("END"));
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn forged_duplicate_unknown_and_foreign_approvals_are_rejected() {
    let rt = runtime();
    start(&rt, "a", "Send $50 to Hanako").await;
    start(&rt, "b", "Send $10 to Taro").await;
    let session_a = rt.session("a").await.unwrap();
    let session_b = rt.session("b").await.unwrap();
    let before_a = session_a.snapshot();
    let before_b = session_b.snapshot();

    // Unknown (forged) id.
    assert_eq!(
        rt.submit("a", &[approve("apv-999")]).await.unwrap_err(),
        InputError::UnknownApproval {
            approval_id: "apv-999".into()
        }
    );
    // Chat b's approval sent to chat a.
    assert_eq!(
        rt.submit("a", &[approve("apv-2")]).await.unwrap_err(),
        InputError::ApprovalOfOtherChat {
            approval_id: "apv-2".into()
        }
    );
    // A chat that does not exist.
    assert_eq!(
        rt.submit("nope", &[approve("apv-1")]).await.unwrap_err(),
        InputError::ApprovalOfOtherChat {
            approval_id: "apv-1".into()
        }
    );
    // One good and one bad answer together: nothing applies.
    assert!(matches!(
        rt.submit("a", &[approve("apv-1"), approve("apv-404")])
            .await,
        Err(InputError::UnknownApproval { .. })
    ));
    // The same approval twice in one request.
    assert_eq!(
        rt.submit("a", &[approve("apv-1"), deny("apv-1", None)])
            .await
            .unwrap_err(),
        InputError::ApprovalAlreadyAnswered {
            approval_id: "apv-1".into()
        }
    );
    // A browser result for a server tool.
    assert!(matches!(
        rt.submit(
            "a",
            &[PersonInput::BrowserResult {
                tool_call_id: "call-1".into(),
                result: BrowserResult::Output { output: json!({}) },
            }]
        )
        .await,
        Err(InputError::NotABrowserTool { .. })
    ));
    assert_eq!(
        session_a.snapshot(),
        before_a,
        "rejected answers change nothing"
    );
    assert_eq!(session_b.snapshot(), before_b);

    // The real answer works once; a replay is refused.
    answer(&rt, "a", &[approve("apv-1")]).await;
    assert_eq!(session_a.with_wallet(|w| w.balance_cents), 95_000);
    let replay = rt.submit("a", &[approve("apv-1")]).await.unwrap_err();
    assert!(
        matches!(
            replay,
            InputError::ApprovalAlreadyAnswered { .. } | InputError::NoActiveTurn
        ),
        "{replay:?}"
    );
    assert_eq!(session_a.with_wallet(|w| w.balance_cents), 95_000);
    assert_eq!(session_b.with_wallet(|w| w.balance_cents), 100_000);
}

#[tokio::test(start_paused = true)]
async fn progressive_mode_streams_text_of_every_step() {
    let rt = runtime_with(TextTiming::Progressive, Duration::ZERO);
    let (_, entries) = start(&rt, "c", "What's the weather in Tokyo?").await;
    assert_eq!(describe(&entries).last().map(String::as_str), Some("END"));
    assert!(text_of(&entries).contains("Tokyo"));
}

#[tokio::test(start_paused = true)]
async fn the_session_record_mirrors_what_the_client_saw() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let record = rt.session("c").await.unwrap().snapshot();
    assert_eq!(record.messages.len(), 2);
    let messages = record.messages.to_vec().unwrap();
    let assistant = &messages[1];
    assert_eq!(assistant.id, "msg-1");
    let tool = assistant.tool_parts().next().expect("a tool part");
    assert_eq!(
        tool.state,
        countersign::protocol::ToolState::ApprovalRequested
    );
    assert_eq!(tool.approval.as_ref().map(|a| a.id.as_str()), Some("apv-1"));
    let listed = rt.list_sessions().await.unwrap();
    assert_eq!(listed, ["c"]);
}

/// A store's hook that records what each commit carried and can hold commits until released;
/// `inner` keeps the chats ([`runtime_on`] puts it in front of it).
#[derive(Default)]
struct HoldingStore {
    inner: Arc<MemoryStore>,
    held: std::sync::atomic::AtomicBool,
    release: tokio::sync::Notify,
    commits: std::sync::Mutex<Vec<(Vec<AuditKind>, i64)>>,
}

impl HoldingStore {
    /// Waits while commits are held, then notes what this one carries.
    async fn hold_and_note(&self, record: &SessionRecord, audit: &[AuditEvent]) {
        if self.held.load(std::sync::atomic::Ordering::SeqCst) {
            self.release.notified().await;
        }
        self.commits.lock().unwrap().push((
            audit.iter().map(|e| e.kind).collect(),
            record.wallet.balance_cents,
        ));
    }
}

impl Hook for HoldingStore {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if let Call::Commit { record, audit, .. } = call {
            self.hold_and_note(record, audit).await;
        }
        run.await
    }
}

fn runtime_on(store: Arc<HoldingStore>) -> Arc<Runtime> {
    let tools = ToolRegistry::standard(&ToolSettings {
        approval_timeout: APPROVAL_TIMEOUT,
        browser_timeout: BROWSER_TIMEOUT,
        weather: WeatherSource::Offline,
    });
    Runtime::new(
        Arc::new(DemoModel::new(Duration::ZERO)),
        tools,
        Arc::new(TokioClock::starting_at(1_800_000_000_000)),
        Arc::new(SequentialIds::default()),
        Arc::new(Delegate::new(store.inner.clone(), store)),
        RuntimeSettings::default(),
    )
}

/// A chat whose payment waits for approval, on a store that now holds every commit (nothing
/// committed so far is listed).
async fn payment_waiting_on_a_held_store() -> (Arc<HoldingStore>, Arc<Runtime>) {
    let store = Arc::new(HoldingStore::default());
    let rt = runtime_on(store.clone());
    start(&rt, "c", "Send $50 to Hanako").await;
    store.commits.lock().unwrap().clear();
    store.held.store(true, std::sync::atomic::Ordering::SeqCst);
    (store, rt)
}

impl HoldingStore {
    /// Lets held commits (and every later one) through.
    fn let_through(&self) {
        self.held.store(false, std::sync::atomic::Ordering::SeqCst);
        self.release.notify_waiters();
    }
}

fn has_output(entries: &[TurnEntry]) -> bool {
    entries
        .iter()
        .any(|e| matches!(e, TurnEntry::Chunk(Chunk::ToolOutputAvailable(_))))
}

#[tokio::test(start_paused = true)]
async fn a_tool_output_reaches_its_readers_before_the_model_goes_on() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let receipt = rt.submit("c", &[approve("apv-1")]).await.expect("accepted");
    let is_output = |e: &TurnEntry| matches!(e, TurnEntry::Chunk(Chunk::ToolOutputAvailable(_)));
    let mut reader = receipt.log.subscribe(receipt.from);
    while let Some(entry) = reader.next().await {
        if is_output(&entry) {
            break;
        }
    }
    // The reader woke for the output; the turn has not taken the thread back since.
    let logged = receipt.log.entries_from(0);
    let after: Vec<_> = logged
        .iter()
        .skip_while(|e| !is_output(e))
        .skip(1)
        .collect();
    assert!(
        logged.iter().any(is_output) && after.is_empty(),
        "logged after the output before its reader ran: {after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_turn_ends_in_its_log_only_once_its_last_commit_is_on_disk() {
    let store = Arc::new(HoldingStore::default());
    store.held.store(true, std::sync::atomic::Ordering::SeqCst);
    let rt = runtime_on(store.clone());
    let started = rt
        .start_turn(
            "c",
            UserTurn {
                text: "Hello".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .expect("turn starts");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let so_far = started.log.entries_from(0);
    assert!(
        so_far
            .iter()
            .any(|e| matches!(e, TurnEntry::Chunk(Chunk::Finish(_)))),
        "the turn has finished: {so_far:?}"
    );
    assert!(
        !so_far.iter().any(|e| matches!(e, TurnEntry::End)),
        "its end ([DONE]) waits for the commit"
    );

    store.let_through();
    let all = read_all(&started.log).await;
    assert!(matches!(all.last(), Some(TurnEntry::End)));
    assert_eq!(store.commits.lock().unwrap().len(), 1);
    let stored = store.inner.load("c").await.unwrap().expect("committed");
    assert_eq!(
        stored.record.turn.map(|t| t.status),
        Some(TurnStatus::Finished)
    );
}

#[tokio::test(start_paused = true)]
async fn an_approved_payment_is_committed_with_its_result_before_its_output() {
    let (store, rt) = payment_waiting_on_a_held_store().await;

    // The approval of a payment needs no commit of its own: the call answer returns at once.
    let receipt = tokio::time::timeout(Duration::from_secs(1), rt.submit("c", &[approve("apv-1")]))
        .await
        .expect("an approval of an in-record tool does not wait for the disk")
        .expect("input accepted");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !has_output(&receipt.log.entries_from(receipt.from)),
        "the output waits for the commit"
    );
    assert!(store.commits.lock().unwrap().is_empty());

    store.let_through();
    let rest = read_segment(&receipt.log, receipt.from).await;
    assert!(has_output(&rest));
    let commits = store.commits.lock().unwrap().clone();
    assert_eq!(
        commits[0],
        (vec![AuditKind::Approved, AuditKind::Executed], 95_000),
        "approval, payment and result in one commit: {commits:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_denial_is_committed_before_the_turn_hears_of_it() {
    let (store, rt) = payment_waiting_on_a_held_store().await;

    let submit = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.submit("c", &[deny("apv-1", Some("no"))]).await })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!submit.is_finished(), "the denial waits for its commit");
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.turn_status(), Some(TurnStatus::AwaitingPerson));

    store.let_through();
    let receipt = submit.await.unwrap().expect("input accepted");
    read_segment(&receipt.log, receipt.from).await;
    let commits = store.commits.lock().unwrap().clone();
    assert_eq!(
        commits[0],
        (vec![AuditKind::Denied], 100_000),
        "{commits:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_leave_memory_after_two_sweeps_and_come_back_from_the_store() {
    let rt = runtime();
    start(&rt, "done", "What's the weather in Tokyo?").await;
    start(&rt, "waiting", "Send $50 to Hanako").await;
    // Let the finished turn's task end (and the waiting one's park).
    tokio::time::sleep(Duration::from_millis(10)).await;
    let held = rt.session("held").await.unwrap();
    // The parked payment left memory as soon as its task was gone (ADR 0011).
    assert_eq!(rt.live_sessions(), 2);

    let mut marked = std::collections::HashMap::new();
    assert_eq!(rt.evict_idle(&mut marked), 0, "the first sweep only marks");
    assert_eq!(rt.evict_idle(&mut marked), 1, "the finished chat leaves");
    assert_eq!(rt.live_sessions(), 1, "a held session stays");
    drop(held);
    assert_eq!(
        rt.evict_idle(&mut marked),
        0,
        "released just now: marked first"
    );
    assert_eq!(rt.evict_idle(&mut marked), 1);
    assert_eq!(rt.live_sessions(), 0);

    // The evicted chat comes back whole from the store and takes a new turn.
    let before = history(&rt, "done").await;
    assert!(before.len() >= 3, "{before:?}");
    assert!(is_well_formed(&before));
    let (_, next) = start(&rt, "done", "What's the weather in Paris?").await;
    assert!(matches!(next.last(), Some(TurnEntry::End)));
    assert!(history(&rt, "done").await.len() > before.len());

    // The waiting turn comes back from the store and can still be answered.
    for _ in 0..3 {
        rt.evict_idle(&mut marked);
    }
    let answered = answer(&rt, "waiting", &[approve("apv-1")]).await;
    assert!(has_output(&answered));
}

#[tokio::test(start_paused = true)]
async fn a_parked_turn_leaves_memory_and_comes_back_with_its_log_exactly() {
    let rt = runtime();
    let first = {
        let (_, first) = start(&rt, "c", "Pay Alice 30 dollars and Bob 40 dollars").await;
        first
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        rt.live_sessions(),
        0,
        "nothing of the waiting chat stays in memory"
    );

    // Back from the store: parked, the same log entry for entry, answers pick up there.
    let session = rt.session("c").await.unwrap();
    assert!(session.is_parked());
    let log = session.current_log().unwrap();
    assert_eq!(log.entries_from(0), first);
    drop((session, log));
    let receipt = rt.submit("c", &[approve("apv-2")]).await.unwrap();
    assert_eq!(receipt.from, first.len());
    let after_one = read_segment(&receipt.log, receipt.from).await;
    assert_eq!(
        describe(&after_one),
        lines(&["tool-output-available call-2", "PAUSE"])
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0, "parked again, gone again");

    let receipt = rt.submit("c", &[approve("apv-1")]).await.unwrap();
    assert_eq!(receipt.from, first.len() + after_one.len());
    let rest = read_segment(&receipt.log, receipt.from).await;
    assert!(matches!(rest.last(), Some(TurnEntry::End)));
    assert!(has_output(&rest));
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn whose_a_parked_chat_is_is_known_without_bringing_it_back() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0);
    // A route's ownership check reads the chat's owner, not the chat (ADR 0038): the waiting
    // chat stays in the store, however long it is.
    assert_eq!(rt.chat_owner("c").await.unwrap(), Some(None));
    assert_eq!(rt.live_sessions(), 0, "the check loaded the chat");
    assert_eq!(rt.chat_owner("never").await.unwrap(), None);
    // The answer still finds it.
    let receipt = rt.submit("c", &[approve("apv-1")]).await.unwrap();
    assert!(has_output(&read_segment(&receipt.log, receipt.from).await));
}

#[tokio::test(start_paused = true)]
async fn the_deadline_of_a_turn_that_left_memory_brings_it_back_to_expire() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0);
    tokio::time::advance(APPROVAL_TIMEOUT + Duration::from_secs(1)).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let history = history(&rt, "c").await;
    assert!(
        history.iter().any(|h| matches!(h, HistoryItem::ToolResults { results } if results[0].outcome == Outcome::Expired)),
        "{history:?}"
    );
    let log = rt.session("c").await.unwrap().current_log().unwrap();
    assert!(log.is_ended());
    assert_eq!(
        rt.submit("c", &[approve("apv-1")]).await.unwrap_err(),
        InputError::ApprovalExpired {
            approval_id: "apv-1".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_keeps_a_parked_turns_log_sees_what_follows_after_it_came_back() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Send $50 to Hanako").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0);
    // The answer brings the session back; the turn continues the log this reader holds.
    rt.submit("c", &[approve("apv-1")]).await.unwrap();
    let rest = read_segment(&log, first.len()).await;
    assert!(has_output(&rest));
}

#[tokio::test(start_paused = true)]
async fn a_session_that_ran_a_turn_since_it_was_marked_stays_another_sweep() {
    let rt = runtime();
    start(&rt, "c", "What's the weather in Tokyo?").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut marked = std::collections::HashMap::new();
    rt.evict_idle(&mut marked);
    start(&rt, "c", "What's the weather in Paris?").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.evict_idle(&mut marked), 0, "a new turn since the mark");
    assert_eq!(rt.evict_idle(&mut marked), 1);
}
