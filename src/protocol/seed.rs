//! The original ("seed") system's dialect of the UI message stream, so its unmodified Next.js
//! frontend can talk to Countersign on `POST /stream` and WebSocket `/live` (ADR 0019).
//!
//! The seed speaks AI SDK v6 chunks too, but shapes its streams differently, and its frontend and
//! tests depend on that shape:
//!
//! * no `start-step`/`finish-step`, except that on the WebSocket every pause for approval is the
//!   group `start-step`, `tool-approval-request`…, `finish-step` (its client closes its stream on
//!   that `finish-step` and opens a new one when every approval is answered);
//! * approval requests come last, when the turn waits: on SSE as the end of the response, with a
//!   `finish` (reason `stop`, usage and model) and `[DONE]`; on the WebSocket as that group;
//! * a denial is a `tool-output-error` with the seed's words for it, and tool outputs of one step
//!   come in the order of their calls;
//! * `finish` always says `stop` and carries `{"usage": {"promptTokens", "completionTokens",
//!   "totalTokens"}, "modelVersion"}`; no `data-*` chunks but its own `data-pcm` (the agent's
//!   speech);
//! * what the person said in a spoken turn (our `data-voice` `heard`, before the message) is a
//!   text block `<messageId>_input_text` right after the message's `start`, as the seed writes
//!   its `input_transcription` (ADR 0035); the words stay the person's message in the chat,
//!   and our other clients keep the `heard` chunk;
//! * every event is written like Python's `json.dumps` (`", "` and `": "` separators, non-ASCII as
//!   `\uXXXX`): the seed's own tests pick events out by substrings such as `"type": "text-`.
//!
//! Those rewrites depend on what came before (which tool a call is, which approvals wait, which
//! outputs are not out yet), so they cannot live in [`Chunk::to_json`]: a [`SeedEncoder`] is fed
//! a turn's log entry by entry and returns the frames to send. Per chunk its key policy is
//! [`Dialect::V6Strict`]. What it keeps of ours on purpose (message ids, unguessable call and
//! approval ids, our `error` chunk) is in ADR 0019.

use std::io;

use serde::Serialize;
use serde_json::{Value, ser::Formatter};

use super::{
    chunk::{
        APPROVAL_EXPIRED_PREFIX, BROWSER_TIMEOUT_PREFIX, Chunk, DataChunk, Dialect, Finish,
        FinishReason, ToolApprovalRequest, ToolOutputError,
    },
    sse::DONE_FRAME,
};

/// The seed's two carriers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeedTransport {
    /// `POST /stream`: one HTTP response per segment of a turn; each ends with `finish` and
    /// `[DONE]`, a pause for the person included.
    Sse,
    /// WebSocket `/live`: one stream per user turn, kept open while the person decides; one
    /// `[DONE]` at the end of the turn.
    Bidi,
}

/// One entry of a turn's log, as the encoder is fed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Entry<'a> {
    Chunk(&'a Chunk),
    /// The turn waits for the person. `metadata` is what the turn's own `finish` would carry at
    /// this point (`{"usage": {"inputTokens", …}, "modelVersion", …}`): the SSE response that
    /// ends here closes with a `finish` of its own that reports it.
    Pause(Option<&'a Value>),
    /// The turn is over.
    End,
}

/// The seed's words for a denied call on SSE, whatever the tool (ADK's own rejection).
pub const REJECTED: &str = "This tool call is rejected.";
/// The seed's words for a denied `process_payment` on the WebSocket.
pub const PAYMENT_DENIED: &str = "User denied the payment";
/// The seed's words for a denied `get_location` on the WebSocket.
pub const LOCATION_DENIED: &str = "User denied location access";
/// The seed's words for an approval nobody answered in time.
pub const APPROVAL_TIMED_OUT: &str = "Approval request timed out";

/// The seed writes its two step markers compactly, unlike every other event.
const START_STEP_FRAME: &str = "data: {\"type\":\"start-step\"}\n\n";
const FINISH_STEP_FRAME: &str = "data: {\"type\":\"finish-step\"}\n\n";

/// Turns a turn's log into the seed's frames (`data: …\n\n` strings, `[DONE]` included), for
/// one carrier ([`SeedTransport`]). Feed it every entry in order with [`SeedEncoder::push`]; a
/// reader that starts in the middle of a turn first feeds what the client already has with
/// [`SeedEncoder::prime`], so the encoder knows the calls.
#[derive(Debug, Clone)]
pub struct SeedEncoder {
    transport: SeedTransport,
    /// The turn's calls, (call id, tool name), in the order their input started.
    calls: Vec<(String, String)>,
    /// Approval requests not sent yet: they go out when the turn pauses.
    held_approvals: Vec<ToolApprovalRequest>,
    /// Tool results not sent yet (rewritten): they go out in call order before anything else.
    held_outputs: Vec<Chunk>,
    /// What the person said (a spoken turn's `data-voice` `heard`, which comes before its
    /// message): it goes out as the message's `<messageId>_input_text` block once `start`
    /// names the message.
    heard: Option<String>,
}

impl SeedEncoder {
    pub fn new(transport: SeedTransport) -> Self {
        SeedEncoder {
            transport,
            calls: Vec::new(),
            held_approvals: Vec::new(),
            held_outputs: Vec::new(),
            heard: None,
        }
    }

    pub fn transport(&self) -> SeedTransport {
        self.transport
    }

    /// The frames `entry` adds to the stream (often none: held, or dropped).
    pub fn push(&mut self, entry: Entry<'_>) -> Vec<String> {
        let mut out = Vec::new();
        self.encode(entry, &mut out);
        out
    }

    /// Feeds an entry the client already has (an SSE continuation reads the log from its
    /// answer on; a socket may pick up a turn in its middle): the encoder learns from it and
    /// writes nothing.
    pub fn prime(&mut self, entry: Entry<'_>) {
        self.encode(entry, &mut Vec::new());
    }

    fn encode(&mut self, entry: Entry<'_>, out: &mut Vec<String>) {
        match entry {
            Entry::Chunk(chunk) => self.chunk(chunk, out),
            Entry::Pause(metadata) => {
                self.flush_outputs(out);
                let held = std::mem::take(&mut self.held_approvals);
                match self.transport {
                    SeedTransport::Sse => {
                        out.extend(held.iter().map(approval_frame));
                        out.push(finish_frame(Some(&FinishReason::Stop), metadata));
                        out.push(DONE_FRAME.to_owned());
                    }
                    SeedTransport::Bidi if held.is_empty() => {}
                    SeedTransport::Bidi => {
                        out.push(START_STEP_FRAME.to_owned());
                        out.extend(held.iter().map(approval_frame));
                        out.push(FINISH_STEP_FRAME.to_owned());
                    }
                }
            }
            Entry::End => {
                self.flush_outputs(out);
                self.held_approvals.clear();
                self.calls.clear();
                self.heard = None;
                out.push(DONE_FRAME.to_owned());
            }
        }
    }

    fn chunk(&mut self, chunk: &Chunk, out: &mut Vec<String>) {
        // Results wait for the next other chunk, so those of one step go out in call order; a
        // call that ends takes back its approval request if that never went out.
        let result = match chunk {
            Chunk::ToolOutputAvailable(output) => Some((&output.tool_call_id, chunk.clone())),
            Chunk::ToolOutputError(error) => {
                let error_text = self.error_text(&error.tool_call_id, &error.error_text);
                Some((&error.tool_call_id, tool_output_error(error, error_text)))
            }
            Chunk::ToolOutputDenied(denied) => {
                let error = ToolOutputError {
                    tool_call_id: denied.tool_call_id.clone(),
                    error_text: self.denial_text(&denied.tool_call_id).to_owned(),
                    ..Default::default()
                };
                Some((
                    &denied.tool_call_id,
                    Chunk::ToolOutputError(Box::new(error)),
                ))
            }
            _ => None,
        };
        if let Some((call, result)) = result {
            self.held_approvals.retain(|r| r.tool_call_id != *call);
            self.held_outputs.push(result);
            return;
        }
        self.flush_outputs(out);
        match chunk {
            Chunk::ToolApprovalRequest(request) => self.held_approvals.push((**request).clone()),
            Chunk::Data(data) if heard_words(data).is_some() => {
                self.heard = heard_words(data).map(str::to_owned);
            }
            Chunk::Start(start) => {
                out.extend(frame(chunk));
                let heard = self.heard.take().filter(|words| !words.is_empty());
                if let (Some(words), Some(message)) = (heard, &start.message_id) {
                    out.extend(input_text(message, &words));
                }
            }
            Chunk::ToolInputStart(start) => {
                self.remember(&start.tool_call_id, &start.tool_name);
                out.extend(frame(chunk));
            }
            Chunk::ToolInputAvailable(available) => {
                self.remember(&available.tool_call_id, &available.tool_name);
                out.extend(frame(chunk));
            }
            Chunk::ToolInputError(error) => {
                self.remember(&error.tool_call_id, &error.tool_name);
                out.extend(frame(chunk));
            }
            Chunk::Finish(Finish {
                finish_reason,
                message_metadata,
            }) => {
                // Calls that end without a pause take their requests with them.
                self.held_approvals.clear();
                out.push(finish_frame(
                    finish_reason.as_ref(),
                    message_metadata.as_ref(),
                ));
            }
            // The agent's speech: the seed's own `data-pcm` part, which its frontend plays
            // (a stored log's reference without `content` is not sent again).
            Chunk::Data(data) if data.name == "pcm" => {
                if data
                    .data
                    .get("content")
                    .is_some_and(|c| c.as_str() != Some(""))
                {
                    out.extend(frame(chunk));
                }
            }
            // Step markers come back only around approvals (BIDI pause); the whole input is in
            // `tool-input-available`; the seed sends no other data, sources or metadata chunks.
            Chunk::StartStep
            | Chunk::FinishStep
            | Chunk::ToolInputDelta(_)
            | Chunk::Data(_)
            | Chunk::MessageMetadata(_)
            | Chunk::SourceUrl(_)
            | Chunk::SourceDocument(_)
            | Chunk::Unknown(_) => {}
            // The seed's frontend renders image files and nothing else.
            Chunk::File(file) if !file.media_type.starts_with("image/") => {}
            _ => out.extend(frame(chunk)),
        }
    }

    fn remember(&mut self, call: &str, tool: &str) {
        if !self.calls.iter().any(|(id, _)| id == call) {
            self.calls.push((call.to_owned(), tool.to_owned()));
        }
    }

    fn tool_name(&self, call: &str) -> Option<&str> {
        self.calls
            .iter()
            .find(|(id, _)| id == call)
            .map(|(_, tool)| tool.as_str())
    }

    /// Held results, in the order of their calls.
    fn flush_outputs(&mut self, out: &mut Vec<String>) {
        if self.held_outputs.is_empty() {
            return;
        }
        let mut held = std::mem::take(&mut self.held_outputs);
        let position = |chunk: &Chunk| {
            let call = match chunk {
                Chunk::ToolOutputAvailable(o) => o.tool_call_id.as_str(),
                Chunk::ToolOutputError(e) => e.tool_call_id.as_str(),
                _ => "",
            };
            self.calls
                .iter()
                .position(|(id, _)| id == call)
                .unwrap_or(usize::MAX)
        };
        held.sort_by_key(|chunk| position(chunk));
        out.extend(held.iter().filter_map(frame));
    }

    /// What the seed says when the person denies `call`.
    fn denial_text(&self, call: &str) -> &'static str {
        match (self.transport, self.tool_name(call)) {
            (SeedTransport::Bidi, Some("process_payment")) => PAYMENT_DENIED,
            (SeedTransport::Bidi, Some("get_location")) => LOCATION_DENIED,
            _ => REJECTED,
        }
    }

    /// Our error text of `call` in the seed's words where the seed has its own.
    fn error_text(&self, call: &str, text: &str) -> String {
        if text.starts_with(APPROVAL_EXPIRED_PREFIX) {
            return APPROVAL_TIMED_OUT.to_owned();
        }
        if self.transport == SeedTransport::Bidi && text.starts_with(BROWSER_TIMEOUT_PREFIX) {
            let tool = self.tool_name(call).unwrap_or("unknown");
            return format!("Timeout waiting for frontend tool result (tool={tool}, id={call})");
        }
        text.to_owned()
    }
}

fn tool_output_error(error: &ToolOutputError, error_text: String) -> Chunk {
    Chunk::ToolOutputError(Box::new(ToolOutputError {
        error_text,
        ..error.clone()
    }))
}

/// A spoken turn's words, if `data` is its `data-voice` `heard` chunk.
fn heard_words(data: &DataChunk) -> Option<&str> {
    super::voice::heard(data).map(|(_, words)| words)
}

/// What the person said as the original system shows its `input_transcription`: a text block
/// `<messageId>_input_text` of the assistant's message, closed at once (the words are final).
fn input_text(message: &str, words: &str) -> Vec<String> {
    let id = format!("{message}_input_text");
    [
        Chunk::text_start(id.clone()),
        Chunk::text_delta(id.clone(), words),
        Chunk::text_end(id),
    ]
    .iter()
    .filter_map(frame)
    .collect()
}

/// `tool-approval-request` with the seed's key order (`toolCallId` first).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SeedApproval<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    tool_call_id: &'a str,
    approval_id: &'a str,
}

/// `finish` as the seed writes it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SeedFinish<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    finish_reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_metadata: Option<SeedMetadata<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SeedMetadata<'a> {
    usage: SeedUsage<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_version: Option<&'a Value>,
}

/// Token counts under the seed's names; `null` where unknown.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SeedUsage<'a> {
    prompt_tokens: &'a Value,
    completion_tokens: &'a Value,
    total_tokens: &'a Value,
}

fn approval_frame(request: &ToolApprovalRequest) -> String {
    sse_frame(&python_json(&SeedApproval {
        kind: "tool-approval-request",
        tool_call_id: &request.tool_call_id,
        approval_id: &request.approval_id,
    }))
}

/// The seed's `finish`: the reason is `stop` where ours is `tool-calls` (a pause, or a step
/// cut short), and our metadata (`{"usage": {"inputTokens", …}, "modelVersion"}`) is renamed.
fn finish_frame(reason: Option<&FinishReason>, metadata: Option<&Value>) -> String {
    let reason = match reason {
        None | Some(FinishReason::ToolCalls) => "stop",
        Some(FinishReason::Unknown(_)) => "other",
        Some(reason) => reason.as_str(),
    };
    const NULL: &Value = &Value::Null;
    let metadata = metadata.map(|m| {
        let usage = m.get("usage").unwrap_or(NULL);
        let count = |key: &str| usage.get(key).unwrap_or(NULL);
        SeedMetadata {
            usage: SeedUsage {
                prompt_tokens: count("inputTokens"),
                completion_tokens: count("outputTokens"),
                total_tokens: count("totalTokens"),
            },
            model_version: m.get("modelVersion").or_else(|| m.get("model")),
        }
    });
    sse_frame(&python_json(&SeedFinish {
        kind: "finish",
        finish_reason: reason,
        message_metadata: metadata,
    }))
}

/// One chunk as a seed frame: the `ai@6.0.0` keys, written like Python.
fn frame(chunk: &Chunk) -> Option<String> {
    let chunk = chunk.for_dialect(Dialect::V6Strict)?;
    Some(sse_frame(&python_json(chunk.as_ref())))
}

fn sse_frame(json: &str) -> String {
    let mut frame = String::with_capacity(json.len() + 8);
    frame.push_str("data: ");
    frame.push_str(json);
    frame.push_str("\n\n");
    frame
}

/// `value` as Python's `json.dumps(value)` writes it (the seed's backend): `", "` between
/// items, `": "` after keys, everything outside printable ASCII escaped as `\uXXXX` (UTF-16,
/// lowercase hex). Keys keep the order serde gives them (declaration order for our structs,
/// sorted for JSON objects we only carry).
pub fn python_json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::with_capacity(128);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonStyle);
    match value.serialize(&mut serializer) {
        // Only ASCII is ever written (see `write_string_fragment`).
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        // Our wire types always serialize (see `chunk::to_json_infallible`).
        Err(_) => String::new(),
    }
}

/// The formatter behind [`python_json`].
struct PythonStyle;

impl Formatter for PythonStyle {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    /// serde_json has already escaped `"`, `\` and control characters (as Python does); the
    /// rest of printable ASCII is written as is and everything else as `\uXXXX`.
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut plain = 0;
        for (at, c) in fragment.char_indices() {
            if (' '..='~').contains(&c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[plain..at])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            plain = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[plain..])
    }
}

#[cfg(test)]
mod tests;
