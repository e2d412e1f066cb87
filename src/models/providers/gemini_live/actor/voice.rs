//! The person's voice on a Live session (ADR 0035): microphone audio as
//! `realtimeInput.audio`, push-to-talk as `activityStart`/`activityEnd` (the server's detection
//! off), hands-free as the server's own detection; and the spoken answer, which begins with no
//! step to take it: the actor tells the runtime what it heard ([`VoiceNotice::Heard`]), holds
//! what the server sends until the runner's step for that turn comes, and hands it to that step.
//!
//! The setup cannot change on an open socket, so the first `start` of a chat, and a `start` in
//! another mode, replace the socket (resuming with the handle); text steps keep the mode the
//! chat last spoke in, so they do not.

use futures::StreamExt;
use serde_json::json;
use tokio::time::Instant;

use super::step::{Step, StepEnd};
use super::{SessionActor, send, send_context};
use crate::agent::history::{HistoryItem, ToolCall};
use crate::agent::model::{ModelError, ModelRequest};
use crate::agent::voice::{UNTRANSCRIBED, VoiceInput, VoiceMode, VoiceNotice};
use crate::models::providers::gemini;
use crate::models::providers::gemini_live::history::{google_id, live_ids};
use crate::models::providers::gemini_live::wire::{
    LiveFunctionResponse, ServerMessage, SetupSpec, realtime_audio, tool_response,
};
use crate::models::providers::gemini_live::{EventSender, ToolBehavior};

/// What the model is told of a call that waits for a countersignature: the card decides, not
/// the conversation (ADR 0035).
const AWAITING: &str = "This call has not run. It waits for a countersignature: the people who \
                        must approve it do so on their screen (the card, or the inbox). Tell the \
                        person it is waiting for their approval on screen; do not say it was \
                        done, and do not take a spoken yes as approval. Its outcome will follow \
                        under this call id.";

/// What the model is told of a call it asks for in an aside (ADR 0035): the aside runs
/// nothing; the person asks again once the waiting call is decided.
const ASIDE_CALL: &str = "This call was not run: it was asked for while another call waits for \
                          its countersignature, and nothing new runs until that one is decided. \
                          Do not say it was done; tell the person to ask again once the waiting \
                          call is decided.";

/// The voice of one session.
#[derive(Default)]
pub(in crate::models::providers::gemini_live) struct Voice {
    /// What the last `start` opened the session with (system and tools for a new socket).
    pub(super) context: Option<ModelRequest>,
    /// The mode the socket was set up for, once the chat has spoken.
    pub(super) mode: Option<VoiceMode>,
    /// Between `start` and `end`.
    open: bool,
    /// Audio went to the server since the last spoken turn began: output between steps is the
    /// answer to it.
    spoke: bool,
    /// The input transcription since then.
    heard: String,
    /// An answer the runtime was told of, held until it is taken.
    announced: Option<Announced>,
    /// What the server sent for the announced answer before it was taken.
    held: Vec<ServerMessage>,
}

/// What the held answer answers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Announced {
    /// The person's speech: a spoken turn's user message as the runtime will write it (or an
    /// aside of the waiting turn).
    Heard(String),
    /// Nothing the person said: the model talks on its own while a call it was told waits
    /// ([`VoiceNotice::WhileWaiting`]); taken as an aside of the waiting turn.
    WhileWaiting,
}

impl Voice {
    /// Keeps the input transcription of speech not yet answered.
    pub(super) fn note_heard(&mut self, text: &str) {
        self.heard.push_str(text);
    }

    /// The server cut an answer off because the person spoke over it (`interrupted`): what
    /// they said is answered next, so output between steps after this is the answer to speech
    /// even when its audio went before the cut answer began (the person kept talking).
    pub(super) fn spoken_over(&mut self) {
        self.spoke = true;
    }

    /// Audio went to the server since the last spoken turn began.
    pub(super) fn spoke(&self) -> bool {
        self.spoke
    }
}

impl SessionActor {
    pub(super) async fn on_voice(&mut self, input: VoiceInput) {
        let result = match input {
            VoiceInput::Start { mode } => self.start_voice(mode).await,
            VoiceInput::Audio(pcm) => self.send_voice(&realtime_audio(&pcm)).await,
            VoiceInput::End => {
                let end = match self.voice.mode {
                    Some(VoiceMode::HandsFree) => {
                        json!({"realtimeInput": {"audioStreamEnd": true}})
                    }
                    _ => json!({"realtimeInput": {"activityEnd": {}}}),
                };
                let sent = self.send_voice(&end).await;
                self.voice.open = false;
                sent
            }
        };
        if let Err(reason) = result {
            tracing::warn!(session = %self.session_id, %reason, "Gemini Live voice input lost");
        }
    }

    /// Opens the socket for speech in `mode` (see the module docs), brings the server session
    /// up to the runner's history, and, for push-to-talk, marks the start of speech.
    async fn start_voice(&mut self, mode: VoiceMode) -> Result<(), String> {
        let replace = self.voice.mode != Some(mode);
        self.voice.mode = Some(mode);
        if self.in_step {
            // A step is reading this socket: the mode changes at the next start.
            if replace {
                tracing::info!(session = %self.session_id, "voice mode changes after this answer");
            }
        } else {
            let request = self
                .voice
                .context
                .clone()
                .ok_or("no voice context: the runtime sends it before start")?;
            let setup =
                SetupSpec::new(&self.shared, &request, Some(mode)).map_err(|e| e.to_string())?;
            self.reconcile(&request.history);
            self.ensure_connection(&setup, &request.history)
                .await
                .map_err(|e| e.to_string())?;
            self.sync_history(&request.history).await?;
        }
        self.voice.open = true;
        if self.voice.mode == Some(VoiceMode::PushToTalk) {
            self.send_voice(&json!({"realtimeInput": {"activityStart": {}}}))
                .await?;
        }
        Ok(())
    }

    /// A call of the last step waits for a countersignature ([`Job::Awaiting`]). In a voice
    /// chat whose tools are `NON_BLOCKING`, the model is answered at once on the call's id with
    /// `{"output": {"status": "awaiting_countersignature", …}}`, `willContinue: true` and
    /// `scheduling: "WHEN_IDLE"`, so it goes on talking and says the call waits; the final
    /// response follows on the same id (`willContinue: false`) once people decided. A text
    /// chat, a blocking model, or a call this socket did not issue (a resumed or replaced
    /// socket: the id means nothing to it) gets nothing here: the outcome goes the usual way.
    ///
    /// [`Job::Awaiting`]: crate::models::providers::gemini_live::Job::Awaiting
    pub(super) async fn on_awaiting(&mut self, call: &ToolCall) {
        if self.shared.behavior != ToolBehavior::NonBlocking || self.voice.mode.is_none() {
            return;
        }
        let Some(id) = google_id(&call.provider_data) else {
            return;
        };
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if !conn.issued.contains_key(&id) || self.cancelled.contains(&id) {
            return;
        }
        if !conn.awaiting.insert(id.clone()) {
            return;
        }
        let response = LiveFunctionResponse {
            id,
            name: call.name.clone(),
            response: json!({"output": {
                "status": "awaiting_countersignature",
                "message": AWAITING,
            }}),
            scheduling: Some("WHEN_IDLE"),
            will_continue: Some(true),
        };
        if let Err(reason) = send(conn, &tool_response(vec![response])).await {
            tracing::debug!(session = %self.session_id, %reason, "the Gemini Live socket broke");
            self.conn = None;
        }
    }

    /// Sends what the server session lacks of `history`, as context (no answer asked for).
    async fn sync_history(&mut self, history: &[HistoryItem]) -> Result<(), String> {
        let conn = self.conn.as_mut().ok_or("no socket")?;
        let tail = self.synced.unsent(history);
        send_context(conn, tail).await?;
        self.synced.sent(tail);
        Ok(())
    }

    async fn send_voice(&mut self, message: &serde_json::Value) -> Result<(), String> {
        if !self.voice.open {
            return Err("audio outside start … end".into());
        }
        let conn = self
            .conn
            .as_mut()
            .ok_or("the Gemini Live socket is closed")?;
        send(conn, message).await?;
        self.voice.spoke = true;
        Ok(())
    }

    /// A server message with no step to take it: if it begins (or continues) the answer to the
    /// person's speech, it is held for that turn's step and `None` is returned.
    ///
    /// Without speech, output while a call this socket was told waits (`willContinue`) is the
    /// model talking about it ("it is on your screen, waiting for your approval"): held the
    /// same way, and the runtime told [`VoiceNotice::WhileWaiting`], so the person hears it
    /// inside the waiting turn rather than not at all.
    pub(super) fn hold_spoken_answer(&mut self, message: ServerMessage) -> Option<ServerMessage> {
        if self.voice.announced.is_some() {
            self.voice.held.push(message);
            return None;
        }
        let Some(conn) = self.conn.as_ref().filter(|c| c.discard == 0) else {
            return Some(message);
        };
        let answers = message.tool_call.is_some()
            || message
                .server_content
                .as_ref()
                .is_some_and(|c| c.has_content());
        if !self.voice.spoke {
            let waits = conn.awaiting.iter().any(|id| !self.cancelled.contains(id));
            if !(waits && answers) {
                return Some(message);
            }
            self.voice.announced = Some(Announced::WhileWaiting);
            self.voice.held.push(message);
            tracing::debug!(session = %self.session_id, "Gemini Live talks while a call waits");
            let _ = self.shared.voice_notices.send(VoiceNotice::WhileWaiting {
                session_id: self.session_id.clone(),
            });
            return None;
        }
        if let Some(text) = message.server_content.as_ref().and_then(|c| c.heard()) {
            self.voice.note_heard(text);
        }
        if !answers {
            return Some(message);
        }
        let heard = std::mem::take(&mut self.voice.heard);
        let transcript = heard.trim().to_owned();
        self.voice.spoke = false;
        self.voice.announced = Some(Announced::Heard(if transcript.is_empty() {
            UNTRANSCRIBED.to_owned()
        } else {
            transcript.clone()
        }));
        self.voice.held.push(message);
        tracing::debug!(session = %self.session_id, "Gemini Live answers speech");
        let _ = self.shared.voice_notices.send(VoiceNotice::Heard {
            session_id: self.session_id.clone(),
            transcript,
        });
        None
    }

    /// [`Model::aside`]: the answer held for the speech last announced (or the model's own talk
    /// while a call waits) streams to `events`, as an aside of the turn that waits, not as a
    /// step: nothing is sent (the
    /// server heard the speech), nothing is added to what the server's conversation is known
    /// to have seen (the waiting call's outcome still goes on its id), and calls the model
    /// makes in it are answered at once as not run. A closed `events` (the runtime declined
    /// the answer) discards it.
    ///
    /// [`Model::aside`]: crate::agent::model::Model::aside
    pub(super) async fn run_aside(&mut self, events: EventSender) {
        if self.voice.announced.take().is_none() {
            // Nothing was heard, or its answer went to a step already.
            return;
        }
        let held = std::mem::take(&mut self.voice.held);
        let mut step = Step::for_aside(events);
        if step.events.is_closed() {
            self.drop_held(held).await;
            return;
        }
        let mut held = held.into_iter();
        while let Some(message) = held.next() {
            match self.on_step_message(&mut step, message).await {
                Ok(true) => return self.release_held(held).await,
                Ok(false) => {}
                Err(reason) => {
                    self.conn = None;
                    let _ = step.events.send(Err(ModelError::Transport(reason)));
                    return;
                }
            }
        }
        match self.read_step(&mut step).await {
            StepEnd::Finished | StepEnd::Dropped => {}
            StepEnd::Failed(error) => {
                let _ = step.events.send(Err(error));
            }
            StepEnd::Lost(reason) => {
                self.conn = None;
                let _ = step.events.send(Err(ModelError::Transport(reason)));
            }
        }
    }

    /// No turn takes the answer to `words` ([`Model::decline_spoken`]): if it is the one held,
    /// it goes (what was held behind it is read again, so it is announced in turn).
    ///
    /// [`Model::decline_spoken`]: crate::agent::model::Model::decline_spoken
    pub(super) async fn decline_spoken(&mut self, words: &str) {
        if !matches!(&self.voice.announced, Some(Announced::Heard(heard)) if heard == words) {
            return;
        }
        tracing::info!(session = %self.session_id, "no turn for the words heard; dropping their answer");
        self.voice.announced = None;
        let held = std::mem::take(&mut self.voice.held);
        let ends = held.iter().position(ServerMessage::ends_generation);
        match ends {
            Some(end) => {
                let mut held = held.into_iter();
                let answer: Vec<ServerMessage> = held.by_ref().take(end + 1).collect();
                self.drop_held(answer).await;
                self.release_held(held).await;
            }
            None => self.drop_held(held).await,
        }
    }

    /// Reads the socket, holding what comes, until the held answer's generation ends
    /// (`turnComplete` or `interrupted`); `false` if it does not (the socket broke, or the
    /// server was silent for [`LiveTimeouts::silence`]).
    ///
    /// [`LiveTimeouts::silence`]: crate::models::providers::gemini_live::LiveTimeouts::silence
    async fn held_answer_ends(&mut self) -> bool {
        while !self.voice.held.iter().any(ServerMessage::ends_generation) {
            let Some(conn) = self.conn.as_mut() else {
                return false;
            };
            let silence = self.shared.config.timeouts.silence;
            let Ok(frame) = tokio::time::timeout(silence, conn.ws.next()).await else {
                tracing::warn!(session = %self.session_id, "the held answer to speech did not end");
                return false;
            };
            // As between steps: what comes is held behind the answer; a socket that broke or
            // closed is gone.
            self.on_idle_frame(frame).await;
        }
        tracing::debug!(session = %self.session_id, "a step of the running turn goes first; the answer to speech stays held for its own turn");
        true
    }

    /// What was held behind the answer just taken (another answer began after it ended, e.g.
    /// the person spoke over the model's talk): read again as if it had just come, so it is
    /// announced in turn rather than lost.
    async fn release_held(&mut self, rest: impl Iterator<Item = ServerMessage>) {
        for message in rest {
            if let Err(reason) = self.on_idle_message(message).await {
                tracing::debug!(session = %self.session_id, %reason, "the socket broke");
                self.conn = None;
                return;
            }
        }
    }

    /// A held answer nobody takes: its notices still count (a cancellation, a call to answer),
    /// and the rest of its generation is discarded.
    async fn drop_held(&mut self, held: Vec<ServerMessage>) {
        let ended = held.iter().any(ServerMessage::ends_generation);
        for message in held {
            self.common(&message);
            if let Some(cancellation) = message.tool_call_cancellation {
                self.remember_cancelled(cancellation.ids);
            }
            if let Some(calls) = message.tool_call
                && let Err(reason) = self
                    .answer_stray_calls(calls.function_calls, "its answer was declined")
                    .await
            {
                tracing::debug!(session = %self.session_id, %reason, "the socket broke");
                self.conn = None;
            }
        }
        if !ended && let Some(conn) = self.conn.as_mut() {
            conn.discard += 1;
        }
    }

    /// Calls the model makes in an aside: answered at once as not run (silently with
    /// `NON_BLOCKING` tools: the model knows, nothing new is generated; a blocking model goes
    /// on with its answer).
    pub(super) async fn refuse_aside_calls(
        &mut self,
        calls: Vec<gemini::FunctionCall>,
    ) -> Result<(), String> {
        let non_blocking = self.shared.behavior == ToolBehavior::NonBlocking;
        let conn = self.conn.as_mut().ok_or("no socket")?;
        let responses: Vec<LiveFunctionResponse> = calls
            .into_iter()
            .filter_map(|call| {
                tracing::info!(
                    session = %self.session_id, tool = %call.name,
                    "a call asked for in an aside is answered as not run"
                );
                Some(LiveFunctionResponse {
                    id: call.id?,
                    name: call.name,
                    response: json!({ "error": ASIDE_CALL }),
                    scheduling: non_blocking.then_some("SILENT"),
                    will_continue: None,
                })
            })
            .collect();
        if responses.is_empty() {
            return Ok(());
        }
        send(conn, &tool_response(responses)).await
    }

    /// The runner's step for the spoken turn: the server already heard its user message, so
    /// nothing is sent; what was held is read first. `Some(true)`: the step ended in what was
    /// held; `None`: this step is not the spoken turn's (it goes the usual way).
    ///
    /// A step that is not the spoken turn's, while an answer to speech is held, is a step of a
    /// turn that was still running when the person spoke (its tools ran; the spoken turn
    /// starts when it stops): the held answer stays for its own turn (ADR 0035, "the held-answer
    /// race"). That step waits for the held generation's end first (its input would cut the
    /// answer off), then goes the usual way.
    pub(super) async fn attach_spoken(&mut self, step: &mut Step) -> Option<bool> {
        let heard_answer = matches!(self.voice.announced, Some(Announced::Heard(_)));
        let is_spoken = match &self.voice.announced {
            Some(Announced::Heard(heard)) => matches!(
                step.history.last(),
                Some(HistoryItem::User { text, .. }) if text == heard
            ),
            _ => false,
        };
        if heard_answer && !is_spoken && self.held_answer_ends().await {
            return None;
        }
        let announced = self.voice.announced.take()?;
        let held = std::mem::take(&mut self.voice.held);
        let conn = self.conn.as_mut()?;
        if !is_spoken {
            match announced {
                Announced::Heard(_) => tracing::warn!(
                    session = %self.session_id,
                    "the spoken turn did not start; dropping the answer to it"
                ),
                Announced::WhileWaiting => tracing::info!(
                    session = %self.session_id,
                    "the talk while a call waited was not taken before the next step; dropped"
                ),
            }
            let ended = held.iter().any(ServerMessage::ends_generation);
            if !ended {
                conn.discard += 1;
            }
            return None;
        }
        let tail = self.synced.unsent(&step.history);
        // Calls of the turn the speech ended (a card superseded) still get their one final
        // response, silently: the model is answering the speech already. (A blocking model's
        // call is cancelled by the speech itself, §1 of voice.md.)
        let ids = live_ids(&step.history);
        let non_blocking = self.shared.behavior == ToolBehavior::NonBlocking;
        let responses: Vec<LiveFunctionResponse> = tail
            .iter()
            .filter(|_| non_blocking)
            .filter_map(|item| match item {
                HistoryItem::ToolResults { results } => Some(results),
                _ => None,
            })
            .flatten()
            .filter_map(|result| {
                let id = ids.get(result.call_id.as_str())?.clone();
                if self.cancelled.remove(&id) {
                    conn.issued.remove(&id);
                    conn.awaiting.remove(&id);
                    return None;
                }
                conn.issued.remove(&id)?;
                let will_continue = conn.awaiting.remove(&id).then_some(false);
                Some(LiveFunctionResponse {
                    id,
                    name: result.name.clone(),
                    response: gemini::as_object(result.model_view(), "result"),
                    scheduling: Some("SILENT"),
                    will_continue,
                })
            })
            .collect();
        if !responses.is_empty()
            && let Err(reason) = send(conn, &tool_response(responses)).await
        {
            tracing::debug!(session = %self.session_id, %reason, "the socket broke");
            self.conn = None;
            return Some(false);
        }
        self.synced.sent(tail);
        step.input_sent = true;
        step.last_heard = Instant::now();
        let mut held = held.into_iter();
        while let Some(message) = held.next() {
            match self.on_step_message(step, message).await {
                Ok(true) => {
                    self.release_held(held).await;
                    return Some(true);
                }
                Ok(false) => {}
                Err(reason) => {
                    tracing::debug!(session = %self.session_id, %reason, "the socket broke");
                    self.conn = None;
                    return Some(false);
                }
            }
        }
        Some(false)
    }
}
