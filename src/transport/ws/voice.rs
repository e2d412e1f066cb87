//! A BIDI socket's voice (ADR 0035): microphone audio in (binary frames of PCM16LE mono 16 kHz,
//! or the seed's `audio_chunk` JSON with base64), `audio_control` start/stop naming the chat and
//! the mode, the connection's limits on audio; and the agent's speech out, as binary frames for
//! a client that opened `?audio=binary` and as the seed's `data-pcm` chunks for every other.
//!
//! Limits: a frame of an odd length closes the socket with 1007, one over 16,000 bytes with
//! 1009; audio faster than `COUNTERSIGN_VOICE_BYTES_PER_SEC` (a token bucket, two seconds of
//! burst) or an utterance longer than `COUNTERSIGN_VOICE_MAX_UTTERANCE_SECS` of audio closes it
//! with 1008. The chat and what waits in it are not touched: a close is the socket's end only.

use std::{sync::Arc, time::Instant};

use base64::Engine as _;

use super::{ChatScope, Connection, close, inbound::Next, socket::Socket};
use crate::{
    agent::voice::{
        AudioFrameError, INPUT_SAMPLE_RATE, MAX_AUDIO_FRAME_BYTES, VoiceError, VoiceInput,
        VoiceMode, check_frame_len, duration_secs, speech_of,
    },
    config::EdgeSettings,
    protocol::{
        Chunk,
        envelope::{AudioAction, AudioMode},
    },
    transport::edge::limits::TokenBucket,
};

/// A connection's voice: what it sends out, and what limits its audio.
pub(super) struct Voice {
    /// The client takes the agent's speech as binary frames (`?audio=binary`).
    pub(super) binary_out: bool,
    /// Microphone bytes a second, with two seconds of burst.
    bytes: TokenBucket,
    max_utterance_secs: f64,
    /// Bytes of the open utterance; `None` outside `start` … `stop`.
    utterance: Option<usize>,
}

impl Voice {
    pub(super) fn new(settings: &EdgeSettings, binary_out: bool, now: Instant) -> Self {
        let rate = f64::from(settings.voice_bytes_per_sec);
        Voice {
            binary_out,
            bytes: TokenBucket::new(rate * 2.0, rate, now),
            max_utterance_secs: settings.voice_max_utterance.as_secs_f64(),
            utterance: None,
        }
    }

    /// Whether `len` more bytes of audio at `now` keep within the limits; else the close.
    fn admit(&mut self, len: usize, now: Instant) -> Result<(), (u16, String)> {
        if let Err(e) = check_frame_len(len) {
            return Err(frame_close(e));
        }
        let Some(sent) = self.utterance.as_mut() else {
            return Ok(());
        };
        *sent += len;
        if duration_secs(*sent, INPUT_SAMPLE_RATE) > self.max_utterance_secs {
            return Err((
                close::POLICY,
                format!(
                    "an utterance is at most {} s of audio",
                    self.max_utterance_secs
                ),
            ));
        }
        if self.bytes.take_n(len as f64, now).is_err() {
            return Err((
                close::POLICY,
                "audio arrives faster than twice real time".into(),
            ));
        }
        Ok(())
    }
}

/// The close for a frame that is not PCM16 within the size limit: 1007 for an odd length, 1009
/// for one too large.
fn frame_close(error: AudioFrameError) -> (u16, String) {
    let code = match error {
        AudioFrameError::OddLength { .. } => close::INVALID_PAYLOAD,
        AudioFrameError::TooLarge { .. } => close::TOO_BIG,
    };
    (code, error.to_string())
}

impl Connection {
    /// `audio_control`: names the chat (`id` on `/api/live`; the connection's own on `/live`)
    /// and opens or closes an utterance.
    pub(super) async fn on_audio_control(
        &mut self,
        action: AudioAction,
        id: Option<String>,
        mode: Option<AudioMode>,
        socket: &mut Socket,
    ) -> Next {
        let chat = match (self.scope, id, &self.chat) {
            (ChatScope::Connection, id, _) => self.connection_chat(id.as_deref().unwrap_or("")),
            (ChatScope::Client, Some(id), _) if !id.trim().is_empty() => Arc::from(id.trim()),
            (ChatScope::Client, _, Some(bound)) => bound.clone(),
            (ChatScope::Client, _, None) => {
                return self
                    .send_error(
                        socket,
                        "audio_control needs the chat's id before any audio.",
                    )
                    .await;
            }
        };
        if let Some(bound) = &self.chat
            && *bound != chat
        {
            let message =
                format!("This socket belongs to chat {bound}; open another socket for {chat}.");
            return self.send_error(socket, &message).await;
        }
        if let Some(refusal) = self.foreign(&chat).await {
            return self.send_api_error(socket, refusal).await;
        }
        self.bind(&chat);
        let input = match action {
            AudioAction::Start => VoiceInput::Start {
                mode: match mode.unwrap_or_default() {
                    AudioMode::PushToTalk => VoiceMode::PushToTalk,
                    AudioMode::HandsFree => VoiceMode::HandsFree,
                },
            },
            AudioAction::Stop => VoiceInput::End,
        };
        let speaker = self.client.principal();
        match self.runtime.voice(&chat, speaker.id(), input).await {
            Ok(()) => {
                self.voice.utterance = (action == AudioAction::Start).then_some(0);
                Next::Continue
            }
            Err(error) => {
                self.voice.utterance = None;
                self.refuse_frame(socket, &error.to_string()).await
            }
        }
    }

    /// The seed's `audio_chunk`: base64 PCM16 mono 16 kHz.
    pub(super) async fn on_audio_chunk(
        &mut self,
        chunk: &str,
        format: (Option<u32>, Option<u16>, Option<u16>),
        socket: &mut Socket,
    ) -> Next {
        let (rate, channels, bits) = format;
        if rate.is_some_and(|r| r != INPUT_SAMPLE_RATE)
            || channels.is_some_and(|c| c != 1)
            || bits.is_some_and(|b| b != 16)
        {
            return self
                .refuse_frame(
                    socket,
                    "Audio must be PCM16 mono at 16000 Hz (sampleRate 16000, channels 1, bitDepth 16).",
                )
                .await;
        }
        // A base64 string longer than a frame's bytes can be is refused before it is decoded.
        if chunk.len() > MAX_AUDIO_FRAME_BYTES.div_ceil(3) * 4 + 4 {
            let (code, reason) = frame_close(AudioFrameError::TooLarge {
                len: chunk.len() / 4 * 3,
                max: MAX_AUDIO_FRAME_BYTES,
            });
            return Next::Close(code, reason);
        }
        match base64::engine::general_purpose::STANDARD.decode(chunk) {
            Ok(pcm) => self.on_audio(pcm, socket).await,
            Err(e) => {
                self.refuse_frame(socket, &format!("audio_chunk.chunk is not base64: {e}"))
                    .await
            }
        }
    }

    /// Microphone audio (a binary frame's bytes, or a decoded `audio_chunk`).
    pub(super) async fn on_audio(&mut self, pcm: Vec<u8>, socket: &mut Socket) -> Next {
        if let Err((code, reason)) = self.voice.admit(pcm.len(), Instant::now()) {
            return Next::Close(code, reason);
        }
        let (Some(chat), Some(_)) = (self.chat.clone(), self.voice.utterance) else {
            return self
                .refuse_frame(socket, &VoiceError::NotStarted.to_string())
                .await;
        };
        let speaker = self.client.principal();
        let input = VoiceInput::Audio(Arc::from(pcm));
        match self.runtime.voice(&chat, speaker.id(), input).await {
            Ok(()) => Next::Continue,
            Err(error) => self.refuse_frame(socket, &error.to_string()).await,
        }
    }

    /// A chunk of the forwarded turn carrying speech, as this client takes it: raw bytes in a
    /// binary frame (`?audio=binary`), or the chunk. `None`: not speech.
    pub(super) async fn send_speech(&mut self, socket: &mut Socket, chunk: &Chunk) -> Option<Next> {
        let is_pcm = matches!(chunk, Chunk::Data(data) if data.name == "pcm");
        if !is_pcm {
            return None;
        }
        // A stored log's reference to speech sent before: nothing to play.
        let Some(content) = speech_of(chunk) else {
            return Some(Next::Continue);
        };
        if !self.voice.binary_out {
            return None;
        }
        let Ok(pcm) = base64::engine::general_purpose::STANDARD.decode(content) else {
            return Some(Next::Continue);
        };
        Some(
            match socket.send(super::frame::OpCode::Binary, &pcm).await {
                Ok(()) => Next::Continue,
                Err(_) => Next::Gone,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_is_limited_by_frame_utterance_and_rate() {
        let now = Instant::now();
        let settings = EdgeSettings::default();
        let mut voice = Voice::new(&settings, false, now);
        assert_eq!(
            voice.admit(3_201, now).unwrap_err().0,
            close::INVALID_PAYLOAD
        );
        assert_eq!(voice.admit(16_002, now).unwrap_err().0, close::TOO_BIG);
        voice.utterance = Some(0);
        // Two seconds of burst at twice real time, then the bucket is empty.
        for _ in 0..8 {
            voice.admit(16_000, now).unwrap();
        }
        let (code, reason) = voice.admit(16_000, now).unwrap_err();
        assert_eq!(code, close::POLICY);
        assert!(reason.contains("twice real time"), "{reason}");
        // Real time goes on for the whole utterance, and not past its limit.
        let mut voice = Voice::new(&settings, false, now);
        voice.utterance = Some(0);
        let frames = (60.0 / 0.5) as u64;
        for n in 1..=frames {
            voice
                .admit(16_000, now + std::time::Duration::from_millis(500 * n))
                .unwrap();
        }
        let later = now + std::time::Duration::from_millis(500 * (frames + 1));
        let (code, reason) = voice.admit(16_000, later).unwrap_err();
        assert_eq!(code, close::POLICY);
        assert!(reason.contains("at most 60 s"), "{reason}");
    }
}
