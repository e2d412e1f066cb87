//! Voice on the wire that both builds read (ADR 0035): the `data-voice` part. Its transient
//! states (`heard`, `interrupted`, …) steer the page; an *aside* — what the person said while
//! the turn waited for them — is a stored part of the waiting assistant message, so every
//! client's reducer keeps the person's words where they were said, and a reload shows them.

use serde_json::json;

use super::{
    chunk::{Chunk, DataChunk},
    message::DataPart,
};

/// The data part's name (`data-voice`).
pub const VOICE_PART: &str = "voice";

/// Where a chat's voice stands, as the browser is told (`data-voice` `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoiceState {
    /// The microphone is open and the model listens.
    Listening,
    /// The model is speaking.
    Speaking,
    /// Neither.
    Idle,
    /// The person spoke over the model: stop playing its speech at once.
    Interrupted,
}

impl VoiceState {
    const ALL: [VoiceState; 4] = [
        VoiceState::Listening,
        VoiceState::Speaking,
        VoiceState::Idle,
        VoiceState::Interrupted,
    ];

    /// The wire name (`data-voice.data.state`).
    pub fn as_str(self) -> &'static str {
        match self {
            VoiceState::Listening => "listening",
            VoiceState::Speaking => "speaking",
            VoiceState::Idle => "idle",
            VoiceState::Interrupted => "interrupted",
        }
    }

    /// The state a transient `data-voice` chunk's data tells, if it tells one (a `heard` or an
    /// aside tells none).
    pub fn of(data: &serde_json::Value) -> Option<VoiceState> {
        let name = data.get("state")?.as_str()?;
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The transient `data-voice` chunk that tells the browser where the voice stands.
    pub fn chunk(self) -> Chunk {
        Chunk::transient_data(VOICE_PART, json!({ "state": self.as_str() }))
    }
}

/// The transient `data-voice` chunk that opens a spoken turn: what the person said, as their
/// message `message_id` (the page shows it; the chat keeps it as that user message).
pub fn heard_chunk(message_id: &str, text: &str) -> Chunk {
    Chunk::transient_data(
        VOICE_PART,
        json!({ "state": "heard", "messageId": message_id, "text": text }),
    )
}

/// What a spoken turn's `heard` chunk says: the person's message id (when it names one) and
/// their words.
pub fn heard(data: &DataChunk) -> Option<(Option<&str>, &str)> {
    if data.name != VOICE_PART || data.data.get("state")?.as_str()? != "heard" {
        return None;
    }
    let id = data.data.get("messageId").and_then(|v| v.as_str());
    Some((id, data.data.get("text")?.as_str()?))
}

/// The stored `data-voice` part of an aside: `{state: "aside", text}`.
pub fn aside_chunk(text: &str) -> Chunk {
    Chunk::data(VOICE_PART, json!({ "state": "aside", "text": text }))
}

/// The person's words, if `part` is an aside's.
pub fn aside_words(part: &DataPart) -> Option<&str> {
    if part.name != VOICE_PART || part.data.get("state")?.as_str()? != "aside" {
        return None;
    }
    part.data.get("text")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{MessageReducer, UiPart};

    /// The reducer keeps an aside's words in the message, in order with what the agent said
    /// around them (both builds reduce with it: the server's record, the page's list).
    #[test]
    fn an_asides_words_are_kept_in_the_message_where_they_were_said() {
        let mut reducer = MessageReducer::new("m1".to_owned());
        for chunk in [
            Chunk::start("m1"),
            Chunk::text_start("t1"),
            Chunk::text_delta("t1", "It waits for your approval."),
            Chunk::text_end("t1"),
            aside_chunk("yes, approve it"),
            Chunk::text_start("t2"),
            Chunk::text_delta("t2", "Only the card approves it."),
            Chunk::text_end("t2"),
        ] {
            reducer.apply(&chunk).unwrap();
        }
        let parts = &reducer.message().parts;
        let said: Vec<_> = parts
            .iter()
            .filter_map(|p| match p {
                UiPart::Data(d) => aside_words(d),
                _ => None,
            })
            .collect();
        assert_eq!(said, ["yes, approve it"]);
        let position = |wanted: &dyn Fn(&UiPart) -> bool| parts.iter().position(wanted);
        let words = position(&|p| matches!(p, UiPart::Data(_))).unwrap();
        let before = position(&|p| matches!(p, UiPart::Text(t) if t.text.starts_with("It waits")));
        let after = position(&|p| matches!(p, UiPart::Text(t) if t.text.starts_with("Only")));
        assert!(before < Some(words) && Some(words) < after, "{parts:?}");
    }

    #[test]
    fn other_voice_parts_are_no_asides() {
        let part = |name: &str, data| DataPart {
            name: name.into(),
            id: None,
            data,
        };
        assert_eq!(
            aside_words(&part("voice", json!({"state": "heard", "text": "hi"}))),
            None
        );
        assert_eq!(
            aside_words(&part("other", json!({"state": "aside", "text": "hi"}))),
            None
        );
        assert_eq!(
            aside_words(&part("voice", json!({"state": "aside", "text": "hi"}))),
            Some("hi")
        );
    }
}
