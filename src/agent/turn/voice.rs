//! A turn's voice: the agent's speech reaches the turn's log as it comes, as the original
//! system's transient `data-pcm` chunks (a socket that takes binary frames gets the raw bytes;
//! a stored log keeps them by reference: `voice::stored_form`), and a barge-in tells the browser
//! to stop playing at once.

use super::TurnDriver;
use crate::agent::{
    Transport,
    attachments::file_url,
    clock::IdKind,
    session::TurnEntry,
    store::audit::sha256_hex,
    voice::wav,
    voice::{OUTPUT_SAMPLE_RATE, Pcm, VoiceState, duration_secs, pcm_chunk},
};
use crate::protocol::Chunk;
use serde_json::{Value, json};

/// The speech of the message streaming now.
#[derive(Debug, Default)]
pub(crate) struct Speech {
    /// How many audio chunks the model sent.
    pub(crate) chunks: u64,
    /// All of it, PCM16LE mono at [`OUTPUT_SAMPLE_RATE`].
    pub(crate) pcm: Vec<u8>,
}

impl Speech {
    /// `finish.messageMetadata.audio`: `{chunks, bytes, sampleRate, duration}` (seconds); `None`
    /// for a message without speech.
    pub(crate) fn metadata(&self) -> Option<Value> {
        (self.chunks > 0).then(|| {
            json!({
                "chunks": self.chunks,
                "bytes": self.pcm.len(),
                "sampleRate": OUTPUT_SAMPLE_RATE,
                "duration": duration_secs(self.pcm.len(), OUTPUT_SAMPLE_RATE),
            })
        })
    }
}

impl TurnDriver {
    /// The id of a text block the model opens: in a BIDI chat someone speaks in, where the words
    /// are the output transcript of the agent's speech, the original system's
    /// `<messageId>_output_text` (its frontend and ours close a block's id at its `text-end`, so
    /// blocks after it with the same id stay separate parts); otherwise the runtime's.
    pub(super) fn text_id(&self) -> String {
        if self.transport == Transport::Bidi && self.rt.speaks_in(&self.session.id) {
            format!("{}_output_text", self.output.message_id())
        } else {
            self.rt.ids.next_id(IdKind::Text)
        }
    }

    /// The model spoke: the sound goes to the log (every reader frames it for its client) and
    /// into the message's recording.
    pub(super) fn speak(&mut self, pcm: Pcm) {
        if pcm.is_empty() {
            return;
        }
        let Some(chunk) = pcm_chunk(&pcm) else {
            return;
        };
        self.speech.chunks += 1;
        self.speech.pcm.extend_from_slice(&pcm);
        // Transient, and kept out of the chunk log (the recording is kept by reference).
        self.push(TurnEntry::Chunk(chunk));
    }

    /// Keeps the message's speech as a WAV file of the chat (the file store of attachments) and
    /// gives the message a `file` part referencing it, so a reload can play it again. A store
    /// that fails loses the recording only (logged): the answer itself is committed as usual.
    pub(super) async fn keep_speech(&mut self) {
        if self.speech.pcm.is_empty() {
            return;
        }
        let file = wav(&self.speech.pcm, OUTPUT_SAMPLE_RATE);
        let sha = sha256_hex(&file);
        let now = self.rt.clock.now_ms();
        let chat = self.session.id.clone();
        match self
            .rt
            .store
            .save_attachment(&chat, &sha, "audio/wav", &file, now)
            .await
        {
            Ok(()) => self.emit(Chunk::file(file_url(&chat, &sha), "audio/wav")),
            Err(error) => {
                tracing::warn!(session = %chat, error = %error.report(), "the spoken answer's recording was not kept")
            }
        }
    }

    /// The person spoke over the answer.
    pub(super) fn interrupted(&mut self) {
        self.emit(VoiceState::Interrupted.chunk());
    }
}
