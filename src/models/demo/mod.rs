//! The offline demo model: deterministic, honest about what it is, and good enough to drive
//! every tool and scenario without a network or an API key.
//!
//! It reads the last user message with a small table-driven grammar ([`nlu`]) into a plan of
//! steps, each a set of parallel tool calls, and replays that plan statelessly from the history:
//! after `k` rounds of tool results it issues step `k`, and when the plan is done (or the person
//! said no) it writes a summary of what actually happened. Text streams word by word, with
//! `COUNTERSIGN_DEMO_DELAY_MS` between words.

pub mod nlu;
pub mod voice;

use std::{collections::VecDeque, sync::Arc, time::Duration};

use futures::{StreamExt, stream};
use serde_json::Value;

use crate::agent::{
    history::{AssistantPart, HistoryItem, Outcome, ToolCall},
    model::{Model, ModelEvent, ModelRequest, ModelStream, Usage},
    voice::{VoiceError, VoiceInput},
};
use crate::protocol::FinishReason;
use nlu as reply;
use nlu::{Intent, Lang, ToolOutcome};

/// The label people see for this model.
pub const DEMO_LABEL: &str = "Countersign demo model (offline, deterministic)";
/// Its model id (`finish` metadata `modelVersion`).
pub const DEMO_VERSION: &str = "countersign-demo";

/// The demo model.
#[derive(Debug, Clone)]
pub struct DemoModel {
    /// Pause between streamed words.
    pub delay: Duration,
    /// Its ears and voice (offline: `voice`), shared by its clones.
    voice: Arc<voice::DemoVoice>,
}

impl DemoModel {
    pub fn new(delay: Duration) -> Self {
        DemoModel {
            delay,
            voice: Arc::default(),
        }
    }
}

impl Model for DemoModel {
    fn label(&self) -> String {
        DEMO_LABEL.to_string()
    }

    /// It only says it cannot look at them.
    fn reads_attachments(&self) -> bool {
        false
    }

    fn model_version(&self) -> String {
        DEMO_VERSION.to_string()
    }

    /// It hears its own phrases offline (PocketSphinx with its grammar): see [`voice`].
    fn voice(&self, session_id: &str, input: VoiceInput) -> Result<(), VoiceError> {
        self.voice.take(session_id, input)
    }

    fn voice_notices(&self) -> Option<crate::agent::voice::VoiceSubscription> {
        Some(self.voice.notices())
    }

    /// Spoken to while a card waits (an aside): the card is still there, and words do not sign
    /// it. It asks for nothing in an aside.
    fn aside(&self, session_id: &str) -> ModelStream {
        let text = self.text_stream(vec![
            ModelEvent::TextDelta(reply::still_awaiting_countersignature()),
            ModelEvent::Finish {
                reason: crate::protocol::FinishReason::Stop,
                usage: Default::default(),
            },
        ]);
        if self.voice.speaks_in(session_id) {
            self.voice.spoken(session_id, text)
        } else {
            text
        }
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let mut events = respond(&request.history);
        let aloud = self.voice.speaks_in(&request.session_id);
        if aloud && events.iter().any(|e| matches!(e, ModelEvent::ToolCall(_))) {
            // Spoken, the card is out of sight: say where it is and that words do not sign it.
            events.insert(0, ModelEvent::TextDelta(reply::awaiting_countersignature()));
        }
        let text = self.text_stream(events);
        if aloud {
            self.voice.spoken(&request.session_id, text)
        } else {
            text
        }
    }
}

impl DemoModel {
    /// `events`, the words paced by `delay`.
    fn text_stream(&self, events: Vec<ModelEvent>) -> ModelStream {
        let events: VecDeque<ModelEvent> = events.into();
        let delay = self.delay;
        stream::unfold(
            (events, false),
            move |(mut events, mut started)| async move {
                let event = events.pop_front()?;
                if matches!(event, ModelEvent::TextDelta(_)) {
                    if started && !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    started = true;
                }
                Some((Ok(event), (events, started)))
            },
        )
        .boxed()
    }
}

/// The whole response of one step, decided from the history.
pub fn respond(history: &[HistoryItem]) -> Vec<ModelEvent> {
    let Some(user_at) = history
        .iter()
        .rposition(|item| matches!(item, HistoryItem::User { .. }))
    else {
        return text_events(&reply::not_understood(Lang::En, ""), history);
    };
    let HistoryItem::User { text, attachments } = &history[user_at] else {
        return Vec::new();
    };
    let plan = nlu::understand(text);
    let lang = plan.lang;
    let since = &history[user_at + 1..];
    let outcomes = outcomes_since(since);
    let rounds = since
        .iter()
        .filter(|item| matches!(item, HistoryItem::ToolResults { .. }))
        .count();

    if !plan.is_understood() {
        let mut answer = reply::not_understood(lang, text);
        if !attachments.is_empty() {
            answer = format!("{}\n{answer}", attachment_note(lang));
        }
        return text_events(&answer, history);
    }

    // The person said no (or did not answer): stop the chain and report.
    let stopped = last_round_stopped(since);
    if rounds < plan.steps.len() && !stopped {
        let step = &plan.steps[rounds];
        let calls: Vec<ModelEvent> = step
            .iter()
            .filter_map(Intent::tool_call)
            .map(|call| {
                ModelEvent::ToolCall(ToolCall {
                    id: String::new(),
                    name: call.name.to_string(),
                    args: call.args,
                    provider_data: None,
                })
            })
            .collect();
        if !calls.is_empty() {
            let mut events = calls;
            events.push(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: usage(history, 0),
            });
            return events;
        }
        // A step of direct answers (greeting, capabilities, /lorem, clarifying questions).
        let text: Vec<String> = step
            .iter()
            .filter_map(|intent| reply::direct(lang, intent))
            .collect();
        let mut answer = text.join("\n");
        if !outcomes.is_empty() {
            answer = format!("{}\n{answer}", reply::summary(lang, &outcomes));
        }
        return text_events(&answer, history);
    }
    text_events(&reply::summary(lang, &outcomes), history)
}

/// Whether the latest round of results includes a denial, an expiry or an interrupt.
fn last_round_stopped(since: &[HistoryItem]) -> bool {
    since
        .iter()
        .rev()
        .find_map(|item| match item {
            HistoryItem::ToolResults { results } => Some(results.iter().any(|r| {
                matches!(
                    r.outcome,
                    Outcome::Denied { .. } | Outcome::Expired | Outcome::Interrupted
                )
            })),
            _ => None,
        })
        .unwrap_or(false)
}

/// Every tool outcome since the user message, with the arguments the calls ran with.
fn outcomes_since(since: &[HistoryItem]) -> Vec<ToolOutcome> {
    let mut calls: Vec<&ToolCall> = Vec::new();
    let mut outcomes = Vec::new();
    for item in since {
        match item {
            HistoryItem::Assistant { parts } => {
                calls.extend(parts.iter().filter_map(|p| match p {
                    AssistantPart::ToolCall { call } => Some(call),
                    _ => None,
                }));
            }
            HistoryItem::ToolResults { results } => {
                for result in results {
                    let proposed = calls
                        .iter()
                        .find(|c| c.id == result.call_id)
                        .map(|c| c.args.clone())
                        .unwrap_or(Value::Null);
                    let outcome = result.outcome.clone();
                    let outcome = match &result.edited_args {
                        Some(edited) => ToolOutcome::new(&result.name, edited.clone(), outcome)
                            .with_proposed(proposed),
                        None => ToolOutcome::new(&result.name, proposed, outcome),
                    };
                    outcomes.push(outcome);
                }
            }
            // Context is what a client said happened before (ADR 0020): not an outcome here.
            HistoryItem::User { .. } | HistoryItem::Context { .. } => {}
        }
    }
    outcomes
}

fn attachment_note(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "I'm the offline demo model, so I cannot look at attachments.",
        Lang::Ja => "オフラインのデモモデルなので、添付ファイルは読めません。",
    }
}

/// A text answer streamed in small pieces, then `finish`.
fn text_events(text: &str, history: &[HistoryItem]) -> Vec<ModelEvent> {
    let pieces = word_pieces(text);
    let words = pieces.len() as u64;
    let mut events: Vec<ModelEvent> = pieces.into_iter().map(ModelEvent::TextDelta).collect();
    events.push(ModelEvent::Finish {
        reason: FinishReason::Stop,
        usage: usage(history, words),
    });
    events
}

/// "Usage" of the demo model: words in and out (it has no tokenizer, and says so in its label).
/// The words in are the person's and a client's earlier conversation (ADR 0020).
fn usage(history: &[HistoryItem], output_words: u64) -> Usage {
    let input: u64 = history
        .iter()
        .map(|item| match item {
            HistoryItem::User { text, .. } | HistoryItem::Context { text, .. } => {
                text.split_whitespace().count() as u64
            }
            _ => 0,
        })
        .sum();
    Usage {
        input_tokens: Some(input),
        output_tokens: Some(output_words),
        total_tokens: Some(input + output_words),
    }
}

/// Splits text into streaming pieces: a word with its following white space; runs of Japanese
/// (no spaces) in pieces of three characters. Concatenating the pieces gives the text back.
pub fn word_pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    for word in text.split_inclusive(char::is_whitespace) {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > 6 && chars.iter().any(|c| !c.is_ascii()) {
            for chunk in chars.chunks(3) {
                pieces.push(chunk.iter().collect());
            }
        } else {
            pieces.push(word.to_string());
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::history::ToolResult;
    use crate::models::providers::testing::text_of;
    use serde_json::json;

    fn calls_of(events: &[ModelEvent]) -> Vec<(String, Value)> {
        events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolCall(c) => Some((c.name.clone(), c.args.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pieces_reassemble_the_text() {
        for text in [
            "Hello there, world.",
            "花子さんへの50ドルの送金が完了しました。",
            "",
            "a  b\nc",
        ] {
            assert_eq!(word_pieces(text).concat(), text);
        }
        assert_eq!(word_pieces("one two three").len(), 3);
    }

    #[test]
    fn lorem_streams_exactly_n_words() {
        let events = respond(&[HistoryItem::user("/lorem 50")]);
        assert_eq!(text_of(&events).split_whitespace().count(), 50);
        assert!(matches!(
            events.last(),
            Some(ModelEvent::Finish {
                reason: FinishReason::Stop,
                ..
            })
        ));
    }

    #[test]
    fn a_payment_request_becomes_a_tool_call_then_a_summary_of_the_result() {
        let mut history = vec![HistoryItem::user("Send $50 to Hanako")];
        let first = respond(&history);
        let calls = calls_of(&first);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "process_payment");
        assert_eq!(calls[0].1["amount"], 50);
        assert!(matches!(
            first.last(),
            Some(ModelEvent::Finish {
                reason: FinishReason::ToolCalls,
                ..
            })
        ));

        history.push(HistoryItem::Assistant {
            parts: vec![AssistantPart::ToolCall {
                call: ToolCall {
                    id: "c1".into(),
                    name: "process_payment".into(),
                    args: calls[0].1.clone(),
                    provider_data: None,
                },
            }],
        });
        history.push(HistoryItem::ToolResults {
            results: vec![ToolResult {
                call_id: "c1".into(),
                name: "process_payment".into(),
                outcome: Outcome::Denied {
                    reason: Some("not today".into()),
                    by: None,
                },
                edited_args: None,
            }],
        });
        let second = respond(&history);
        assert!(calls_of(&second).is_empty());
        let text = text_of(&second);
        assert!(text.contains("not today"), "{text}");
    }

    #[test]
    fn a_chain_stops_after_a_denial() {
        let mut history = vec![HistoryItem::user(
            "check the weather in Paris, then send Bob $5",
        )];
        let first = calls_of(&respond(&history));
        assert_eq!(first[0].0, "get_weather");
        history.push(HistoryItem::Assistant {
            parts: vec![AssistantPart::ToolCall {
                call: ToolCall {
                    id: "w".into(),
                    name: "get_weather".into(),
                    args: first[0].1.clone(),
                    provider_data: None,
                },
            }],
        });
        history.push(HistoryItem::ToolResults {
            results: vec![ToolResult {
                call_id: "w".into(),
                name: "get_weather".into(),
                outcome: Outcome::Output { output: json!({"location": "Paris", "temperature_c": 14, "condition": "Light rain", "source": "offline"}) },
                edited_args: None,
            }],
        });
        let second = calls_of(&respond(&history));
        assert_eq!(second[0].0, "process_payment");
        history.push(HistoryItem::Assistant {
            parts: vec![AssistantPart::ToolCall {
                call: ToolCall {
                    id: "p".into(),
                    name: "process_payment".into(),
                    args: second[0].1.clone(),
                    provider_data: None,
                },
            }],
        });
        history.push(HistoryItem::ToolResults {
            results: vec![ToolResult {
                call_id: "p".into(),
                name: "process_payment".into(),
                outcome: Outcome::Expired,
                edited_args: None,
            }],
        });
        let last = respond(&history);
        assert!(calls_of(&last).is_empty());
        let text = text_of(&last);
        assert!(text.contains("Paris"), "{text}");
    }

    #[test]
    fn client_context_is_read_as_words_in_and_changes_no_plan() {
        use crate::agent::history::{ContextRole, context_items};
        let mut history = context_items([
            (ContextRole::User, "Send $50 to Hanako".to_owned()),
            (
                ContextRole::Assistant,
                "[The tool process_payment was approved and returned {\"ok\":true}]".to_owned(),
            ),
        ]);
        history.push(HistoryItem::user("Send $50 to Hanako"));
        let events = respond(&history);
        // The payment is asked for again: what the client says happened is not an outcome.
        assert_eq!(calls_of(&events)[0].0, "process_payment");
        let Some(ModelEvent::Finish { usage, .. }) = events.last() else {
            panic!("{events:?}");
        };
        let context_words: u64 = history[..2]
            .iter()
            .map(|item| match item {
                HistoryItem::Context { text, .. } => text.split_whitespace().count() as u64,
                _ => 0,
            })
            .sum();
        assert_eq!(usage.input_tokens, Some(context_words + 4));
    }

    #[test]
    fn unknown_requests_get_an_honest_answer() {
        let text = text_of(&respond(&[HistoryItem::user("Tell me a joke")]));
        assert!(text.to_lowercase().contains("demo"), "{text}");
    }
}
