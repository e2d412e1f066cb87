//! Messages, tool cards and approval cards — all rendered from the `protocol` message parts:
//! a message and its parts here, a tool call's card in `message/tool.rs`, the approval card
//! and its forms in `message/approval.rs`.

use leptos::{
    either::{Either, EitherOf3, EitherOf9},
    prelude::*,
};
use serde_json::Value;

mod approval;
mod tool;

pub(super) use approval::countdown;
use tool::ToolCard;

use super::{controller::ChatCtl, markdown::Markdown, question::QuestionCard};
use crate::protocol::{
    Role, UiMessage, UiPart, message::inline_image_type, question::QUESTION_PART,
    voice::aside_words,
};

/// Which part of a message a keyed child renders: tool parts by their call id and questions by
/// theirs (their cards keep local state while the message grows), other parts by position.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PartKey {
    Tool(String),
    Question(String),
    Other(usize),
}

fn part_keys(message: &UiMessage) -> Vec<PartKey> {
    message
        .parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            UiPart::Tool(t) | UiPart::DynamicTool(t) => Some(PartKey::Tool(t.tool_call_id.clone())),
            UiPart::Data(d) if d.name == QUESTION_PART => d.id.clone().map(PartKey::Question),
            UiPart::Data(d) if aside_words(d).is_some() => Some(PartKey::Other(i)),
            UiPart::StepStart | UiPart::Data(_) | UiPart::Unknown(_) => None,
            _ => Some(PartKey::Other(i)),
        })
        .collect()
}

/// Builds the conversation's messages into `list` (the chat page's `<ol>`; only the browser
/// renders messages). With a split wasm (ADR 0030) every message, card and form is in a part of
/// its own, loaded with the first message (and fetched ahead once the chat page works).
#[cfg(feature = "hydrate")]
#[cfg_attr(wasm_split, leptos::lazy(messages))]
pub async fn build_messages(
    list: web_sys::Element,
    ids: Memo<Vec<String>>,
) -> super::deferred::Built {
    super::deferred::build_into(&list, move || {
        view! { <For each=move || ids.get() key=|id| id.clone() children=|id| view! { <MessageView id=id/> }/> }
    })
}

/// One message of the conversation.
#[component]
pub fn MessageView(id: String) -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    let lookup = id.clone();
    let message = Memo::new(move |_| {
        ctl.messages
            .with(|ms| ms.iter().find(|m| m.id == lookup).cloned())
    });
    let role = move || match message.with(|m| m.as_ref().map(|m| m.role)) {
        Some(Role::User) => "user",
        Some(Role::System) => "system",
        _ => "assistant",
    };
    let keys = Memo::new(move |_| message.with(|m| m.as_ref().map(part_keys).unwrap_or_default()));
    let is_last = {
        let id = id.clone();
        move || {
            ctl.messages
                .with(|ms| ms.last().is_some_and(|m| m.id == id))
        }
    };
    let streaming = move || {
        is_last()
            && role() == "assistant"
            && matches!(ctl.status.get(), super::controller::Status::Streaming)
    };
    let usage = move || {
        message.with(|m| {
            let meta = m.as_ref()?.metadata.as_ref()?;
            let usage = meta.get("usage")?;
            let total = usage.get("totalTokens").and_then(Value::as_u64)?;
            let model = meta
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            Some((total, model))
        })
    };
    let message_id = id;
    view! {
        <li class=move || format!("message {}", role()) data-testid="message" data-role=role>
            <For
                each=move || keys.get()
                key=|k| k.clone()
                children=move |key| {
                    let message_id = message_id.clone();
                    match key {
                        PartKey::Tool(call_id) => EitherOf3::A(view! { <ToolCard message=message call_id=call_id/> }),
                        PartKey::Question(id) => EitherOf3::B(view! { <QuestionCard message=message id=id/> }),
                        PartKey::Other(index) => EitherOf3::C(view! { <PartView message=message index=index message_id=message_id/> }),
                    }
                }
            />
            <Show when=streaming>
                <span class="cursor" aria-hidden="true"></span>
            </Show>
            {move || usage().map(|(total, model)| view! {
                <footer class="usage" data-testid="usage">
                    {format!("{total} tokens")}
                    {(!model.is_empty()).then(|| format!(" · {model}"))}
                </footer>
            })}
        </li>
    }
}

/// A non-tool part: text (Markdown), reasoning, a file, the words of an aside.
#[component]
fn PartView(message: Memo<Option<UiMessage>>, index: usize, message_id: String) -> impl IntoView {
    let _ = message_id;
    let part =
        Memo::new(move |_| message.with(|m| m.as_ref().and_then(|m| m.parts.get(index).cloned())));
    move || match part.get() {
        Some(UiPart::Text(text)) => {
            let is_user = message.with(|m| m.as_ref().is_some_and(|m| m.role == Role::User));
            if is_user {
                EitherOf9::A(
                    view! { <p class="message-text" data-testid="user-text">{text.text}</p> },
                )
            } else {
                let content = Signal::derive(move || match part.get() {
                    Some(UiPart::Text(t)) => t.text,
                    _ => String::new(),
                });
                EitherOf9::B(
                    view! { <div class="assistant-text markdown" data-testid="assistant-text"><Markdown text=content/></div> },
                )
            }
        }
        Some(UiPart::Reasoning(reasoning)) => EitherOf9::C(view! {
            <details class="reasoning" data-testid="reasoning">
                <summary>"Reasoning"</summary>
                <p>{reasoning.text}</p>
            </details>
        }),
        Some(UiPart::File(file))
            if inline_image_type(&file.media_type).is_some()
                && (file.url.starts_with("data:image/")
                    || file.url.starts_with("https://")
                    || file.url.starts_with("/api/chats/")) =>
        {
            EitherOf9::D(view! {
                <img class="attachment" src=file.url alt=file.filename.unwrap_or_else(|| "attached image".into())/>
            })
        }
        // A spoken answer, kept by the chat's file store: a player, to hear it again (ADR 0037).
        Some(UiPart::File(file))
            if file.media_type.starts_with("audio/") && file.url.starts_with("/api/chats/") =>
        {
            let caption =
                message.with(|m| spoken_caption(m.as_ref().and_then(|m| m.metadata.as_ref())));
            EitherOf9::H(view! {
                <figure class="spoken" data-testid="spoken-answer">
                    <audio controls preload="none" src=file.url data-testid="spoken-audio"
                        aria-label="The agent's spoken answer"></audio>
                    <figcaption>{caption}</figcaption>
                </figure>
            })
        }
        // Any other file is a download (the server serves it as one, ADR 0026): a link when
        // it is kept here, its name otherwise.
        Some(UiPart::File(file)) => {
            let name = file.filename.clone().unwrap_or(file.media_type);
            let href = file.url.starts_with("/api/chats/").then_some(file.url);
            EitherOf9::E(view! {
                <p class="attachment-name" data-testid="attachment-name"><super::icons::AttachIcon/>" "{match href {
                    Some(href) => Either::Left(view! { <a href=href download=name.clone()>{name.clone()}</a> }),
                    None => Either::Right(name),
                }}</p>
            })
        }
        Some(UiPart::SourceUrl(source)) => {
            let href = super::markdown::safe_href(&source.url);
            let title = source.title.clone().unwrap_or_else(|| source.url.clone());
            EitherOf9::F(view! { <p class="source">{match href {
                Some(href) => Either::Left(view! { <a href=href target="_blank" rel="noopener noreferrer nofollow">{title}</a> }),
                None => Either::Right(title),
            }}</p> })
        }
        // What the person said while the turn waited for them (an aside, ADR 0035): their
        // words, inside the waiting message where they said them.
        Some(UiPart::Data(data)) if aside_words(&data).is_some() => {
            let words = aside_words(&data).unwrap_or_default().to_owned();
            EitherOf9::I(view! {
                <blockquote class="aside" data-testid="aside-words">
                    <span class="aside-who">"You said"</span>" "<q>{words}</q>
                </blockquote>
            })
        }
        _ => EitherOf9::G(()),
    }
}

/// The caption of a spoken answer's player: its length, from the message's
/// `metadata.audio.duration` (seconds; `finish.messageMetadata.audio`, ADR 0035).
fn spoken_caption(metadata: Option<&Value>) -> String {
    let duration = metadata
        .and_then(|m| m.get("audio"))
        .and_then(|a| a.get("duration"))
        .and_then(Value::as_f64)
        .filter(|d| d.is_finite() && *d >= 0.0);
    match duration {
        Some(seconds) => {
            let tenths = (seconds * 10.0).round() as u64;
            format!(
                "Spoken answer · {}:{:02}.{}",
                tenths / 600,
                tenths / 10 % 60,
                tenths % 10
            )
        }
        None => "Spoken answer".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spoken_answer_is_captioned_with_its_length_from_the_metadata() {
        let meta = serde_json::json!({"audio": {"chunks": 4, "bytes": 153_600, "sampleRate": 24_000, "duration": 3.2}});
        assert_eq!(spoken_caption(Some(&meta)), "Spoken answer · 0:03.2");
        let long = serde_json::json!({"audio": {"duration": 75.04}});
        assert_eq!(spoken_caption(Some(&long)), "Spoken answer · 1:15.0");
        for meta in [
            serde_json::json!({}),
            serde_json::json!({"audio": {"duration": "3"}}),
            serde_json::json!({"audio": {"duration": -1}}),
        ] {
            assert_eq!(spoken_caption(Some(&meta)), "Spoken answer");
        }
        assert_eq!(spoken_caption(None), "Spoken answer");
    }
}
