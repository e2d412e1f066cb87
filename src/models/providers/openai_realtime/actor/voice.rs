//! The person's voice on a Realtime session (ADR 0035, ADR 0041): microphone audio resampled
//! from 16 to 24 kHz as `input_audio_buffer.append`; push-to-talk as `turn_detection: null`
//! with `input_audio_buffer.clear` / `commit` and `response.create`; hands-free as the
//! server's detection. The spoken answer begins with no step to take it: the actor tells the
//! runtime what it heard ([`VoiceNotice::Heard`]), holds what the server sends until the
//! runner's step for that turn comes, and hands it to that step.

use std::collections::VecDeque;

use super::{Ask, SessionActor, send};
use crate::agent::history::HistoryItem;
use crate::agent::model::ModelRequest;
use crate::agent::voice::{UNTRANSCRIBED, VoiceInput, VoiceMode, VoiceNotice};
use crate::models::pcm::{self, Resampler};
use crate::models::providers::openai_realtime::REALTIME_RATE;
use crate::models::providers::openai_realtime::wire::{self, ServerEvent, SessionSpec};

/// The voice of one session.
#[derive(Default)]
pub(super) struct Voice {
    /// What the last `start` opened the session with (system, tools, history).
    pub(super) context: Option<ModelRequest>,
    /// The mode the session was last set up for, once the chat has spoken.
    pub(super) mode: Option<VoiceMode>,
    /// Between `start` and `end`: the utterance's resampler (16 → 24 kHz).
    resampler: Option<Resampler>,
    /// What the person said that no step or aside has taken yet, oldest first: each utterance
    /// from its commit until the runner's step for its spoken turn (or an aside) takes its
    /// answer. Several can wait at once (the person speaks again before the runtime started
    /// the first one's turn, because a turn of the chat still runs), and none is lost.
    utterances: VecDeque<Utterance>,
}

/// One utterance the server committed, and its answer until a step takes it.
#[derive(Default)]
struct Utterance {
    /// Its user item (`input_audio_buffer.committed`), which its transcription names; `None`
    /// for push-to-talk's until the server acknowledges the commit.
    item: Option<String>,
    /// Its input transcription (`Some("")` when that failed).
    heard: Option<String>,
    /// The response answering it.
    response: Option<String>,
    /// That response ended.
    answer_done: bool,
    /// Its spoken turn was announced: its user message as the runtime writes it.
    announced: Option<String>,
    /// What the server sent of the answer.
    held: Vec<ServerEvent>,
}

impl Utterance {
    /// Ready to announce: its answer began and its words are known (or the answer ended
    /// without them).
    fn ready(&self) -> bool {
        self.response.is_some() && (self.heard.is_some() || self.answer_done)
    }

    fn into_held(self) -> HeldAnswer {
        HeldAnswer {
            events: self.held,
            response: self.response,
            done: self.answer_done,
        }
    }
}

/// The answer held for an utterance, taken by the step or aside that plays it.
pub(super) struct HeldAnswer {
    pub(super) events: Vec<ServerEvent>,
    pub(super) response: Option<String>,
    pub(super) done: bool,
}

impl Voice {
    /// The server committed an utterance (`item`: its user item). Push-to-talk's own commit
    /// ([`Voice::committed_here`]) came first and only learns its item here.
    pub(super) fn committed(&mut self, item: Option<String>) {
        if let Some(mine) = self.utterances.iter_mut().find(|u| u.item.is_none()) {
            mine.item = item;
            return;
        }
        self.utterances.push_back(Utterance {
            item,
            ..Utterance::default()
        });
    }

    /// The socket is gone: what it would have sent of the utterances' answers never comes, so
    /// they are forgotten (a spoken turn not started yet is answered afresh on the next socket,
    /// from its words in the history).
    pub(super) fn socket_gone(&mut self) {
        self.utterances.clear();
    }

    /// An utterance waits for the response that answers it: a response the server starts on
    /// its own now is that answer.
    pub(super) fn awaits_answer(&self) -> bool {
        self.utterances.iter().any(|u| u.response.is_none())
    }

    /// Push-to-talk committed an utterance (before the server says so).
    fn committed_here(&mut self) {
        self.utterances.push_back(Utterance::default());
    }
}

impl SessionActor {
    pub(super) async fn on_voice(&mut self, input: VoiceInput) {
        let result = match input {
            VoiceInput::Start { mode } => self.start_voice(mode).await,
            VoiceInput::Audio(pcm) => self.send_audio(&pcm).await,
            VoiceInput::End => self.end_voice().await,
        };
        if let Err(reason) = result {
            tracing::warn!(session = %self.session_id, %reason, "OpenAI Realtime voice input lost");
        }
    }

    /// Sets the session up for speech in `mode` and brings the conversation up to the runner's
    /// history; push-to-talk starts from an empty input buffer.
    async fn start_voice(&mut self, mode: VoiceMode) -> Result<(), String> {
        self.voice.mode = Some(mode);
        if self.in_step {
            // The step's socket stays; only the detection changes.
            if let Some(conn) = self.conn.as_mut()
                && conn.spec.mode != Some(mode)
            {
                let spec = SessionSpec {
                    mode: Some(mode),
                    ..conn.spec.clone()
                };
                send(conn, &wire::session_update(&self.shared, &spec)).await?;
                conn.spec = spec;
            }
        } else {
            let request = self
                .voice
                .context
                .clone()
                .ok_or("no voice context: the runtime sends it before start")?;
            let spec = SessionSpec::new(&request, Some(mode));
            self.reconcile(&request.history);
            self.ensure_connection(&spec)
                .await
                .map_err(|e| e.to_string())?;
            if let Err(reason) = self.send_tail(&request.history).await {
                self.reset(&reason);
                return Err(reason);
            }
        }
        self.voice.resampler = Some(
            Resampler::new(crate::agent::voice::INPUT_SAMPLE_RATE, REALTIME_RATE)
                .map_err(|e| e.to_string())?,
        );
        if mode == VoiceMode::PushToTalk {
            self.send_voice(&wire::bare("input_audio_buffer.clear"))
                .await?;
        }
        Ok(())
    }

    async fn send_audio(&mut self, pcm: &[u8]) -> Result<(), String> {
        let resampler = self
            .voice
            .resampler
            .as_mut()
            .ok_or("audio outside start … end")?;
        let mut out = Vec::new();
        resampler
            .push(&pcm::samples_of(pcm), &mut out)
            .map_err(|e| e.to_string())?;
        self.append(&out).await
    }

    async fn end_voice(&mut self) -> Result<(), String> {
        let resampler = self
            .voice
            .resampler
            .take()
            .ok_or("end outside start … end")?;
        let mut tail = Vec::new();
        resampler.finish(&mut tail).map_err(|e| e.to_string())?;
        self.append(&tail).await?;
        if self.voice.mode == Some(VoiceMode::PushToTalk) {
            self.send_voice(&wire::bare("input_audio_buffer.commit"))
                .await?;
            self.voice.committed_here();
            self.create_response(Ask::Speech).await?;
        }
        Ok(())
    }

    async fn append(&mut self, samples: &[i16]) -> Result<(), String> {
        if samples.is_empty() {
            return Ok(());
        }
        self.send_voice(&wire::append_audio(&pcm::bytes_of(samples)))
            .await
    }

    async fn send_voice(&mut self, event: &serde_json::Value) -> Result<(), String> {
        let conn = self.conn.as_mut().ok_or("no socket")?;
        send(conn, event).await
    }

    /// A server event no step reads: if it is part of the answer to the person's speech, it
    /// is held for that turn's step (and the turn announced once the transcript is known).
    pub(super) fn hold_spoken_answer(&mut self, event: ServerEvent) {
        match &event {
            ServerEvent::SpeechStarted => return,
            ServerEvent::Committed { item_id } => {
                self.voice.committed(item_id.clone());
                return;
            }
            ServerEvent::TranscriptionCompleted {
                item_id,
                transcript,
            } => {
                if let Some(utterance) = self.transcribed(item_id.as_deref()) {
                    utterance
                        .heard
                        .get_or_insert_with(String::new)
                        .push_str(transcript);
                }
                self.announce_when_ready();
                return;
            }
            ServerEvent::TranscriptionFailed { item_id } => {
                if let Some(utterance) = self.transcribed(item_id.as_deref()) {
                    utterance.heard.get_or_insert_with(String::new);
                }
                self.announce_when_ready();
                return;
            }
            _ => {}
        }
        let Some(response) = event.response_id().map(str::to_owned) else {
            return;
        };
        let utterances = &mut self.voice.utterances;
        let index = match utterances
            .iter()
            .position(|u| u.response.as_deref() == Some(response.as_str()))
        {
            Some(index) => Some(index),
            // A response that begins with no step answers the oldest utterance not answered.
            None if matches!(event, ServerEvent::ResponseCreated { .. }) => {
                let index = utterances.iter().position(|u| u.response.is_none());
                if let Some(index) = index {
                    utterances[index].response = Some(response.clone());
                }
                index
            }
            None => None,
        };
        let Some(index) = index else {
            // A response no one asked for here (or the tail of one no step reads).
            tracing::debug!(session = %self.session_id, response, "OpenAI Realtime response with no step");
            if let Some(conn) = self.conn.as_mut()
                && !matches!(event, ServerEvent::ResponseDone { .. })
            {
                conn.discard.insert(response);
            }
            return;
        };
        let utterance = &mut utterances[index];
        if matches!(event, ServerEvent::ResponseDone { .. }) {
            utterance.answer_done = true;
        }
        utterance.held.push(event);
        self.announce_when_ready();
    }

    /// The utterance a transcription is of: the one with its item, else the oldest one not
    /// transcribed (push-to-talk's before the server named its item). `None` when that one
    /// was announced already (its message is written) or is gone.
    fn transcribed(&mut self, item: Option<&str>) -> Option<&mut Utterance> {
        let utterances = &mut self.voice.utterances;
        let index = item
            .and_then(|item| {
                utterances
                    .iter()
                    .position(|u| u.item.as_deref() == Some(item))
            })
            .or_else(|| {
                utterances
                    .iter()
                    .position(|u| u.heard.is_none() && u.announced.is_none())
            })?;
        utterances.get_mut(index).filter(|u| u.announced.is_none())
    }

    /// Announces the spoken turns whose answers began and whose words are known (or whose
    /// answers ended without them), in the order they were said: one still waiting for its
    /// words or its answer holds back those said after it.
    fn announce_when_ready(&mut self) {
        for utterance in &mut self.voice.utterances {
            if utterance.announced.is_some() {
                continue;
            }
            if !utterance.ready() {
                return;
            }
            let transcript = utterance.heard.take().unwrap_or_default().trim().to_owned();
            utterance.announced = Some(if transcript.is_empty() {
                UNTRANSCRIBED.to_owned()
            } else {
                transcript.clone()
            });
            tracing::debug!(session = %self.session_id, "OpenAI Realtime answers speech");
            let _ = self.shared.voice_notices.send(VoiceNotice::Heard {
                session_id: self.session_id.clone(),
                transcript,
            });
        }
    }

    /// The answer held for the oldest utterance, if it was announced (an aside of a waiting
    /// turn takes it).
    pub(super) fn take_spoken(&mut self) -> Option<HeldAnswer> {
        self.voice.utterances.front()?.announced.as_ref()?;
        self.voice.utterances.pop_front().map(Utterance::into_held)
    }

    /// The runner's step, if it is the spoken turn of an announced utterance (its history ends
    /// in that utterance's words): the server already heard its user message, so only what it
    /// lacks before it is sent, and what was held is read first. `None`: not a spoken turn's
    /// step, and what is held stays for the step or aside it is for (a step of a turn that was
    /// still running when the person spoke comes first, with its own request). Utterances
    /// announced before the one taken never got a turn (their words were dismissed): their
    /// answers are dropped.
    pub(super) async fn attach_spoken(&mut self, history: &[HistoryItem]) -> Option<HeldAnswer> {
        let Some(HistoryItem::User { text, .. }) = history.last() else {
            return None;
        };
        let position = self
            .voice
            .utterances
            .iter()
            .position(|u| u.announced.as_deref() == Some(text.as_str()))?;
        let stale: Vec<Utterance> = self.voice.utterances.drain(..position).collect();
        for utterance in stale {
            tracing::warn!(session = %self.session_id, "a spoken turn that never started; dropping its answer");
            self.drop_answer(utterance.into_held());
        }
        let held = self.voice.utterances.pop_front()?.into_held();
        let before = &history[..history.len() - 1];
        self.reconcile(before);
        if self.conn.is_some() {
            match self.send_tail(before).await {
                Ok(()) => {
                    self.synced.sent(&history[history.len() - 1..]);
                    return Some(held);
                }
                Err(reason) => self.reset(&reason),
            }
        }
        tracing::warn!(session = %self.session_id, "the spoken turn lost its socket; it is answered afresh");
        self.drop_answer(held);
        None
    }

    /// No turn takes the answer to `words` ([`Model::decline_spoken`]): that utterance goes.
    ///
    /// [`Model::decline_spoken`]: crate::agent::model::Model::decline_spoken
    pub(super) fn decline_spoken(&mut self, words: &str) {
        let Some(index) = self
            .voice
            .utterances
            .iter()
            .position(|u| u.announced.as_deref() == Some(words))
        else {
            return;
        };
        if let Some(utterance) = self.voice.utterances.remove(index) {
            tracing::info!(session = %self.session_id, "no turn for the words heard; dropping their answer");
            self.drop_answer(utterance.into_held());
        }
    }

    /// What is left of an answer nobody will read is discarded as it comes.
    pub(super) fn drop_answer(&mut self, held: HeldAnswer) {
        if let (Some(conn), Some(response), false) = (self.conn.as_mut(), held.response, held.done)
        {
            conn.discard.insert(response);
        }
    }
}
