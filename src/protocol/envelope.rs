//! Requests from the browser: the SSE `POST` body and the WebSocket frames.
//!
//! * [`ChatRequest`] is the body `useChat`'s `HttpChatTransport` posts to the
//!   chat endpoint (protocols.md §A.5): `{id, messages, trigger, messageId?}`
//!   plus whatever extra `body` fields the app configured, which are ignored.
//! * [`ClientFrame`] is one JSON text frame of the bidirectional WebSocket
//!   mode, the flat envelopes of the seed system (seed-system.md §2.2):
//!   `{"type": "message" | "tool_result" | ..., ...}`. Extra keys such as
//!   `version` and `timestamp` are tolerated.
//! * [`ServerControl`] are the server's non-chunk frames on that socket.
//!
//! Envelope `type`s are snake_case, unlike chunk types (kebab-case), because
//! that is what the seed clients send.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::message::UiMessage;

/// Why the client asked for a response (`trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// A new user message, or an automatic send after approvals/tool outputs
    /// (then the last message is the assistant message being continued).
    SubmitMessage,
    /// Regenerate the assistant message `messageId` (or the last one).
    RegenerateMessage,
}

/// The JSON body of a chat `POST` (`HttpChatTransport`, §A.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    /// The chat id.
    pub id: String,
    /// The *full* history, the last message being the new user message or
    /// the assistant message that carries approval answers / tool outputs.
    pub messages: Vec<UiMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// Absent on a plain send; the edited or regenerated message's id, or the
    /// last message's id on automatic sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

impl ChatRequest {
    /// Decodes a request body; extra keys are ignored.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// [`ChatRequest::from_json`] for a server: only the messages a server reads are decoded
    /// ([`read_messages`]). A client sends the whole conversation with every request (the AI
    /// SDK does), attachments included; the server keeps the conversation itself and needs the
    /// last message and, when it starts a turn, the few before it.
    pub fn from_slice_for_server(body: &[u8], limits: ReadLimits) -> Result<Self, ReadError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Lean<'a> {
            id: String,
            #[serde(borrow)]
            messages: &'a RawValue,
            #[serde(default)]
            trigger: Option<Trigger>,
            #[serde(default)]
            message_id: Option<String>,
        }
        let lean: Lean<'_> = serde_json::from_slice(body)?;
        Ok(ChatRequest {
            id: lean.id,
            messages: read_messages(lean.messages, limits)?,
            trigger: lean.trigger,
            message_id: lean.message_id,
        })
    }
}

/// How much of a request's `messages` a server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// The most messages a request may carry: more is refused, and read no further than that.
    pub max_messages: usize,
    /// How many of the messages before the last are decoded when the last is the person's new
    /// message (what a new chat may adopt as context).
    pub earlier: usize,
}

/// Why a chat request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("the request carries more than {max} messages")]
    TooManyMessages { max: usize },
}

/// The last `keep` entries of the JSON array `array`, oldest first, each as its raw JSON: the
/// entries are checked to be JSON but none is decoded, and the whole array costs no more memory
/// than `keep` references. An array of more than `max` entries is
/// [`ReadError::TooManyMessages`].
pub fn latest_messages(
    array: &RawValue,
    keep: usize,
    max: usize,
) -> Result<Vec<&RawValue>, ReadError> {
    use serde::de::{DeserializeSeed, Error, SeqAccess, Visitor};

    struct Latest<'c> {
        keep: usize,
        max: usize,
        over: &'c std::cell::Cell<bool>,
    }

    impl<'de> Visitor<'de> for Latest<'_> {
        type Value = std::collections::VecDeque<&'de RawValue>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of messages")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut kept = std::collections::VecDeque::with_capacity(self.keep.min(64));
            let mut count = 0usize;
            while let Some(entry) = seq.next_element::<&'de RawValue>()? {
                count += 1;
                if count > self.max {
                    self.over.set(true);
                    return Err(A::Error::custom("too many messages"));
                }
                if kept.len() == self.keep {
                    kept.pop_front();
                }
                if self.keep > 0 {
                    kept.push_back(entry);
                }
            }
            Ok(kept)
        }
    }

    impl<'de> DeserializeSeed<'de> for Latest<'_> {
        type Value = std::collections::VecDeque<&'de RawValue>;

        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
    }

    let over = std::cell::Cell::new(false);
    let mut reader = serde_json::Deserializer::from_str(array.get());
    let latest = Latest {
        keep,
        max,
        over: &over,
    };
    match latest.deserialize(&mut reader) {
        Ok(kept) => {
            reader.end()?;
            Ok(kept.into())
        }
        Err(_) if over.get() => Err(ReadError::TooManyMessages { max }),
        Err(e) => Err(ReadError::Json(e)),
    }
}

/// The messages of a request's `messages` array that a server reads: the last one and, when it
/// is the person's new message, the `limits.earlier` before it (the context a new chat may
/// adopt, ADR 0020). When the last is the assistant's (answers to approvals, tool outputs), the
/// earlier ones are only checked to be JSON.
pub fn read_messages(array: &RawValue, limits: ReadLimits) -> Result<Vec<UiMessage>, ReadError> {
    let latest = latest_messages(array, limits.earlier + 1, limits.max_messages)?;
    let Some((last, earlier)) = latest.split_last() else {
        return Ok(Vec::new());
    };
    let last: UiMessage = serde_json::from_str(last.get())?;
    let mut messages = Vec::new();
    if last.role == super::message::Role::User {
        messages = earlier
            .iter()
            .map(|m| serde_json::from_str(m.get()))
            .collect::<Result<_, _>>()?;
    }
    messages.push(last);
    Ok(messages)
}

mod frames;
pub use frames::*;

#[cfg(test)]
mod tests;
