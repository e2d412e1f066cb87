//! A tool call's card: what it is (in its tool's words), where it stands, its arguments and
//! result, the countersigning's progress, the ruling's chip, and its approval card while it
//! waits for one.

use leptos::{ev, prelude::*};
use serde_json::Value;

use super::approval::ApprovalCard;
use crate::protocol::{
    ToolPart, ToolPresentation, ToolState, UiMessage, UiPart,
    chunk::{APPROVAL_EXPIRED_PREFIX, DISMISSED_PREFIX, SUPERSEDED_PREFIX, WITHDRAWN_PREFIX},
    countersign::{DENIED_BY, PROGRESS_PART, Progress, ProgressState},
    grant::Ruling,
};
use crate::ui::{api::ToolInfo, controller::ChatCtl, platform, url};

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
pub(super) fn described(ctl: ChatCtl, name: &str) -> Option<ToolInfo> {
    ctl.tools
        .with(|tools| tools.iter().find(|t| t.name == name).cloned())
}

/// What a tool card shows of one call, tracked: its part in the message, what its tool says
/// about itself, and where its countersigning stands. The card ([`ToolCard`]) lays it out.
#[derive(Clone, Copy)]
struct CallView {
    tool: Memo<Option<ToolPart>>,
    /// What the tool says about itself (nothing when it left the registry since the call).
    info: Memo<Option<ToolInfo>>,
    progress: Memo<Option<Progress>>,
    /// An edit made a new proposal: the approvals are for its arguments (ADR 0028).
    proposal: Memo<Option<Value>>,
}

impl CallView {
    fn new(ctl: ChatCtl, message: Memo<Option<UiMessage>>, call_id: String) -> Self {
        let tool = Memo::new(move |_| {
            message.with(|m| m.as_ref().and_then(|m| m.find_tool_part(&call_id).cloned()))
        });
        let name =
            move || tool.with(|t| t.as_ref().map(|t| t.tool_name.clone()).unwrap_or_default());
        let info = Memo::new(move |_| described(ctl, &name()));
        let progress = Memo::new(move |_| {
            tool.with(|t| {
                let t = t.as_ref()?;
                message.with(|m| progress_of(m.as_ref()?, t))
            })
        });
        let proposal =
            Memo::new(move |_| progress.with(|p| p.as_ref().and_then(|p| p.args.clone())));
        CallView {
            tool,
            info,
            progress,
            proposal,
        }
    }

    fn name(self) -> String {
        self.tool
            .with(|t| t.as_ref().map(|t| t.tool_name.clone()).unwrap_or_default())
    }

    fn runs_in_browser(self) -> bool {
        self.info
            .with(|i| i.as_ref().is_some_and(|i| i.runs_in_browser))
    }

    fn title(self) -> String {
        self.info
            .with(|i| i.as_ref().map(|i| i.presentation.title.clone()))
            .unwrap_or_else(|| self.name())
    }

    fn source(self) -> Option<String> {
        self.info
            .with(|i| i.as_ref().and_then(|i| i.presentation.source.clone()))
    }

    fn notes(self) -> String {
        self.info
            .with(|i| i.as_ref().map(|i| i.presentation.notes.join(" · ")))
            .unwrap_or_default()
    }

    fn fields(self, value: &Value, except: Option<&Value>) -> Vec<(String, String)> {
        self.info.with(|i| match i {
            Some(i) => i.presentation.fields(value, except),
            None => ToolPresentation::default().fields(value, except),
        })
    }

    /// Where the call stands, in words, and its `data-state`.
    fn state(self) -> (&'static str, &'static str) {
        self.tool
            .with(|t| {
                t.as_ref().map(|t| {
                    describe_state(
                        t,
                        self.runs_in_browser(),
                        self.progress.with(|p| p.as_ref().map(|p| p.state)),
                    )
                })
            })
            .unwrap_or(("Preparing", "input-streaming"))
    }

    /// The arguments the approvals are for: an edit's proposal, else the call's input.
    fn args(self) -> Vec<(String, String)> {
        if let Some(proposal) = self.proposal.get() {
            return self.fields(&proposal, None);
        }
        self.tool.with(|t| {
            t.as_ref()
                .and_then(|t| t.input.as_ref())
                .map(|i| self.fields(i, None))
                .unwrap_or_default()
        })
    }

    fn output(self) -> Vec<(String, String)> {
        self.tool.with(|t| {
            t.as_ref()
                .and_then(|t| t.output.as_ref().map(|o| self.fields(o, t.input.as_ref())))
                .unwrap_or_default()
        })
    }

    fn error(self) -> Option<String> {
        self.tool
            .with(|t| t.as_ref().and_then(|t| t.error_text.clone()))
    }

    fn denial(self) -> Option<String> {
        let countersigned = self.progress.with(Option::is_some);
        self.tool
            .with(|t| t.as_ref().and_then(|t| denial_note(t, countersigned)))
    }

    fn approval_id(self) -> Option<String> {
        self.tool.with(|t| t.as_ref().and_then(waiting_approval))
    }

    fn receipt(self) -> Option<String> {
        self.tool.with(|t| t.as_ref().and_then(receipt_of))
    }

    /// Only a call nobody decided can be asked again: it expired, or was set aside.
    fn askable(self) -> bool {
        matches!(self.state().1, "expired" | "dismissed")
    }
}

/// One tool call: what it is, where it stands, its arguments and result.
#[component]
pub(super) fn ToolCard(message: Memo<Option<UiMessage>>, call_id: String) -> impl IntoView {
    let ctl = expect_context::<ChatCtl>();
    let call = CallView::new(ctl, message, call_id.clone());
    let CallView {
        tool,
        progress,
        proposal,
        ..
    } = call;
    let ask_call = StoredValue::new(call_id);
    view! {
        <section
            class=move || format!("tool-card state-{}", call.state().1)
            data-testid="tool-card"
            data-tool=move || call.name()
            data-state=move || call.state().1
            aria-label=move || format!("{} tool: {}", call.title(), call.state().0)
        >
            <header class="tool-head">
                <span class="tool-title">{move || call.title()}</span>
                {move || call.source().map(|s| view! { <span class="tool-source" data-testid="tool-source">{s}</span> })}
                <span class="tool-status" data-testid="tool-status" role="status">{move || call.state().0}</span>
            </header>
            {move || {
                let notes = call.notes();
                (!notes.is_empty()).then(|| view! { <p class="tool-notes" data-testid="tool-notes">{notes}</p> })
            }}
            {move || proposal.with(|p| p.is_some()).then(|| view! {
                <p class="tool-notes" data-testid="tool-proposal">"Edited: the approvals are for these arguments"</p>
            })}
            {move || field_list("tool-args", call.args())}
            <RulingChip tool=tool/>
            {move || progress.get().map(progress_note)}
            {move || call.denial().map(|note| view! { <p class="tool-denial" data-testid="denial-reason">{note}</p> })}
            {move || call.approval_id().map(|id| {
                view! { <ApprovalCard approval_id=id tool=tool progress=progress/> }
            })}
            {move || call.askable().then(|| view! {
                <div class="approval-actions">
                    <button type="button" class="edit" data-testid="ask-again" disabled=move || ctl.busy()
                        on:click=move |_| ctl.ask_again(ask_call.get_value())>"Ask again"</button>
                </div>
            })}
            {move || field_list("tool-output", call.output())}
            {move || call.error().map(|e| view! { <p class="tool-error">{e}</p> })}
            {move || call.receipt().map(|href| view! {
                <a class="tool-receipt" href=href download="" data-testid="tool-receipt">"Receipt"</a>
            })}
            <RawJson tool=tool/>
        </section>
    }
}

/// A tool's fields (its arguments, its output) as a definition list; nothing when it has none.
fn field_list(class: &'static str, fields: Vec<(String, String)>) -> Option<impl IntoView> {
    (!fields.is_empty()).then(|| {
        view! {
            <dl class=class>
                {fields.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
            </dl>
        }
    })
}

/// The chip of what a rule or a grant decided; the chip of a call a grant let run revokes that
/// grant (its click bubbles here).
#[component]
fn RulingChip(tool: Memo<Option<ToolPart>>) -> impl IntoView {
    let ruling = Memo::new(move |_| tool.with(|t| t.as_ref().and_then(ruling_of)));
    let revoked = RwSignal::new(None::<Result<(), String>>);
    let on_ruling_click = move |ev: ev::MouseEvent| {
        if let Some(id) =
            platform::action_of(&ev).and_then(|a| a.strip_prefix("revoke:").map(str::to_owned))
        {
            crate::ui::grants::revoke(id, revoked);
        }
    };
    view! {
        <div class="tool-ruling" on:click=on_ruling_click
            inner_html=move || ruling.with(|r| r.as_ref().map(|r| crate::ui::grants::ruling_html(r, revoked.get())).unwrap_or_default())></div>
    }
}

/// Where the countersigning of an approval that needs several people stands, with a link to
/// the approval while it waits.
fn progress_note(progress: Progress) -> impl IntoView {
    let link = (progress.state == ProgressState::Waiting)
        .then(|| format!("/approvals/{}", url::encode(&progress.approval_id)));
    view! {
        <p class="countersign-progress" data-testid="countersign-progress" data-progress=progress.state.as_str()>
            {progress.words()}
            {link.map(|href| view! { " · " <a href=href data-testid="approval-link">"open it on another device"</a> })}
        </p>
    }
}

/// The tool part as JSON, behind a toggle.
#[component]
fn RawJson(tool: Memo<Option<ToolPart>>) -> impl IntoView {
    let show_raw = RwSignal::new(false);
    let raw = move || {
        tool.with(|t| {
            t.as_ref()
                .map(|t| serde_json::to_string_pretty(t).unwrap_or_default())
                .unwrap_or_default()
        })
    };
    view! {
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
    }
}

/// The approval `tool` waits for, if it waits for one.
fn waiting_approval(tool: &ToolPart) -> Option<String> {
    (tool.state == ToolState::ApprovalRequested)
        .then(|| tool.approval.as_ref().map(|a| a.id.clone()))
        .flatten()
}

/// A call that ran after an approval (a person's, a rule's or a grant's) has a receipt anyone
/// can check offline (ADR 0029): the server makes it; the card links to it.
fn receipt_of(tool: &ToolPart) -> Option<String> {
    if !matches!(
        tool.state,
        ToolState::OutputAvailable | ToolState::OutputError
    ) {
        return None;
    }
    tool.approval
        .as_ref()
        .filter(|a| a.approved == Some(true))
        .map(|a| format!("/api/audit/receipts/{}", url::encode(&a.id)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
