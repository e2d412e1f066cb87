//! Questions a running tool asks the person (an MCP server's elicitation): the open ones, the
//! answers that reach them, and how a tool asks.
//!
//! A tool asks through its [`Asker`] (in its `ToolContext`): the question is registered here
//! under an unguessable id, shown to the chat as a `data-question` part (the turn emits it), and
//! the tool waits — for the person's reply (`POST /api/chats/{chat}/questions/{id}`, checked
//! against the question's form), the deadline, or the end of the call. The part is sent again
//! when the question closes. Questions live in memory only: the call they belong to does not
//! survive a restart either (the revived turn runs the call again, which asks again).

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::{
    clock::{Clock, IdGen, IdKind},
    lock,
};
use crate::protocol::{
    Chunk, UiMessage, UiPart,
    question::{QUESTION_PART, Question, QuestionReply, QuestionState},
    schema,
};

/// Why a reply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionError {
    /// Unknown, already closed, or another chat's (the same words for all three: an id is not
    /// proof of anything).
    #[error("this question is not open: it was answered, it expired, or this chat never had it")]
    NotOpen,
    /// The form's values do not match what was asked.
    #[error("{0}")]
    Invalid(String),
}

struct OpenQuestion {
    chat_id: String,
    schema: Option<Value>,
    reply: oneshot::Sender<QuestionReply>,
}

/// The questions waiting for a person, by id.
#[derive(Default)]
pub struct Questions {
    open: Mutex<HashMap<String, OpenQuestion>>,
}

impl Questions {
    /// The person's reply to question `id` of `chat_id`. An accepted form is checked against the
    /// question's schema; a refused reply changes nothing (the question stays open).
    pub fn answer(
        &self,
        chat_id: &str,
        id: &str,
        reply: QuestionReply,
    ) -> Result<(), QuestionError> {
        let mut open = lock(&self.open);
        let Some(question) = open.get(id).filter(|q| q.chat_id == chat_id) else {
            return Err(QuestionError::NotOpen);
        };
        if let (QuestionReply::Accept { content }, Some(schema)) = (&reply, &question.schema) {
            check_answer(schema, content).map_err(QuestionError::Invalid)?;
        }
        let Some(question) = open.remove(id) else {
            return Err(QuestionError::NotOpen);
        };
        question
            .reply
            .send(reply)
            .map_err(|_| QuestionError::NotOpen)
    }

    /// How many questions wait (for tests and the logs).
    pub fn open_count(&self) -> usize {
        lock(&self.open).len()
    }

    fn close(&self, id: &str) {
        lock(&self.open).remove(id);
    }
}

/// What a tool asks.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// Who asks, in words ("MCP server files").
    pub source: String,
    pub message: String,
    pub form: AskForm,
    /// How long the person has.
    pub within: Duration,
}

/// The answer's shape.
#[derive(Debug, Clone, PartialEq)]
pub enum AskForm {
    /// Values for a flat JSON Schema object.
    Form(Value),
    /// A page to open (http or https).
    Link(String),
}

/// How a question ended, for the tool that asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    Reply(QuestionReply),
    /// Nobody answered in time.
    Expired,
    /// The asker gave up first (the server withdrew the question), or the chat is gone.
    Withdrawn,
}

/// What a question tells its turn: the part to emit, and what to audit.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionEvent {
    /// A `data-question` part (the question opened or closed).
    Part(Chunk),
    /// A question of call `tool_call_id` opened.
    Asked {
        tool_call_id: String,
        question_id: String,
        message: String,
    },
    /// It closed: `state`, and what was answered.
    Closed {
        tool_call_id: String,
        question_id: String,
        state: QuestionState,
        answer: Option<Value>,
    },
}

/// How a running tool asks the person: bound to its chat and call.
#[derive(Clone)]
pub struct Asker {
    questions: Arc<Questions>,
    chat_id: String,
    tool_call_id: String,
    /// To the turn, which emits the parts and records the audit events.
    events: mpsc::UnboundedSender<QuestionEvent>,
    clock: Arc<dyn Clock>,
    ids: Arc<dyn IdGen>,
}

impl Asker {
    pub fn new(
        questions: Arc<Questions>,
        chat_id: String,
        tool_call_id: String,
        events: mpsc::UnboundedSender<QuestionEvent>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGen>,
    ) -> Self {
        Asker {
            questions,
            chat_id,
            tool_call_id,
            events,
            clock,
            ids,
        }
    }

    /// The chat the questions go to.
    pub fn chat_id(&self) -> &str {
        &self.chat_id
    }

    /// Asks the person and waits for the reply, the deadline, or `withdrawn` (whichever comes
    /// first). The chat sees the question open, then closed.
    pub async fn ask(&self, ask: Ask, withdrawn: impl Future<Output = ()>) -> Asked {
        let id = self.ids.next_id(IdKind::Question);
        let deadline_ms = self.clock.now_ms() + ask.within.as_millis() as i64;
        let (schema, url) = match ask.form {
            AskForm::Form(schema) => (Some(schema), None),
            AskForm::Link(url) => (None, Some(url)),
        };
        let mut question = Question {
            tool_call_id: self.tool_call_id.clone(),
            source: ask.source,
            message: ask.message,
            schema: schema.clone(),
            url,
            state: QuestionState::Open,
            deadline_ms: Some(deadline_ms),
            answer: None,
        };
        let (reply_tx, reply_rx) = oneshot::channel();
        lock(&self.questions.open).insert(
            id.clone(),
            OpenQuestion {
                chat_id: self.chat_id.clone(),
                schema,
                reply: reply_tx,
            },
        );
        // Closes the question however this future ends (dropped with its call included).
        let mut guard = OpenGuard {
            asker: self,
            id: &id,
            question: Some(question.clone()),
        };
        if self
            .events
            .send(QuestionEvent::Part(question_chunk(&id, &question)))
            .is_err()
        {
            return Asked::Withdrawn;
        }
        let _ = self.events.send(QuestionEvent::Asked {
            tool_call_id: self.tool_call_id.clone(),
            question_id: id.clone(),
            message: question.message.clone(),
        });
        tracing::info!(chat = %self.chat_id, call = %self.tool_call_id, question = %id, "a tool asks the person");
        let asked = tokio::select! {
            reply = reply_rx => match reply {
                Ok(reply) => Asked::Reply(reply),
                Err(_) => Asked::Withdrawn,
            },
            () = tokio::time::sleep(ask.within) => Asked::Expired,
            () = withdrawn => Asked::Withdrawn,
        };
        guard.question = None;
        self.questions.close(&id);
        question.deadline_ms = None;
        question.state = match &asked {
            Asked::Reply(QuestionReply::Accept { content }) => {
                if question.schema.is_some() {
                    question.answer = Some(Value::Object(content.clone()));
                }
                QuestionState::Answered
            }
            Asked::Reply(QuestionReply::Decline) => QuestionState::Declined,
            Asked::Reply(QuestionReply::Cancel) | Asked::Withdrawn => QuestionState::Cancelled,
            Asked::Expired => QuestionState::Expired,
        };
        self.closed(&id, &question);
        asked
    }

    /// Tells the turn that question `id` closed as `question` says.
    fn closed(&self, id: &str, question: &Question) {
        let _ = self
            .events
            .send(QuestionEvent::Part(question_chunk(id, question)));
        let _ = self.events.send(QuestionEvent::Closed {
            tool_call_id: self.tool_call_id.clone(),
            question_id: id.to_owned(),
            state: question.state,
            answer: question.answer.clone(),
        });
    }
}

/// Closes a question whose `ask` was dropped midway (its call ended or the turn stopped).
struct OpenGuard<'a> {
    asker: &'a Asker,
    id: &'a str,
    question: Option<Question>,
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        if let Some(mut question) = self.question.take() {
            self.asker.questions.close(self.id);
            question.state = QuestionState::Cancelled;
            question.deadline_ms = None;
            self.asker.closed(self.id, &question);
        }
    }
}

/// The `data-question` chunk of `question`.
pub fn question_chunk(id: &str, question: &Question) -> Chunk {
    Chunk::data_with_id(
        QUESTION_PART,
        id,
        serde_json::to_value(question).unwrap_or(Value::Null),
    )
}

/// Closes the questions still open in `message` (a turn revived after a restart: the call that
/// asked them runs again and asks anew). True when one was closed.
pub fn close_stale(message: &mut UiMessage) -> bool {
    let mut closed = false;
    for part in &mut message.parts {
        let UiPart::Data(data) = part else { continue };
        if data.name != QUESTION_PART || data.data.get("state") != Some(&Value::from("open")) {
            continue;
        }
        if let Some(object) = data.data.as_object_mut() {
            object.insert("state".into(), Value::from("cancelled"));
            object.remove("deadlineMs");
            closed = true;
        }
    }
    closed
}

/// Checks an accepted form: the schema's rules, then the formats MCP names (`email`, `uri`,
/// `date`, `date-time`), which JSON Schema itself only describes.
pub fn check_answer(schema: &Value, content: &Map<String, Value>) -> Result<(), String> {
    // `enumNames` (the 2025-06-18 way to title choices) labels, it does not constrain.
    let value = Value::Object(content.clone());
    schema::validate(&without_enum_names(schema), &value).map_err(|e| {
        format!(
            "{}: {}",
            e.path.trim_start_matches("$.").trim_start_matches('$'),
            e.message
        )
    })?;
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, prop) in properties.into_iter().flatten() {
        let (Some(format), Some(Value::String(text))) = (
            prop.get("format").and_then(Value::as_str),
            content.get(name),
        ) else {
            continue;
        };
        let ok = match format {
            "email" => is_email(text),
            "uri" => reqwest::Url::parse(text).is_ok(),
            "date" => is_date(text),
            "date-time" => is_date_time(text),
            _ => true,
        };
        if !ok {
            return Err(format!("{name}: is not a valid {format}"));
        }
    }
    Ok(())
}

fn without_enum_names(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for prop in properties.values_mut() {
            if let Some(prop) = prop.as_object_mut() {
                prop.remove("enumNames");
            }
        }
    }
    schema
}

fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !text.chars().any(char::is_whitespace)
}

/// `YYYY-MM-DD`, a real day.
fn is_date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return false;
    }
    let (Ok(y), Ok(m), Ok(d)) = (y.parse::<u32>(), m.parse::<u32>(), d.parse::<u32>()) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339: a date, `T`, a time, and an offset (`Z` or `±HH:MM`).
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let (clock, offset_ok) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, true)
    } else if time.len() > 6 {
        let (clock, offset) = time.split_at(time.len() - 6);
        let ok = offset.starts_with(['+', '-'])
            && offset.as_bytes()[3] == b':'
            && offset[1..3].parse::<u8>().is_ok_and(|h| h < 24)
            && offset[4..].parse::<u8>().is_ok_and(|m| m < 60);
        (clock, ok)
    } else {
        return false;
    };
    let clock = clock.split_once('.').map_or(clock, |(whole, _)| whole);
    let fields: Vec<&str> = clock.split(':').collect();
    offset_ok
        && fields.len() == 3
        && fields.iter().all(|f| f.len() == 2)
        && fields[0].parse::<u8>().is_ok_and(|h| h < 24)
        && fields[1].parse::<u8>().is_ok_and(|m| m < 60)
        && fields[2].parse::<u8>().is_ok_and(|s| s <= 60)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::clock::{SequentialIds, SystemClock};

    fn form() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "minLength": 1},
                "email": {"type": "string", "format": "email"},
                "born": {"type": "string", "format": "date"},
                "at": {"type": "string", "format": "date-time"},
                "home": {"type": "string", "format": "uri"},
                "pet": {"type": "string", "enum": ["pet-1", "pet-2"], "enumNames": ["Cats", "Dogs"]},
                "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}]},
                "fish": {"type": "array", "maxItems": 2, "items": {"anyOf": [{"const": "f1"}, {"const": "f2"}, {"const": "f3"}]}},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "agree": {"type": "boolean"}
            },
            "required": ["name"]
        })
    }

    fn content(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn answers_are_checked_against_the_form_and_its_formats() {
        let schema = form();
        let good = content(json!({
            "name": "Ada", "email": "ada@example.org", "born": "1815-12-10",
            "at": "2026-11-25T10:00:00Z", "home": "https://ada.example", "pet": "pet-2",
            "hero": "h1", "fish": ["f1", "f3"], "count": 3, "agree": true
        }));
        assert_eq!(check_answer(&schema, &good), Ok(()));
        let cases = [
            (json!({}), "name"),
            (json!({"name": ""}), "name"),
            (json!({"name": "A", "email": "not-an-address"}), "email"),
            (json!({"name": "A", "email": "a@b"}), "email"),
            (json!({"name": "A", "born": "2026-02-30"}), "born"),
            (json!({"name": "A", "born": "26-1-1"}), "born"),
            (json!({"name": "A", "at": "2026-11-25 10:00"}), "at"),
            (json!({"name": "A", "at": "2026-11-25T25:00:00Z"}), "at"),
            (json!({"name": "A", "home": "not a url"}), "home"),
            (json!({"name": "A", "pet": "pet-9"}), "pet"),
            (json!({"name": "A", "hero": "h2"}), "hero"),
            (json!({"name": "A", "fish": ["f1", "f2", "f3"]}), "fish"),
            (json!({"name": "A", "fish": ["f9"]}), "fish"),
            (json!({"name": "A", "count": 11}), "count"),
            (json!({"name": "A", "count": 2.5}), "count"),
            (json!({"name": "A", "agree": "yes"}), "agree"),
        ];
        for (value, field) in cases {
            let error = check_answer(&schema, &content(value.clone())).unwrap_err();
            assert!(error.starts_with(field), "{value}: {error}");
        }
        assert!(is_date_time("2026-11-25T10:00:00.5+09:00"));
        assert!(!is_date_time("2026-11-25T10:00:00+9:00"));
    }

    fn asker(questions: &Arc<Questions>) -> (Asker, mpsc::UnboundedReceiver<QuestionEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Asker::new(
                questions.clone(),
                "chat-1".into(),
                "call-1".into(),
                tx,
                Arc::new(SystemClock),
                Arc::new(SequentialIds::default()),
            ),
            rx,
        )
    }

    /// The next part's (id, state), past the audit events.
    async fn next_part(events: &mut mpsc::UnboundedReceiver<QuestionEvent>) -> Chunk {
        loop {
            match events.recv().await {
                Some(QuestionEvent::Part(chunk)) => return chunk,
                Some(_) => continue,
                None => panic!("no more events"),
            }
        }
    }

    fn state_of(chunk: &Chunk) -> (String, String) {
        match chunk {
            Chunk::Data(data) => (
                data.id.clone().unwrap_or_default(),
                data.data["state"].as_str().unwrap_or_default().to_owned(),
            ),
            other => panic!("not a data chunk: {other:?}"),
        }
    }

    fn ask(within: Duration) -> Ask {
        Ask {
            source: "MCP server test".into(),
            message: "Your name?".into(),
            form: AskForm::Form(form()),
            within,
        }
    }

    #[tokio::test]
    async fn a_reply_reaches_the_tool_only_from_its_own_chat_and_only_when_valid() {
        let questions = Arc::new(Questions::default());
        let (asker, mut parts) = asker(&questions);
        let task = tokio::spawn({
            let asker = asker.clone();
            async move {
                asker
                    .ask(ask(Duration::from_secs(60)), std::future::pending())
                    .await
            }
        });
        let opened = next_part(&mut parts).await;
        let (id, state) = state_of(&opened);
        assert_eq!((id.as_str(), state.as_str()), ("q-1", "open"));
        let accept = |v: Value| QuestionReply::Accept {
            content: content(v),
        };
        assert_eq!(
            questions.answer("chat-2", &id, accept(json!({"name": "Eve"}))),
            Err(QuestionError::NotOpen)
        );
        assert!(matches!(
            questions.answer("chat-1", &id, accept(json!({"name": ""}))),
            Err(QuestionError::Invalid(_))
        ));
        assert_eq!(
            questions.answer("chat-1", "q-404", QuestionReply::Decline),
            Err(QuestionError::NotOpen)
        );
        assert_eq!(
            questions.answer("chat-1", &id, accept(json!({"name": "Ada"}))),
            Ok(())
        );
        assert_eq!(
            task.await.unwrap(),
            Asked::Reply(accept(json!({"name": "Ada"})))
        );
        let closed = next_part(&mut parts).await;
        assert_eq!(state_of(&closed), (id.clone(), "answered".into()));
        let Chunk::Data(data) = closed else {
            unreachable!()
        };
        assert_eq!(data.data["answer"], json!({"name": "Ada"}));
        assert_eq!(
            questions.answer("chat-1", &id, QuestionReply::Decline),
            Err(QuestionError::NotOpen),
            "a question is answered once"
        );
        assert_eq!(questions.open_count(), 0);
    }

    #[tokio::test]
    async fn questions_expire_are_withdrawn_and_close_when_dropped() {
        let questions = Arc::new(Questions::default());
        let (asker, mut parts) = asker(&questions);
        assert_eq!(
            asker
                .ask(ask(Duration::from_millis(20)), std::future::pending())
                .await,
            Asked::Expired
        );
        assert_eq!(state_of(&next_part(&mut parts).await).1, "open");
        assert_eq!(state_of(&next_part(&mut parts).await).1, "expired");
        assert_eq!(
            asker.ask(ask(Duration::from_secs(60)), async {}).await,
            Asked::Withdrawn
        );
        assert_eq!(state_of(&next_part(&mut parts).await).1, "open");
        assert_eq!(state_of(&next_part(&mut parts).await).1, "cancelled");
        // The call ends (its future is dropped) while the question is open.
        let pending = asker.ask(ask(Duration::from_secs(60)), std::future::pending());
        let _ = tokio::time::timeout(Duration::from_millis(10), pending).await;
        assert_eq!(state_of(&next_part(&mut parts).await).1, "open");
        assert_eq!(state_of(&next_part(&mut parts).await).1, "cancelled");
        assert_eq!(questions.open_count(), 0);
    }

    #[test]
    fn stale_open_questions_close() {
        let mut message: UiMessage = serde_json::from_value(json!({
            "id": "m", "role": "assistant", "parts": [
                {"type": "data-question", "id": "q1", "data": {"toolCallId": "c", "source": "s", "message": "?", "state": "open", "deadlineMs": 5}},
                {"type": "data-question", "id": "q2", "data": {"toolCallId": "c", "source": "s", "message": "?", "state": "answered"}}
            ]
        }))
        .unwrap();
        assert!(close_stale(&mut message));
        let UiPart::Data(first) = &message.parts[0] else {
            unreachable!()
        };
        assert_eq!(first.data["state"], "cancelled");
        assert!(first.data.get("deadlineMs").is_none());
        assert!(!close_stale(&mut message));
    }
}
