//! The model interface: a system instruction, the conversation and the tool declarations go in;
//! a stream of text, reasoning and tool-call events comes out.
//!
//! Cancellation is by dropping the stream: the runner selects on its cancel token and drops the
//! stream, so providers must release their connection on drop (an HTTP body or a WebSocket
//! does).

use std::{sync::Arc, time::Duration};

use futures::{StreamExt, stream::BoxStream};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::history::{HistoryItem, ToolCall};
#[cfg(doc)]
use super::voice::VoiceNotice;
use super::voice::{Pcm, VoiceError, VoiceInput, VoiceSubscription};
use crate::protocol::FinishReason;

/// A tool as the model is told about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDeclaration {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// Everything a model step needs.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The chat this step belongs to. A model that keeps one connection per conversation
    /// (Gemini Live) keys it by this; a stateless model ignores it.
    pub session_id: String,
    pub system: String,
    /// The chat's history, shared with the chat's record (ADR 0038: handing it to the model
    /// copies nothing; a model that keeps it past its step makes the record's next change copy
    /// it once).
    pub history: Arc<Vec<HistoryItem>>,
    pub tools: Vec<ToolDeclaration>,
}

/// Token counts of one step (or summed over a turn).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

impl Usage {
    /// Adds `other` to `self`, keeping `None` only where both are unknown.
    pub fn add(&mut self, other: Usage) {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            }
        }
        self.input_tokens = sum(self.input_tokens, other.input_tokens);
        self.output_tokens = sum(self.output_tokens, other.output_tokens);
        self.total_tokens = sum(self.total_tokens, other.total_tokens);
    }
}

/// One event of a model step.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    TextDelta(String),
    /// Provider data for the text this step writes (Gemini's thought signature on a text part):
    /// kept with the text in history and sent back with it.
    TextData(Value),
    ReasoningDelta {
        text: String,
        provider_data: Option<Value>,
    },
    /// A complete tool call. Several in one step are parallel calls. `id` may be empty: the
    /// runner assigns its own ids and keeps the provider's in `provider_data`.
    ToolCall(ToolCall),
    /// The agent's speech for this step's answer: PCM16LE mono at
    /// [`OUTPUT_SAMPLE_RATE`](super::voice::OUTPUT_SAMPLE_RATE) (voice models only; its words
    /// come as [`ModelEvent::TextDelta`], the output transcript).
    Audio(Pcm),
    /// The person spoke over this step's answer (barge-in): what it said so far stays, its
    /// speech stops playing at once. A `Finish` follows.
    Interrupted,
    /// The step ended.
    Finish {
        reason: FinishReason,
        usage: Usage,
    },
}

/// Why a model step failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("the model provider is rate limiting requests{}", retry_hint(.retry_after))]
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("the model provider answered {status}: {message}")]
    Provider { status: u16, message: String },
    #[error("cannot reach the model provider: {0}")]
    Transport(String),
    #[error("the model provider sent something unexpected: {0}")]
    Protocol(String),
}

fn retry_hint(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!("; retry after {} s", d.as_secs().max(1)),
        None => String::new(),
    }
}

/// What a model tells the runner outside a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallNotice {
    /// The model withdrew a call it made in an earlier step (Gemini Live's
    /// `toolCallCancellation`, e.g. after the person spoke over it): its approval, if still
    /// pending, must not be answerable any more, and its result is not wanted.
    Withdrawn {
        session_id: String,
        /// The provider's id of the call, as kept in the call's `provider_data`.
        provider_call_id: String,
    },
}

impl super::notices::ChatNotice for CallNotice {
    fn session_id(&self) -> &str {
        let CallNotice::Withdrawn { session_id, .. } = self;
        session_id
    }
}

/// Where a model announces its [`CallNotice`]s, losing none ([`super::notices`]): a withdrawn
/// call missed would stay answerable and could run.
pub type CallNotices = super::notices::Notices<CallNotice>;
/// A subscriber's end of [`CallNotices`].
pub type CallSubscription = super::notices::Subscription<CallNotice>;

/// The stream a model step produces.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ModelError>>;

/// A language model (or a stand-in for one).
pub trait Model: Send + Sync + 'static {
    /// How the model is named to the person (banner, UI, `finish` metadata).
    fn label(&self) -> String;
    /// The model's own id (`gemini-2.5-flash`), for clients that show which model answered
    /// (`finish` metadata `modelVersion`, as the seed's frontend reads it). Defaults to the label.
    fn model_version(&self) -> String {
        self.label()
    }
    /// Starts one model step.
    fn stream(&self, request: ModelRequest) -> ModelStream;
    /// Notices about chat `session_id`'s calls of earlier steps, for models that send them
    /// (Gemini Live, OpenAI Realtime): every one sent from now on, none lost.
    fn call_notices(&self, session_id: &str) -> Option<CallSubscription> {
        let _ = session_id;
        None
    }

    /// Takes the person's voice for chat `session_id` (see [`crate::agent::voice`]). A model
    /// without voice refuses it: [`VoiceError::Unsupported`].
    fn voice(&self, session_id: &str, input: VoiceInput) -> Result<(), VoiceError> {
        let _ = (session_id, input);
        Err(VoiceError::Unsupported {
            model: self.label(),
        })
    }

    /// What a step of chat `session_id` would be sent now (system, history, tools), handed to
    /// the model by the runtime before each [`VoiceInput::Start`]: a model that opens its live
    /// session for speech (Gemini Live) opens it with these. Others ignore it.
    fn voice_context(&self, request: ModelRequest) {
        let _ = request;
    }

    /// Call `call` of chat `session_id`, made in the step that just ended, now waits for people
    /// to countersign it (its card is shown). A model that keeps talking while its calls are out
    /// (Gemini Live's `NON_BLOCKING` calls in a voice chat) tells the provider the call is
    /// pending, so the model neither waits in silence nor claims it done. This decides nothing:
    /// the call's outcome still reaches the model the usual way, in the step after the decision.
    /// Others ignore it.
    fn awaiting_approval(&self, session_id: &str, call: &ToolCall) {
        let _ = (session_id, call);
    }

    /// The answer the model began to a [`VoiceNotice::Heard`] that the runtime takes as an
    /// *aside* of chat `session_id`'s waiting turn (ADR 0035): the person spoke while the turn's
    /// calls are out (a card waits), so the answer streams into that turn and starts no turn of
    /// its own. The same for a [`VoiceNotice::WhileWaiting`]: the model's own talk while a call
    /// waits. Its events are a step's, except that it makes no calls (a call the model asks
    /// for in an aside is answered by the model itself as not run, and never reaches the
    /// runner) and it adds nothing to the history: the exchange stays on the provider's side,
    /// so the waiting call's outcome still goes on its own id. Dropping the stream dismisses the
    /// answer (the rest of it is discarded), which is also how the runtime declines one it
    /// starts nothing for. A model without voice has nothing to say: an empty stream.
    fn aside(&self, session_id: &str) -> ModelStream {
        let _ = session_id;
        futures::stream::empty().boxed()
    }

    /// The runtime starts no turn for the spoken words `transcript` of chat `session_id` that
    /// the model announced ([`VoiceNotice::Heard`]): the chat is not the speaker's any more, or
    /// the turn could not start. The answer the model holds for them is dropped (the rest of it
    /// discarded as it comes), so it neither waits forever nor is taken for other words.
    ///
    /// [`VoiceNotice::Heard`]: crate::agent::voice::VoiceNotice::Heard
    fn decline_spoken(&self, session_id: &str, transcript: &str) {
        let _ = (session_id, transcript);
    }

    /// Notices of spoken turns ([`VoiceNotice::Heard`]), for models with voice: every one, in
    /// order ([`crate::agent::voice::VoiceNotices`]).
    fn voice_notices(&self) -> Option<VoiceSubscription> {
        None
    }

    /// Whether the model reads what attachments hold (a provider does: their bytes are inlined
    /// into each request; the offline demo model and a replay only see that there are some).
    fn reads_attachments(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_adds_known_counts() {
        let mut u = Usage::default();
        u.add(Usage {
            input_tokens: Some(3),
            output_tokens: None,
            total_tokens: Some(3),
        });
        u.add(Usage {
            input_tokens: Some(2),
            output_tokens: Some(5),
            total_tokens: Some(7),
        });
        assert_eq!(u.input_tokens, Some(5));
        assert_eq!(u.output_tokens, Some(5));
        assert_eq!(u.total_tokens, Some(10));
    }

    #[test]
    fn rate_limit_errors_say_when_to_retry() {
        let e = ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(12)),
            message: "quota".into(),
        };
        assert!(e.to_string().contains("retry after 12 s"), "{e}");
    }
}
