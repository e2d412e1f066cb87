//! The page's few pictograms as inline SVG: they draw the same on every machine, with or
//! without an emoji or CJK font (an emoji or a full-width sign in the markup renders as an
//! empty box where no installed font has it). They take the text colour (`currentColor`) and
//! are hidden from assistive technology: the control around each one carries the words.

use leptos::prelude::*;

/// A paper clip: attach files.
#[component]
pub fn AttachIcon() -> impl IntoView {
    view! {
        <svg class="icon" viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" focusable="false">
            <path d="M20 11.5l-7.6 7.6a5 5 0 0 1-7.1-7.1l8.3-8.3a3.3 3.3 0 0 1 4.7 4.7l-8.1 8.1a1.6 1.6 0 0 1-2.3-2.3l7.4-7.4"
                fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"/>
        </svg>
    }
}

/// A pen nib on a line: the brand's mark (signing).
#[component]
pub fn PenIcon() -> impl IntoView {
    view! {
        <svg class="icon" viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" focusable="false">
            <path d="M15.5 4.5l4 4L9 19l-5 1 1-5z M13.5 6.5l4 4 M3 22h18"
                fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"/>
        </svg>
    }
}

/// A musical note: the background music control.
#[component]
pub fn NoteIcon() -> impl IntoView {
    view! {
        <svg class="icon" viewBox="0 0 24 24" width="16" height="16" aria-hidden="true" focusable="false">
            <path d="M9 18V5.5l11-2.5v12.5" fill="none" stroke="currentColor" stroke-width="1.8"
                stroke-linecap="round" stroke-linejoin="round"/>
            <circle cx="6.5" cy="18" r="2.5" fill="currentColor"/>
            <circle cx="17.5" cy="15.5" r="2.5" fill="currentColor"/>
        </svg>
    }
}

/// A microphone: talk to the agent.
#[component]
pub fn MicIcon() -> impl IntoView {
    view! {
        <svg class="icon" viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" focusable="false">
            <path d="M12 3a3 3 0 0 1 3 3v6a3 3 0 0 1-6 0V6a3 3 0 0 1 3-3z M5.5 11a6.5 6.5 0 0 0 13 0 M12 17.5V21"
                fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"/>
        </svg>
    }
}
