use std::sync::atomic::{AtomicU64, Ordering};

use futures::executor::block_on;
use serde_json::json;

use super::cutter::call;
use super::*;
use crate::{
    agent::{
        chunk_log::ChunkLog,
        history::{AssistantPart, Outcome, ToolResult},
    },
    protocol::Dialect,
};

// ----- helpers ------------------------------------------------------------------------------

fn out(n: u64, chunk: Value) -> String {
    line(n, "sse", "out", chunk)
}

fn line(n: u64, mode: &str, direction: &str, chunk: Value) -> String {
    json!({
        "timestamp": 1_767_225_600_000_i64 + n as i64,
        "session": "chat-1",
        "mode": mode,
        "direction": direction,
        "sequence_number": n,
        "chunk": chunk,
    })
    .to_string()
}

fn text(t: &str) -> ModelEvent {
    ModelEvent::TextDelta(t.into())
}

fn think(t: &str) -> ModelEvent {
    ModelEvent::ReasoningDelta {
        text: t.into(),
        provider_data: None,
    }
}

fn tool(name: &str, args: Value) -> ModelEvent {
    call(name.into(), args)
}

fn finish(reason: FinishReason) -> ModelEvent {
    ModelEvent::Finish {
        reason,
        usage: Usage::default(),
    }
}

/// The history the runner has when it asks for `step` of `turn`: earlier turns complete
/// (user, a tool step, its results, a text step), this turn's earlier steps with results.
fn history(turn: usize, step: usize) -> Vec<HistoryItem> {
    let mut items = Vec::new();
    let call_step = || HistoryItem::Assistant {
        parts: vec![AssistantPart::ToolCall {
            call: ToolCall {
                id: "call-1".into(),
                name: "get_weather".into(),
                args: json!({}),
                provider_data: None,
            },
        }],
    };
    let results = || HistoryItem::ToolResults {
        results: vec![ToolResult {
            call_id: "call-1".into(),
            name: "get_weather".into(),
            outcome: Outcome::Expired,
            edited_args: None,
        }],
    };
    for _ in 0..turn {
        items.push(HistoryItem::user("earlier"));
        items.push(call_step());
        items.push(results());
        items.push(HistoryItem::Assistant {
            parts: vec![AssistantPart::Text {
                text: "ok".into(),
                provider_data: None,
            }],
        });
    }
    items.push(HistoryItem::user("now"));
    for _ in 0..step {
        items.push(call_step());
        items.push(results());
    }
    items
}

fn play(model: &ReplayModel, turn: usize, step: usize) -> Vec<ModelEvent> {
    let request = ModelRequest {
        session_id: "chat-1".into(),
        system: String::new(),
        history: history(turn, step).into(),
        tools: Vec::new(),
    };
    block_on(model.stream(request).collect::<Vec<_>>())
        .into_iter()
        .map(|e| e.unwrap())
        .collect()
}

/// A server log of three turns: weather (a tool step, then a text step); a payment that
/// waited for approval, recorded as the two SSE responses the browser got (both open with
/// `start` of the same message); a short answer cut by the token limit.
fn server_recording() -> String {
    let chunks = vec![
        // Turn 1.
        json!({"type": "start", "messageId": "msg-1"}),
        json!({"type": "start-step"}),
        json!({"type": "reasoning-start", "id": "r1"}),
        json!({"type": "reasoning-delta", "id": "r1", "delta": "Weather: use the tool."}),
        json!({"type": "reasoning-end", "id": "r1"}),
        json!({"type": "tool-input-start", "toolCallId": "call-1", "toolName": "get_weather"}),
        json!({"type": "tool-input-available", "toolCallId": "call-1", "toolName": "get_weather", "input": {"location": "Tokyo"}}),
        json!({"type": "finish-step"}),
        json!({"type": "tool-output-available", "toolCallId": "call-1", "output": {"celsius": 18}}),
        json!({"type": "start-step"}),
        json!({"type": "text-start", "id": "t1"}),
        json!({"type": "text-delta", "id": "t1", "delta": "It is 18 °C"}),
        json!({"type": "text-delta", "id": "t1", "delta": " in Tokyo."}),
        json!({"type": "text-end", "id": "t1"}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "stop", "messageMetadata": {"model": "gemini"}}),
        json!("[DONE]"),
        // Turn 2, first response: ends waiting for the approval.
        json!({"type": "start", "messageId": "msg-2"}),
        json!({"type": "start-step"}),
        json!({"type": "text-start", "id": "t2"}),
        json!({"type": "text-delta", "id": "t2", "delta": "Sending 20 € to Rin."}),
        json!({"type": "text-end", "id": "t2"}),
        json!({"type": "tool-input-start", "toolCallId": "call-2", "toolName": "process_payment"}),
        json!({"type": "tool-input-available", "toolCallId": "call-2", "toolName": "process_payment", "input": {"recipient": "Rin", "amount": 20}}),
        json!({"type": "tool-approval-request", "approvalId": "ap-1", "toolCallId": "call-2"}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "tool-calls"}),
        json!("[DONE]"),
        // Turn 2, continuation after the approval.
        json!({"type": "start", "messageId": "msg-2"}),
        json!({"type": "tool-output-available", "toolCallId": "call-2", "output": {"ok": true}}),
        json!({"type": "start-step"}),
        json!({"type": "text-start", "id": "t3"}),
        json!({"type": "text-delta", "id": "t3", "delta": "Sent."}),
        json!({"type": "text-end", "id": "t3"}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "stop"}),
        json!("[DONE]"),
        // Turn 3.
        json!({"type": "start", "messageId": "msg-3"}),
        json!({"type": "start-step"}),
        json!({"type": "text-delta", "id": "t4", "delta": "You're"}),
        json!({"type": "finish-step"}),
        json!({"type": "error", "errorText": "not model output"}),
        json!({"type": "finish", "finishReason": "length"}),
        json!("[DONE]"),
    ];
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| out(i as u64 + 1, c))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What each (turn, step) of [`server_recording`] plays.
fn expected() -> Vec<Vec<Vec<ModelEvent>>> {
    vec![
        vec![
            vec![
                think("Weather: use the tool."),
                tool("get_weather", json!({"location": "Tokyo"})),
                finish(FinishReason::ToolCalls),
            ],
            vec![
                text("It is 18 °C"),
                text(" in Tokyo."),
                finish(FinishReason::Stop),
            ],
        ],
        vec![
            vec![
                text("Sending 20 € to Rin."),
                tool("process_payment", json!({"recipient": "Rin", "amount": 20})),
                finish(FinishReason::ToolCalls),
            ],
            vec![text("Sent."), finish(FinishReason::Stop)],
        ],
        vec![vec![text("You're"), finish(FinishReason::Length)]],
    ]
}

fn assert_plays(model: &ReplayModel, expected: &[Vec<Vec<ModelEvent>>]) {
    assert_eq!(model.turn_count(), expected.len());
    for (turn, steps) in expected.iter().enumerate() {
        assert_eq!(model.step_count(turn), Some(steps.len()), "turn {turn}");
        for (step, events) in steps.iter().enumerate() {
            assert_eq!(&play(model, turn, step), events, "turn {turn} step {step}");
        }
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "countersign-replay-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ----- tests --------------------------------------------------------------------------------

#[test]
fn each_turn_and_step_plays_what_the_model_said_in_it() {
    let model = ReplayModel::from_jsonl("bug-42.jsonl", &server_recording()).unwrap();
    assert_plays(&model, &expected());
    assert_eq!(model.label(), "Replay of bug-42.jsonl (3 turns)");
}

#[test]
fn past_the_recording_it_says_so_and_stops() {
    let model = ReplayModel::from_jsonl("r", &server_recording()).unwrap();
    assert_eq!(play(&model, 0, 2), say(NO_MORE_STEPS));
    assert_eq!(play(&model, 3, 0), say(NO_MORE_TURNS));
    let request = ModelRequest {
        session_id: "chat-1".into(),
        system: String::new(),
        history: Default::default(),
        tools: Vec::new(),
    };
    let events: Vec<_> = block_on(model.stream(request).collect::<Vec<_>>());
    assert_eq!(
        events.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        say(NO_MORE_TURNS)
    );
}

#[test]
fn the_position_comes_from_the_history_alone() {
    assert_eq!(position(&[]), None);
    assert_eq!(position(&history(0, 0)), Some((0, 0)));
    assert_eq!(position(&history(2, 1)), Some((2, 1)));
    // Tool results do not count as steps; a user message resets the step.
    let mut items = history(1, 3);
    items.push(HistoryItem::user("again"));
    assert_eq!(position(&items), Some((2, 0)));
}

#[test]
fn the_browser_download_replays_what_it_received() {
    let request_body = json!({"id": "chat-1", "trigger": "submit-message", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather in Tokyo?"}]}]});
    let mut lines = vec![line(1, "bidi", "out", request_body.clone())];
    let mut n = 1;
    for raw in server_recording().lines() {
        let value: Value = serde_json::from_str(raw).unwrap();
        n += 1;
        lines.push(line(n, "bidi", "in", value["chunk"].clone()));
        if value["chunk"] == json!("[DONE]") {
            // What the browser sent next, and a control frame it got.
            n += 1;
            lines.push(line(n, "bidi", "out", request_body.clone()));
            n += 1;
            lines.push(line(
                n,
                "bidi",
                "in",
                json!({"type": "pong", "timestamp": 5}),
            ));
            n += 1;
            lines.push(line(
                n,
                "bidi",
                "in",
                json!({"type": "data-countersign-pending", "data": {"approvalIds": []}, "transient": true}),
            ));
        }
    }
    // A browser file has no trailing newline and may have blank lines.
    let text = lines.join("\n\n");
    let model = ReplayModel::from_jsonl("countersign-chat-1.jsonl", &text).unwrap();
    assert_plays(&model, &expected());
}

#[test]
fn a_browser_log_with_sse_responses_keeps_one_turn_per_message() {
    // SSE: the browser logs no [DONE]; each response opens with `start` of the same id.
    let chunks = [
        json!({"type": "start", "messageId": "m"}),
        json!({"type": "start-step"}),
        json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "get_location", "input": {}}),
        json!({"type": "tool-approval-request", "approvalId": "a", "toolCallId": "c"}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "tool-calls"}),
        json!({"type": "start", "messageId": "m"}),
        json!({"type": "tool-output-available", "toolCallId": "c", "output": {"city": "Kyoto"}}),
        json!({"type": "start-step"}),
        json!({"type": "text-delta", "id": "t", "delta": "Kyoto."}),
        json!({"type": "finish-step"}),
        json!({"type": "finish", "finishReason": "stop"}),
        json!({"type": "start", "messageId": "m2"}),
        json!({"type": "start-step"}),
        json!({"type": "text-delta", "id": "t", "delta": "Hi."}),
    ];
    let lines: Vec<String> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| line(i as u64 + 1, "sse", "in", c))
        .collect();
    let model = ReplayModel::from_jsonl("b", &lines.join("\n")).unwrap();
    assert_plays(
        &model,
        &[
            vec![
                vec![
                    tool("get_location", json!({})),
                    finish(FinishReason::ToolCalls),
                ],
                vec![text("Kyoto."), finish(FinishReason::Stop)],
            ],
            // Cut off mid-step: the step still plays.
            vec![vec![text("Hi."), finish(FinishReason::Stop)]],
        ],
    );
}

#[test]
fn a_call_the_runner_rejected_is_replayed_as_the_models_call() {
    let chunks = [
        json!({"type": "start", "messageId": "m"}),
        json!({"type": "start-step"}),
        json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "process_payment"}),
        json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "process_payment", "input": {"amount": -5}, "errorText": "Invalid arguments"}),
        json!({"type": "finish-step"}),
        json!({"type": "reasoning-file", "url": "data:,x"}),
    ];
    let lines: Vec<String> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| out(i as u64 + 1, c))
        .collect();
    let model = ReplayModel::from_jsonl("e", &lines.join("\n")).unwrap();
    assert_eq!(
        model.events(0, 0).unwrap(),
        &[
            tool("process_payment", json!({"amount": -5})),
            finish(FinishReason::ToolCalls)
        ]
    );
}

#[test]
fn malformed_lines_are_errors_with_their_line_number() {
    let good = out(1, json!({"type": "start", "messageId": "m"}));
    let cases: Vec<(String, &str)> = vec![
        ("{not json".into(), "not JSON"),
        ("[1, 2]".into(), "not a JSON object"),
        (json!({"direction": "out"}).to_string(), "no `chunk`"),
        (
            json!({"chunk": {"type": "start"}}).to_string(),
            "no string `direction`",
        ),
        (out(2, json!("hello")), "only \"[DONE]\""),
        (out(2, json!({"delta": "x"})), "without a string `type`"),
        (out(2, json!({"type": 5})), "without a string `type`"),
        (out(2, json!(42)), "neither an object"),
        (
            out(2, json!({"type": "text-delta", "id": "t"})),
            "invalid `text-delta` chunk",
        ),
    ];
    for (bad, message) in cases {
        let text = format!("{good}\n\n{bad}\n{good}");
        let error = ReplayModel::from_jsonl("x.jsonl", &text).unwrap_err();
        let shown = error.to_string();
        assert!(shown.starts_with("x.jsonl:3: "), "{bad}: {shown}");
        assert!(shown.contains(message), "{bad}: {shown}");
    }
}

#[test]
fn the_lines_not_replayed_are_not_checked_as_chunks() {
    // A browser log: its "out" lines are requests, not chunks.
    let text = [
        line(1, "sse", "out", json!({"id": "c", "messages": []})),
        line(2, "sse", "in", json!({"type": "start", "messageId": "m"})),
    ]
    .join("\n");
    assert!(ReplayModel::from_jsonl("b", &text).is_ok());
}

#[test]
fn a_recording_with_nothing_to_replay_is_an_error() {
    for text in ["", "\n\n", &out(1, json!("[DONE]"))] {
        assert!(matches!(
            ReplayModel::from_jsonl("empty", text),
            Err(ReplayError::Empty { .. })
        ));
    }
    let missing = std::env::temp_dir().join("countersign-replay-does-not-exist.jsonl");
    let error = ReplayModel::from_file(&missing).unwrap_err();
    assert!(matches!(error, ReplayError::Read { .. }), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_text_delay_paces_the_text() {
    let model = ReplayModel::from_jsonl("r", &server_recording())
        .unwrap()
        .with_text_delay(Duration::from_millis(50));
    let request = ModelRequest {
        session_id: "chat-1".into(),
        system: String::new(),
        history: history(0, 1).into(),
        tools: Vec::new(),
    };
    let started = tokio::time::Instant::now();
    let events: Vec<_> = model
        .stream(request)
        .map(Result::unwrap)
        .collect::<Vec<_>>()
        .await;
    assert_eq!(events, expected()[0][1]);
    // Two text deltas, 50 ms before each; the other events do not wait.
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(100) && elapsed < Duration::from_millis(150),
        "{elapsed:?}"
    );
}

/// The original system's frontend in voice mode on `/live` (our seed encoder, ADR 0035), as its
/// "Download Chunks" keeps it: no step markers but around the pause for approval, and what the
/// person said as a `<messageId>_input_text` block of the assistant's message, before the
/// model's own `_output_text`. The words are the person's, never replayed as the model's; the
/// model's reasoning, calls and words are cut into steps at its calls' results. (Before, every
/// event outside a step was dropped: such a log replayed nothing the model said.)
#[test]
fn the_originals_voice_log_replays_the_models_words_and_not_the_persons() {
    let words = |id: &str, deltas: &[&str]| {
        let mut chunks = vec![json!({"type": "text-start", "id": id})];
        chunks.extend(
            deltas
                .iter()
                .map(|d| json!({"type": "text-delta", "id": id, "delta": d})),
        );
        chunks.push(json!({"type": "text-end", "id": id}));
        chunks
    };
    let mut chunks = vec![json!({"type": "start", "messageId": "m1"})];
    chunks.extend(words("m1_input_text", &["pay Jiro 200 dollars"]));
    chunks.extend([
        json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "process_payment"}),
        json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "process_payment", "input": {"amount": 200, "recipient": "Jiro", "currency": "USD"}}),
        json!({"type": "start-step"}),
        json!({"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "a1"}),
        json!({"type": "finish-step"}),
        json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"success": true}}),
        json!({"type": "data-pcm", "data": {"content": "AAA=", "sampleRate": 24000, "channels": 1, "bitDepth": 16}}),
    ]);
    chunks.extend(words("m1_output_text", &["Sent 200 dollars", " to Jiro."]));
    chunks.extend([
        json!({"type": "finish", "finishReason": "stop", "messageMetadata": {"audio": {"chunks": 1}}}),
        json!("[DONE]"),
        json!({"type": "start", "messageId": "m2"}),
    ]);
    chunks.extend(words("m2_input_text", &["and the weather", " in Tokyo?"]));
    chunks.extend([
        json!({"type": "reasoning-start", "id": "0"}),
        json!({"type": "reasoning-delta", "id": "0", "delta": "Tokyo it is."}),
        json!({"type": "reasoning-end", "id": "0"}),
        json!({"type": "tool-input-available", "toolCallId": "c2", "toolName": "get_weather", "input": {"location": "Tokyo"}}),
        json!({"type": "tool-output-available", "toolCallId": "c2", "output": {"temperature": 20}}),
    ]);
    chunks.extend(words("m2_output_text", &["Sunny in Tokyo."]));
    chunks.extend([
        json!({"type": "finish", "finishReason": "stop"}),
        json!("[DONE]"),
    ]);
    // What the browser sent (not replayed): its microphone's frames.
    let mut lines = vec![line(
        1,
        "adk-bidi",
        "out",
        json!({"type": "audio_control", "action": "start"}),
    )];
    lines.extend(
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| line(i as u64 + 2, "adk-bidi", "in", c)),
    );
    let model = ReplayModel::from_jsonl("frontend-voice.jsonl", &lines.join("\n")).unwrap();
    assert_plays(
        &model,
        &[
            vec![
                vec![
                    tool(
                        "process_payment",
                        json!({"amount": 200, "recipient": "Jiro", "currency": "USD"}),
                    ),
                    finish(FinishReason::ToolCalls),
                ],
                vec![
                    text("Sent 200 dollars"),
                    text(" to Jiro."),
                    finish(FinishReason::Stop),
                ],
            ],
            vec![
                vec![
                    think("Tokyo it is."),
                    tool("get_weather", json!({"location": "Tokyo"})),
                    finish(FinishReason::ToolCalls),
                ],
                vec![text("Sunny in Tokyo."), finish(FinishReason::Stop)],
            ],
        ],
    );
}

/// A real recording of the original system (`tests/fixtures/seed/frontend`, a payment
/// approved over its WebSocket) replays what its model did: its reasoning and the call, then
/// the words after the result.
#[test]
fn a_recording_of_the_original_system_replays_its_steps() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/seed/frontend/process_payment-approved-bidi-baseline.json"
    );
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let chunks: Vec<Value> = fixture["output"]["rawEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| {
            let data = event.as_str().unwrap().trim().trim_start_matches("data: ");
            serde_json::from_str(data).unwrap_or_else(|_| json!(data))
        })
        .collect();
    let said: String = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available")
        .unwrap()["input"]
        .clone();
    let lines: Vec<String> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, c)| out(i as u64 + 1, c))
        .collect();
    let model = ReplayModel::from_jsonl("original.jsonl", &lines.join("\n")).unwrap();
    assert_eq!(model.turn_count(), 1);
    assert_eq!(model.step_count(0), Some(2));
    let first = model.events(0, 0).unwrap();
    assert!(
        matches!(first[0], ModelEvent::ReasoningDelta { .. }),
        "{first:?}"
    );
    assert_eq!(
        first[first.len() - 2..],
        [
            tool("process_payment", input),
            finish(FinishReason::ToolCalls)
        ]
    );
    let second = model.events(0, 1).unwrap();
    let replayed: String = second
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(!said.is_empty());
    assert_eq!(replayed, said);
    assert_eq!(second.last(), Some(&finish(FinishReason::Stop)));
}

/// What a model says in one step, as a script for the fake runner below.
type Script = Vec<Vec<Vec<ModelEvent>>>;

/// Emits the chunks the runner emits for these model steps (progressive text, every call
/// answered by a server tool), recording each one as the runner will.
fn run_and_record(log: &ChunkLog, session: &str, turns: &Script, first_turn: usize) {
    let now = std::cell::Cell::new(1_000);
    let tick = || {
        now.set(now.get() + 1);
        now.get()
    };
    let record = |chunk: Chunk| log.record(session, "bidi", &chunk, tick());
    for (t, steps) in turns.iter().enumerate() {
        let turn = first_turn + t;
        record(Chunk::start(format!("msg-{turn}")));
        let mut last_reason = FinishReason::Stop;
        for (s, events) in steps.iter().enumerate() {
            record(Chunk::start_step());
            let mut calls = Vec::new();
            for (e, event) in events.iter().enumerate() {
                let id = format!("{turn}-{s}-{e}");
                match event {
                    ModelEvent::TextDelta(delta) => {
                        record(Chunk::text_start(&id));
                        record(Chunk::text_delta(&id, delta));
                        record(Chunk::text_end(&id));
                    }
                    ModelEvent::TextData(_) => {}
                    ModelEvent::ReasoningDelta { text, .. } => {
                        record(Chunk::reasoning_start(&id));
                        record(Chunk::reasoning_delta(&id, text));
                        record(Chunk::reasoning_end(&id));
                    }
                    ModelEvent::ToolCall(call) => {
                        record(Chunk::tool_input_start(&id, &call.name));
                        record(Chunk::tool_input_available(
                            &id,
                            &call.name,
                            call.args.clone(),
                        ));
                        calls.push(id);
                    }
                    ModelEvent::Finish { reason, .. } => last_reason = reason.clone(),
                    ModelEvent::Audio(_) | ModelEvent::Interrupted => {}
                }
            }
            record(Chunk::finish_step());
            for id in calls {
                record(Chunk::tool_output_available(id, json!({"ok": true})));
            }
        }
        record(Chunk::finish(last_reason));
        log.record_done(session, "bidi", tick());
    }
}

#[test]
fn what_the_chunk_log_records_replays_as_the_same_model_events() {
    let script: Script = vec![
        vec![
            vec![
                think("Need the weather."),
                text("Checking."),
                tool("get_weather", json!({"location": "Oslo"})),
                tool("get_weather", json!({"location": "Bergen"})),
                finish(FinishReason::ToolCalls),
            ],
            vec![text("Oslo 3 °C, Bergen 7 °C."), finish(FinishReason::Stop)],
        ],
        vec![vec![text("Anything else?"), finish(FinishReason::Stop)]],
        vec![
            vec![
                tool("process_payment", json!({"recipient": "Rin", "amount": 5})),
                finish(FinishReason::ToolCalls),
            ],
            vec![text("Done."), finish(FinishReason::ContentFilter)],
        ],
    ];
    let dir = TempDir::new("round-trip");
    let session = "../Chat 1";
    {
        let log = ChunkLog::new(dir.0.clone()).unwrap();
        run_and_record(&log, session, &script[..2].to_vec(), 0);
    }
    // The server restarts between turns 2 and 3.
    let log = ChunkLog::new(dir.0.clone()).unwrap();
    run_and_record(&log, session, &script[2..].to_vec(), 2);
    let path = log.path_for(session);
    drop(log);

    let recorded = std::fs::read_to_string(&path).unwrap();
    let numbers: Vec<u64> = recorded
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["sequence_number"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    // Every chunk is recorded as the Full dialect writes it.
    let first: Value = serde_json::from_str(recorded.lines().next().unwrap()).unwrap();
    assert_eq!(
        Some(first["chunk"].clone()),
        Chunk::start("msg-0").to_value(Dialect::Full)
    );

    let model = ReplayModel::from_file(&path).unwrap();
    assert_plays(&model, &script);
    assert!(model.label().ends_with("(3 turns)"), "{}", model.label());
}
