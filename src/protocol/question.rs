//! A question a tool's server asks the person while the tool runs (an MCP server's elicitation):
//! carried in the assistant message as a `data-question` part whose `id` is the question's id.
//! The part is sent again, with the same id, when the question closes (answered, declined,
//! cancelled, expired), so every client (ours, a stock `useChat`) keeps one part per question.
//!
//! The person answers with `POST /api/chats/{chat}/questions/{id}` and a [`QuestionReply`]: the
//! tool is still running, so the answer cannot wait for the next chat request.

use serde::Serialize;
use serde_json::Value;

/// The data part's name: `data-question` on the wire.
pub const QUESTION_PART: &str = "question";

/// What the person is asked, and where the question stands. Written by the server (serde),
/// read with [`Question::from_data`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// The tool call that is waiting for the answer.
    pub tool_call_id: String,
    /// Who asks, in words ("MCP server files").
    pub source: String,
    /// The question, as the server wrote it (plain text, never Markdown or HTML).
    pub message: String,
    /// The answer's form: a flat JSON Schema object of strings, numbers, booleans and choices.
    /// `None` for a link to open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// A page the person is asked to open (in a new tab, never inside the chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub state: QuestionState,
    /// When the question closes unanswered (server time, ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
    /// What the person answered (an accepted form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
}

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuestionState {
    /// Waiting for the person.
    Open,
    /// The person answered (a form sent, a link opened).
    Answered,
    /// The person chose not to answer; the tool goes on without it.
    Declined,
    /// The person (or the server, or the end of the call) called the whole thing off.
    Cancelled,
    /// Nobody answered in time.
    Expired,
}

impl Question {
    /// Reads a `data-question` part's data; `None` when it is not a question. By hand rather
    /// than serde's derived decoder, which costs the browser's bundle ~3 KB.
    pub fn from_data(data: &Value) -> Option<Question> {
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_owned);
        let value = |key: &str| data.get(key).filter(|v| !v.is_null()).cloned();
        Some(Question {
            tool_call_id: text("toolCallId")?,
            source: text("source")?,
            message: text("message")?,
            schema: value("schema"),
            url: text("url"),
            state: QuestionState::named(data.get("state")?.as_str()?)?,
            deadline_ms: data.get("deadlineMs").and_then(Value::as_i64),
            answer: value("answer"),
        })
    }
}

impl QuestionState {
    /// The state of a wire value.
    pub fn named(name: &str) -> Option<QuestionState> {
        Some(match name {
            "open" => QuestionState::Open,
            "answered" => QuestionState::Answered,
            "declined" => QuestionState::Declined,
            "cancelled" => QuestionState::Cancelled,
            "expired" => QuestionState::Expired,
            _ => return None,
        })
    }

    /// The wire value (`open`, `answered`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionState::Open => "open",
            QuestionState::Answered => "answered",
            QuestionState::Declined => "declined",
            QuestionState::Cancelled => "cancelled",
            QuestionState::Expired => "expired",
        }
    }

    /// How the state reads on the card.
    pub fn words(self) -> &'static str {
        match self {
            QuestionState::Open => "Waiting for your answer",
            QuestionState::Answered => "Answered",
            QuestionState::Declined => "Declined",
            QuestionState::Cancelled => "Cancelled",
            QuestionState::Expired => "Expired unanswered",
        }
    }
}

/// The person's reply to a question.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ssr", derive(serde::Deserialize))]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum QuestionReply {
    /// The form's values (`{}` for a link the person opened).
    #[serde(rename = "accept")]
    Accept {
        #[serde(default)]
        content: serde_json::Map<String, Value>,
    },
    /// Not answering; the tool may go on without it.
    #[serde(rename = "decline")]
    Decline,
    /// Stop: the tool should give up what it was asking for.
    #[serde(rename = "cancel")]
    Cancel,
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn questions_and_replies_keep_their_wire_shape() {
        let question = Question {
            tool_call_id: "call_1".into(),
            source: "MCP server files".into(),
            message: "Which name?".into(),
            schema: Some(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
            url: None,
            state: QuestionState::Open,
            deadline_ms: Some(5),
            answer: None,
        };
        let wire = serde_json::to_value(&question).unwrap();
        assert_eq!(wire["toolCallId"], "call_1");
        assert_eq!(wire["state"], "open");
        assert!(wire.get("url").is_none());
        assert_eq!(Question::from_data(&wire), Some(question.clone()));
        for state in [
            QuestionState::Open,
            QuestionState::Answered,
            QuestionState::Declined,
            QuestionState::Cancelled,
            QuestionState::Expired,
        ] {
            let wire = serde_json::to_value(state).unwrap();
            assert_eq!(wire, state.as_str());
            assert_eq!(QuestionState::named(state.as_str()), Some(state));
        }
        assert_eq!(Question::from_data(&json!({"state": "open"})), None);
        assert_eq!(
            Question::from_data(
                &json!({"toolCallId": "c", "source": "s", "message": "m", "state": "odd"})
            ),
            None
        );

        let accept: QuestionReply =
            serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada"}}))
                .unwrap();
        assert_eq!(
            serde_json::to_value(&accept).unwrap(),
            json!({"action": "accept", "content": {"name": "Ada"}})
        );
        assert_eq!(
            serde_json::from_value::<QuestionReply>(json!({"action": "accept"})).unwrap(),
            QuestionReply::Accept {
                content: Default::default()
            }
        );
        assert_eq!(
            serde_json::from_value::<QuestionReply>(json!({"action": "decline"})).unwrap(),
            QuestionReply::Decline
        );
        assert!(serde_json::from_value::<QuestionReply>(json!({"action": "maybe"})).is_err());
    }
}
