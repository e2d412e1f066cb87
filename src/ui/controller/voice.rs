//! BIDI's voice (issue #36, ADR 0037): what the microphone is doing, the agent's speech, and
//! barge-in. The page's verbs (talk, hands-free) and what the socket brings (speech frames, the
//! `data-voice` state) go through [`ChatCtl`]; the browser's part — the microphone, Web Audio —
//! is a [`VoiceEngine`] the voice bar installs when BIDI mode first shows it (its code is the
//! bar's part of the wasm, ADR 0030). Voice is a channel, not an authority: nothing here answers
//! an approval.

pub mod pcm;

use std::rc::Rc;

use leptos::{prelude::*, task::spawn_local};
use serde_json::Value;

use super::{ChatCtl, Mode};
use crate::protocol::{
    ClientFrame,
    envelope::{AudioAction, AudioMode},
    voice::VoiceState,
};
use crate::ui::platform::VoiceEngine;

/// The microphone's state, as the voice bar shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mic {
    Off,
    /// Asked for (the browser may be asking the person).
    Opening(AudioMode),
    Open(AudioMode),
    /// Sending what it still holds, then `stop`.
    Closing,
}

/// The voice's state: signals the voice bar reads, and what the controller keeps.
#[derive(Clone, Copy)]
pub struct Voice {
    pub mic: RwSignal<Mic>,
    /// The microphone's level, 0..1, while it is open.
    pub level: RwSignal<f32>,
    /// The agent's side, from the server's `data-voice` chunks: listening, speaking, idle.
    pub state: RwSignal<Option<VoiceState>>,
    /// Why the microphone cannot be used (the voice bar says it; text keeps working).
    pub problem: RwSignal<Option<String>>,
    /// The browser's microphone and speakers, once the voice bar installed them.
    engine: StoredValue<Option<Rc<dyn VoiceEngine>>, LocalStorage>,
    framer: StoredValue<pcm::Framer, LocalStorage>,
    barge_in: StoredValue<pcm::BargeIn, LocalStorage>,
    /// The agent's speech was interrupted: what still arrives of that message is not played
    /// (until the next message starts).
    muted: StoredValue<bool>,
    /// The chat the open microphone speaks to: its audio and its `stop` go to that chat only
    /// (another chat opened meanwhile has its own socket, which never heard the `start`).
    chat: StoredValue<String>,
}

impl Voice {
    pub(super) fn new() -> Self {
        Voice {
            mic: RwSignal::new(Mic::Off),
            level: RwSignal::new(0.0),
            state: RwSignal::new(None),
            problem: RwSignal::new(None),
            engine: StoredValue::new_local(None),
            framer: StoredValue::new_local(pcm::Framer::default()),
            barge_in: StoredValue::new_local(pcm::BargeIn::default()),
            muted: StoredValue::new(false),
            chat: StoredValue::new(String::new()),
        }
    }

    /// The voice bar's part of the wasm gives the page its engine (the first time it shows).
    pub fn install(self, engine: impl FnOnce() -> Rc<dyn VoiceEngine>) {
        if self.engine.with_value(Option::is_none) {
            self.engine.set_value(Some(engine()));
        }
    }

    /// Calls the engine, if the voice bar installed one (speech arriving before BIDI mode showed
    /// the bar has nothing to play it; in BIDI mode the bar is always shown).
    fn engine(self, call: impl FnOnce(&dyn VoiceEngine)) {
        if let Some(engine) = self.engine.with_value(Clone::clone) {
            call(&*engine);
        }
    }
}

impl ChatCtl {
    /// The talk button (or its key) is pressed: the agent stops speaking (barge-in) and the
    /// microphone opens for one utterance.
    pub fn talk_start(self) {
        if self.voice.mic.get_untracked() != Mic::Off {
            return;
        }
        self.barge_in();
        self.open_mic(AudioMode::PushToTalk);
    }

    /// The talk button (or its key) is let go: the utterance ends.
    pub fn talk_end(self) {
        match self.voice.mic.get_untracked() {
            // Let go before the microphone opened: it closes as soon as it does.
            Mic::Opening(AudioMode::PushToTalk) => self.voice.mic.set(Mic::Off),
            Mic::Open(AudioMode::PushToTalk) => self.close_mic(),
            _ => {}
        }
    }

    /// The hands-free toggle: the microphone stays open and the server finds the utterances.
    pub fn toggle_hands_free(self) {
        match self.voice.mic.get_untracked() {
            Mic::Off => self.open_mic(AudioMode::HandsFree),
            Mic::Opening(AudioMode::HandsFree) => self.voice.mic.set(Mic::Off),
            Mic::Open(AudioMode::HandsFree) => self.close_mic(),
            _ => {}
        }
    }

    /// The voice bar went (BIDI mode left, another chat opened): the microphone closes and the
    /// agent stops speaking.
    pub fn voice_off(self) {
        match self.voice.mic.get_untracked() {
            Mic::Opening(_) => self.voice.mic.set(Mic::Off),
            Mic::Open(_) => self.close_mic(),
            Mic::Off | Mic::Closing => {}
        }
        self.voice.engine(|e| e.stop_playback());
        self.voice.state.set(None);
    }

    fn open_mic(self, hold: AudioMode) {
        let voice = self.voice;
        voice.problem.set(None);
        voice.mic.set(Mic::Opening(hold));
        voice.framer.set_value(pcm::Framer::default());
        voice.barge_in.set_value(pcm::BargeIn::default());
        let on_batch: Rc<dyn Fn(Vec<f32>)> = Rc::new(move |samples| self.on_mic_batch(&samples));
        voice.engine(move |engine| {
            let opened = engine.open_mic(on_batch);
            spawn_local(async move {
                match opened.await {
                    Ok(()) if voice.mic.get_untracked() == Mic::Opening(hold) => {
                        voice.mic.set(Mic::Open(hold));
                        voice.chat.set_value(self.chat_id.get_untracked());
                        self.send_audio_control(AudioAction::Start, hold);
                    }
                    // Let go (or turned off) while it opened.
                    Ok(()) => voice.engine(|e| e.close_mic(Box::new(|| {}))),
                    Err(e) => {
                        voice.mic.set(Mic::Off);
                        voice.problem.set(Some(e.to_string()));
                    }
                }
            });
        });
    }

    /// Sends what the microphone still holds, then `stop`, and closes it.
    fn close_mic(self) {
        let voice = self.voice;
        let Mic::Open(hold) = voice.mic.get_untracked() else {
            return;
        };
        voice.mic.set(Mic::Closing);
        voice.engine(move |engine| {
            engine.close_mic(Box::new(move || {
                let frame = voice.framer.try_update_value(|f| f.flush()).flatten();
                if self.speaks_to_this_chat() {
                    if let Some(frame) = frame {
                        self.transport().send_audio(self, frame);
                    }
                    self.send_audio_control(AudioAction::Stop, hold);
                }
                voice.level.set(0.0);
                if voice.mic.get_untracked() == Mic::Closing {
                    voice.mic.set(Mic::Off);
                }
            }));
        });
    }

    /// A batch of the microphone's samples (100 ms): the meter, hands-free barge-in, and the
    /// frames to send.
    fn on_mic_batch(self, samples: &[f32]) {
        let voice = self.voice;
        let (Mic::Open(hold) | Mic::Opening(hold)) = voice.mic.get_untracked() else {
            // Closing: the last samples still go out.
            if voice.mic.get_untracked() == Mic::Closing {
                self.send_frames(samples);
            }
            return;
        };
        let level = pcm::level(samples);
        voice.level.set(level);
        if hold == AudioMode::HandsFree
            && voice.barge_in.try_update_value(|b| b.hears(level)) == Some(true)
            && voice
                .engine
                .with_value(|e| e.as_ref().is_some_and(|e| e.playing()))
        {
            self.barge_in();
        }
        if matches!(voice.mic.get_untracked(), Mic::Open(_)) {
            self.send_frames(samples);
        }
    }

    /// Whether the open microphone's chat is still the one shown.
    fn speaks_to_this_chat(self) -> bool {
        self.voice
            .chat
            .with_value(|chat| *chat == self.chat_id.get_untracked())
    }

    fn send_frames(self, samples: &[f32]) {
        let frames = self
            .voice
            .framer
            .try_update_value(|f| f.push(samples))
            .unwrap_or_default();
        if frames.is_empty() || !self.speaks_to_this_chat() {
            return;
        }
        let transport = self.transport();
        for frame in frames {
            transport.send_audio(self, frame);
        }
    }

    /// The person speaks over the agent: its speech stops now, and what still arrives of that
    /// answer is not played.
    fn barge_in(self) {
        self.voice.muted.set_value(true);
        self.voice.engine(|e| e.stop_playback());
    }

    fn send_audio_control(self, action: AudioAction, hold: AudioMode) {
        if self.mode.get_untracked() != Mode::Bidi {
            return;
        }
        let frame = ClientFrame::AudioControl {
            action,
            id: Some(self.chat_id.get_untracked()),
            mode: Some(hold),
        };
        self.transport().send_audio_control(self, frame);
    }

    /// A frame of the agent's speech arrived (BIDI's binary frames).
    pub(super) fn on_speech(self, pcm: Vec<u8>) {
        if self.voice.muted.get_value() {
            return;
        }
        self.voice.engine(|e| e.play(&pcm));
    }

    /// A new assistant message starts: its speech plays.
    pub(super) fn on_message_start(self) {
        self.voice.muted.set_value(false);
    }

    /// A spoken turn begins (`data-voice` `heard`, before its reply's `start`): what the person
    /// said is their message, and the reply is a message of its own, never the continuation of
    /// a message that still waits (its stream ends here; what it showed stays).
    pub(in crate::ui::controller) fn on_heard(self, id: &str, text: &str) {
        // Like a typed message, it makes the chat one of the person's (a reload opens it again).
        self.remember_chat(super::state::chat_title(text));
        self.conversation.update_value(|c| {
            c.end_stream();
            if !c.messages().iter().any(|m| m.id == id) {
                c.push(crate::protocol::UiMessage::user_text(
                    id.to_owned(),
                    text.to_owned(),
                ));
            }
            // From an empty message: its `start` names the reply (a replay after a reload
            // replaces the copy the page loaded, rather than continuing it twice over).
            c.begin_resume(crate::ui::platform::random_id("m"));
        });
        self.publish();
    }

    /// The server's `data-voice` chunk: `interrupted` stops the agent's speech at once.
    pub(super) fn on_voice_state(self, data: &Value) {
        let state = VoiceState::of(data);
        if state == Some(VoiceState::Interrupted) {
            self.barge_in();
        }
        self.voice.state.set(state);
    }
}
