//! The person's grants: the list with revoke, and the chip a call a grant let run carries.
//!
//! Listing and revoking are Leptos server functions (`POST /api/fn/grants`,
//! `POST /api/fn/revoke_grant`): verbs the page asks of the server, behind the same edge (keys,
//! sign-in, Origin checks) as every other route.

use leptos::{prelude::*, server_fn::codec::Json as JsonCodec, task::spawn_local};

use crate::protocol::{
    grant::{Grant, GrantState},
    money::format_minor,
};

/// Every grant, newest first.
#[server(prefix = "/api/fn", endpoint = "grants", input = JsonCodec)]
pub async fn list_grants() -> Result<Vec<Grant>, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    Ok(state.runtime.policy().grants())
}

/// Revokes grant `id`: from now on it lets nothing run. Audited.
#[server(prefix = "/api/fn", endpoint = "revoke_grant", input = JsonCodec)]
pub async fn revoke_grant(id: String) -> Result<Grant, ServerFnError> {
    let state = expect_context::<crate::state::AppState>();
    state
        .runtime
        .revoke_grant(&id)
        .await
        .map_err(|e| ServerFnError::new(e.to_string()))
}

/// "in 14 min", "in 2 h", "in 3 days"; `None` once past.
fn remaining(until_ms: i64, now_ms: i64) -> Option<String> {
    let secs = (until_ms - now_ms) / 1000;
    if secs <= 0 {
        return None;
    }
    Some(if secs < 3600 {
        format!("{} min", (secs + 59) / 60)
    } else if secs < 2 * 86_400 {
        format!("{} h", secs / 3600)
    } else {
        format!("{} days", secs / 86_400)
    })
}

/// One grant's line: what it lets run, its use, and how long it lasts.
fn describe(grant: &Grant, now_ms: i64) -> String {
    let mut words = Vec::new();
    if let Some(max) = grant.max_cents {
        words.push(format!(
            "{} of {} USD used",
            format_minor(grant.used_cents, 2),
            format_minor(max, 2)
        ));
    }
    words.push(match grant.uses {
        0 => "not used yet".to_owned(),
        1 => "used once".to_owned(),
        n => format!("used {n} times"),
    });
    match grant.state(now_ms) {
        GrantState::Active => {
            if let Some(left) = remaining(grant.expires_at_ms, now_ms) {
                words.push(format!("expires in {left}"));
            }
        }
        other => words.push(other.as_str().to_owned()),
    }
    words.join(" · ")
}

/// The grants panel: every grant, the active ones first, each active one with Revoke.
#[component]
pub fn GrantsPanel(on_close: Callback<()>) -> impl IntoView {
    let grants = RwSignal::new(None::<Result<Vec<Grant>, String>>);
    let now = RwSignal::new(crate::ui::platform::now_ms());
    let load = move || {
        spawn_local(async move {
            let listed = list_grants().await.map_err(|e| e.to_string());
            now.set(crate::ui::platform::now_ms());
            grants.set(Some(listed));
        });
    };
    load();
    let revoke = move |id: String| {
        spawn_local(async move {
            if let Err(e) = revoke_grant(id).await {
                grants.set(Some(Err(format!("Cannot revoke: {e}"))));
                return;
            }
            load();
        });
    };
    view! {
        <aside class="tools-panel grants-panel" data-testid="grants-panel" aria-label="Grants">
            <header>
                <strong>"Grants"</strong>
                <span class="muted">"Approvals you asked to remember"</span>
                <button type="button" class="link-button" data-testid="grants-panel-close"
                    on:click=move |_| on_close.run(())>"Close"</button>
            </header>
            {move || match grants.get() {
                None => view! { <p class="muted">"Loading…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="edit-error" role="alert">{e}</p> }.into_any(),
                Some(Ok(list)) if list.is_empty() => view! {
                    <p class="muted" data-testid="grants-empty">
                        "No grants. On an approval card, tick “Remember” to let the same kind of call run without asking."
                    </p>
                }.into_any(),
                Some(Ok(mut list)) => {
                    let at = now.get();
                    list.sort_by_key(|g| g.state(at) != GrantState::Active);
                    view! {
                        <ul class="grants">
                            {list.into_iter().map(|grant| {
                                let active = grant.state(at) == GrantState::Active;
                                let id = grant.id.clone();
                                view! {
                                    <li data-testid="grant" data-grant-id=grant.id.clone()
                                        data-state=grant.state(at).as_str()>
                                        <span class="grant-label">{grant.label.clone()}</span>
                                        <span class="muted">{describe(&grant, at)}</span>
                                        {active.then(|| view! {
                                            <button type="button" class="deny" data-testid="revoke-grant"
                                                on:click=move |_| revoke(id.clone())>"Revoke"</button>
                                        })}
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }
            }}
        </aside>
    }
}

/// The chip of a call that ran without asking because of grant `grant`: its words, and Revoke.
#[component]
pub fn GrantChip(grant: String, label: String) -> impl IntoView {
    let revoked = RwSignal::new(None::<Result<(), String>>);
    let id = grant.clone();
    let revoke = move |_| {
        let id = id.clone();
        spawn_local(async move {
            let done = revoke_grant(id)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
            revoked.set(Some(done));
        });
    };
    view! {
        <p class="ruling-chip granted" data-testid="ruling-chip" data-ruling="allowed_by_grant" data-grant-id=grant>
            <span>"Ran without asking: your grant ("{label}")"</span>
            {move || match revoked.get() {
                None => view! {
                    <button type="button" class="link-button" data-testid="chip-revoke" on:click=revoke.clone()>"Revoke"</button>
                }.into_any(),
                Some(Ok(())) => view! { <span class="muted" data-testid="chip-revoked">" · revoked"</span> }.into_any(),
                Some(Err(e)) => view! { <span class="edit-error" role="alert">{format!(" · {e}")}</span> }.into_any(),
            }}
        </p>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::grant::GrantScope;

    #[test]
    fn a_grant_reads_as_its_use_and_its_time() {
        let mut grant = Grant {
            id: "g".into(),
            scope: GrantScope::Budget,
            tool: "process_payment".into(),
            chat: None,
            args: None,
            max_cents: Some(5_000),
            used_cents: 1_250,
            uses: 1,
            created_at_ms: 0,
            expires_at_ms: 3_600_000,
            revoked_at_ms: None,
            approval_id: "a".into(),
            granted_in: "c".into(),
            label: "Payment up to 50.00 USD".into(),
        };
        assert_eq!(
            describe(&grant, 0),
            "12.50 of 50.00 USD used · used once · expires in 1 h"
        );
        grant.uses = 3;
        assert_eq!(
            describe(&grant, 3_000_000),
            "12.50 of 50.00 USD used · used 3 times · expires in 10 min"
        );
        grant.revoked_at_ms = Some(1);
        assert!(describe(&grant, 5).ends_with("revoked"));
        assert_eq!(remaining(200_000_000, 0).as_deref(), Some("2 days"));
        assert_eq!(remaining(7_200_000, 0).as_deref(), Some("2 h"));
        assert_eq!(remaining(10, 10), None);
    }
}
