//! Messages, tool cards and approval cards — all rendered from the `protocol` message parts.

use leptos::{
    either::{Either, EitherOf3, EitherOf8},
    ev,
    prelude::*,
};
use serde_json::{Map, Value};

use super::{
    api::ToolInfo,
    controller::{Answer, ChatCtl},
    form,
    markdown::Markdown,
    platform,
    question::QuestionCard,
};
use crate::protocol::{
    Role, ToolPart, ToolPresentation, ToolState, UiMessage, UiPart,
    chunk::{APPROVAL_EXPIRED_PREFIX, DISMISSED_PREFIX, SUPERSEDED_PREFIX, WITHDRAWN_PREFIX},
    countersign::{DENIED_BY, PROGRESS_PART, Progress, ProgressState},
    grant::Ruling,
    message::inline_image_type,
    presentation::unknown_tool_sentence,
    question::QUESTION_PART,
    schema,
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

/// A non-tool part: text (Markdown), reasoning, a file.
#[component]
fn PartView(message: Memo<Option<UiMessage>>, index: usize, message_id: String) -> impl IntoView {
    let _ = message_id;
    let part =
        Memo::new(move |_| message.with(|m| m.as_ref().and_then(|m| m.parts.get(index).cloned())));
    move || match part.get() {
        Some(UiPart::Text(text)) => {
            let is_user = message.with(|m| m.as_ref().is_some_and(|m| m.role == Role::User));
            if is_user {
                EitherOf8::A(
                    view! { <p class="message-text" data-testid="user-text">{text.text}</p> },
                )
            } else {
                let content = Signal::derive(move || match part.get() {
                    Some(UiPart::Text(t)) => t.text,
                    _ => String::new(),
                });
                EitherOf8::B(
                    view! { <div class="assistant-text markdown" data-testid="assistant-text"><Markdown text=content/></div> },
                )
            }
        }
        Some(UiPart::Reasoning(reasoning)) => EitherOf8::C(view! {
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
            EitherOf8::D(view! {
                <img class="attachment" src=file.url alt=file.filename.unwrap_or_else(|| "attached image".into())/>
            })
        }
        // A spoken answer, kept by the chat's file store: a player, to hear it again (ADR 0037).
        Some(UiPart::File(file))
            if file.media_type.starts_with("audio/") && file.url.starts_with("/api/chats/") =>
        {
            let caption =
                message.with(|m| spoken_caption(m.as_ref().and_then(|m| m.metadata.as_ref())));
            EitherOf8::H(view! {
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
            EitherOf8::E(view! {
                <p class="attachment-name" data-testid="attachment-name"><super::icons::AttachIcon/>" "{match href {
                    Some(href) => Either::Left(view! { <a href=href download=name.clone()>{name.clone()}</a> }),
                    None => Either::Right(name),
                }}</p>
            })
        }
        Some(UiPart::SourceUrl(source)) => {
            let href = super::markdown::safe_href(&source.url);
            let title = source.title.clone().unwrap_or_else(|| source.url.clone());
            EitherOf8::F(view! { <p class="source">{match href {
                Some(href) => Either::Left(view! { <a href=href target="_blank" rel="noopener noreferrer nofollow">{title}</a> }),
                None => Either::Right(title),
            }}</p> })
        }
        _ => EitherOf8::G(()),
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

/// What the policy decided for a tool part: the ruling the server put in its approval's
/// descriptor (`approval.descriptor.countersign`).
pub(super) fn ruling_of(tool: &ToolPart) -> Option<Ruling> {
    let descriptor = tool.approval.as_ref()?.descriptor.as_ref()?.as_object()?;
    Ruling::from_metadata(descriptor)
}

/// The `data-countersign` part of `tool`'s approval in `message`, if its approval needs several
/// people.
fn progress_of(message: &UiMessage, tool: &ToolPart) -> Option<Progress> {
    let approval = &tool.approval.as_ref()?.id;
    message.parts.iter().find_map(|part| match part {
        UiPart::Data(data)
            if data.name == PROGRESS_PART && data.id.as_deref() == Some(approval.as_str()) =>
        {
            Progress::from_value(&data.data)
        }
        _ => None,
    })
}

/// Why a person denied `tool`, as its card says it under the status — the reason carried by the
/// approval's answer (`approval.reason`: the requester's own words, or "Denied by Ben: …" from
/// the server). Nothing when a `data-countersign` part says it (`countersigned`), for a rule's
/// refusal (its chip says it) or for a call that was not denied.
fn denial_note(tool: &ToolPart, countersigned: bool) -> Option<String> {
    let approval = tool.approval.as_ref()?;
    let denied = approval.approved == Some(false)
        && matches!(
            tool.state,
            ToolState::OutputDenied | ToolState::ApprovalResponded
        );
    if !denied || countersigned || matches!(ruling_of(tool), Some(Ruling::DeniedByRule { .. })) {
        return None;
    }
    let reason = approval.reason.as_deref()?.trim();
    if reason.is_empty() {
        None
    } else if reason.starts_with(DENIED_BY) {
        Some(reason.to_owned())
    } else {
        Some(format!("Reason: {reason}"))
    }
}

/// The state of a tool part in words a person understands, and the `data-state` it shows;
/// `progress`: where its countersigning stands, when its approval needs several people.
fn describe_state(
    tool: &ToolPart,
    runs_in_browser: bool,
    progress: Option<ProgressState>,
) -> (&'static str, &'static str) {
    let error_starts = |prefix: &str| {
        tool.error_text
            .as_deref()
            .is_some_and(|e| e.starts_with(prefix))
    };
    match tool.state {
        ToolState::InputStreaming => ("Preparing", "input-streaming"),
        ToolState::InputAvailable if runs_in_browser => {
            ("Waiting for your browser", "input-available")
        }
        ToolState::InputAvailable => ("Running", "input-available"),
        ToolState::ApprovalRequested if progress.is_some() => {
            ("Waiting for approvals", "approval-requested")
        }
        ToolState::ApprovalRequested => ("Waiting for your approval", "approval-requested"),
        ToolState::ApprovalResponded
            if progress == Some(ProgressState::Waiting)
                && tool.approval.as_ref().and_then(|a| a.approved) != Some(false) =>
        {
            ("Waiting for more approvals", "awaiting-countersign")
        }
        ToolState::ApprovalResponded => {
            let approval = tool.approval.as_ref();
            if approval.and_then(|a| a.dismissed) == Some(true) {
                ("Not decided", "approval-responded")
            } else if approval.and_then(|a| a.approved) == Some(false) {
                ("Denied", "approval-responded")
            } else if runs_in_browser {
                ("Waiting for your browser", "approval-responded")
            } else {
                ("Running", "approval-responded")
            }
        }
        ToolState::OutputAvailable => ("Completed", "output-available"),
        ToolState::OutputError if error_starts(APPROVAL_EXPIRED_PREFIX) => ("Expired", "expired"),
        ToolState::OutputError if error_starts(DISMISSED_PREFIX) => ("Not decided", "dismissed"),
        ToolState::OutputError if error_starts(SUPERSEDED_PREFIX) => ("Superseded", "superseded"),
        ToolState::OutputError if error_starts(WITHDRAWN_PREFIX) => ("Withdrawn", "withdrawn"),
        ToolState::OutputError => ("Failed", "output-error"),
        ToolState::OutputDenied if matches!(ruling_of(tool), Some(Ruling::DeniedByRule { .. })) => {
            ("Refused by a rule", "denied-by-rule")
        }
        ToolState::OutputDenied => ("Denied", "output-denied"),
    }
}

/// What a tool says about itself, tracked (`None` when it left the registry since the call).
fn described(ctl: ChatCtl, name: &str) -> Option<ToolInfo> {
    ctl.tools
        .with(|tools| tools.iter().find(|t| t.name == name).cloned())
}

/// One tool call: what it is, where it stands, its arguments and result.
#[component]
fn ToolCard(message: Memo<Option<UiMessage>>, call_id: String) -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    let lookup = call_id.clone();
    let tool = Memo::new(move |_| {
        message.with(|m| m.as_ref().and_then(|m| m.find_tool_part(&lookup).cloned()))
    });
    let show_raw = RwSignal::new(false);
    let name = move || tool.with(|t| t.as_ref().map(|t| t.tool_name.clone()).unwrap_or_default());
    // What the tool says about itself (nothing when it left the registry since the call).
    let info = Memo::new(move |_| described(ctl, &name()));
    let runs_in_browser = move || info.with(|i| i.as_ref().is_some_and(|i| i.runs_in_browser));
    let title = move || {
        info.with(|i| i.as_ref().map(|i| i.presentation.title.clone()))
            .unwrap_or_else(name)
    };
    let source = move || info.with(|i| i.as_ref().and_then(|i| i.presentation.source.clone()));
    let notes = move || {
        info.with(|i| i.as_ref().map(|i| i.presentation.notes.join(" · ")))
            .unwrap_or_default()
    };
    let fields = move |value: &Value, except: Option<&Value>| {
        info.with(|i| match i {
            Some(i) => i.presentation.fields(value, except),
            None => ToolPresentation::default().fields(value, except),
        })
    };
    let progress = Memo::new(move |_| {
        tool.with(|t| {
            let t = t.as_ref()?;
            message.with(|m| progress_of(m.as_ref()?, t))
        })
    });
    let state = move || {
        tool.with(|t| {
            t.as_ref().map(|t| {
                describe_state(
                    t,
                    runs_in_browser(),
                    progress.with(|p| p.as_ref().map(|p| p.state)),
                )
            })
        })
        .unwrap_or(("Preparing", "input-streaming"))
    };
    // An edit made a new proposal: the approvals are for its arguments (ADR 0028).
    let proposal = Memo::new(move |_| progress.with(|p| p.as_ref().and_then(|p| p.args.clone())));
    let args = move || {
        if let Some(proposal) = proposal.get() {
            return fields(&proposal, None);
        }
        tool.with(|t| {
            t.as_ref()
                .and_then(|t| t.input.as_ref())
                .map(|i| fields(i, None))
                .unwrap_or_default()
        })
    };
    let output = move || {
        tool.with(|t| {
            t.as_ref()
                .and_then(|t| t.output.as_ref().map(|o| fields(o, t.input.as_ref())))
                .unwrap_or_default()
        })
    };
    let error = move || tool.with(|t| t.as_ref().and_then(|t| t.error_text.clone()));
    let raw = move || {
        tool.with(|t| {
            t.as_ref()
                .map(|t| serde_json::to_string_pretty(t).unwrap_or_default())
                .unwrap_or_default()
        })
    };
    let approval_id = move || {
        tool.with(|t| {
            t.as_ref()
                .filter(|t| t.state == ToolState::ApprovalRequested)
                .and_then(|t| t.approval.as_ref().map(|a| a.id.clone()))
        })
    };
    // A call that ran after an approval (a person's, a rule's or a grant's) has a receipt
    // anyone can check offline (ADR 0029): the server makes it; the card links to it.
    let receipt = move || {
        tool.with(|t| {
            t.as_ref()
                .filter(|t| matches!(t.state, ToolState::OutputAvailable | ToolState::OutputError))
                .and_then(|t| t.approval.as_ref())
                .filter(|a| a.approved == Some(true))
                .map(|a| format!("/api/audit/receipts/{}", super::url::encode(&a.id)))
        })
    };
    let ruling = Memo::new(move |_| tool.with(|t| t.as_ref().and_then(ruling_of)));
    // Only a call nobody decided can be asked again: it expired, or was set aside.
    let askable = move || matches!(state().1, "expired" | "dismissed");
    let ask_call = StoredValue::new(call_id.clone());
    // The chip of a call a grant let run revokes that grant (its click bubbles here).
    let revoked = RwSignal::new(None::<Result<(), String>>);
    let on_ruling_click = move |ev: ev::MouseEvent| {
        if let Some(id) =
            platform::action_of(&ev).and_then(|a| a.strip_prefix("revoke:").map(str::to_owned))
        {
            super::grants::revoke(id, revoked);
        }
    };
    view! {
        <section
            class=move || format!("tool-card state-{}", state().1)
            data-testid="tool-card"
            data-tool=name
            data-state=move || state().1
            aria-label=move || format!("{} tool: {}", title(), state().0)
        >
            <header class="tool-head">
                <span class="tool-title">{title}</span>
                {move || source().map(|s| view! { <span class="tool-source" data-testid="tool-source">{s}</span> })}
                <span class="tool-status" data-testid="tool-status" role="status">{move || state().0}</span>
            </header>
            {move || {
                let notes = notes();
                (!notes.is_empty()).then(|| view! { <p class="tool-notes" data-testid="tool-notes">{notes}</p> })
            }}
            {move || proposal.with(|p| p.is_some()).then(|| view! {
                <p class="tool-notes" data-testid="tool-proposal">"Edited: the approvals are for these arguments"</p>
            })}
            {move || {
                let args = args();
                (!args.is_empty()).then(|| view! {
                    <dl class="tool-args">
                        {args.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
                    </dl>
                })
            }}
            <div class="tool-ruling" on:click=on_ruling_click
                inner_html=move || ruling.with(|r| r.as_ref().map(|r| super::grants::ruling_html(r, revoked.get())).unwrap_or_default())></div>
            {move || progress.get().map(|p| {
                let link = (p.state == ProgressState::Waiting).then(|| format!("/approvals/{}", super::url::encode(&p.approval_id)));
                view! {
                    <p class="countersign-progress" data-testid="countersign-progress" data-progress=p.state.as_str()>
                        {p.words()}
                        {link.map(|href| view! { " · " <a href=href data-testid="approval-link">"open it on another device"</a> })}
                    </p>
                }
            })}
            {move || {
                let countersigned = progress.with(Option::is_some);
                tool.with(|t| t.as_ref().and_then(|t| denial_note(t, countersigned)))
                    .map(|note| view! { <p class="tool-denial" data-testid="denial-reason">{note}</p> })
            }}
            {move || approval_id().map(|id| {
                view! { <ApprovalCard approval_id=id tool=tool progress=progress/> }
            })}
            {move || askable().then(|| view! {
                <div class="approval-actions">
                    <button type="button" class="edit" data-testid="ask-again" disabled=move || ctl.busy()
                        on:click=move |_| ctl.ask_again(ask_call.get_value())>"Ask again"</button>
                </div>
            })}
            {move || {
                let out = output();
                (!out.is_empty()).then(|| view! {
                    <dl class="tool-output">
                        {out.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
                    </dl>
                })
            }}
            {move || error().map(|e| view! { <p class="tool-error">{e}</p> })}
            {move || receipt().map(|href| view! {
                <a class="tool-receipt" href=href download="" data-testid="tool-receipt">"Receipt"</a>
            })}
            <button
                type="button"
                class="link-button"
                data-testid="tool-raw-toggle"
                aria-expanded=move || show_raw.get().to_string()
                on:click=move |_| show_raw.update(|v| *v = !*v)
            >
                {move || if show_raw.get() { "Hide raw JSON" } else { "Show raw JSON" }}
            </button>
            <Show when=move || show_raw.get()>
                <pre class="tool-raw" data-testid="tool-raw">{raw}</pre>
            </Show>
        </section>
    }
}

pub(super) fn countdown(remaining_ms: i64) -> String {
    if remaining_ms <= 0 {
        return "Expiring…".into();
    }
    let secs = remaining_ms / 1000;
    format!("Expires in {}:{:02}", secs / 60, secs % 60)
}

/// Where the approval card is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CardMode {
    Ask,
    Deny,
    Edit,
}

/// The countersignature: Approve, Deny (with an optional reason) or Edit.
#[component]
fn ApprovalCard(
    approval_id: String,
    tool: Memo<Option<ToolPart>>,
    progress: Memo<Option<Progress>>,
) -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    let mode = RwSignal::new(CardMode::Ask);
    let reason = RwSignal::new(String::new());
    let edit_error = RwSignal::new(None::<String>);
    let ruling = Memo::new(move |_| tool.with(|t| t.as_ref().and_then(ruling_of)));
    let grantable = move || {
        matches!(
            ruling.get(),
            Some(Ruling::Asked {
                grantable: true,
                ..
            })
        )
    };
    let asking_rule = move || match ruling.get() {
        Some(Ruling::Asked {
            rule: Some(rule), ..
        }) => Some(rule),
        _ => None,
    };
    // What the rule asks for beyond this person's click, and whether they can give it: an
    // edit may have made it ask for more (its progress part says so).
    let needs = Memo::new(move |_| {
        progress
            .with(|p| p.as_ref().map(|p| p.needs.clone()))
            .or_else(|| ruling.get().map(|r| r.needs()))
            .unwrap_or_default()
    });
    let cannot = Memo::new(move |_| ctl.me.with(|me| me.cannot_sign(&needs.get(), &me.id)));
    let step_up = move || needs.with(|n| n.step_up);
    let step_error = RwSignal::new(None::<String>);
    // An answer, after a passkey confirmation when the rule asks for one (for the arguments
    // that will run: edited ones need their own).
    let sign = {
        let id = approval_id.clone();
        move |answer: Answer| {
            if !needs.with_untracked(|n| n.step_up) || !answer.approved() {
                ctl.answer(id.clone(), answer);
                return;
            }
            let id = id.clone();
            let args = answer.edited().cloned();
            step_error.set(Some("Confirm with your passkey…".into()));
            leptos::task::spawn_local(async move {
                match super::inbox::confirm_with_passkey(&id, args, None).await {
                    Ok(assertion) => {
                        step_error.set(None);
                        ctl.answer_confirmed(id, answer, assertion);
                    }
                    Err(e) => step_error.set(Some(e)),
                }
            });
        }
    };
    let name = move || tool.with(|t| t.as_ref().map(|t| t.tool_name.clone()).unwrap_or_default());
    let input = move || {
        progress
            .with(|p| p.as_ref().and_then(|p| p.args.clone()))
            .or_else(|| tool.with(|t| t.as_ref().and_then(|t| t.input.clone())))
            .unwrap_or(Value::Null)
    };
    let info = Memo::new(move |_| described(ctl, &name()));
    // "Pay 50.00 USD to Hanako": the sentence the person countersigns, in the tool's words.
    let sentence = move || {
        info.with(|i| i.as_ref().map(|i| i.presentation.sentence(&input())))
            .unwrap_or_else(|| unknown_tool_sentence(&name()))
    };
    let deadline_id = approval_id.clone();
    let remaining = move || {
        ctl.deadlines
            .with(|d| d.get(&deadline_id).copied())
            .map(|deadline| countdown(deadline - ctl.now.get()))
    };
    let button_id = format!("approve-{approval_id}");
    // A new card takes the focus, so the keyboard can answer at once.
    let focus_id = approval_id.clone();
    let focus_target = button_id.clone();
    Effect::new(move |_| {
        if ctl.focus_approval.get().as_deref() == Some(focus_id.as_str()) {
            platform::focus(&focus_target);
        }
    });
    let schema = move || {
        info.with(|i| i.as_ref().map(|i| i.parameters.clone()))
            .unwrap_or(Value::Null)
    };
    let pays = move || info.with(|i| i.as_ref().is_some_and(|i| i.pays));
    // What this call pays in the wallet's cents (a paying tool's `amount` and `currency`).
    let call_cents = move || {
        let input = input();
        let amount = input.get("amount")?;
        let code = input
            .get("currency")
            .and_then(Value::as_str)
            .unwrap_or("USD");
        crate::protocol::money::Money::parse(&amount.to_string(), code)
            .ok()
            .map(|m| m.wallet_cents())
    };
    let grant_error = RwSignal::new(None::<String>);
    let id_approve = approval_id.clone();
    let id_deny = approval_id.clone();
    let id_dismiss = approval_id.clone();
    let start_edit = move |_| {
        edit_error.set(None);
        mode.set(CardMode::Edit);
    };
    let sign_edit = sign.clone();
    let sign_approve = sign.clone();
    let submit_edit = move |ev: ev::SubmitEvent| {
        ev.prevent_default();
        let schema = schema();
        // The arguments as they were, with the form's fields in place of the schema's.
        let mut args = input().as_object().cloned().unwrap_or_default();
        for name in schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(Map::keys)
        {
            args.remove(name);
        }
        for (name, value) in form::values_from(&schema, &platform::form_entries(&ev)) {
            args.insert(name, value);
        }
        let args = Value::Object(args);
        if let Err(e) = schema::validate(&schema, &args) {
            edit_error.set(Some(format!(
                "{}: {}",
                e.path.trim_start_matches("$."),
                e.message
            )));
            return;
        }
        sign_edit(Answer::ApproveWithEdits(args));
    };
    // Approve (the Ask form's submit), perhaps remembering it as a grant.
    let approve = move |ev: ev::SubmitEvent| {
        ev.prevent_default();
        match super::grants::grant_request_from(&platform::form_entries(&ev)) {
            Ok(Some(grant)) => ctl.answer(id_approve.clone(), Answer::Remember(None, grant)),
            Ok(None) => sign_approve(Answer::Approve),
            Err(e) => grant_error.set(Some(e)),
        }
    };
    view! {
        <div class="approval-card" data-testid="approval-card" data-approval-id=approval_id.clone() role="group" aria-label=move || format!("Approval needed: {}", sentence())>
            <p class="approval-summary" data-testid="approval-summary">{sentence}</p>
            {move || asking_rule().map(|rule| view! {
                <p class="approval-rule muted" data-testid="approval-rule">{format!("The policy rule {rule} asks for this call every time.")}</p>
            })}
            {move || (!needs.with(|n| n.is_plain())).then(|| view! {
                <p class="approval-needs" data-testid="approval-needs">{move || format!("Needs {}.", needs.with(|n| n.words()))}</p>
            })}
            {move || cannot.get().map(|why| view! { <p class="approval-why" data-testid="approval-why">{why}</p> })}
            {move || step_error.get().map(|e| view! { <p class="edit-error" data-testid="step-up-status" role="alert">{e}</p> })}
            {move || remaining().map(|r| view! { <p class="approval-countdown" data-testid="approval-countdown">{r}</p> })}
            <Show when=move || mode.get() == CardMode::Ask>
                <form class="approval-ask" on:submit=approve.clone()>
                    <div inner_html=move || if grantable() { super::grants::remember_html(pays(), call_cents()) } else { String::new() }></div>
                    {move || grant_error.get().map(|e| view! { <p class="edit-error" data-testid="grant-error" role="alert">{e}</p> })}
                    <div class="approval-actions">
                        <button type="submit" class="approve" id=button_id.clone() data-testid="approve"
                            disabled=move || cannot.with(Option::is_some)>{move || if step_up() { "Approve with passkey" } else { "Approve" }}</button>
                        <button type="button" class="deny" data-testid="deny" on:click=move |_| mode.set(CardMode::Deny)>"Deny"</button>
                        <button type="button" class="edit" data-testid="edit" on:click=start_edit>"Edit"</button>
                        <button type="button" class="link-button" data-testid="dismiss" title="No decision now: nothing runs, and you can ask for it again later"
                            on:click={
                                let id = id_dismiss.clone();
                                move |_| ctl.answer(id.clone(), Answer::Dismiss)
                            }>"Not now"</button>
                    </div>
                </form>
            </Show>
            <Show when=move || mode.get() == CardMode::Deny>
                <form class="deny-form" on:submit={
                    let id = id_deny.clone();
                    move |ev: ev::SubmitEvent| {
                        ev.prevent_default();
                        ctl.answer(id.clone(), Answer::Deny(Some(reason.get_untracked())));
                    }
                }>
                    <label>
                        "Reason (optional)"
                        <input type="text" data-testid="deny-reason" prop:value=move || reason.get()
                            on:input=move |ev| reason.set(event_target_value(&ev)) maxlength="500"/>
                    </label>
                    <div class="approval-actions">
                        <button type="submit" class="deny" data-testid="deny-confirm">"Deny"</button>
                        <button type="button" class="link-button" on:click=move |_| mode.set(CardMode::Ask)>"Back"</button>
                    </div>
                </form>
            </Show>
            <Show when=move || mode.get() == CardMode::Edit>
                <form class="edit-form" on:submit=submit_edit.clone()>
                    <div class="edit-fields" inner_html=move || form::fields_html(&schema(), input().as_object().unwrap_or(&Map::new()))></div>
                    {move || edit_error.get().map(|e| view! { <p class="edit-error" data-testid="edit-error" role="alert">{e}</p> })}
                    <div class="approval-actions">
                        <button type="submit" class="approve" data-testid="edit-approve"
                            disabled=move || cannot.with(Option::is_some)>"Approve with changes"</button>
                        <button type="button" class="link-button" data-testid="edit-cancel" on:click=move |_| mode.set(CardMode::Ask)>"Cancel"</button>
                    </div>
                </form>
            </Show>
        </div>
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

    #[test]
    fn tool_states_are_named_for_people() {
        let mut tool = ToolPart::new("process_payment", "c", ToolState::OutputError);
        tool.error_text = Some(format!("{APPROVAL_EXPIRED_PREFIX}: nobody answered"));
        assert_eq!(describe_state(&tool, false, None), ("Expired", "expired"));
        tool.error_text = Some("Insufficient funds".into());
        assert_eq!(
            describe_state(&tool, false, None),
            ("Failed", "output-error")
        );
        let waiting = ToolPart::new("change_bgm", "c", ToolState::InputAvailable);
        assert_eq!(
            describe_state(&waiting, true, None).0,
            "Waiting for your browser"
        );
        let mut signed = ToolPart::new("process_payment", "c", ToolState::ApprovalResponded);
        signed.approval = Some(crate::protocol::Approval {
            id: "a".into(),
            approved: Some(true),
            ..Default::default()
        });
        assert_eq!(
            describe_state(&signed, false, Some(ProgressState::Waiting)),
            ("Waiting for more approvals", "awaiting-countersign")
        );
        assert_eq!(describe_state(&signed, false, None).0, "Running");
        for (prefix, state) in [
            (DISMISSED_PREFIX, "dismissed"),
            (SUPERSEDED_PREFIX, "superseded"),
            (WITHDRAWN_PREFIX, "withdrawn"),
        ] {
            tool.error_text = Some(format!("{prefix}: …"));
            assert_eq!(describe_state(&tool, false, None).1, state);
        }
        let mut refused = ToolPart::new("process_payment", "c", ToolState::OutputDenied);
        assert_eq!(describe_state(&refused, false, None).1, "output-denied");
        refused.approval = Some(crate::protocol::Approval {
            id: "a".into(),
            approved: Some(false),
            is_automatic: Some(true),
            descriptor: Some(serde_json::Value::Object(
                Ruling::DeniedByRule {
                    rule: "limit".into(),
                    reason: "too much".into(),
                }
                .to_metadata(),
            )),
            ..Default::default()
        });
        assert_eq!(
            describe_state(&refused, false, None),
            ("Refused by a rule", "denied-by-rule")
        );
        assert_eq!(
            ruling_of(&refused).and_then(|r| r.sentence()),
            Some("Refused by rule limit: too much".into())
        );
    }

    #[test]
    fn a_denied_card_says_why() {
        let mut denied = ToolPart::new("process_payment", "c", ToolState::OutputDenied);
        denied.approval = Some(crate::protocol::Approval {
            id: "a".into(),
            approved: Some(false),
            reason: Some("too much".into()),
            ..Default::default()
        });
        assert_eq!(
            denial_note(&denied, false).as_deref(),
            Some("Reason: too much")
        );
        assert_eq!(
            denial_note(&denied, true),
            None,
            "the progress part says it"
        );
        if let Some(approval) = denied.approval.as_mut() {
            approval.reason = Some("Denied by Ben: not this vendor".into());
        }
        assert_eq!(
            denial_note(&denied, false).as_deref(),
            Some("Denied by Ben: not this vendor")
        );
        if let Some(approval) = denied.approval.as_mut() {
            approval.reason = None;
        }
        assert_eq!(denial_note(&denied, false), None);
        let ran = ToolPart::new("process_payment", "c", ToolState::OutputAvailable);
        assert_eq!(denial_note(&ran, false), None);
    }

    #[test]
    fn countdowns_show_minutes_and_seconds() {
        assert_eq!(countdown(299_500), "Expires in 4:59");
        assert_eq!(countdown(0), "Expiring…");
    }
}
