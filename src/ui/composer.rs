//! The message composer: a text box, Send, and Stop while a turn streams.
//!
//! Enter sends, Shift+Enter inserts a newline, and Send is disabled while the box holds only
//! white space or a turn is streaming. The disabled state is reactive, so a Send button that
//! enables while typing is also the visible proof that the page has hydrated.

use leptos::{ev, prelude::*, task::spawn_local};

use super::platform::{self, PickedFile};
use crate::protocol::message::{INLINE_IMAGE_TYPES, inline_image_type};

/// A composer that calls `on_send` with the trimmed text and the attached images, and clears
/// itself.
#[component]
pub fn Composer(
    /// Receives the text and attachments to send (never both empty).
    #[prop(into)]
    on_send: Callback<(String, Vec<PickedFile>)>,
    /// The largest image accepted, in bytes (the live connection takes less than SSE).
    #[prop(into, default = Signal::derive(|| 10 * 1024 * 1024))]
    max_attachment_bytes: Signal<u64>,
    /// Told why a file was not attached.
    #[prop(into, optional)]
    on_error: Option<Callback<String>>,
    /// A turn is streaming: Send is disabled and Stop is shown.
    #[prop(into, default = Signal::derive(|| false))]
    busy: Signal<bool>,
    /// Stop the streaming turn.
    #[prop(into, optional)]
    on_stop: Option<Callback<()>>,
    /// Placeholder shown in the empty box.
    #[prop(into, default = "Message the agent… (Enter sends, Shift+Enter for a new line)".into())]
    placeholder: String,
) -> impl IntoView {
    let text = RwSignal::new(String::new());
    let files = RwSignal::new(Vec::<PickedFile>::new());
    let is_empty = move || text.with(|t| t.trim().is_empty()) && files.with(Vec::is_empty);

    let send = move || {
        if busy.get_untracked() || is_empty() {
            return;
        }
        let value = text.get_untracked();
        on_send.run((value.trim().to_string(), files.get_untracked()));
        text.set(String::new());
        files.set(Vec::new());
    };

    let on_pick = move |ev: ev::Event| {
        let limit = max_attachment_bytes.get_untracked();
        spawn_local(attach(ev, limit, files, on_error));
    };

    let on_keydown = move |ev: ev::KeyboardEvent| {
        // Composition (IME) keeps Enter for the input method: Japanese input commits with Enter.
        if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
            ev.prevent_default();
            send();
        }
    };

    view! {
        <AttachmentPreviews files=files/>
        <form
            class="composer"
            on:submit=move |ev: ev::SubmitEvent| {
                ev.prevent_default();
                send();
            }
        >
            <label class="attach" title="Attach images">
                <span class="visually-hidden">"Attach images"</span>
                <super::icons::AttachIcon/>
                <input type="file" accept=INLINE_IMAGE_TYPES.join(",") multiple class="visually-hidden" data-testid="attach-input" on:change=on_pick/>
            </label>
            <label class="visually-hidden" for="composer-input">"Message"</label>
            <textarea
                id="composer-input"
                data-testid="composer-input"
                rows="1"
                placeholder=placeholder
                prop:value=move || text.get()
                on:input=move |ev| text.set(event_target_value(&ev))
                on:keydown=on_keydown
            ></textarea>
            {move || match (busy.get(), on_stop) {
                (true, Some(stop)) => Some(view! {
                    <button type="button" class="stop" data-testid="stop" on:click=move |_| stop.run(())>
                        "Stop"
                    </button>
                }),
                _ => None,
            }}
            <button
                type="submit"
                class="send"
                data-testid="send"
                disabled=move || is_empty() || busy.get()
            >
                "Send"
            </button>
        </form>
    }
}

/// The images attached to the next message, each with its Remove button; nothing when there is
/// none.
#[component]
fn AttachmentPreviews(files: RwSignal<Vec<PickedFile>>) -> impl IntoView {
    let indexed = move || {
        files
            .get()
            .into_iter()
            .enumerate()
            .collect::<Vec<(usize, PickedFile)>>()
    };
    view! {
        <Show when=move || !files.with(Vec::is_empty)>
            <ul class="attachments" aria-label="Attached images">
                <For each=indexed key=|(i, f)| (*i, f.name.clone()) children=move |(index, file)| view! {
                    <li class="attachment-preview" data-testid="attachment-preview">
                        <img src=file.url.clone() alt=file.name.clone()/>
                        <button type="button" class="attachment-remove" data-testid="attachment-remove"
                            aria-label=format!("Remove {}", file.name)
                            on:click=move |_| files.update(|f| { if index < f.len() { f.remove(index); } })>"×"</button>
                    </li>
                }/>
            </ul>
        </Show>
    }
}

/// Reads the files the person picked and attaches the images that fit `limit`, telling
/// `on_error` why any other was left out. With a split wasm (ADR 0030) this is a part of its
/// own, loaded when a file is first picked.
#[cfg_attr(wasm_split, leptos::lazy(attachments))]
async fn attach(
    ev: ev::Event,
    limit: u64,
    files: RwSignal<Vec<PickedFile>>,
    on_error: Option<Callback<String>>,
) {
    for picked in platform::read_picked(&ev).await {
        match picked {
            Ok(file) if inline_image_type(&file.media_type).is_none() => {
                if let Some(report) = on_error {
                    report.run(format!(
                        "{} is not an image this page shows; only PNG, JPEG, GIF, \
                         WebP and AVIF images can be attached.",
                        file.name
                    ));
                }
            }
            Ok(file) if file.size > limit => {
                if let Some(report) = on_error {
                    report.run(format!(
                        "{} is {} KB; this connection takes images up to {} KB.",
                        file.name,
                        file.size / 1024,
                        limit / 1024
                    ));
                }
            }
            Ok(file) => files.update(|f| f.push(file)),
            Err(message) => {
                if let Some(report) = on_error {
                    report.run(message);
                }
            }
        }
    }
}
