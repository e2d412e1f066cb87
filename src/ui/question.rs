//! A question a running tool's server asks the person (an MCP elicitation), from its
//! `data-question` part: the form (or the link to open, never shown inside the chat), Send /
//! Decline / Cancel, and once it closes, what was answered. The reply goes to
//! `POST /api/chats/{chat}/questions/{id}`; the card changes when the server sends the
//! question's part again.
//!
//! The card is written as one escaped HTML string ([`card_html`]) with its clicks and its
//! submit handled where they bubble to: a generated view per element cost the wasm bundle
//! ~17 KB (ADR 0022). It is redrawn only when the question's part changes, so what the person
//! types stays put.

use leptos::{ev, prelude::*};
use serde_json::{Map, Value};

use super::{controller::ChatCtl, form, html::escape, message::countdown, platform, url::encode};
use crate::protocol::{
    UiMessage, UiPart,
    question::{Question, QuestionReply, QuestionState},
    schema,
};

/// One question, found in `message` by its id.
#[component]
pub fn QuestionCard(message: Memo<Option<UiMessage>>, id: String) -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    let lookup = id.clone();
    let question = Memo::new(move |_| {
        message.with(|m| {
            m.as_ref()?.parts.iter().find_map(|p| match p {
                UiPart::Data(d) if d.id.as_deref() == Some(lookup.as_str()) => {
                    Question::from_data(&d.data)
                }
                _ => None,
            })
        })
    });
    let id = StoredValue::new(id);
    let error = RwSignal::new(None::<String>);
    let busy = StoredValue::new(false);
    let reply = move |reply: QuestionReply| {
        if busy.get_value() {
            return;
        }
        busy.set_value(true);
        error.set(None);
        let url = format!(
            "/api/chats/{}/questions/{}",
            encode(&ctl.chat_id.get_untracked()),
            id.with_value(|id| encode(id))
        );
        let body = serde_json::to_string(&reply).unwrap_or_default();
        leptos::task::spawn_local(async move {
            let sent = platform::post(&url, Some(body)).await;
            busy.set_value(false);
            if let Err(e) = sent {
                error.set(Some(e.to_string()));
            }
        });
    };
    let on_click = move |ev: ev::MouseEvent| match platform::action_of(&ev).as_deref() {
        Some("decline") => reply(QuestionReply::Decline),
        Some("cancel") => reply(QuestionReply::Cancel),
        // The link opens in a new tab (its default); opening it is the answer.
        Some("open") => reply(QuestionReply::Accept {
            content: Map::new(),
        }),
        _ => {}
    };
    let on_submit = move |ev: ev::SubmitEvent| {
        ev.prevent_default();
        let Some(schema) = question.with_untracked(|q| q.as_ref().and_then(|q| q.schema.clone()))
        else {
            return;
        };
        let content = form::values_from(&schema, &platform::form_entries(&ev));
        match schema::validate(&schema, &Value::Object(content.clone())) {
            Err(e) => error.set(Some(format!(
                "{}: {}",
                e.path.trim_start_matches("$."),
                e.message
            ))),
            Ok(()) => reply(QuestionReply::Accept { content }),
        }
    };
    // Its deadline is the server's time; the browser's clock is assumed close to it (the
    // server closes the question in any case).
    let remaining = move || {
        question
            .with(|q| {
                q.as_ref()
                    .filter(|q| q.state == QuestionState::Open)
                    .and_then(|q| q.deadline_ms)
            })
            .map(|deadline| countdown(deadline - ctl.now.get()))
    };
    view! {
        <div class="question" on:click=on_click on:submit=on_submit
            inner_html=move || question.with(|q| q.as_ref().map(card_html).unwrap_or_default())></div>
        {move || error.get().map(|e| view! { <p class="edit-error" data-testid="question-error" role="alert">{e}</p> })}
        {move || remaining().map(|r| view! { <p class="approval-countdown" data-testid="question-countdown">{r}</p> })}
    }
}

/// The buttons of an open question besides its answer.
const DECLINE_OR_CANCEL: &str = "<button type=\"button\" class=\"deny\" data-action=\"decline\" \
    data-testid=\"question-decline\">Decline</button><button type=\"button\" class=\"link-button\" \
    data-action=\"cancel\" data-testid=\"question-cancel\">Cancel the call</button>";

/// The whole card of `question`, escaped.
pub fn card_html(question: &Question) -> String {
    let open = question.state == QuestionState::Open;
    let body = match (&question.schema, &question.url) {
        (Some(schema), _) if open => format!(
            "<form class=\"edit-form\" data-testid=\"question-form\">{}\
             <div class=\"approval-actions\"><button type=\"submit\" class=\"approve\" \
             data-testid=\"question-send\">Send</button>{DECLINE_OR_CANCEL}</div></form>",
            form::fields_html(schema, &form::defaults(schema)),
        ),
        (_, Some(url)) if open => match super::markdown::safe_href(url) {
            Some(href) => format!(
                "<p class=\"question-link\"><a href=\"{href}\" target=\"_blank\" rel=\"noopener noreferrer nofollow\" \
                 data-action=\"open\" data-testid=\"question-link\">Open the page</a> \
                 <span class=\"question-url\" data-testid=\"question-url\">{href}</span></p>\
                 <div class=\"approval-actions\">{DECLINE_OR_CANCEL}</div>",
                href = escape(&href)
            ),
            None => format!("<div class=\"approval-actions\">{DECLINE_OR_CANCEL}</div>"),
        },
        _ => match question.answer.as_ref().and_then(Value::as_object) {
            Some(answer) => format!(
                "<dl class=\"tool-output\" data-testid=\"question-answer\">{}</dl>",
                form::answer_html(question.schema.as_ref().unwrap_or(&Value::Null), answer)
            ),
            None => String::new(),
        },
    };
    format!(
        "<section class=\"tool-card question-card\" data-testid=\"question-card\" data-state=\"{state}\" \
         role=\"group\" aria-label=\"Question from {source}\"><header class=\"tool-head\">\
         <span class=\"tool-title\">Question</span>\
         <span class=\"tool-source\" data-testid=\"question-source\">{source}</span>\
         <span class=\"tool-status\" data-testid=\"question-status\" role=\"status\">{words}</span></header>\
         <p class=\"question-message\" data-testid=\"question-message\">{message}</p>{body}</section>",
        state = question.state.as_str(),
        source = escape(&question.source),
        words = question.state.words(),
        message = escape(&question.message),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn question(state: QuestionState) -> Question {
        Question {
            tool_call_id: "c".into(),
            source: "MCP server <evil>".into(),
            message: "Your name? <img src=x onerror=alert(1)>".into(),
            schema: Some(
                json!({"type": "object", "properties": {"name": {"type": "string", "default": "Ada"}}}),
            ),
            url: None,
            state,
            deadline_ms: None,
            answer: None,
        }
    }

    #[test]
    fn an_open_form_is_escaped_and_starts_from_the_defaults() {
        let html = card_html(&question(QuestionState::Open));
        assert!(!html.contains("<img") && !html.contains("<evil>"), "{html}");
        assert!(html.contains("data-state=\"open\""), "{html}");
        assert!(html.contains("data-testid=\"question-form\""), "{html}");
        assert!(html.contains("value=\"Ada\""), "{html}");
        assert!(html.contains("data-action=\"decline\""), "{html}");
    }

    #[test]
    fn links_open_in_a_new_tab_and_only_http() {
        let mut q = question(QuestionState::Open);
        q.schema = None;
        q.url = Some("https://example.org/consent?a=1&b=\"2\"".into());
        let html = card_html(&q);
        assert!(
            html.contains("target=\"_blank\" rel=\"noopener noreferrer nofollow\""),
            "{html}"
        );
        assert!(html.contains("a=1&amp;b="), "{html}");
        assert!(!html.contains("<form"), "{html}");
        q.url = Some("javascript:alert(1)".into());
        assert!(
            !card_html(&q).contains("<a "),
            "a script link is never a link"
        );
    }

    #[test]
    fn a_closed_question_shows_its_answer_and_no_form() {
        let mut q = question(QuestionState::Answered);
        q.answer = Some(json!({"name": "<b>Ada</b>"}));
        let html = card_html(&q);
        assert!(
            html.contains("<dt>name</dt><dd>&lt;b&gt;Ada&lt;/b&gt;</dd>"),
            "{html}"
        );
        assert!(
            !html.contains("<form") && !html.contains("data-action"),
            "{html}"
        );
        assert!(html.contains("Answered"), "{html}");
    }
}
