//! The approval card: the sentence a person countersigns, what the rule asks for, and the
//! Approve (perhaps remembered as a grant), Deny (with an optional reason) and Edit forms.

use leptos::{ev, prelude::*};
use serde_json::{Map, Value};

use super::tool::{described, ruling_of};
use crate::protocol::{
    ToolPart, countersign::Progress, countersign::Requirement, grant::Ruling,
    presentation::unknown_tool_sentence, schema,
};
use crate::ui::{
    api::ToolInfo,
    controller::{Answer, ChatCtl},
    form, platform,
};

pub(in crate::ui) fn countdown(remaining_ms: i64) -> String {
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
pub(super) fn ApprovalCard(
    approval_id: String,
    tool: Memo<Option<ToolPart>>,
    progress: Memo<Option<Progress>>,
) -> impl IntoView {
    let card = Card::new(approval_id.clone(), tool, progress);
    let asking_rule = move || match card.ruling.get() {
        Some(Ruling::Asked {
            rule: Some(rule), ..
        }) => Some(rule),
        _ => None,
    };
    let name = move || tool.with(|t| t.as_ref().map(|t| t.tool_name.clone()).unwrap_or_default());
    // "Pay 50.00 USD to Hanako": the sentence the person countersigns, in the tool's words.
    let sentence = move || {
        card.info
            .with(|i| {
                i.as_ref()
                    .map(|i| i.presentation.sentence(&card.input.get()))
            })
            .unwrap_or_else(|| unknown_tool_sentence(&name()))
    };
    let deadline_id = approval_id.clone();
    let remaining = move || {
        card.ctl
            .deadlines
            .with(|d| d.get(&deadline_id).copied())
            .map(|deadline| countdown(deadline - card.ctl.now.get()))
    };
    let button_id = format!("approve-{approval_id}");
    // A new card takes the focus, so the keyboard can answer at once.
    let focus_id = approval_id.clone();
    let focus_target = button_id.clone();
    Effect::new(move |_| {
        if card.ctl.focus_approval.get().as_deref() == Some(focus_id.as_str()) {
            platform::focus(&focus_target);
        }
    });
    let needs = card.needs;
    view! {
        <div class="approval-card" data-testid="approval-card" data-approval-id=approval_id.clone() role="group" aria-label=move || format!("Approval needed: {}", sentence())>
            <p class="approval-summary" data-testid="approval-summary">{sentence}</p>
            {move || asking_rule().map(|rule| view! {
                <p class="approval-rule muted" data-testid="approval-rule">{format!("The policy rule {rule} asks for this call every time.")}</p>
            })}
            {move || (!needs.with(|n| n.is_plain())).then(|| view! {
                <p class="approval-needs" data-testid="approval-needs">{move || format!("Needs {}.", needs.with(|n| n.words()))}</p>
            })}
            {move || card.cannot.get().map(|why| view! { <p class="approval-why" data-testid="approval-why">{why}</p> })}
            {move || card.step_error.get().map(|e| view! { <p class="edit-error" data-testid="step-up-status" role="alert">{e}</p> })}
            {move || remaining().map(|r| view! { <p class="approval-countdown" data-testid="approval-countdown">{r}</p> })}
            <Show when=move || card.mode.get() == CardMode::Ask>
                {card.ask_form(button_id.clone())}
            </Show>
            <Show when=move || card.mode.get() == CardMode::Deny>
                {card.deny_form()}
            </Show>
            <Show when=move || card.mode.get() == CardMode::Edit>
                {card.edit_form()}
            </Show>
        </div>
    }
}

/// One approval card's state, shared by its forms (`Copy`, so every handler can hold it).
#[derive(Clone, Copy)]
struct Card {
    ctl: ChatCtl,
    approval_id: StoredValue<String>,
    mode: RwSignal<CardMode>,
    /// What the policy decided for the call.
    ruling: Memo<Option<Ruling>>,
    /// What the rule asks for beyond this person's click: an edit may have made it ask for
    /// more (its progress part says so).
    needs: Memo<Requirement>,
    /// Why this person cannot give it, when they cannot.
    cannot: Memo<Option<String>>,
    /// The arguments on the table (the last edit's, or the call's).
    input: Signal<Value>,
    /// What the tool says about itself.
    info: Memo<Option<ToolInfo>>,
    reason: RwSignal<String>,
    edit_error: RwSignal<Option<String>>,
    grant_error: RwSignal<Option<String>>,
    step_error: RwSignal<Option<String>>,
}

impl Card {
    fn new(
        approval_id: String,
        tool: Memo<Option<ToolPart>>,
        progress: Memo<Option<Progress>>,
    ) -> Self {
        let ctl = expect_context::<ChatCtl>();
        let ruling = Memo::new(move |_| tool.with(|t| t.as_ref().and_then(ruling_of)));
        let needs = Memo::new(move |_| {
            progress
                .with(|p| p.as_ref().map(|p| p.needs.clone()))
                .or_else(|| ruling.get().map(|r| r.needs()))
                .unwrap_or_default()
        });
        let name =
            move || tool.with(|t| t.as_ref().map(|t| t.tool_name.clone()).unwrap_or_default());
        Card {
            ctl,
            approval_id: StoredValue::new(approval_id),
            mode: RwSignal::new(CardMode::Ask),
            ruling,
            needs,
            cannot: Memo::new(move |_| ctl.me.with(|me| me.cannot_sign(&needs.get(), &me.id))),
            input: Signal::derive(move || {
                progress
                    .with(|p| p.as_ref().and_then(|p| p.args.clone()))
                    .or_else(|| tool.with(|t| t.as_ref().and_then(|t| t.input.clone())))
                    .unwrap_or(Value::Null)
            }),
            info: Memo::new(move |_| described(ctl, &name())),
            reason: RwSignal::new(String::new()),
            edit_error: RwSignal::new(None),
            grant_error: RwSignal::new(None),
            step_error: RwSignal::new(None),
        }
    }

    /// An answer, after a passkey confirmation when the rule asks for one (for the arguments
    /// that will run: edited ones need their own).
    fn sign(self, answer: Answer) {
        let id = self.approval_id.get_value();
        if !self.needs.with_untracked(|n| n.step_up) || !answer.approved() {
            self.ctl.answer(id, answer);
            return;
        }
        let args = answer.edited().cloned();
        let (ctl, step_error) = (self.ctl, self.step_error);
        step_error.set(Some("Confirm with your passkey…".into()));
        leptos::task::spawn_local(async move {
            match crate::ui::inbox::confirm_with_passkey(&id, args, None).await {
                Ok(assertion) => {
                    step_error.set(None);
                    ctl.answer_confirmed(id, answer, assertion);
                }
                Err(e) => step_error.set(Some(e)),
            }
        });
    }

    fn schema(self) -> Value {
        self.info
            .with(|i| i.as_ref().map(|i| i.parameters.clone()))
            .unwrap_or(Value::Null)
    }

    fn grantable(self) -> bool {
        matches!(
            self.ruling.get(),
            Some(Ruling::Asked {
                grantable: true,
                ..
            })
        )
    }

    /// Approve (the Ask form's submit), perhaps remembering it as a grant.
    fn approve(self, ev: ev::SubmitEvent) {
        ev.prevent_default();
        match crate::ui::grants::grant_request_from(&platform::form_entries(&ev)) {
            Ok(Some(grant)) => self
                .ctl
                .answer(self.approval_id.get_value(), Answer::Remember(None, grant)),
            Ok(None) => self.sign(Answer::Approve),
            Err(e) => self.grant_error.set(Some(e)),
        }
    }

    /// Approve with the Edit form's arguments, when the tool's schema takes them.
    fn submit_edit(self, ev: ev::SubmitEvent) {
        ev.prevent_default();
        match edited_args(
            &self.schema(),
            self.input.get(),
            &platform::form_entries(&ev),
        ) {
            Ok(args) => self.sign(Answer::ApproveWithEdits(args)),
            Err(e) => self.edit_error.set(Some(e)),
        }
    }

    /// Approve (perhaps as a grant), Deny, Edit or Not now.
    fn ask_form(self, button_id: String) -> impl IntoView {
        let ctl = self.ctl;
        let pays = move || self.info.with(|i| i.as_ref().is_some_and(|i| i.pays));
        let grant_error = self.grant_error;
        view! {
            <form class="approval-ask" on:submit=move |ev| self.approve(ev)>
                <div inner_html=move || if self.grantable() { crate::ui::grants::remember_html(pays(), call_cents(&self.input.get())) } else { String::new() }></div>
                {move || grant_error.get().map(|e| view! { <p class="edit-error" data-testid="grant-error" role="alert">{e}</p> })}
                <div class="approval-actions">
                    <button type="submit" class="approve" id=button_id data-testid="approve"
                        disabled=move || self.cannot.with(Option::is_some)>{move || if self.needs.with(|n| n.step_up) { "Approve with passkey" } else { "Approve" }}</button>
                    <button type="button" class="deny" data-testid="deny" on:click=move |_| self.mode.set(CardMode::Deny)>"Deny"</button>
                    <button type="button" class="edit" data-testid="edit" on:click=move |_| {
                        self.edit_error.set(None);
                        self.mode.set(CardMode::Edit);
                    }>"Edit"</button>
                    <button type="button" class="link-button" data-testid="dismiss" title="No decision now: nothing runs, and you can ask for it again later"
                        on:click=move |_| ctl.answer(self.approval_id.get_value(), Answer::Dismiss)>"Not now"</button>
                </div>
            </form>
        }
    }

    /// Deny, with an optional reason.
    fn deny_form(self) -> impl IntoView {
        let reason = self.reason;
        view! {
            <form class="deny-form" on:submit=move |ev: ev::SubmitEvent| {
                ev.prevent_default();
                self.ctl.answer(self.approval_id.get_value(), Answer::Deny(Some(reason.get_untracked())));
            }>
                <label>
                    "Reason (optional)"
                    <input type="text" data-testid="deny-reason" prop:value=move || reason.get()
                        on:input=move |ev| reason.set(event_target_value(&ev)) maxlength="500"/>
                </label>
                <div class="approval-actions">
                    <button type="submit" class="deny" data-testid="deny-confirm">"Deny"</button>
                    <button type="button" class="link-button" on:click=move |_| self.mode.set(CardMode::Ask)>"Back"</button>
                </div>
            </form>
        }
    }

    /// The arguments as a form written from the tool's schema, approved with changes.
    fn edit_form(self) -> impl IntoView {
        let edit_error = self.edit_error;
        view! {
            <form class="edit-form" on:submit=move |ev| self.submit_edit(ev)>
                <div class="edit-fields" inner_html=move || form::fields_html(&self.schema(), self.input.get().as_object().unwrap_or(&Map::new()))></div>
                {move || edit_error.get().map(|e| view! { <p class="edit-error" data-testid="edit-error" role="alert">{e}</p> })}
                <div class="approval-actions">
                    <button type="submit" class="approve" data-testid="edit-approve"
                        disabled=move || self.cannot.with(Option::is_some)>"Approve with changes"</button>
                    <button type="button" class="link-button" data-testid="edit-cancel" on:click=move |_| self.mode.set(CardMode::Ask)>"Cancel"</button>
                </div>
            </form>
        }
    }
}

/// What a call pays in the wallet's cents (a paying tool's `amount` and `currency`).
fn call_cents(input: &Value) -> Option<i64> {
    let amount = input.get("amount")?;
    let code = input
        .get("currency")
        .and_then(Value::as_str)
        .unwrap_or("USD");
    crate::protocol::money::Money::parse(&amount.to_string(), code)
        .ok()
        .map(|m| m.wallet_cents())
}

/// The arguments as they were (`input`), with the Edit form's fields (`entries`) in place of
/// the schema's; or why the schema refuses them.
fn edited_args(
    schema: &Value,
    input: Value,
    entries: &[(String, String)],
) -> Result<Value, String> {
    let mut args = input.as_object().cloned().unwrap_or_default();
    for name in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(Map::keys)
    {
        args.remove(name);
    }
    for (name, value) in form::values_from(schema, entries) {
        args.insert(name, value);
    }
    let args = Value::Object(args);
    match schema::validate(schema, &args) {
        Ok(()) => Ok(args),
        Err(e) => Err(format!(
            "{}: {}",
            e.path.trim_start_matches("$."),
            e.message
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn countdowns_show_minutes_and_seconds() {
        assert_eq!(countdown(299_500), "Expires in 4:59");
        assert_eq!(countdown(0), "Expiring…");
    }

    #[test]
    fn an_edit_replaces_the_schemas_fields_and_keeps_the_rest() {
        let schema = json!({
            "type": "object",
            "properties": {"amount": {"type": "number"}, "note": {"type": "string"}},
            "required": ["amount"],
        });
        let input = json!({"amount": 5, "note": "old", "trace": "kept"});
        let entries = [("amount".to_owned(), "7".to_owned())];
        let args = edited_args(&schema, input.clone(), &entries);
        assert_eq!(args, Ok(json!({"amount": 7, "trace": "kept"})));
        assert_eq!(
            edited_args(&schema, input, &[]),
            Err("amount: is required".to_owned())
        );
    }

    #[test]
    fn a_payment_is_counted_in_wallet_cents() {
        assert_eq!(
            call_cents(&json!({"amount": 12.5, "currency": "USD"})),
            Some(1250)
        );
        assert_eq!(call_cents(&json!({"to": "Hanako"})), None);
    }
}
