//! `GET /tools`: the tools the model may call, by where they come from — Countersign's own and
//! each MCP server with its state — and what each needs: asks, runs, or off (and why). Written
//! on the server as plain HTML (a hydrated panel cost the browser's bundle 10 KB; ADR 0021).
//! `GET /tools?panel` is the same list without the page around it: the chat's Tools panel shows
//! it (one rendering of the list, and almost nothing in the bundle).

use axum::{
    extract::{RawQuery, State},
    response::Html,
};

use super::html::{document, escape};
use crate::{
    agent::tools::{ApprovalPolicy, Tool},
    transport::state::AppState,
};

pub async fn page(State(state): State<AppState>, RawQuery(query): RawQuery) -> Html<String> {
    let list = list(&state);
    if query.is_some_and(|q| {
        q.split('&')
            .any(|p| p == "panel" || p.starts_with("panel="))
    }) {
        return Html(list);
    }
    let body = format!("<h1>Tools</h1><p><a href=\"/\">Back to the chat</a></p>{list}");
    document(&state, "Tools", "tools-page", &body)
}

/// The policy in force: its file and rules, what it warns of, the last reload that failed.
fn policy_section(state: &AppState) -> String {
    let status = state.runtime.policy().status();
    let Some(file) = &status.file else {
        return "<section data-testid=\"tools-page-policy\" data-policy=\"none\"><h2>Policy</h2>\
                <p class=\"muted\">No policy file: each tool's own setting below decides \
                (COUNTERSIGN_POLICY names one).</p></section>"
            .into();
    };
    let rules: String = status
        .rules
        .iter()
        .map(|r| {
            format!(
                "<li data-testid=\"tools-page-rule\" data-rule=\"{id}\" data-effect=\"{effect}\">\
                 <code>{id}</code> — {effect}{needs} <span class=\"muted\">(line {line})</span></li>",
                id = escape(&r.id),
                effect = r.effect,
                needs = r
                    .needs
                    .as_ref()
                    .map(|n| format!(": {}", escape(n)))
                    .unwrap_or_default(),
                line = r.line,
            )
        })
        .collect();
    let problems: String = status
        .reload_error
        .iter()
        .map(|e| {
            format!(
                "<p class=\"edit-error\" role=\"alert\" data-testid=\"tools-page-policy-error\">\
                 The file does not load; the rules below stay in force: {}</p>",
                escape(e)
            )
        })
        .chain(
            status
                .warnings
                .iter()
                .map(|w| format!("<p class=\"muted\">Warning: {}</p>", escape(&w.to_string()))),
        )
        .collect();
    format!(
        "<section data-testid=\"tools-page-policy\" data-policy=\"file\"><h2>Policy</h2>\
         <p class=\"muted\"><code>{file}</code>, version {version}: its rules decide; a call no \
         rule matches asks. “asks” and “runs” below are each tool's own setting \
         (<code>context.asks_by_default</code>).</p>{problems}<ul>{rules}</ul></section>",
        file = escape(file),
        version = escape(status.version.as_deref().unwrap_or("")),
    )
}

/// The tools by where they come from, as HTML sections.
fn list(state: &AppState) -> String {
    let tools = state.runtime.tools.snapshot();
    let row = |tool: &Tool| {
        let needs = match tool.spec.approval {
            ApprovalPolicy::Never => "runs",
            ApprovalPolicy::Always => "asks",
            ApprovalPolicy::When(_) => "asks sometimes",
        };
        let notes = if tool.spec.presentation.notes.is_empty() {
            String::new()
        } else {
            format!(
                " <span class=\"muted\">({})</span>",
                escape(&tool.spec.presentation.notes.join(", "))
            )
        };
        format!(
            "<li data-testid=\"tools-page-tool\" data-tool=\"{name}\" data-needs=\"{needs}\">\
             <strong>{title}</strong> <code>{name}</code> — {needs}{notes}</li>",
            name = escape(&tool.spec.name),
            title = escape(&tool.spec.presentation.title),
        )
    };
    let own: String = tools
        .iter()
        .filter(|t| t.spec.presentation.source.is_none())
        .map(|t| row(t))
        .collect();
    let mut body = format!(
        "<section data-testid=\"tools-page-group\" data-source=\"countersign\">\
         <h2>Countersign</h2><ul>{own}</ul></section>"
    );
    body.push_str(&policy_section(state));
    for server in state.mcp.statuses() {
        let source = format!("MCP server {}", server.name);
        let offered: String = tools
            .iter()
            .filter(|t| t.spec.presentation.source.as_deref() == Some(source.as_str()))
            .map(|t| row(t))
            .collect();
        let off: String = server
            .skipped
            .iter()
            .map(|s| format!("<li data-needs=\"off\">{} — off</li>", escape(s)))
            .collect();
        let mut state_text = match &server.error {
            Some(e) => format!("{}: {}", server.state, escape(e)),
            None => server.state.to_owned(),
        };
        if server.remembered {
            state_text.push_str(" — its tools as it last listed them");
        }
        body.push_str(&format!(
            "<section data-testid=\"tools-page-group\" data-source=\"{name}\" data-state=\"{state}\">\
             <h2>{source}</h2><p class=\"muted\">{state_text}</p><ul>{offered}{off}</ul></section>",
            name = escape(&server.name),
            state = server.state,
            source = escape(&source),
        ));
    }
    body
}
