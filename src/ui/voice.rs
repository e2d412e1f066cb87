//! The voice bar of BIDI mode (issue #36, ADR 0037): hold to talk (the button, or Alt+V
//! anywhere on the page, or Space/Enter on the button), a hands-free toggle, the microphone's
//! level while it is open, and what the voice is doing. Only the browser builds it, from code
//! loaded when BIDI mode first shows it (a part of the wasm of its own, ADR 0030), which also
//! holds the microphone's and the speakers' code (`ui::browser::voice`): the bar installs it.

use leptos::{ev, prelude::*};

use super::controller::{ChatCtl, Link, voice::Mic};
use crate::protocol::{envelope::AudioMode, voice::VoiceState};

/// The key held to talk, with Alt: V for voice. Alt keeps it from typing into the composer
/// (and from the IME's Ctrl+Space); the physical key, so every keyboard layout has it.
const TALK_KEY_CODE: &str = "KeyV";

/// The talk button's title: what it does and its key.
const TALK_TITLE: &str = "Hold to talk (Alt+V); let go to send. Speaking stops the agent's voice.";

/// Builds the voice bar into `host`.
#[cfg(feature = "hydrate")]
#[cfg_attr(wasm_split, leptos::lazy(voice))]
pub async fn build_voice_bar(host: web_sys::Element) -> super::deferred::Built {
    super::deferred::build_into(&host, || view! { <VoiceBar/> })
}

/// What the voice is doing, in words (the bar's status line).
fn status(mic: Mic, agent: Option<VoiceState>) -> &'static str {
    match mic {
        Mic::Opening(_) => "Opening the microphone…",
        Mic::Open(AudioMode::PushToTalk) => "Listening — let go to send",
        Mic::Open(AudioMode::HandsFree) => "Hands-free: speak any time",
        Mic::Closing => "Sending…",
        Mic::Off => match agent {
            Some(VoiceState::Speaking) => "The agent is speaking",
            Some(VoiceState::Listening) => "The agent is listening",
            Some(VoiceState::Interrupted) => "Interrupted",
            Some(VoiceState::Idle) | None => "",
        },
    }
}

#[component]
fn VoiceBar() -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    let voice = ctl.voice;
    voice.install(super::platform::voice_engine);
    let live = move || ctl.link.get() == Link::Live;
    let talking = move || {
        matches!(
            voice.mic.get(),
            Mic::Opening(AudioMode::PushToTalk) | Mic::Open(AudioMode::PushToTalk)
        )
    };
    let hands_free = move || {
        matches!(
            voice.mic.get(),
            Mic::Opening(AudioMode::HandsFree) | Mic::Open(AudioMode::HandsFree)
        )
    };
    let open = move || matches!(voice.mic.get(), Mic::Open(_) | Mic::Closing);

    // Alt+V held anywhere on the page talks (a repeat of the held key is not a new press).
    let down = window_event_listener(ev::keydown, move |ev| {
        if ev.alt_key() && ev.code() == TALK_KEY_CODE {
            ev.prevent_default();
            if !ev.repeat() && live() {
                ctl.talk_start();
            }
        }
    });
    let up = window_event_listener(ev::keyup, move |ev| {
        if ev.code() == TALK_KEY_CODE || ev.key() == "Alt" {
            ctl.talk_end();
        }
    });
    on_cleanup(move || {
        down.remove();
        up.remove();
        // The bar goes with BIDI mode: so do the microphone and the agent's voice.
        ctl.voice_off();
    });

    // Space or Enter held on the focused button talks too.
    let on_key = move |ev: ev::KeyboardEvent, pressed: bool| {
        if matches!(ev.key().as_str(), " " | "Enter") {
            ev.prevent_default();
            if pressed && !ev.repeat() {
                ctl.talk_start();
            } else if !pressed {
                ctl.talk_end();
            }
        }
    };

    view! {
        <div class="voice-bar" role="group" aria-label="Voice" data-testid="voice-bar">
            <button type="button" class="talk" data-testid="talk" title=TALK_TITLE
                aria-pressed=move || talking().to_string()
                disabled=move || !live() || hands_free()
                on:pointerdown=move |ev: ev::PointerEvent| if ev.button() == 0 { ctl.talk_start() }
                on:pointerup=move |_| ctl.talk_end()
                on:pointercancel=move |_| ctl.talk_end()
                on:pointerleave=move |_| ctl.talk_end()
                on:contextmenu=move |ev: ev::MouseEvent| ev.prevent_default()
                on:keydown=move |ev| on_key(ev, true)
                on:keyup=move |ev| on_key(ev, false)>
                <super::icons::MicIcon/>
                {move || if talking() { " Talking…" } else { " Hold to talk" }}
            </button>
            <button type="button" class="hands-free" data-testid="hands-free"
                title="Keep the microphone open; the agent hears when you speak"
                aria-pressed=move || hands_free().to_string()
                disabled=move || !live() || talking()
                on:click=move |_| ctl.toggle_hands_free()>"Hands-free"</button>
            <Show when=open>
                <label class="visually-hidden" for="voice-level">"Microphone level"</label>
                <meter id="voice-level" class="voice-level" data-testid="voice-level"
                    min="0" max="1" low="0.35" high="0.9" optimum="0.6"
                    value=move || voice.level.get().to_string()></meter>
            </Show>
            <span class="voice-status muted" role="status" data-testid="voice-status">
                {move || status(voice.mic.get(), voice.state.get())}
            </span>
            {move || voice.problem.get().map(|problem| view! {
                <p class="voice-problem" role="alert" data-testid="voice-problem">{problem}</p>
            })}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_says_what_the_microphone_does_before_what_the_agent_does() {
        assert_eq!(
            status(Mic::Open(AudioMode::PushToTalk), Some(VoiceState::Speaking)),
            "Listening — let go to send"
        );
        assert_eq!(
            status(Mic::Open(AudioMode::HandsFree), None),
            "Hands-free: speak any time"
        );
        assert_eq!(
            status(Mic::Off, Some(VoiceState::Speaking)),
            "The agent is speaking"
        );
        assert_eq!(status(Mic::Off, Some(VoiceState::Idle)), "");
        assert_eq!(status(Mic::Off, None), "");
    }
}
