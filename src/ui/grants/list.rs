//! The grants panel's list as HTML, written on the server (the page receives it whole).

use axum::http::StatusCode;

use crate::{
    agent::{policy::GrantError, runtime::GrantChange},
    protocol::{
        grant::{Grant, GrantState},
        money::format_minor,
    },
    transport::people::refuse,
    ui::{FnError, html::escape},
};

/// Why a grant could not be revoked, as the server function's refusal.
pub(super) fn revoke_refusal(e: GrantChange) -> FnError {
    let (status, code) = match &e {
        GrantChange::Refused(GrantError::Unknown(_)) => (StatusCode::NOT_FOUND, "grant_not_found"),
        GrantChange::Refused(GrantError::AlreadyRevoked(_)) => {
            (StatusCode::CONFLICT, "grant_already_revoked")
        }
        GrantChange::NotRecorded => (StatusCode::SERVICE_UNAVAILABLE, "grant_not_recorded"),
    };
    refuse(status, code, e)
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

/// The grants as HTML, active ones first (each with Revoke), escaped.
pub fn list_html(grants: &[Grant], now_ms: i64) -> String {
    if grants.is_empty() {
        return "<p class=\"muted\" data-testid=\"grants-empty\">No grants. On an approval \
                card, tick “Remember” to let the same kind of call run without asking.</p>"
            .to_owned();
    }
    let row = |grant: &Grant| {
        let state = grant.state(now_ms);
        let revoke = if state == GrantState::Active {
            format!(
                "<button type=\"button\" class=\"deny\" data-testid=\"revoke-grant\" \
                 data-action=\"revoke:{}\">Revoke</button>",
                escape(&grant.id)
            )
        } else {
            String::new()
        };
        format!(
            "<li data-testid=\"grant\" data-grant-id=\"{id}\" data-state=\"{state}\">\
             <span class=\"grant-label\">{label}</span> <span class=\"muted\">{about}</span>\
             {revoke}</li>",
            id = escape(&grant.id),
            state = state.as_str(),
            label = escape(&grant.label),
            about = escape(&describe(grant, now_ms)),
        )
    };
    let active = grants
        .iter()
        .filter(|g| g.state(now_ms) == GrantState::Active);
    let ended = grants
        .iter()
        .filter(|g| g.state(now_ms) != GrantState::Active);
    let rows: String = active.chain(ended).map(row).collect();
    format!("<ul class=\"grants\">{rows}</ul>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::grant::GrantScope;

    #[test]
    fn a_grant_reads_as_its_use_and_its_time() {
        let mut grant = Grant::sample("g", "process_payment");
        grant.used_cents = 1_250;
        grant.uses = 1;
        grant.expires_at_ms = 3_600_000;
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

    #[test]
    fn the_list_is_escaped_active_first_and_only_active_ones_revoke() {
        let grant = |id: &str, revoked: Option<i64>| Grant {
            scope: GrantScope::Tool,
            tool: "get_location".into(),
            chat: Some("c".into()),
            max_cents: None,
            expires_at_ms: 10_000,
            revoked_at_ms: revoked,
            label: "<b>Location</b> in this chat".into(),
            ..Grant::sample(id, "get_location")
        };
        let html = list_html(&[grant("old", Some(5)), grant("new", None)], 6);
        assert!(html.find("data-grant-id=\"new\"") < html.find("data-grant-id=\"old\""));
        assert_eq!(html.matches("data-action=\"revoke:").count(), 1);
        assert!(html.contains("&lt;b&gt;Location&lt;/b&gt;"), "{html}");
        assert!(!html.contains("<b>"));
        assert!(list_html(&[], 0).contains("No grants"));
    }
}
