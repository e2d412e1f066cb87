//! The person's grants: the list with revoke, and the chip a call a grant let run carries.
//!
//! Listing and revoking are Leptos server functions (`POST /api/fn/grants_panel`, which answers
//! the list as HTML written on the server, and `POST /api/fn/revoke_grant`): verbs the page asks
//! of the server, behind the same edge (keys, sign-in, Origin checks) as every other route.

use leptos::{prelude::*, server_fn::codec::Json as JsonCodec, task::spawn_local};

#[cfg(feature = "ssr")]
mod list;

use super::{FnError, html::escape};
use crate::protocol::grant::{GRANT_DURATIONS, GrantRequest, GrantScope, Ruling};

/// The grants panel's list, written on the server ([`list::list_html`]): the page needs no
/// decoder of grants, only the HTML (scripts read `GET /api/policy`).
#[server(prefix = "/api/fn", endpoint = "grants_panel", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn grants_panel() -> Result<String, FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    let now = state.runtime.clock.now_ms();
    let me = crate::ui::api::principal();
    let mine: Vec<_> = state
        .runtime
        .policy()
        .grants()
        .into_iter()
        .filter(|g| g.owner() == me.id())
        .collect();
    Ok(list::list_html(&mine, now))
}

/// Revokes grant `id`: from now on it lets nothing run. Audited. Another person's grant reads
/// as one that does not exist (404 `grant_not_found`).
#[server(prefix = "/api/fn", endpoint = "revoke_grant", input = JsonCodec, client = crate::ui::api::PageClient)]
pub async fn revoke_grant(id: String) -> Result<(), FnError> {
    let state = expect_context::<crate::transport::state::AppState>();
    state
        .runtime
        .grants()
        .revoke(&id, crate::ui::api::principal().id())
        .await
        .map(|_| ())
        .map_err(list::revoke_refusal)
}

/// Builds the grants panel into `host` (only the browser shows it). With a split wasm (ADR
/// 0030) its code is a part of its own, loaded when the panel is first opened.
#[cfg(feature = "hydrate")]
#[cfg_attr(wasm_split, leptos::lazy(grants_panel))]
pub async fn build_panel(host: web_sys::Element, on_close: Callback<()>) -> super::deferred::Built {
    super::deferred::build_into(&host, move || view! { <GrantsPanel on_close/> })
}

/// The grants panel: every grant, the active ones first, each active one with Revoke. The list
/// is one escaped HTML string ([`list_html`]) with its clicks handled where they bubble to (a
/// view per row cost the bundle several KB; ADR 0022).
#[component]
pub fn GrantsPanel(on_close: Callback<()>) -> impl IntoView {
    let html = RwSignal::new("<p class=\"muted\">Loading…</p>".to_owned());
    let load = move || {
        spawn_local(async move {
            html.set(match grants_panel().await {
                Ok(list) => list,
                Err(e) => error_html(&e.to_string()),
            });
        });
    };
    load();
    let on_click = move |ev: leptos::ev::MouseEvent| {
        let Some(action) = crate::ui::platform::action_of(&ev) else {
            return;
        };
        if let Some(id) = action.strip_prefix("revoke:") {
            let id = id.to_owned();
            spawn_local(async move {
                match revoke_grant(id).await {
                    Ok(_) => load(),
                    Err(e) => html.set(error_html(&format!("Cannot revoke: {e}"))),
                }
            });
        }
    };
    view! {
        <aside class="tools-panel grants-panel" data-testid="grants-panel" aria-label="Grants">
            <header>
                <strong>"Grants"</strong>
                <span class="muted">"Approvals you asked to remember"</span>
                <button type="button" class="link-button" data-testid="grants-panel-close"
                    on:click=move |_| on_close.run(())>"Close"</button>
            </header>
            <div on:click=on_click inner_html=move || html.get()></div>
        </aside>
    }
}

pub(super) fn error_html(message: &str) -> String {
    format!(
        "<p class=\"edit-error\" role=\"alert\">{}</p>",
        escape(message)
    )
}

/// The "Remember" part of an approval card, for a tool that pays (a budget, by default) or not
/// (the tool in this chat, by default): escaped HTML inside the card's form, read back by
/// [`grant_request_from`]. `call_cents`: what the call pays, the budget's smallest sensible size.
pub fn remember_html(pays: bool, call_cents: Option<i64>) -> String {
    let scopes = if pays {
        "<option value=\"budget\" selected>payments up to an amount, in every chat</option>\
         <option value=\"call\">this exact payment, in this chat</option>"
    } else {
        "<option value=\"tool\" selected>this tool, in this chat</option>\
         <option value=\"call\">this exact call, in this chat</option>"
    };
    let amount = if pays {
        let dollars = call_cents.map_or(50, |c| (c.max(5_000) + 99) / 100);
        format!(
            "<label class=\"grant-amount-label\">up to <input type=\"number\" name=\"max_usd\" \
             min=\"1\" step=\"1\" value=\"{dollars}\" class=\"grant-amount\" \
             data-testid=\"grant-amount\"> USD in all</label>"
        )
    } else {
        String::new()
    };
    let durations: String = GRANT_DURATIONS
        .iter()
        .map(|(secs, words)| {
            format!(
                "<option value=\"{secs}\"{}>for {words}</option>",
                if *secs == 3600 { " selected" } else { "" }
            )
        })
        .collect();
    format!(
        "<div class=\"grant-form\" data-testid=\"grant-form\"><label><input type=\"checkbox\" \
         name=\"remember\" data-testid=\"remember\"> Remember: let it run without asking</label>\
         <div class=\"grant-options\"><select name=\"scope\" data-testid=\"grant-scope\" \
         aria-label=\"What to remember\">{scopes}</select>{amount}<select name=\"seconds\" \
         data-testid=\"grant-duration\" aria-label=\"For how long\">{durations}</select></div></div>"
    )
}

/// The grant the approval card's form asks for (`None` when Remember is not ticked), or why
/// the form does not make one.
pub fn grant_request_from(entries: &[(String, String)]) -> Result<Option<GrantRequest>, String> {
    let value = |name: &str| {
        entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
    };
    if value("remember").is_none() {
        return Ok(None);
    }
    let scope = value("scope")
        .and_then(GrantScope::parse)
        .ok_or("Choose what to remember.")?;
    let seconds = value("seconds")
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or("Choose for how long.")?;
    let max_cents = match scope {
        GrantScope::Budget => {
            let text = value("max_usd").unwrap_or_default();
            let dollars = text
                .parse::<i64>()
                .ok()
                .filter(|d| (1..=1_000_000).contains(d))
                .ok_or_else(|| {
                    format!("“{text}” is not a whole number of US dollars from 1 to 1,000,000")
                })?;
            Some(dollars * 100)
        }
        _ => None,
    };
    Ok(Some(GrantRequest {
        scope,
        seconds,
        max_cents,
    }))
}

/// Revokes grant `id` from a chip; `done` says how it went.
pub fn revoke(id: String, done: RwSignal<Option<Result<(), String>>>) {
    spawn_local(async move {
        done.set(Some(revoke_grant(id).await.map_err(|e| e.to_string())));
    });
}

/// The chip of a call a rule or a grant decided, as escaped HTML: its words, and for a grant,
/// Revoke (or how revoking went). Nothing for a call that asks.
pub fn ruling_html(ruling: &Ruling, revoked: Option<Result<(), String>>) -> String {
    let Some(words) = ruling.sentence() else {
        return String::new();
    };
    let (kind, grant) = match ruling {
        Ruling::AllowedByRule { .. } => ("allowed_by_rule", None),
        Ruling::AllowedByGrant { grant, .. } => ("allowed_by_grant", Some(grant)),
        Ruling::DeniedByRule { .. } => ("denied_by_rule", None),
        Ruling::Asked { .. } => return String::new(),
    };
    let revoke = match (grant, revoked) {
        (None, _) => String::new(),
        (Some(id), None) => format!(
            " <button type=\"button\" class=\"link-button\" data-testid=\"chip-revoke\" \
             data-action=\"revoke:{}\">Revoke</button>",
            escape(id)
        ),
        (Some(_), Some(Ok(()))) => {
            " <span class=\"muted\" data-testid=\"chip-revoked\">· revoked</span>".to_owned()
        }
        (Some(_), Some(Err(e))) => format!(
            " <span class=\"edit-error\" role=\"alert\">· {}</span>",
            escape(&e)
        ),
    };
    format!(
        "<p class=\"ruling-chip {kind}\" data-testid=\"ruling-chip\" data-ruling=\"{kind}\">\
         <span>{}</span>{revoke}</p>",
        escape(&words)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chip_says_why_a_call_ran_and_revokes_its_grant() {
        let grant = Ruling::AllowedByGrant {
            grant: "g<1>".into(),
            label: "Payment up to 50.00 USD".into(),
        };
        let html = ruling_html(&grant, None);
        assert!(html.contains("data-ruling=\"allowed_by_grant\""), "{html}");
        assert!(html.contains("data-action=\"revoke:g&lt;1&gt;\""), "{html}");
        assert!(html.contains("Ran without asking: your grant (Payment up to 50.00 USD)"));
        assert!(ruling_html(&grant, Some(Ok(()))).contains("revoked"));
        assert!(!ruling_html(&grant, Some(Ok(()))).contains("data-action"));
        let rule = ruling_html(
            &Ruling::DeniedByRule {
                rule: "limit".into(),
                reason: "<too much>".into(),
            },
            None,
        );
        assert!(
            rule.contains("Refused by rule limit: &lt;too much&gt;"),
            "{rule}"
        );
        assert_eq!(
            ruling_html(
                &Ruling::Asked {
                    rule: None,
                    grantable: true,
                    needs: None,
                },
                None
            ),
            ""
        );
    }

    #[test]
    fn the_remember_form_reads_back_as_a_grant_request() {
        let entries = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            grant_request_from(&entries(&[("scope", "budget")])),
            Ok(None)
        );
        assert_eq!(
            grant_request_from(&entries(&[
                ("remember", "on"),
                ("scope", "budget"),
                ("max_usd", "100"),
                ("seconds", "3600")
            ])),
            Ok(Some(GrantRequest {
                scope: GrantScope::Budget,
                seconds: 3600,
                max_cents: Some(10_000)
            }))
        );
        assert_eq!(
            grant_request_from(&entries(&[
                ("remember", "on"),
                ("scope", "call"),
                ("seconds", "900")
            ])),
            Ok(Some(GrantRequest {
                scope: GrantScope::Call,
                seconds: 900,
                max_cents: None
            }))
        );
        for bad in ["0", "1.5", "x", "", "2000000"] {
            assert!(
                grant_request_from(&entries(&[
                    ("remember", "on"),
                    ("scope", "budget"),
                    ("max_usd", bad),
                    ("seconds", "60")
                ]))
                .is_err(),
                "{bad}"
            );
        }
        let paying = remember_html(true, Some(12_345));
        assert!(paying.contains("value=\"124\""), "{paying}");
        assert!(paying.contains("value=\"budget\" selected"));
        assert!(!remember_html(false, None).contains("max_usd"));
    }
}
