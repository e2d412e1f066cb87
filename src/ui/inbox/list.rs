//! The inbox on the server: which waiting approvals a person sees and may act on, the list as
//! HTML, and the actions (decide, a step-up challenge).

use axum::http::StatusCode;
use serde_json::Value;

use crate::{
    agent::people::{Principal, passkeys::Binding},
    agent::{
        PersonInput,
        gate::{
            ApprovalDecision, InputError, Signer,
            countersign::{args_digest, may_deny, may_sign},
        },
        inbox::Waiting,
        runtime::Telling,
    },
    protocol::countersign::{Progress, ProgressState},
    transport::people::{people_refusal, refuse},
    transport::state::AppState,
    ui::{FnError, html::escape},
};

/// The gate's view of a principal now (roles as the directory has them).
pub fn signer_of(state: &AppState, principal: &Principal) -> Signer {
    match principal {
        Principal::Local { .. } => Signer::local(),
        Principal::Person { id, name, .. } => Signer {
            id: id.clone(),
            name: name.clone(),
            roles: state.runtime.people().roles_of(id),
            person: true,
            step_ups: Vec::new(),
        },
    }
}

/// What a person may do with a waiting approval they see.
struct Seen {
    waiting: Waiting,
    own: bool,
    /// `Ok`: they may approve; else why not.
    sign: Result<(), String>,
    signed: bool,
}

/// How many approvals the inbox page shows at most: the oldest first (ADR 0039).
pub const PAGE: usize = 100;

/// What `signer` may do with `waiting`, if they see it: their own chats', and others' they may
/// sign.
fn seen_by(signer: &Signer, waiting: Waiting) -> Option<Seen> {
    let own = waiting.owner == signer.id;
    let sign = may_sign(&waiting.needs, signer, &waiting.owner).map_err(|e| e.0);
    if !own && sign.is_err() {
        return None;
    }
    let signed = waiting.signatures.iter().any(|s| s.person == signer.id);
    Some(Seen {
        waiting,
        own,
        sign,
        signed,
    })
}

/// The list as HTML, and how many approvals on it wait for this person's decision.
pub async fn inbox_html(
    state: &AppState,
    principal: &Principal,
    focus: Option<&str>,
) -> Result<(String, u32), FnError> {
    let signer = signer_of(state, principal);
    let unread = |e: crate::agent::store::StoreError| -> FnError {
        tracing::error!(error = %e.report(), "cannot read the inbox");
        crate::transport::ApiError::from(e).into()
    };
    let (items, more) = match focus {
        Some(focus) => {
            let one = state.runtime.inbox.waiting(focus).await.map_err(unread)?;
            let now = state.runtime.clock.now_ms();
            let items: Vec<Seen> = one
                .filter(|w| w.deadline_ms > now)
                .and_then(|w| seen_by(&signer, w))
                .into_iter()
                .collect();
            if items.is_empty() {
                // Once its call ran, the receipt says who signed what (ADR 0029); the server
                // answers `no_receipt` for one that did not run or that this person may not read.
                let receipt = format!(
                    "/api/audit/receipts/{}",
                    escape(&crate::common::url::encode(focus))
                );
                return Ok((
                    format!(
                        "<p class=\"muted\" data-testid=\"inbox-gone\">This approval is not waiting \
                         for you: it was decided, expired, or is not yours to decide. \
                         <a href=\"/approvals\">All approvals</a> · <a href=\"{receipt}\" download \
                         data-testid=\"inbox-receipt\">Its receipt, if it ran</a></p>"
                    ),
                    0,
                ));
            }
            (items, false)
        }
        None => {
            let page = state
                .runtime
                .inbox
                .page(&signer, None, PAGE)
                .await
                .map_err(unread)?;
            let more = page.len() == PAGE;
            let items = page
                .into_iter()
                .filter_map(|w| seen_by(&signer, w))
                .collect();
            (items, more)
        }
    };
    if items.is_empty() {
        return Ok((
            "<p class=\"muted\" data-testid=\"inbox-empty\">Nothing waits for you. Approvals \
             appear here the moment a chat asks — yours, and those a rule asks you to \
             countersign.</p>"
                .to_owned(),
            0,
        ));
    }
    let actionable = items.iter().filter(|s| s.sign.is_ok() && !s.signed).count() as u32;
    let public = state.edge.public_url.clone();
    let mut html = items
        .iter()
        .map(|seen| item_html(state, seen, &public))
        .collect::<String>();
    if more {
        html.push_str(&format!(
            "<p class=\"muted\" data-testid=\"inbox-more\">The oldest {PAGE} are shown; the \
             next appear here as these are decided or expire.</p>"
        ));
    }
    Ok((html, actionable))
}

fn item_html(state: &AppState, seen: &Seen, public: &str) -> String {
    let w = &seen.waiting;
    let runtime = &state.runtime;
    let tool = runtime.tools.get(&w.tool);
    let (title, sentence, fields) = match &tool {
        Some(tool) => {
            let p = &tool.spec.presentation;
            (
                p.title.clone(),
                p.sentence(&w.args),
                p.fields(&w.args, None),
            )
        }
        None => (
            w.tool.clone(),
            crate::protocol::presentation::unknown_tool_sentence(&w.tool),
            Vec::new(),
        ),
    };
    let requester = if seen.own {
        "you".to_owned()
    } else {
        runtime.people().name_of(&w.owner)
    };
    let rule = w
        .rule
        .as_deref()
        .map(|r| format!(" · rule <code>{}</code>", escape(r)))
        .unwrap_or_default();
    let fields: String = fields
        .iter()
        .map(|(k, v)| format!("<dt>{}</dt><dd>{}</dd>", escape(k), escape(v)))
        .collect();
    let progress = progress_html(w);
    let id = escape(&w.approval_id);
    let approve = approve_html(seen, &id);
    let deny = deny_html(seen, &id);
    let edit = edit_html(seen, tool.as_deref(), &id);
    let chat = if seen.own {
        format!(
            " · <a href=\"/?chat={}\">open the chat</a>",
            crate::common::url::encode(&w.chat)
        )
    } else {
        String::new()
    };
    let link = format!(
        "{public}/approvals/{}",
        crate::common::url::encode(&w.approval_id)
    );
    format!(
        "<article class=\"inbox-item\" data-testid=\"inbox-item\" data-approval=\"{id}\">\
         <header><strong>{title}</strong> <span class=\"countdown\" data-deadline=\"{deadline}\" \
         data-testid=\"inbox-countdown\"></span></header>\
         <p class=\"inbox-who muted\" data-testid=\"inbox-who\">Asked by {requester}{rule}{chat}</p>\
         <p class=\"inbox-sentence\" data-testid=\"inbox-sentence\">{sentence}</p>\
         <dl class=\"inbox-args\">{fields}</dl>{progress}\
         <div class=\"inbox-actions\">{approve}{deny}</div>{edit}\
         <p class=\"inbox-link muted\">On another device: <a href=\"{link}\" \
         data-testid=\"inbox-link\">{link}</a> <button type=\"button\" class=\"link-button\" \
         data-action=\"copy:{link}\">Copy link</button></p></article>",
        title = escape(&title),
        deadline = w.deadline_ms,
        requester = escape(&requester),
        sentence = escape(&sentence),
        link = escape(&link),
    )
}

/// How far a countersigned approval is ("Needs …", who signed); nothing for a plain one.
fn progress_html(w: &Waiting) -> String {
    if w.needs.is_plain() {
        return String::new();
    }
    let words = Progress {
        approval_id: w.approval_id.clone(),
        tool_call_id: w.tool_call_id.clone(),
        needs: w.needs.clone(),
        signatures: w.signatures.clone(),
        state: ProgressState::Waiting,
        denied_by: None,
        args: None,
        dropped: w.dropped.clone(),
        reason: None,
    }
    .words();
    format!(
        "<p class=\"inbox-needs\">Needs {}.</p><p class=\"inbox-progress\" \
         data-testid=\"inbox-progress\">{}</p>",
        escape(&w.needs.words()),
        escape(&words)
    )
}

/// The approve button (with a passkey when the rule asks for one), or why this person cannot
/// approve, or that they already did. `id`: the approval's id, escaped.
fn approve_html(seen: &Seen, id: &str) -> String {
    match (&seen.sign, seen.signed) {
        (_, true) => "<p class=\"muted\" data-testid=\"inbox-signed\">You approved it; it \
                      waits for the others.</p>"
            .to_owned(),
        (Ok(()), false) if seen.waiting.needs.step_up => format!(
            "<button type=\"button\" class=\"approve\" data-action=\"approve:step-up:{id}\" \
             data-testid=\"inbox-approve\">Approve with passkey</button>"
        ),
        (Ok(()), false) => format!(
            "<button type=\"button\" class=\"approve\" data-action=\"approve:{id}\" \
             data-testid=\"inbox-approve\">Approve</button>"
        ),
        (Err(why), false) => format!(
            "<p class=\"inbox-why\" data-testid=\"inbox-why\">You cannot approve it: {}.</p>",
            escape(why)
        ),
    }
}

/// Whoever sees it may say no: the person who asked withdraws, an approver denies.
fn deny_html(seen: &Seen, id: &str) -> String {
    format!(
        "<form class=\"inbox-deny\"><input type=\"hidden\" name=\"deny\" value=\"{id}\">\
         <input name=\"reason\" placeholder=\"Reason (optional)\" aria-label=\"Reason\" \
         maxlength=\"500\" data-testid=\"inbox-reason\"><button type=\"submit\" \
         class=\"deny\" data-testid=\"inbox-deny\">{}</button></form>",
        if seen.own && seen.sign.is_err() {
            "Withdraw"
        } else {
            "Deny"
        }
    )
}

/// An approver may change the arguments before approving (the count starts again): the tool's
/// form, filled with the arguments asked for. Nothing for anyone else, or an unknown tool.
fn edit_html(seen: &Seen, tool: Option<&crate::agent::tools::Tool>, id: &str) -> String {
    let (Ok(()), false, Some(tool)) = (&seen.sign, seen.signed, tool) else {
        return String::new();
    };
    let w = &seen.waiting;
    let values = w.args.as_object().cloned().unwrap_or_default();
    format!(
        "<details class=\"inbox-edit\"><summary data-testid=\"inbox-edit\">Edit before \
         approving</summary><form class=\"edit-form\"><input type=\"hidden\" \
         name=\"edit\" value=\"{id}\">{step_up}<div class=\"edit-fields\">{fields}</div>\
         <button type=\"submit\" class=\"approve\" data-testid=\"inbox-edit-approve\">\
         Approve with changes</button></form></details>",
        step_up = if w.needs.step_up {
            "<input type=\"hidden\" name=\"step-up\" value=\"1\">"
        } else {
            ""
        },
        fields = crate::ui::form::fields_html(&tool.spec.parameters, &values),
    )
}

/// The approval `approval_id` if it waits (the store's answer; its failure a 503).
async fn waiting_now(state: &AppState, approval_id: &str) -> Result<Option<Waiting>, FnError> {
    state.runtime.inbox.waiting(approval_id).await.map_err(|e| {
        tracing::error!(error = %e.report(), approval = %approval_id, "cannot read a waiting approval");
        crate::transport::ApiError::from(e).into()
    })
}

/// How an input error reads as a refusal of a server function.
fn input_refusal(e: InputError) -> FnError {
    crate::transport::ApiError::from(e).into()
}

/// The arguments the edit form's `fields` describe: the approval's arguments with the form's
/// fields in their place, valid against the tool's schema.
fn edited_args(
    state: &AppState,
    waiting: &Waiting,
    fields: &[(String, String)],
) -> Result<Value, FnError> {
    let tool = state.runtime.tools.get(&waiting.tool).ok_or_else(|| {
        refuse(
            StatusCode::CONFLICT,
            "tool_not_offered",
            format!("{} is no longer offered", waiting.tool),
        )
    })?;
    let schema = &tool.spec.parameters;
    let mut args = waiting.args.as_object().cloned().unwrap_or_default();
    for name in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(serde_json::Map::keys)
    {
        args.remove(name);
    }
    args.extend(crate::ui::form::values_from(schema, fields));
    let invalid = |e: crate::protocol::schema::SchemaError| {
        refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_edit",
            format!("{}: {}", e.path.trim_start_matches("$."), e.message),
        )
    };
    // The canonical form (ADR 0027): what a passkey confirmation is bound to is what runs.
    let args = tool
        .spec
        .canonical_args(&Value::Object(args))
        .map_err(invalid)?;
    crate::protocol::schema::validate(schema, &args).map_err(invalid)?;
    Ok(args)
}

/// Arguments a page sent as JSON, in their canonical form (what the gate will compare).
fn canonical_args(state: &AppState, waiting: &Waiting, args: Value) -> Result<Value, FnError> {
    match state.runtime.tools.get(&waiting.tool) {
        Some(tool) => tool.spec.canonical_args(&args).map_err(|e| {
            refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_edit",
                format!("{}: {}", e.path.trim_start_matches("$."), e.message),
            )
        }),
        None => Ok(args),
    }
}

/// Decides a waiting approval as the signed-in person, through the gate.
pub async fn decide(
    state: &AppState,
    approval_id: String,
    approve: bool,
    reason: Option<String>,
    step_up: Option<Value>,
    edit: Option<Vec<(String, String)>>,
) -> Result<String, FnError> {
    let principal = crate::ui::api::principal();
    let gone = || {
        refuse(
            StatusCode::NOT_FOUND,
            "approval_not_waiting",
            "this approval is not waiting for you: it was decided, expired, or is not yours to \
             decide",
        )
    };
    let waiting = waiting_now(state, &approval_id).await?.ok_or_else(gone)?;
    let signer = signer_of(state, &principal);
    let visible =
        waiting.owner == signer.id || may_deny(&waiting.needs, &signer, &waiting.owner).is_ok();
    if !visible {
        return Err(gone());
    }
    let edited = match &edit {
        Some(fields) if approve => Some(edited_args(state, &waiting, fields)?),
        _ => None,
    };
    let decision = if let Some(args) = edited.filter(|a| *a != waiting.args) {
        ApprovalDecision::ApproveWithEdits { args }
    } else if approve {
        ApprovalDecision::Approve
    } else {
        ApprovalDecision::Deny {
            reason: reason.filter(|r| !r.trim().is_empty()),
        }
    };
    let parts = leptos::prelude::use_context::<axum::http::request::Parts>();
    let client = parts
        .as_ref()
        .map(crate::transport::edge::Client::from_parts)
        .unwrap_or_default();
    let actor = crate::transport::edge::actor_of(
        &principal,
        "inbox",
        client.address,
        client.user_agent.clone(),
    );
    let receipt = state
        .runtime
        .submit_as(
            &waiting.chat,
            &[PersonInput::Approval {
                approval_id: approval_id.clone(),
                decision,
                step_up,
            }],
            &actor,
        )
        .await
        .map_err(input_refusal)?;
    tracing::info!(approval = %approval_id, person = %signer.id, approve, "decided from the inbox");
    let now = state
        .runtime
        .waiting_after_answer(&waiting.chat, &approval_id)
        .await
        .map_err(|e| {
            tracing::error!(error = %e.report(), approval = %approval_id, "cannot read a waiting approval");
            FnError::from(crate::transport::ApiError::from(e))
        })?;
    // A signature that leaves the approval waiting is done when the chat shows it: its turn
    // tells the new count and waits again at once (a decision that lets the call run returns
    // now: the turn goes on with the call and the model).
    if approve && now.is_some() && !Telling::answer(&receipt, &approval_id).told_soon().await {
        tracing::warn!(approval = %approval_id, "the chat's turn has not told the signature yet; it does when it runs");
    }
    Ok(match (approve, now) {
        (false, _) => "Denied. The chat that asked was told.".to_owned(),
        (true, Some(still)) => format!(
            "Approved: {} of {} — it waits for the others.",
            still.signatures.len(),
            still.needs.approvers.max(1)
        ),
        (true, None) => "Approved. It runs now.".to_owned(),
    })
}

/// A passkey challenge for approving `approval_id` with `args`, or the edit form's fields `edit`
/// (default: the arguments as they stand).
pub async fn step_up_options(
    state: &AppState,
    approval_id: String,
    args: Option<Value>,
    edit: Option<Vec<(String, String)>>,
) -> Result<Value, FnError> {
    let principal = crate::ui::api::principal();
    let Principal::Person { id, .. } = &principal else {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "step_up_needs_a_passkey",
            "a passkey confirmation needs someone signed in with a passkey",
        ));
    };
    let waiting = waiting_now(state, &approval_id).await?.ok_or_else(|| {
        refuse(
            StatusCode::NOT_FOUND,
            "approval_not_waiting",
            "this approval is not waiting any more",
        )
    })?;
    let signer = signer_of(state, &principal);
    may_sign(&waiting.needs, &signer, &waiting.owner).map_err(|e| {
        refuse(
            StatusCode::FORBIDDEN,
            "not_an_approver",
            format!("you may not approve it: {}", e.0),
        )
    })?;
    let args = match (args, edit) {
        (Some(args), _) => canonical_args(state, &waiting, args)?,
        (None, Some(fields)) => edited_args(state, &waiting, &fields)?,
        (None, None) => waiting.args.clone(),
    };
    let people = state.runtime.people();
    let passkeys = people.passkeys().map_err(people_refusal)?;
    passkeys
        .begin_step_up(
            Binding {
                person: id.clone(),
                chat: waiting.chat.clone(),
                approval_id,
                args_digest: args_digest(&args),
            },
            &people.passkeys_of(id),
            state.runtime.clock.now_ms(),
        )
        .await
        .map_err(people_refusal)
}
