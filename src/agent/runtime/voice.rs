//! The runtime's side of voice ([`crate::agent::voice`]): a person's [`VoiceInput`] goes to the
//! chat's BIDI model once the chat is found to be theirs, and a spoken turn the model begins
//! ([`VoiceNotice::Heard`]) becomes an ordinary turn started by the person who spoke.
//!
//! The notices lose nothing (ADR 0035): the model's queue to the runtime has no bound and is
//! read at once; a chat's notices are then handled one after the other, in the order they came,
//! each chat on a task of its own while it has any, so words that wait for their turn to stop
//! hold up only the words said after them in the same chat.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use super::{Runtime, UserTurn, turns::Spoken};
use crate::agent::{
    Transport, lock,
    voice::{UNTRANSCRIBED, VoiceError, VoiceInput, VoiceNotice},
};

/// Who speaks in which chat, and whether their utterance (or microphone) is open.
pub(crate) struct Voices {
    lines: Mutex<HashMap<String, Line>>,
    /// The task that turns [`VoiceNotice::Heard`] into turns runs (started at the first voice).
    listening: std::sync::Once,
    /// The notices of each chat not handled yet, oldest first; a chat is here while the task
    /// handling its notices runs ([`serve_chat`]).
    waiting: Mutex<HashMap<String, VecDeque<VoiceNotice>>>,
}

impl Default for Voices {
    fn default() -> Self {
        Voices {
            lines: Mutex::default(),
            listening: std::sync::Once::new(),
            waiting: Mutex::default(),
        }
    }
}

struct Line {
    speaker: String,
    open: bool,
}

impl Runtime {
    /// Hands `speaker`'s voice for chat `chat_id` to the chat's model. A `Start` checks the
    /// chat is open to them (a new chat becomes theirs with its first turn); `Audio` and `End`
    /// are refused outside a `Start` … `End` of theirs ([`VoiceError::NotStarted`]).
    pub async fn voice(
        self: &Arc<Self>,
        chat_id: &str,
        speaker: &str,
        input: VoiceInput,
    ) -> Result<(), VoiceError> {
        match &input {
            VoiceInput::Start { .. } => {
                let session = self
                    .session(chat_id)
                    .await
                    .map_err(|e| VoiceError::Unavailable(e.to_string()))?;
                if !session.state().record.open_to(speaker) {
                    return Err(VoiceError::NotYourChat);
                }
                self.listen_for_speech();
                let history = session
                    .state()
                    .record
                    .history
                    .shared()
                    .map_err(|e| VoiceError::Unavailable(format!("the chat's history: {e}")))?;
                self.models()
                    .voice()
                    .voice_context(self.models().request(chat_id, history));
                self.models().voice().voice(chat_id, input)?;
                lock(&self.voices.lines).insert(
                    chat_id.to_owned(),
                    Line {
                        speaker: speaker.to_owned(),
                        open: true,
                    },
                );
                Ok(())
            }
            VoiceInput::Audio(_) | VoiceInput::End => {
                {
                    let mut lines = lock(&self.voices.lines);
                    let line = lines
                        .get_mut(chat_id)
                        .filter(|l| l.open && l.speaker == speaker)
                        .ok_or(VoiceError::NotStarted)?;
                    if input == VoiceInput::End {
                        line.open = false;
                    }
                }
                self.models().voice().voice(chat_id, input)
            }
        }
    }

    /// Whether someone has spoken in chat `chat_id` (since this server started).
    pub(crate) fn speaks_in(&self, chat_id: &str) -> bool {
        lock(&self.voices.lines).contains_key(chat_id)
    }

    /// Starts, once, the task that begins a turn for each spoken utterance the model answers.
    fn listen_for_speech(self: &Arc<Self>) {
        self.voices.listening.call_once(|| {
            let Some(mut notices) = self.models().voice().voice_notices() else {
                return;
            };
            let runtime = Arc::downgrade(self);
            tokio::spawn(async move {
                // `None`: the model (and the runtime with it) is gone.
                while let Some(notice) = notices.recv().await {
                    let Some(runtime) = runtime.upgrade() else {
                        break;
                    };
                    runtime.queue_notice(notice);
                }
            });
        });
    }

    /// Puts `notice` behind its chat's earlier ones, starting the chat's task if it has none.
    fn queue_notice(self: &Arc<Self>, notice: VoiceNotice) {
        let chat = notice.session_id().to_owned();
        let mut waiting = lock(&self.voices.waiting);
        if let Some(queue) = waiting.get_mut(&chat) {
            queue.push_back(notice);
            return;
        }
        waiting.insert(chat.clone(), VecDeque::from([notice]));
        tokio::spawn(serve_chat(Arc::downgrade(self), chat));
    }
}

/// Handles chat `chat`'s notices in order until none is left (the check and the chat's removal
/// are under the same lock as [`Runtime::queue_notice`]'s, so none is left behind).
async fn serve_chat(runtime: Weak<Runtime>, chat: String) {
    loop {
        let Some(rt) = runtime.upgrade() else {
            return;
        };
        let notice = {
            let mut waiting = lock(&rt.voices.waiting);
            match waiting.get_mut(&chat).and_then(VecDeque::pop_front) {
                Some(notice) => notice,
                None => {
                    waiting.remove(&chat);
                    return;
                }
            }
        };
        on_notice(rt, notice).await;
    }
}

/// One notice: the model's talk while a call waits goes to the waiting turn; words said start
/// a turn, become an aside of the turn whose calls are out, or wait for the turn to stop.
async fn on_notice(runtime: Arc<Runtime>, notice: VoiceNotice) {
    let (session_id, transcript) = match notice {
        VoiceNotice::Heard {
            session_id,
            transcript,
        } => (session_id, transcript),
        VoiceNotice::WhileWaiting { session_id } => {
            runtime.model_aside(&session_id);
            return;
        }
    };
    // A model answers speech it has no transcript of (the transcription failed or came late):
    // the person's message says so.
    let text = if transcript.trim().is_empty() {
        UNTRANSCRIBED.to_owned()
    } else {
        transcript
    };
    let speaker = lock(&runtime.voices.lines)
        .get(&session_id)
        .map(|line| line.speaker.clone());
    let Some(speaker) = speaker else {
        tracing::warn!(session = %session_id, "speech in a chat nobody speaks in; ignored");
        runtime.models().voice().decline_spoken(&session_id, &text);
        return;
    };
    let user = UserTurn {
        text: text.clone(),
        transport: Transport::Bidi,
        ..UserTurn::default()
    };
    // Words said while the model answers wait here for the turn to stop: the chat's later
    // notices wait behind them (their order is the person's), other chats' do not.
    match runtime.start_spoken_turn(&session_id, user, &speaker).await {
        Ok(Spoken::Turn(started)) => {
            tracing::info!(chat = %session_id, turn = %started.turn_id, "spoken turn started");
        }
        Ok(Spoken::Aside) => {
            tracing::debug!(session = %session_id, "spoken while the turn's calls are out: an aside of it")
        }
        Err(error) => {
            tracing::warn!(session = %session_id, %error, "a spoken turn could not start");
            runtime.models().voice().decline_spoken(&session_id, &text);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt;
    use serde_json::json;

    use super::*;
    use crate::agent::{
        clock::{SequentialIds, SystemClock},
        history::HistoryItem,
        model::Model,
        model::{ModelEvent, ModelRequest, ModelStream, Usage},
        people::LOCAL,
        runtime::RuntimeSettings,
        session::TurnEntry,
        store::MemoryStore,
        tools::ToolRegistry,
        voice::{Pcm, VoiceMode, VoiceNotice, VoiceNotices, VoiceSubscription},
    };
    use crate::protocol::{Chunk, FinishReason};

    /// A model that hears whatever it is sent: at `End` it says it heard "pay alice", and its
    /// step answers with two chunks of speech and their transcript.
    struct Hears {
        notices: VoiceNotices,
        heard: Mutex<Vec<VoiceInput>>,
    }

    impl Model for Hears {
        fn label(&self) -> String {
            "hears".into()
        }

        fn stream(&self, request: ModelRequest) -> ModelStream {
            assert_eq!(
                request.history.last(),
                Some(&HistoryItem::user("pay alice")),
                "the spoken turn's message is the transcript"
            );
            let speech: Pcm = Arc::from(vec![1u8, 0, 2, 0]);
            futures::stream::iter(
                [
                    ModelEvent::Audio(speech.clone()),
                    ModelEvent::TextDelta("Paying.".into()),
                    ModelEvent::Audio(speech),
                    ModelEvent::Finish {
                        reason: FinishReason::Stop,
                        usage: Usage::default(),
                    },
                ]
                .map(Ok),
            )
            .boxed()
        }

        fn voice(&self, session_id: &str, input: VoiceInput) -> Result<(), VoiceError> {
            if input == VoiceInput::End {
                let _ = self.notices.send(VoiceNotice::Heard {
                    session_id: session_id.to_owned(),
                    transcript: "pay alice".into(),
                });
            }
            lock(&self.heard).push(input);
            Ok(())
        }

        fn voice_notices(&self) -> Option<VoiceSubscription> {
            Some(self.notices.subscribe())
        }
    }

    /// A model without voice.
    struct Mute;

    impl Model for Mute {
        fn label(&self) -> String {
            "mute".into()
        }

        fn stream(&self, _: ModelRequest) -> ModelStream {
            futures::stream::empty().boxed()
        }
    }

    fn runtime(model: Arc<dyn Model>) -> Arc<Runtime> {
        Runtime::new(
            model,
            ToolRegistry::default(),
            Arc::new(SystemClock),
            Arc::new(SequentialIds::default()),
            Arc::new(MemoryStore::default()),
            RuntimeSettings::default(),
        )
    }

    const START: VoiceInput = VoiceInput::Start {
        mode: VoiceMode::PushToTalk,
    };

    #[tokio::test]
    async fn a_model_without_voice_says_so() {
        let rt = runtime(Arc::new(Mute));
        let error = rt.voice("c", LOCAL, START).await.unwrap_err();
        assert_eq!(
            error,
            VoiceError::Unsupported {
                model: "mute".into()
            }
        );
        assert!(error.to_string().contains("does not take audio"), "{error}");
    }

    #[tokio::test]
    async fn audio_outside_an_utterance_or_in_anothers_chat_is_refused() {
        let model = Arc::new(Hears {
            notices: VoiceNotices::default(),
            heard: Mutex::default(),
        });
        let rt = runtime(model.clone());
        let audio = VoiceInput::Audio(Arc::from(vec![0u8; 320]));
        assert_eq!(
            rt.voice("c", LOCAL, audio.clone()).await,
            Err(VoiceError::NotStarted)
        );
        rt.voice("c", LOCAL, START).await.unwrap();
        assert_eq!(
            rt.voice("c", "mallory", audio.clone()).await,
            Err(VoiceError::NotStarted),
            "only the person who opened the utterance speaks in it"
        );
        rt.voice("c", LOCAL, audio.clone()).await.unwrap();
        assert_eq!(lock(&model.heard).as_slice(), &[START, audio]);
    }

    #[tokio::test]
    async fn speech_becomes_a_turn_of_the_speaker_with_its_audio_in_the_log() {
        let model = Arc::new(Hears {
            notices: VoiceNotices::default(),
            heard: Mutex::default(),
        });
        let rt = runtime(model);
        rt.voice("c", LOCAL, START).await.unwrap();
        rt.voice("c", LOCAL, VoiceInput::Audio(Arc::from(vec![7u8; 320])))
            .await
            .unwrap();
        rt.voice("c", LOCAL, VoiceInput::End).await.unwrap();
        // The notice starts the turn on the listener's task.
        let session = rt.session("c").await.unwrap();
        let log = loop {
            if let Some(log) = session.current_log() {
                break log;
            }
            tokio::task::yield_now().await;
        };
        let mut reader = log.subscribe(0);
        let (mut pcm, mut finish, mut ids, mut message) = (Vec::new(), None, Vec::new(), None);
        while let Some(entry) = reader.next().await {
            match entry {
                TurnEntry::Chunk(Chunk::Data(data)) if data.name == "pcm" => {
                    pcm.push(data.data["content"].clone())
                }
                TurnEntry::Chunk(Chunk::Start(start)) => message = start.message_id,
                TurnEntry::Chunk(Chunk::TextStart(start)) => ids.push(start.id),
                TurnEntry::Chunk(Chunk::Finish(f)) => finish = f.message_metadata,
                TurnEntry::End => break,
                _ => {}
            }
        }
        assert_eq!(pcm, vec![json!("AQACAA=="), json!("AQACAA==")]);
        // The output transcript's block has the original system's id.
        let message = message.expect("the reply's message id");
        assert_eq!(ids, vec![format!("{message}_output_text")]);
        assert_eq!(
            finish.unwrap()["audio"],
            json!({"chunks": 2, "bytes": 8, "sampleRate": 24000, "duration": 8.0 / 48000.0})
        );
        let record = session.snapshot();
        assert_eq!(record.owner(), LOCAL);
        assert_eq!(
            record.history.to_vec().unwrap()[0],
            HistoryItem::user("pay alice")
        );
    }
}
