//! The seed encoder, scenario by scenario: the logs our turn loop writes (hold mode), and the
//! frames the seed's recorded streams have for the same scenario
//! (`tests/fixtures/seed/frontend/*.json`; `tests/seed_dialect.rs` compares a running server
//! with them).

use serde_json::{Value, json};

use super::*;
use crate::protocol::chunk::{Abort, ToolInputError};

/// A log entry we own (the encoder borrows).
#[derive(Debug, Clone)]
enum Log {
    C(Chunk),
    Pause,
    End,
}

fn metadata() -> Value {
    json!({"model": "Demo (offline)", "modelVersion": "countersign-demo",
           "usage": {"inputTokens": 3, "outputTokens": 5, "totalTokens": 8}})
}

fn paused_metadata() -> Value {
    json!({"model": "Demo (offline)", "modelVersion": "countersign-demo",
           "usage": {"inputTokens": 3, "outputTokens": 0, "totalTokens": 3}})
}

fn entry<'a>(log: &'a Log, pause: &'a Value) -> Entry<'a> {
    match log {
        Log::C(chunk) => Entry::Chunk(chunk),
        Log::Pause => Entry::Pause(Some(pause)),
        Log::End => Entry::End,
    }
}

fn c(chunk: Chunk) -> Log {
    Log::C(chunk)
}

fn input(call: &str, tool: &str, args: Value) -> Vec<Log> {
    vec![
        c(Chunk::tool_input_start(call, tool)),
        c(Chunk::tool_input_available(call, tool, args)),
    ]
}

fn finish(reason: FinishReason) -> Log {
    c(Chunk::Finish(Finish {
        finish_reason: Some(reason),
        message_metadata: Some(metadata()),
    }))
}

/// Held text of the final response, then the turn's end, as the turn loop writes them.
fn final_text(id: &str, text: &str) -> Vec<Log> {
    vec![
        c(Chunk::start_step()),
        c(Chunk::text_start(id)),
        c(Chunk::text_delta(id, text)),
        c(Chunk::text_end(id)),
        c(Chunk::finish_step()),
        finish(FinishReason::Stop),
        Log::End,
    ]
}

fn payment_args(to: &str, amount: u32) -> Value {
    json!({"amount": amount, "currency": "USD", "recipient": to})
}

fn output(call: &str) -> Log {
    c(Chunk::tool_output_available(
        call,
        json!({"success": true, "transaction_id": format!("txn_{call}")}),
    ))
}

/// One payment: asked, paused, then `answer` (the chunks the answer causes).
fn one_payment(answer: Log) -> (Vec<Log>, usize) {
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c1", "process_payment", payment_args("次郎", 200)));
    log.push(c(Chunk::tool_approval_request("a1", "c1")));
    log.push(c(Chunk::finish_step()));
    log.push(Log::Pause);
    let from = log.len();
    log.push(answer);
    log.extend(final_text("t1", "Done."));
    (log, from)
}

/// Two payments in one step, answered together: the answer's results as our turn logs them
/// (denials at once, approved calls when they ran).
fn two_payments(results: Vec<Log>) -> (Vec<Log>, usize) {
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c1", "process_payment", payment_args("Alice", 30)));
    log.extend(input("c2", "process_payment", payment_args("Bob", 40)));
    log.push(c(Chunk::tool_approval_request("a1", "c1")));
    log.push(c(Chunk::tool_approval_request("a2", "c2")));
    log.push(c(Chunk::finish_step()));
    log.push(Log::Pause);
    let from = log.len();
    log.extend(results);
    log.extend(final_text("t1", "Done."));
    (log, from)
}

/// What one SSE response of a turn carries: the log from `from` (a continuation opens with
/// `start` of the same message, after priming with what came before) to its pause or end.
fn sse_response(log: &[Log], from: usize) -> Vec<String> {
    let pause = paused_metadata();
    let mut encoder = SeedEncoder::new(SeedTransport::Sse);
    for e in &log[..from] {
        encoder.prime(entry(e, &pause));
    }
    let mut out = Vec::new();
    if from > 0 {
        out.extend(encoder.push(Entry::Chunk(&Chunk::start("m1"))));
    }
    for e in &log[from..] {
        out.extend(encoder.push(entry(e, &pause)));
        if matches!(e, Log::Pause | Log::End) {
            break;
        }
    }
    out
}

/// What the socket sends for a whole turn.
fn bidi(log: &[Log]) -> Vec<String> {
    let mut encoder = SeedEncoder::new(SeedTransport::Bidi);
    log.iter()
        .flat_map(|e| encoder.push(entry(e, &Value::Null)))
        .collect()
}

/// A frame's JSON (`"[DONE]"` for the terminator).
fn parse(frame: &str) -> Value {
    let data = frame
        .strip_prefix("data: ")
        .and_then(|f| f.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("not an SSE frame: {frame:?}"));
    if data == "[DONE]" {
        return json!("[DONE]");
    }
    serde_json::from_str(data).unwrap_or_else(|e| panic!("{data}: {e}"))
}

fn types(frames: &[String]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match parse(f) {
            Value::String(done) => done,
            v => v["type"].as_str().unwrap_or("?").to_owned(),
        })
        .collect()
}

fn chunks_of(frames: &[String], kind: &str) -> Vec<Value> {
    frames
        .iter()
        .map(|f| parse(f))
        .filter(|v| v["type"] == kind)
        .collect()
}

const SSE_ASKED: [&str; 6] = [
    "start",
    "tool-input-start",
    "tool-input-available",
    "tool-approval-request",
    "finish",
    "[DONE]",
];

#[test]
fn sse_payment_approved_is_two_responses_byte_for_byte_like_the_seed() {
    let (log, from) = one_payment(output("c1"));
    let first = sse_response(&log, 0);
    assert_eq!(
        first,
        [
            "data: {\"type\": \"start\", \"messageId\": \"m1\"}\n\n",
            "data: {\"type\": \"tool-input-start\", \"toolCallId\": \"c1\", \"toolName\": \"process_payment\"}\n\n",
            "data: {\"type\": \"tool-input-available\", \"toolCallId\": \"c1\", \"toolName\": \"process_payment\", \"input\": {\"amount\": 200, \"currency\": \"USD\", \"recipient\": \"\\u6b21\\u90ce\"}}\n\n",
            "data: {\"type\": \"tool-approval-request\", \"toolCallId\": \"c1\", \"approvalId\": \"a1\"}\n\n",
            "data: {\"type\": \"finish\", \"finishReason\": \"stop\", \"messageMetadata\": {\"usage\": {\"promptTokens\": 3, \"completionTokens\": 0, \"totalTokens\": 3}, \"modelVersion\": \"countersign-demo\"}}\n\n",
            "data: [DONE]\n\n",
        ]
    );
    let second = sse_response(&log, from);
    assert_eq!(
        types(&second),
        [
            "start",
            "tool-output-available",
            "text-start",
            "text-delta",
            "text-end",
            "finish",
            "[DONE]"
        ]
    );
    assert_eq!(
        second.last().map(String::as_str),
        Some(DONE_FRAME),
        "one [DONE] per response"
    );
    assert_eq!(
        second[5],
        "data: {\"type\": \"finish\", \"finishReason\": \"stop\", \"messageMetadata\": {\"usage\": {\"promptTokens\": 3, \"completionTokens\": 5, \"totalTokens\": 8}, \"modelVersion\": \"countersign-demo\"}}\n\n"
    );
}

#[test]
fn sse_denial_is_the_seeds_rejection_whatever_the_tool() {
    let (log, from) = one_payment(c(Chunk::tool_output_denied("c1")));
    assert_eq!(types(&sse_response(&log, 0)), SSE_ASKED);
    let second = sse_response(&log, from);
    assert_eq!(
        second[1],
        "data: {\"type\": \"tool-output-error\", \"toolCallId\": \"c1\", \"errorText\": \"This tool call is rejected.\"}\n\n"
    );
    assert_eq!(
        types(&second),
        [
            "start",
            "tool-output-error",
            "text-start",
            "text-delta",
            "text-end",
            "finish",
            "[DONE]"
        ]
    );

    // get_location (D1): the same shape.
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c1", "get_location", json!({})));
    log.extend([
        c(Chunk::tool_approval_request("a1", "c1")),
        c(Chunk::finish_step()),
        Log::Pause,
    ]);
    let from = log.len();
    log.push(c(Chunk::tool_output_denied("c1")));
    log.extend(final_text("t1", "OK."));
    assert_eq!(types(&sse_response(&log, 0)), SSE_ASKED);
    assert_eq!(
        chunks_of(&sse_response(&log, from), "tool-output-error")[0]["errorText"],
        REJECTED
    );
}

#[test]
fn bidi_approval_is_one_stream_with_the_request_in_its_own_step() {
    let (log, _) = one_payment(output("c1"));
    let frames = bidi(&log);
    assert_eq!(
        types(&frames),
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "start-step",
            "tool-approval-request",
            "finish-step",
            "tool-output-available",
            "text-start",
            "text-delta",
            "text-end",
            "finish",
            "[DONE]"
        ]
    );
    // The seed writes its step markers compactly.
    assert_eq!(frames[3], "data: {\"type\":\"start-step\"}\n\n");
    assert_eq!(frames[5], "data: {\"type\":\"finish-step\"}\n\n");
    let finish = &chunks_of(&frames, "finish")[0];
    assert_eq!(finish["finishReason"], "stop");
    assert_eq!(
        finish["messageMetadata"],
        json!({"usage": {"promptTokens": 3, "completionTokens": 5, "totalTokens": 8}, "modelVersion": "countersign-demo"})
    );
}

#[test]
fn bidi_denials_say_what_was_denied() {
    for (tool, text) in [
        ("process_payment", PAYMENT_DENIED),
        ("get_location", LOCATION_DENIED),
        ("some_other_tool", REJECTED),
    ] {
        let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
        log.extend(input("c1", tool, json!({})));
        log.extend([
            c(Chunk::tool_approval_request("a1", "c1")),
            c(Chunk::finish_step()),
            Log::Pause,
            c(Chunk::tool_output_denied("c1")),
        ]);
        log.extend(final_text("t1", "OK."));
        let frames = bidi(&log);
        assert_eq!(
            chunks_of(&frames, "tool-output-error")[0]["errorText"],
            text,
            "{tool}"
        );
        assert!(chunks_of(&frames, "tool-output-denied").is_empty());
    }
}

#[test]
fn a_plain_tool_call_has_no_step_markers_and_one_done() {
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c1", "get_weather", json!({"location": "Tokyo"})));
    log.extend([c(Chunk::finish_step()), output("c1")]);
    log.extend(final_text("t1", "東京は晴れです。"));
    let expected = [
        "start",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        "text-start",
        "text-delta",
        "text-end",
        "finish",
        "[DONE]",
    ];
    assert_eq!(types(&sse_response(&log, 0)), expected);
    assert_eq!(types(&bidi(&log)), expected);
    // change_bgm on SSE is the same shape: the server answered it at once.
}

#[test]
fn parallel_sse_approvals_come_together_and_results_in_call_order() {
    let asked = [
        "start",
        "tool-input-start",
        "tool-input-available",
        "tool-input-start",
        "tool-input-available",
        "tool-approval-request",
        "tool-approval-request",
        "finish",
        "[DONE]",
    ];
    // Our turn logs a denial as soon as it is answered and an approved call's output when it
    // ran: approve A + deny B is logged B, A.
    for (results, expected) in [
        (
            vec![output("c1"), output("c2")],
            ["tool-output-available", "tool-output-available"],
        ),
        (
            vec![c(Chunk::tool_output_denied("c2")), output("c1")],
            ["tool-output-available", "tool-output-error"],
        ),
        (
            vec![c(Chunk::tool_output_denied("c1")), output("c2")],
            ["tool-output-error", "tool-output-available"],
        ),
        (
            vec![
                c(Chunk::tool_output_denied("c2")),
                c(Chunk::tool_output_denied("c1")),
            ],
            ["tool-output-error", "tool-output-error"],
        ),
    ] {
        let (log, from) = two_payments(results);
        let first = sse_response(&log, 0);
        assert_eq!(types(&first), asked);
        let requests = chunks_of(&first, "tool-approval-request");
        assert_eq!(requests[0]["toolCallId"], "c1");
        assert_eq!(requests[1]["toolCallId"], "c2");
        let second = sse_response(&log, from);
        assert_eq!(types(&second)[1..3], expected);
        assert_eq!(parse(&second[1])["toolCallId"], "c1", "call order");
        assert_eq!(parse(&second[2])["toolCallId"], "c2", "call order");
        assert_eq!(
            types(&second)[3..],
            ["text-start", "text-delta", "text-end", "finish", "[DONE]"]
        );
    }
}

#[test]
fn parallel_bidi_approvals_share_one_group() {
    let (log, _) = two_payments(vec![c(Chunk::tool_output_denied("c2")), output("c1")]);
    let frames = bidi(&log);
    assert_eq!(
        types(&frames),
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "tool-input-start",
            "tool-input-available",
            "start-step",
            "tool-approval-request",
            "tool-approval-request",
            "finish-step",
            "tool-output-available",
            "tool-output-error",
            "text-start",
            "text-delta",
            "text-end",
            "finish",
            "[DONE]"
        ]
    );
    assert_eq!(
        chunks_of(&frames, "tool-output-error")[0]["errorText"],
        PAYMENT_DENIED
    );
}

#[test]
fn sequential_bidi_approvals_get_a_group_each() {
    // F2: the model calls one payment per step.
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c1", "process_payment", payment_args("Alice", 30)));
    log.extend([
        c(Chunk::tool_approval_request("a1", "c1")),
        c(Chunk::finish_step()),
        Log::Pause,
        output("c1"),
        c(Chunk::start_step()),
    ]);
    log.extend(input("c2", "process_payment", payment_args("Bob", 40)));
    log.extend([
        c(Chunk::tool_approval_request("a2", "c2")),
        c(Chunk::finish_step()),
        Log::Pause,
        output("c2"),
    ]);
    log.extend(final_text("t1", "Both sent."));
    assert_eq!(
        types(&bidi(&log)),
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "start-step",
            "tool-approval-request",
            "finish-step",
            "tool-output-available",
            "tool-input-start",
            "tool-input-available",
            "start-step",
            "tool-approval-request",
            "finish-step",
            "tool-output-available",
            "text-start",
            "text-delta",
            "text-end",
            "finish",
            "[DONE]"
        ]
    );
}

#[test]
fn an_expired_approval_is_the_seeds_timeout() {
    // G: nobody answered.
    let (log, from) = one_payment(c(Chunk::tool_output_error(
        "c1",
        format!("{APPROVAL_EXPIRED_PREFIX}: nobody answered within 30 seconds. Nothing was done."),
    )));
    let frames = bidi(&log);
    assert_eq!(
        types(&frames)[3..8],
        [
            "start-step",
            "tool-approval-request",
            "finish-step",
            "tool-output-error",
            "text-start"
        ]
    );
    assert_eq!(
        chunks_of(&frames, "tool-output-error")[0]["errorText"],
        APPROVAL_TIMED_OUT
    );
    assert_eq!(
        chunks_of(&sse_response(&log, from), "tool-output-error")[0]["errorText"],
        APPROVAL_TIMED_OUT
    );
}

#[test]
fn a_browser_call_that_never_answers_times_out_in_the_seeds_words_on_the_socket() {
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c7", "change_bgm", json!({"track": 1})));
    log.extend([
        c(Chunk::finish_step()),
        Log::Pause,
        c(Chunk::tool_output_error(
            "c7",
            format!("{BROWSER_TIMEOUT_PREFIX} 10 s."),
        )),
    ]);
    log.extend(final_text("t1", "No music."));
    let frames = bidi(&log);
    // A pause with no approval says nothing: the seed's stream just waits.
    assert_eq!(
        types(&frames)[..4],
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "tool-output-error"
        ]
    );
    assert_eq!(
        chunks_of(&frames, "tool-output-error")[0]["errorText"],
        "Timeout waiting for frontend tool result (tool=change_bgm, id=c7)"
    );
}

#[test]
fn a_server_output_of_the_same_step_comes_before_the_approval_group() {
    // Weather and a payment in one step: the seed's client closes its stream at the group's
    // finish-step, so nothing of the step may come after it.
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c1", "get_weather", json!({"location": "Tokyo"})));
    log.extend(input("c2", "process_payment", payment_args("Bob", 5)));
    log.extend([
        c(Chunk::tool_approval_request("a2", "c2")),
        c(Chunk::finish_step()),
        output("c1"),
        Log::Pause,
        output("c2"),
    ]);
    log.extend(final_text("t1", "Done."));
    assert_eq!(
        types(&bidi(&log))[..9],
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "tool-input-start",
            "tool-input-available",
            "tool-output-available",
            "start-step",
            "tool-approval-request",
            "finish-step"
        ]
    );
    // On SSE too the weather comes with the first response, before the requests.
    assert_eq!(
        types(&sse_response(&log, 0))[5..],
        [
            "tool-output-available",
            "tool-approval-request",
            "finish",
            "[DONE]"
        ]
    );
}

#[test]
fn an_interrupt_while_waiting_ends_the_stream_without_step_markers() {
    let (mut log, _) = one_payment(c(Chunk::tool_output_error(
        "c1",
        "Interrupted (user_abort) before it ran.",
    )));
    log.truncate(log.len() - 7);
    log.extend([
        c(Chunk::Abort(Abort {
            reason: Some("user_abort".into()),
        })),
        finish(FinishReason::Other),
        Log::End,
    ]);
    let frames = bidi(&log);
    assert_eq!(
        types(&frames)[6..],
        ["tool-output-error", "abort", "finish", "[DONE]"]
    );
    assert_eq!(frames[7], "data: {\"type\": \"abort\"}\n\n", "v6.0.0 keys");
    assert_eq!(chunks_of(&frames, "finish")[0]["finishReason"], "other");
}

#[test]
fn a_request_whose_call_ended_before_the_pause_is_never_sent() {
    let mut log = vec![c(Chunk::start("m1")), c(Chunk::start_step())];
    log.extend(input("c1", "process_payment", payment_args("Bob", 5)));
    log.extend([
        c(Chunk::tool_approval_request("a1", "c1")),
        c(Chunk::finish_step()),
        c(Chunk::tool_output_error(
            "c1",
            "The model withdrew this call.",
        )),
        Log::Pause,
    ]);
    let frames = bidi(&log);
    assert!(chunks_of(&frames, "tool-approval-request").is_empty());
    assert!(!types(&frames).contains(&"start-step".to_string()));
}

#[test]
fn priming_learns_the_calls_and_writes_nothing() {
    let (log, from) = one_payment(c(Chunk::tool_output_denied("c1")));
    let mut encoder = SeedEncoder::new(SeedTransport::Bidi);
    let pause = Value::Null;
    for e in &log[..from] {
        encoder.prime(entry(e, &pause));
    }
    // A socket that picks the turn up after the pause still knows the call is a payment.
    let rest: Vec<String> = log[from..]
        .iter()
        .flat_map(|e| encoder.push(entry(e, &pause)))
        .collect();
    assert_eq!(types(&rest)[0], "tool-output-error");
    assert_eq!(parse(&rest[0])["errorText"], PAYMENT_DENIED);
    // Without priming it would not.
    let mut cold = SeedEncoder::new(SeedTransport::Bidi);
    let rest: Vec<String> = log[from..]
        .iter()
        .flat_map(|e| cold.push(entry(e, &pause)))
        .collect();
    assert_eq!(parse(&rest[0])["errorText"], REJECTED);
}

#[test]
fn what_the_seed_never_sends_is_dropped() {
    let mut encoder = SeedEncoder::new(SeedTransport::Bidi);
    for chunk in [
        Chunk::transient_data("countersign-pending", json!({"pending": []})),
        Chunk::data("forecast", json!({})),
        Chunk::message_metadata(json!({"x": 1})),
        Chunk::source_url("s", "https://example.test"),
        Chunk::file("data:audio/wav;base64,AAAA", "audio/wav"),
        Chunk::tool_input_delta("c1", "{\"a\""),
        Chunk::Unknown(json!({"type": "reasoning-file"})),
        Chunk::start_step(),
        Chunk::finish_step(),
    ] {
        assert!(encoder.push(Entry::Chunk(&chunk)).is_empty(), "{chunk:?}");
    }
    let image = Chunk::file("data:image/png;base64,AAAA", "image/png");
    assert_eq!(types(&encoder.push(Entry::Chunk(&image))), ["file"]);
    // Our own chunks the seed also knows pass, in v6.0.0 keys.
    let error = Chunk::ToolInputError(Box::new(ToolInputError {
        tool_call_id: "c9".into(),
        tool_name: "nope".into(),
        input: json!({}),
        error_text: "Unknown tool".into(),
        tool_metadata: Some(Default::default()),
        ..Default::default()
    }));
    assert_eq!(
        encoder.push(Entry::Chunk(&error)),
        [
            "data: {\"type\": \"tool-input-error\", \"toolCallId\": \"c9\", \"toolName\": \"nope\", \"input\": {}, \"errorText\": \"Unknown tool\"}\n\n"
        ]
    );
    assert_eq!(
        encoder.push(Entry::Chunk(&Chunk::error("Too many frames."))),
        ["data: {\"type\": \"error\", \"errorText\": \"Too many frames.\"}\n\n"]
    );
}

#[test]
fn a_finish_without_metadata_still_says_stop() {
    let mut encoder = SeedEncoder::new(SeedTransport::Sse);
    assert_eq!(
        encoder.push(Entry::Chunk(&Chunk::finish(FinishReason::ToolCalls))),
        ["data: {\"type\": \"finish\", \"finishReason\": \"stop\"}\n\n"]
    );
    assert_eq!(
        encoder.push(Entry::Pause(None)),
        [
            "data: {\"type\": \"finish\", \"finishReason\": \"stop\"}\n\n",
            DONE_FRAME
        ]
    );
    // Unknown counts stay null.
    let finish = Chunk::Finish(Finish {
        finish_reason: Some(FinishReason::Length),
        message_metadata: Some(json!({"modelVersion": "m", "usage": {"inputTokens": 1}})),
    });
    assert_eq!(
        parse(&encoder.push(Entry::Chunk(&finish))[0])["messageMetadata"],
        json!({"usage": {"promptTokens": 1, "completionTokens": null, "totalTokens": null}, "modelVersion": "m"})
    );
}

#[test]
fn json_is_written_like_pythons_json_dumps() {
    // Checked against CPython's json.dumps.
    assert_eq!(
        python_json(&json!("a\u{7f}\"\\\n\t\u{1}😀é/")),
        r#""a\u007f\"\\\n\t\u0001\ud83d\ude00\u00e9/""#
    );
    assert_eq!(
        python_json(&json!([1, [], {}, {"a": [1, 2]}])),
        r#"[1, [], {}, {"a": [1, 2]}]"#
    );
    // Keys in the map's order (as Python writes a dict in its order; the server's maps keep
    // the order they were written in, the browser's are sorted: this one is both).
    assert_eq!(
        python_json(&json!({"a": null, "b": 1.5, "c": true})),
        r#"{"a": null, "b": 1.5, "c": true}"#
    );
}

/// A spoken turn's log: what was heard (our `data-voice` `heard`, naming the person's message),
/// then the reply with the transcript of the agent's speech.
fn spoken_turn() -> Vec<Log> {
    let mut log = vec![
        c(Chunk::transient_data(
            crate::protocol::voice::VOICE_PART,
            json!({"state": "heard", "messageId": "u1", "text": "Pay forty euros to Alice"}),
        )),
        c(Chunk::start("m1")),
    ];
    log.extend(final_text("m1_output_text", "I will ask for it."));
    log
}

/// The seed shows what the person said as its `input_transcription` block: text-start, delta
/// and end with id `<messageId>_input_text` in the assistant's message, before the agent's own
/// text; our `data-voice` chunk is not sent to it.
#[test]
fn a_heard_utterance_is_the_messages_input_text_block() {
    let frames = bidi(&spoken_turn());
    let sent: Vec<Value> = frames.iter().map(|f| parse(f)).collect();
    assert_eq!(
        sent[..4],
        [
            json!({"type": "start", "messageId": "m1"}),
            json!({"type": "text-start", "id": "m1_input_text"}),
            json!({"type": "text-delta", "id": "m1_input_text", "delta": "Pay forty euros to Alice"}),
            json!({"type": "text-end", "id": "m1_input_text"}),
        ],
        "{frames:?}"
    );
    assert_eq!(
        sent[4],
        json!({"type": "text-start", "id": "m1_output_text"})
    );
    assert!(
        !types(&frames).iter().any(|t| t.starts_with("data-")),
        "{frames:?}"
    );
    assert!(
        frames[1].starts_with("data: {\"type\": \"text-start\", \"id\": "),
        "Python-style JSON: {}",
        frames[1]
    );

    // A socket that picks the turn up after its start already has the words: not sent again;
    // one that picks it up between the words and the start sends them with the start.
    let log = spoken_turn();
    for (upto, blocks) in [(2, 0), (1, 1)] {
        let mut encoder = SeedEncoder::new(SeedTransport::Bidi);
        for e in &log[..upto] {
            encoder.prime(entry(e, &Value::Null));
        }
        let rest: Vec<String> = log[upto..]
            .iter()
            .flat_map(|e| encoder.push(entry(e, &Value::Null)))
            .collect();
        let input = chunks_of(&rest, "text-start")
            .iter()
            .filter(|c| c["id"] == "m1_input_text")
            .count();
        assert_eq!(input, blocks, "picked up at {upto}: {rest:?}");
    }

    // Words heard of a turn that ended before its message are not given to the next one.
    let mut encoder = SeedEncoder::new(SeedTransport::Bidi);
    encoder.push(entry(&log[0], &Value::Null));
    encoder.push(Entry::End);
    let next = encoder.push(Entry::Chunk(&Chunk::start("m2")));
    assert_eq!(types(&next), ["start"]);
}
