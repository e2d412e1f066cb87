//! The person's voice on a Realtime session (ADR 0035, ADR 0041): microphone audio resampled
//! from 16 to 24 kHz as `input_audio_buffer.append`; push-to-talk as `turn_detection: null`
//! with `input_audio_buffer.clear` / `commit` and `response.create`; hands-free as the
//! server's detection. The spoken answer begins with no step to take it: the actor tells the
//! runtime what it heard ([`VoiceNotice::Heard`]), holds what the server sends until the
//! runner's step for that turn comes, and hands it to that step.

use super::{SessionActor, send};
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
    /// Speech went to the server since the last spoken turn began: a response that begins
    /// with no step is the answer to it.
    spoke: bool,
    /// The input transcription of that speech (`Some("")` when it failed).
    heard: Option<String>,
    /// The response answering that speech, before its turn is announced.
    answering: Option<String>,
    /// That response ended before the transcript came.
    answer_done: bool,
    /// A spoken turn was announced: its user message as the runtime writes it.
    announced: Option<String>,
    /// What the server sent for the answer before its step came.
    held: Vec<ServerEvent>,
}

impl Voice {
    /// The server heard (or committed) speech.
    pub(super) fn note_speech(&mut self) {
        if self.answering.is_none() && self.announced.is_none() {
            self.spoke = true;
        }
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
            self.create_response().await?;
            self.voice.note_speech();
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
            ServerEvent::SpeechStarted | ServerEvent::Committed => {
                self.voice.note_speech();
                return;
            }
            ServerEvent::TranscriptionCompleted { transcript } => {
                if self.voice.announced.is_none() {
                    self.voice
                        .heard
                        .get_or_insert_with(String::new)
                        .push_str(transcript);
                }
                self.announce_when_ready();
                return;
            }
            ServerEvent::TranscriptionFailed => {
                self.voice.heard.get_or_insert_with(String::new);
                self.announce_when_ready();
                return;
            }
            _ => {}
        }
        let Some(response) = event.response_id().map(str::to_owned) else {
            return;
        };
        let ours = self.voice.answering.as_deref() == Some(response.as_str());
        if !ours {
            if self.voice.spoke
                && self.voice.answering.is_none()
                && self.voice.announced.is_none()
                && matches!(event, ServerEvent::ResponseCreated { .. })
            {
                self.voice.spoke = false;
                self.voice.answering = Some(response);
            } else {
                // A response no one asked for here (or the tail of one no step reads).
                tracing::debug!(session = %self.session_id, response, "OpenAI Realtime response with no step");
                if let Some(conn) = self.conn.as_mut()
                    && !matches!(event, ServerEvent::ResponseDone { .. })
                {
                    conn.discard.insert(response);
                }
                return;
            }
        }
        if matches!(event, ServerEvent::ResponseDone { .. }) {
            self.voice.answer_done = true;
        }
        self.voice.held.push(event);
        self.announce_when_ready();
    }

    /// Announces the spoken turn once its answer began and its transcript is known (or the
    /// answer ended without one).
    fn announce_when_ready(&mut self) {
        let voice = &mut self.voice;
        if voice.announced.is_some()
            || voice.answering.is_none()
            || (voice.heard.is_none() && !voice.answer_done)
        {
            return;
        }
        let transcript = voice.heard.take().unwrap_or_default().trim().to_owned();
        voice.announced = Some(if transcript.is_empty() {
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

    /// The answer held for the speech last announced: (what the server sent of it, its
    /// response id, whether it ended); `None` when nothing was announced.
    pub(super) fn take_spoken(&mut self) -> Option<(Vec<ServerEvent>, Option<String>, bool)> {
        self.voice.announced.take()?;
        Some((
            std::mem::take(&mut self.voice.held),
            self.voice.answering.take(),
            std::mem::take(&mut self.voice.answer_done),
        ))
    }

    /// The runner's step for the spoken turn: the server already heard its user message, so
    /// only what it lacks before it is sent, and what was held is read first. `None`: this
    /// step is not the spoken turn's (or nothing was announced), and the held answer is
    /// dropped.
    pub(super) async fn attach_spoken(
        &mut self,
        history: &[HistoryItem],
    ) -> Option<Vec<ServerEvent>> {
        let announced = self.voice.announced.clone()?;
        let (held, response, done) = self.take_spoken()?;
        let is_spoken = matches!(
            history.last(),
            Some(HistoryItem::User { text, .. }) if *text == announced
        );
        if is_spoken {
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
        }
        tracing::warn!(session = %self.session_id, "the spoken turn did not start; dropping the answer to it");
        if let (Some(conn), Some(response), false) = (self.conn.as_mut(), response, done) {
            conn.discard.insert(response);
        }
        None
    }
}
