//! What a live session's server-side conversation has seen, matched against each request's
//! history: one rule for every socket provider (Gemini Live, OpenAI Realtime).
//!
//! A live provider keeps the conversation on its server, so a step sends only what that server
//! lacks. The runner, though, owns the history: it records the model's output its own way
//! (its own call ids, with the provider's id in `provider_data`), may drop a step that said
//! nothing, and may hand the session a history this socket never saw (another instance, a
//! restart, an edit). So the session remembers what it sent and what the model answered
//! ([`SyncedHistory`]), and each request is first reconciled with it: the model's last output
//! is matched against how the runner recorded it (the same calls, by the provider's ids), and
//! the rest must be equal item by item. Anything else means the server's conversation is not
//! the request's: the caller starts a fresh session and seeds it (never answers from a
//! conversation the person did not have).
//!
//! The socket itself is opened here too ([`connect`]), the same way for every vendor.
//!
//! A vendor supplies only the namespace its call ids are kept under in `provider_data`
//! (see the table in [`super`]) and its wire.

use std::collections::HashMap;

use serde_json::Value;

use crate::agent::history::{AssistantPart, HistoryItem};

/// One entry of what the server's conversation saw.
#[derive(Debug, Clone, PartialEq)]
enum Synced {
    /// A history item, sent or (once the runner recorded it) produced by the model.
    Item(HistoryItem),
    /// The model's output of the last step, until the next request shows how the runner
    /// recorded it: the provider's ids of the calls it made.
    Own { calls: Vec<String> },
}

/// Why a request's history cannot continue this session's conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum Diverged {
    #[error("the recorded step does not match what the model said")]
    Step,
    #[error("the history differs from what this session saw")]
    History,
}

/// What the server's conversation has seen, in order.
#[derive(Debug)]
pub(super) struct SyncedHistory {
    /// The provider's namespace in a call's `provider_data`.
    namespace: &'static str,
    seen: Vec<Synced>,
}

impl SyncedHistory {
    pub(super) fn new(namespace: &'static str) -> Self {
        SyncedHistory {
            namespace,
            seen: Vec::new(),
        }
    }

    /// How many history items the server has seen (the model's last output counts as one).
    pub(super) fn len(&self) -> usize {
        self.seen.len()
    }

    /// Forgets everything (a fresh server session).
    pub(super) fn clear(&mut self) {
        self.seen.clear();
    }

    /// Back to the first `len` items (a resumed session covers only those).
    pub(super) fn truncate(&mut self, len: usize) {
        self.seen.truncate(len);
    }

    /// What the server lacks of `history`: the items after those it has seen.
    pub(super) fn unsent<'h>(&self, history: &'h [HistoryItem]) -> &'h [HistoryItem] {
        &history[self.seen.len().min(history.len())..]
    }

    /// The server has now seen `items` (just sent).
    pub(super) fn sent(&mut self, items: &[HistoryItem]) {
        self.seen.extend(items.iter().cloned().map(Synced::Item));
    }

    /// The model produced one step, making the calls with these provider ids (none: it only
    /// spoke, or the step was cut short). The next request says how the runner recorded it.
    pub(super) fn model_step(&mut self, calls: Vec<String>) {
        self.seen.push(Synced::Own { calls });
    }

    /// Matches `history` against what the server saw. On `Ok` the server's conversation is a
    /// prefix of `history` (send [`Self::unsent`]); on `Err` the caller must start a fresh
    /// session (and clear this).
    pub(super) fn reconcile(&mut self, history: &[HistoryItem]) -> Result<(), Diverged> {
        if let Some(Synced::Own { calls }) = self.seen.last() {
            let index = self.seen.len() - 1;
            match history.get(index) {
                Some(item @ HistoryItem::Assistant { parts }) => {
                    let mut recorded: Vec<String> = parts
                        .iter()
                        .filter_map(|p| match p {
                            AssistantPart::ToolCall { call } => {
                                provider_call_id(&call.provider_data, self.namespace)
                            }
                            _ => None,
                        })
                        .collect();
                    let mut made = calls.clone();
                    recorded.sort();
                    made.sort();
                    if recorded != made {
                        return Err(Diverged::Step);
                    }
                    self.seen[index] = Synced::Item(item.clone());
                }
                // The runner recorded nothing for that step (it said nothing).
                _ => {
                    self.seen.pop();
                }
            }
        }
        let prefix = self.seen.len() <= history.len()
            && self
                .seen
                .iter()
                .zip(history)
                .all(|(seen, item)| matches!(seen, Synced::Item(seen) if seen == item));
        if prefix {
            Ok(())
        } else {
            Err(Diverged::History)
        }
    }
}

/// Opens a live provider's WebSocket with Nagle's algorithm off: a session is a conversation of
/// small frames (the end of speech, `response.create`, audio deltas), and with it on, a small
/// write waiting for the ACK of the one before cost up to 40 ms per exchange (measured by
/// `bench/run --only voice`: end of speech → first audio p50 43 ms before, see ADR 0035).
pub(super) async fn connect(
    request: tokio_tungstenite::tungstenite::handshake::client::Request,
) -> Result<
    (
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
        tokio_tungstenite::tungstenite::handshake::client::Response,
    ),
    tokio_tungstenite::tungstenite::Error,
> {
    tokio_tungstenite::connect_async_with_config(request, None, true).await
}

/// Splits a tail into context (up to and including the last assistant item, or the client's
/// earlier messages a chat began with) and trigger (the trailing results and user messages).
pub(super) fn split_tail(tail: &[HistoryItem]) -> (&[HistoryItem], &[HistoryItem]) {
    let at = tail
        .iter()
        .rposition(|item| {
            matches!(
                item,
                HistoryItem::Assistant { .. } | HistoryItem::Context { .. }
            )
        })
        .map_or(0, |i| i + 1);
    tail.split_at(at)
}

/// Runner call id → the provider's call id, from the calls in `history`.
pub(super) fn provider_call_ids<'h>(
    history: &'h [HistoryItem],
    namespace: &str,
) -> HashMap<&'h str, String> {
    let mut ids = HashMap::new();
    for item in history {
        if let HistoryItem::Assistant { parts } = item {
            for part in parts {
                if let AssistantPart::ToolCall { call } = part
                    && let Some(id) = provider_call_id(&call.provider_data, namespace)
                {
                    ids.insert(call.id.as_str(), id);
                }
            }
        }
    }
    ids
}

/// A provider's id of a recorded tool call: `provider_data[namespace].id`.
pub(super) fn provider_call_id(provider_data: &Option<Value>, namespace: &str) -> Option<String> {
    provider_data
        .as_ref()?
        .get(namespace)?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::history::ToolCall;

    fn fresh() -> SyncedHistory {
        SyncedHistory::new("live")
    }

    fn user(text: &str) -> HistoryItem {
        HistoryItem::user(text)
    }

    fn called(runner_id: &str, live_id: &str) -> HistoryItem {
        HistoryItem::Assistant {
            parts: vec![AssistantPart::ToolCall {
                call: ToolCall {
                    id: runner_id.into(),
                    name: "send_money".into(),
                    args: json!({"amount": 50}),
                    provider_data: Some(json!({"live": {"id": live_id}})),
                },
            }],
        }
    }

    fn said(text: &str) -> HistoryItem {
        HistoryItem::Assistant {
            parts: vec![AssistantPart::Text {
                text: text.into(),
                provider_data: None,
            }],
        }
    }

    #[test]
    fn the_models_calls_recorded_under_the_runners_ids_continue_the_conversation() {
        let mut synced = fresh();
        let asked = [user("pay Hanako")];
        synced.sent(&asked);
        synced.model_step(vec!["L1".into()]);
        let history = [user("pay Hanako"), called("call-7", "L1"), user("thanks")];
        assert_eq!(synced.reconcile(&history), Ok(()));
        assert_eq!(synced.unsent(&history), &history[2..]);
    }

    #[test]
    fn a_recorded_step_with_other_calls_than_the_model_made_is_a_different_conversation() {
        let mut synced = fresh();
        synced.sent(&[user("pay Hanako")]);
        synced.model_step(vec!["L1".into()]);
        let history = [user("pay Hanako"), called("call-7", "L2")];
        assert_eq!(synced.reconcile(&history), Err(Diverged::Step));
    }

    #[test]
    fn a_step_the_runner_did_not_record_is_dropped_from_what_the_server_saw() {
        let mut synced = fresh();
        synced.sent(&[user("hello")]);
        synced.model_step(Vec::new());
        let history = [user("hello"), user("are you there?")];
        assert_eq!(synced.reconcile(&history), Ok(()));
        assert_eq!(synced.len(), 1);
        assert_eq!(synced.unsent(&history), &history[1..]);
    }

    #[test]
    fn an_edited_or_foreign_history_is_refused() {
        let mut synced = fresh();
        synced.sent(&[user("pay Hanako"), said("Done.")]);
        let edited = [user("pay Ben"), said("Done.")];
        assert_eq!(synced.reconcile(&edited), Err(Diverged::History));
        let shorter = [user("pay Hanako")];
        let mut synced = fresh();
        synced.sent(&[user("pay Hanako"), said("Done.")]);
        assert_eq!(synced.reconcile(&shorter), Err(Diverged::History));
    }

    #[test]
    fn the_runners_ids_map_to_the_providers_ids_of_the_same_calls() {
        let history = [user("pay"), called("call-7", "L1"), called("call-8", "L2")];
        let ids = provider_call_ids(&history, "live");
        assert_eq!(ids.get("call-7").map(String::as_str), Some("L1"));
        assert_eq!(ids.get("call-8").map(String::as_str), Some("L2"));
        assert!(provider_call_ids(&history, "openai_realtime").is_empty());
    }

    #[test]
    fn a_tail_splits_after_the_last_thing_the_model_said() {
        let tail = [user("a"), said("b"), user("c"), user("d")];
        let (context, trigger) = split_tail(&tail);
        assert_eq!(context, &tail[..2]);
        assert_eq!(trigger, &tail[2..]);
        let (context, trigger) = split_tail(&tail[2..]);
        assert!(context.is_empty());
        assert_eq!(trigger.len(), 2);
    }

    #[test]
    fn a_call_id_is_read_only_from_its_providers_namespace() {
        let data = Some(json!({"live": {"id": "L1"}, "other": {"id": "X"}}));
        assert_eq!(provider_call_id(&data, "live").as_deref(), Some("L1"));
        assert_eq!(provider_call_id(&data, "openai_realtime"), None);
        assert_eq!(provider_call_id(&None, "live"), None);
    }
}
