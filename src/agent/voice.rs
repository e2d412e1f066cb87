//! Voice: how a person's speech reaches a chat's live model and how the model's speech comes
//! back (issue #36, ADR 0035). Vendor-neutral: Gemini Live, the offline demo model and OpenAI
//! Realtime implement the same two [`Model`](super::model::Model) methods.
//!
//! # In
//!
//! The transport hands the runtime [`VoiceInput`]s for a chat ([`Runtime::voice`]); the runtime
//! checks the chat is the speaker's and passes them to the chat's BIDI model
//! ([`Model::voice`](super::model::Model::voice)), which owns the live session they belong to.
//! Audio is PCM16LE mono at [`INPUT_SAMPLE_RATE`], in chunks of at most
//! [`MAX_AUDIO_FRAME_BYTES`] and an even length ([`check_frame`]). A
//! [`Start`](VoiceInput::Start) opens an utterance (push-to-talk: the model's `activityStart`)
//! or the microphone (hands-free: the model detects speech itself); [`End`](VoiceInput::End)
//! closes it. A model without voice answers [`VoiceError::Unsupported`].
//!
//! # Out
//!
//! When the model begins answering speech, it publishes [`VoiceNotice::Heard`] with what it
//! heard; the runtime starts an ordinary turn whose user message is that transcript, so a spoken
//! turn goes through the same turn, gate and commit path as a typed one, and the model's next
//! step for the chat is the answer it is already giving (the model attaches the step to it).
//! Inside a step the model's speech comes as [`ModelEvent::Audio`](super::model::ModelEvent)
//! (PCM16LE mono at [`OUTPUT_SAMPLE_RATE`]), its words as ordinary text deltas (the output
//! transcript), and a barge-in as [`ModelEvent::Interrupted`](super::model::ModelEvent). A
//! provider's cancellation of a call is the existing
//! [`CallNotice::Withdrawn`](super::model::CallNotice).
//!
//! [`Runtime::voice`]: super::Runtime::voice

use std::sync::Arc;

use super::model::ModelError;

/// The microphone's audio: PCM16LE mono at 16 kHz (what Gemini Live takes).
pub const INPUT_SAMPLE_RATE: u32 = 16_000;
/// The agent's speech: PCM16LE mono at 24 kHz (what Gemini Live and OpenAI Realtime send).
pub const OUTPUT_SAMPLE_RATE: u32 = 24_000;
/// The largest audio frame a client may send: 0.5 s at 16 kHz.
pub const MAX_AUDIO_FRAME_BYTES: usize = 16_000;

/// The person's message of a spoken turn when the model sent no transcript of the speech.
pub const UNTRANSCRIBED: &str = "(spoken; no transcript)";

/// PCM16LE mono bytes (cheap to clone: the same bytes go to the browser and to the recording).
pub type Pcm = Arc<[u8]>;

/// How the person talks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VoiceMode {
    /// An utterance is exactly what is sent between [`VoiceInput::Start`] and
    /// [`VoiceInput::End`] (the model's voice activity detection is off).
    #[default]
    PushToTalk,
    /// The microphone is open between `Start` and `End`; the model finds where speech begins
    /// and ends.
    HandsFree,
}

impl VoiceMode {
    /// The wire name (`audio_control.mode`).
    pub fn as_str(self) -> &'static str {
        match self {
            VoiceMode::PushToTalk => "push_to_talk",
            VoiceMode::HandsFree => "hands_free",
        }
    }
}

/// What the transport hands the model for one chat.
#[derive(Debug, Clone, PartialEq)]
pub enum VoiceInput {
    /// An utterance (push-to-talk) or the open microphone (hands-free) begins.
    Start { mode: VoiceMode },
    /// Microphone audio: PCM16LE mono at [`INPUT_SAMPLE_RATE`], checked by [`check_frame`].
    Audio(Pcm),
    /// The utterance ends (push-to-talk: the model answers now) or the microphone closes.
    End,
}

pub use crate::protocol::voice::VoiceState;

/// What a voice model tells the runtime outside a step ([`Model::voice_notices`]).
///
/// [`Model::voice_notices`]: super::model::Model::voice_notices
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoiceNotice {
    /// The model began answering speech in chat `session_id`: the runtime starts a turn whose
    /// user message is `transcript` (what the model heard; may be empty when the model sent no
    /// input transcription), and the model's next step for the chat is that answer.
    Heard {
        session_id: String,
        transcript: String,
    },
    /// The model speaks, unasked, while a call of chat `session_id` waits for its
    /// countersignature — typically right after it was told the call waits
    /// ([`Model::awaiting_approval`]: "it is on your screen, waiting for your approval"). The
    /// runtime streams that answer into the waiting turn ([`Model::aside`]), as an aside
    /// without words of the person's; with no turn to take it, the answer is declined.
    ///
    /// [`Model::awaiting_approval`]: super::model::Model::awaiting_approval
    /// [`Model::aside`]: super::model::Model::aside
    WhileWaiting { session_id: String },
}

impl VoiceNotice {
    /// The chat it is about.
    pub fn session_id(&self) -> &str {
        match self {
            VoiceNotice::Heard { session_id, .. } | VoiceNotice::WhileWaiting { session_id } => {
                session_id
            }
        }
    }
}

impl super::notices::ChatNotice for VoiceNotice {
    fn session_id(&self) -> &str {
        VoiceNotice::session_id(self)
    }
}

/// Where a voice model announces its [`VoiceNotice`]s, losing none ([`super::notices`]).
pub type VoiceNotices = super::notices::Notices<VoiceNotice>;
/// A subscriber's end of [`VoiceNotices`].
pub type VoiceSubscription = super::notices::Subscription<VoiceNotice>;

/// Why voice input was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VoiceError {
    /// The chat's model has no voice (the default of [`Model::voice`]).
    ///
    /// [`Model::voice`]: super::model::Model::voice
    #[error("this model ({model}) does not take audio; type your message instead")]
    Unsupported { model: String },
    /// The chat is someone else's.
    #[error("there is no chat with this id that is yours")]
    NotYourChat,
    /// The chat could not be read.
    #[error("the chat is not available now: {0}")]
    Unavailable(String),
    /// Audio outside a `start` … `stop`.
    #[error("audio arrived outside an utterance: send audio_control start first")]
    NotStarted,
    /// A frame that is not PCM16 mono within the size limit.
    #[error(transparent)]
    Frame(#[from] AudioFrameError),
    /// The live session could not take it.
    #[error("the voice session failed: {0}")]
    Model(#[from] ModelError),
}

/// Why an audio frame was refused (the transport closes the socket: 1007 or 1009).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AudioFrameError {
    #[error("an audio frame has an odd number of bytes ({len}): PCM16 samples are 2 bytes")]
    OddLength { len: usize },
    #[error("an audio frame of {len} bytes is over the limit of {max} bytes (0.5 s at 16 kHz)")]
    TooLarge { len: usize, max: usize },
}

/// Checks one microphone frame: whole PCM16 samples, at most [`MAX_AUDIO_FRAME_BYTES`].
pub fn check_frame(bytes: &[u8]) -> Result<(), AudioFrameError> {
    check_frame_len(bytes.len())
}

/// [`check_frame`] for a frame of `len` bytes.
pub fn check_frame_len(len: usize) -> Result<(), AudioFrameError> {
    if len > MAX_AUDIO_FRAME_BYTES {
        return Err(AudioFrameError::TooLarge {
            len,
            max: MAX_AUDIO_FRAME_BYTES,
        });
    }
    if !len.is_multiple_of(2) {
        return Err(AudioFrameError::OddLength { len });
    }
    Ok(())
}

/// The original system's `data-pcm` chunk carrying `pcm` (the agent's speech) for clients that
/// do not take binary frames; `None` for no audio (a stored log keeps only audio's place).
pub fn pcm_chunk(pcm: &[u8]) -> Option<crate::protocol::Chunk> {
    use base64::Engine as _;
    (!pcm.is_empty()).then(|| {
        crate::protocol::Chunk::transient_data(
            "pcm",
            serde_json::json!({
                "content": base64::engine::general_purpose::STANDARD.encode(pcm),
                "sampleRate": OUTPUT_SAMPLE_RATE,
                "channels": 1,
                "bitDepth": 16,
            }),
        )
    })
}

/// The speech a `data-pcm` chunk carries, still in base64 (`None`: not speech, or a stored
/// log's reference to speech already sent, which keeps its place and not its sound).
pub fn speech_of(chunk: &crate::protocol::Chunk) -> Option<&str> {
    match chunk {
        crate::protocol::Chunk::Data(data) if data.name == "pcm" => data
            .data
            .get("content")
            .and_then(serde_json::Value::as_str)
            .filter(|content| !content.is_empty()),
        _ => None,
    }
}

/// `chunk` as a stored log keeps it: speech as a reference (its `content` replaced by its
/// size in `bytes`), anything else as it is.
pub fn stored_form(chunk: &crate::protocol::Chunk) -> std::borrow::Cow<'_, crate::protocol::Chunk> {
    use base64::Engine as _;
    match (chunk, speech_of(chunk)) {
        (crate::protocol::Chunk::Data(data), Some(content)) => {
            let mut data = data.clone();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(content)
                .map_or(0, |pcm| pcm.len());
            if let Some(fields) = data.data.as_object_mut() {
                fields.remove("content");
                fields.insert("bytes".into(), bytes.into());
            }
            std::borrow::Cow::Owned(crate::protocol::Chunk::Data(data))
        }
        _ => std::borrow::Cow::Borrowed(chunk),
    }
}

/// PCM16LE mono at `sample_rate` as a WAV file (RIFF, `fmt ` PCM, `data`): how a spoken
/// answer is kept for replay.
pub fn wav(pcm: &[u8], sample_rate: u32) -> Vec<u8> {
    let data_len = u32::try_from(pcm.len()).unwrap_or(u32::MAX - 36);
    let mut out = Vec::with_capacity(44 + pcm.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes()); // the fmt chunk's size
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&sample_rate.to_le_bytes());
    out.extend_from_slice(&(sample_rate * 2).to_le_bytes()); // bytes a second
    out.extend_from_slice(&2u16.to_le_bytes()); // bytes a frame
    out.extend_from_slice(&16u16.to_le_bytes()); // bits a sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    out.extend_from_slice(&pcm[..data_len as usize]);
    out
}

/// Seconds of PCM16 mono audio in `bytes` at `sample_rate`.
pub fn duration_secs(bytes: usize, sample_rate: u32) -> f64 {
    bytes as f64 / 2.0 / f64::from(sample_rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_whole_samples_within_half_a_second() {
        assert_eq!(check_frame(&[0; 3200]), Ok(()));
        assert_eq!(check_frame(&[0; MAX_AUDIO_FRAME_BYTES]), Ok(()));
        assert_eq!(
            check_frame(&[0; 3201]),
            Err(AudioFrameError::OddLength { len: 3201 })
        );
        assert_eq!(
            check_frame(&[0; MAX_AUDIO_FRAME_BYTES + 2]),
            Err(AudioFrameError::TooLarge {
                len: MAX_AUDIO_FRAME_BYTES + 2,
                max: MAX_AUDIO_FRAME_BYTES
            })
        );
    }

    #[test]
    fn speech_reaches_other_clients_as_the_originals_data_pcm() {
        let chunk = serde_json::to_value(pcm_chunk(&[1, 0, 255, 127]).unwrap()).unwrap();
        assert_eq!(
            chunk,
            serde_json::json!({
                "type": "data-pcm",
                "data": {"content": "AQD/fw==", "sampleRate": 24000, "channels": 1, "bitDepth": 16},
                "transient": true,
            })
        );
        assert_eq!(pcm_chunk(&[]), None);
    }

    #[test]
    fn a_stored_log_keeps_speech_by_reference() {
        let chunk = pcm_chunk(&[1, 0, 255, 127]).unwrap();
        assert_eq!(speech_of(&chunk), Some("AQD/fw=="));
        let stored = stored_form(&chunk).into_owned();
        assert_eq!(speech_of(&stored), None);
        assert_eq!(
            serde_json::to_value(&stored).unwrap()["data"],
            serde_json::json!({"sampleRate": 24000, "channels": 1, "bitDepth": 16, "bytes": 4})
        );
        let text = crate::protocol::Chunk::text_delta("t", "hi");
        assert_eq!(*stored_form(&text), text);
    }

    #[test]
    fn a_spoken_answer_is_kept_as_a_wav_file() {
        let pcm = [1u8, 0, 255, 127];
        let file = wav(&pcm, OUTPUT_SAMPLE_RATE);
        assert_eq!(file.len(), 48);
        assert_eq!(&file[0..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(file[4..8].try_into().unwrap()), 40);
        assert_eq!(&file[8..16], b"WAVEfmt ");
        assert_eq!(u32::from_le_bytes(file[24..28].try_into().unwrap()), 24_000);
        assert_eq!(u32::from_le_bytes(file[28..32].try_into().unwrap()), 48_000);
        assert_eq!(u16::from_le_bytes(file[34..36].try_into().unwrap()), 16);
        assert_eq!(&file[36..40], b"data");
        assert_eq!(u32::from_le_bytes(file[40..44].try_into().unwrap()), 4);
        assert_eq!(&file[44..], &pcm);
    }

    fn heard(chat: &str, n: usize) -> VoiceNotice {
        VoiceNotice::Heard {
            session_id: chat.to_owned(),
            transcript: format!("said {n}"),
        }
    }

    /// Far more notices than any reader keeps up with, before it reads one: each subscriber
    /// gets every one, in order; a subscriber that went away takes nothing with it.
    #[tokio::test]
    async fn voice_notices_reach_every_subscriber_in_order_and_none_is_dropped() {
        let notices = VoiceNotices::default();
        assert_eq!(notices.send(heard("c", 0)), 0, "nobody listens yet");
        let (mut first, second) = (notices.subscribe(), notices.subscribe());
        let gone = notices.subscribe();
        drop(gone);
        for n in 0..1000 {
            assert_eq!(notices.send(heard("c", n)), 2);
        }
        assert!(!notices.is_empty());
        for n in 0..1000 {
            assert_eq!(first.recv().await, Some(heard("c", n)));
        }
        assert!(!notices.is_empty(), "the second has read none yet");
        drop(second);
        assert!(
            notices.is_empty(),
            "what a subscriber never reads goes with it"
        );
        drop(notices);
        assert_eq!(first.recv().await, None, "the model is gone");
    }

    #[test]
    fn durations_are_in_seconds() {
        assert_eq!(duration_secs(48_000, OUTPUT_SAMPLE_RATE), 1.0);
        assert_eq!(duration_secs(16_000, INPUT_SAMPLE_RATE), 0.5);
    }
}
