//! `countersign policy check <policy>` and `countersign policy test <policy> <cases>`: a policy
//! file loaded and validated exactly as the server does, and a table of calls decided by it.
//!
//! A cases file is TOML: each `[[case]]` names a tool, its arguments and what the policy should
//! do (`run`, `ask` or `deny`), optionally the rule that should decide, the chat, and the running
//! totals before the call (`spent_today` and `spent_in_chat`, in the wallet's currency). The
//! tools are Countersign's own; an MCP server's tools are declared with `[[tool]]` (`server`,
//! `name`, `schema`, `asks`), as its `tools/list` describes them:
//!
//! ```toml
//! [[tool]]
//! server = "files"
//! name = "write_file"
//! schema = { type = "object", properties = { path = { type = "string" } }, required = ["path"] }
//!
//! [[case]]
//! name = "small payments run"
//! tool = "process_payment"
//! args = { amount = 5, recipient = "Jack" }
//! expect = "run"
//! rule = "small-payments"
//! ```

use std::{fmt::Write as _, path::Path};

use serde::Deserialize;
use serde_json::Value;

use super::{Decide, Policy, ToolFacts, Verdict};
use crate::agent::{
    clock::Clock,
    schema::validate,
    tools::{ApprovalPolicy, Executor, ToolRegistry, ToolSettings, ToolSpec},
};
use crate::protocol::{ToolPresentation, grant::Ruling};

/// What `countersign policy …` printed and how it ended (0: passed, 1: a case failed, 2: the
/// policy or the cases could not be used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub output: String,
    pub code: u8,
}

const USAGE: &str = "usage: countersign policy check <policy.cedar>\n       \
                     countersign policy test <policy.cedar> <cases.toml>";

/// Runs `countersign policy <args>`.
pub fn run(args: &[String]) -> Report {
    match args {
        [cmd, policy] if cmd == "check" => check(Path::new(policy)),
        [cmd, policy, cases] if cmd == "test" => test(Path::new(policy), Path::new(cases)),
        _ => Report {
            output: format!("{USAGE}\n"),
            code: 2,
        },
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    #[serde(default)]
    tool: Vec<ToolDecl>,
    #[serde(default)]
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolDecl {
    server: String,
    name: String,
    schema: toml::Value,
    /// Whether the tool's own setting asks (default: yes, as every MCP tool does).
    #[serde(default = "yes")]
    asks: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    #[serde(default)]
    name: Option<String>,
    tool: String,
    #[serde(default)]
    args: Option<toml::Value>,
    expect: String,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    chat: Option<String>,
    /// In the wallet's currency (USD), e.g. 42.5.
    #[serde(default)]
    spent_today: Option<f64>,
    #[serde(default)]
    spent_in_chat: Option<f64>,
    /// When the call is made (RFC 3339, e.g. "2026-11-26T09:30:00Z"); default: now.
    #[serde(default)]
    now: Option<String>,
    /// Whom the chat's wallet paid before (for `context.new_payee`).
    #[serde(default)]
    paid_before: Vec<String>,
    /// The person whose chat it is (the policy's principal; default: the one local person)
    /// and their roles.
    #[serde(default)]
    requester: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
    /// For an `ask`: how many people must approve (a rule's `@approvers`; 1 when it asks only
    /// the chat's person).
    #[serde(default)]
    approvers: Option<u32>,
}

/// The registry the command decides against: Countersign's own tools and the declared ones.
fn registry(declared: &[ToolDecl]) -> Result<ToolRegistry, String> {
    let registry = ToolRegistry::standard(&ToolSettings::default());
    for decl in declared {
        let schema = serde_json::to_value(&decl.schema).map_err(|e| e.to_string())?;
        let unsupported = crate::protocol::schema::unsupported(&schema);
        if !unsupported.is_empty() {
            return Err(format!(
                "tool {}__{}: its schema uses {} (not checked by Countersign)",
                decl.server,
                decl.name,
                unsupported.join(", ")
            ));
        }
        let name = format!("{}__{}", decl.server, decl.name);
        let mut presentation = ToolPresentation::new(decl.name.clone(), format!("Run {name}"));
        presentation.source = Some(format!("MCP server {}", decl.server));
        registry.add(
            ToolSpec {
                name: name.into(),
                description: "".into(),
                purpose: "".into(),
                presentation,
                parameters: schema,
                location: crate::agent::tools::ToolLocation::Server,
                approval: if decl.asks {
                    ApprovalPolicy::Always
                } else {
                    ApprovalPolicy::Never
                },
                approval_timeout: std::time::Duration::from_secs(300),
                result_timeout: std::time::Duration::from_secs(300),
                acknowledgment: None,
                effects: crate::agent::tools::ToolEffects::ExternalOnce,
                server: Some(decl.server.clone().into()),
                pays: None,
                names: Vec::new(),
            },
            Executor::Browser,
        );
    }
    Ok(registry)
}

fn load(path: &Path, registry: &ToolRegistry, servers: Vec<String>) -> Result<Policy, String> {
    Policy::from_file(path, &ToolFacts::all(registry), servers, 0).map_err(|e| e.to_string())
}

fn check(path: &Path) -> Report {
    let registry = ToolRegistry::standard(&ToolSettings::default());
    match load(path, &registry, Vec::new()) {
        Ok(policy) => {
            let status = policy.status();
            let mut output = format!(
                "{}: {} rule{}, version {}\n",
                path.display(),
                status.rules.len(),
                if status.rules.len() == 1 { "" } else { "s" },
                status.version.unwrap_or_default()
            );
            for rule in &status.rules {
                let _ = writeln!(
                    output,
                    "  line {:>3}  {:<4}  {}{}",
                    rule.line,
                    rule.effect,
                    rule.id,
                    rule.needs
                        .as_ref()
                        .map(|n| format!(" (needs {n})"))
                        .unwrap_or_default()
                );
            }
            for warning in &status.warnings {
                let _ = writeln!(output, "warning: {warning}");
            }
            Report { output, code: 0 }
        }
        Err(e) => Report {
            output: format!("error: {e}\n"),
            code: 2,
        },
    }
}

fn test(policy_path: &Path, cases_path: &Path) -> Report {
    let fail = |message: String| Report {
        output: format!("error: {message}\n"),
        code: 2,
    };
    let text = match std::fs::read_to_string(cases_path) {
        Ok(text) => text,
        Err(e) => return fail(format!("{}: cannot read it: {e}", cases_path.display())),
    };
    let cases: CasesFile = match toml::from_str(&text) {
        Ok(cases) => cases,
        Err(e) => return fail(format!("{}: {e}", cases_path.display())),
    };
    let registry = match registry(&cases.tool) {
        Ok(registry) => registry,
        Err(e) => return fail(format!("{}: {e}", cases_path.display())),
    };
    let servers = cases.tool.iter().map(|t| t.server.clone()).collect();
    let policy = match load(policy_path, &registry, servers) {
        Ok(policy) => policy,
        Err(e) => return fail(e),
    };
    if cases.case.is_empty() {
        return fail(format!("{}: no [[case]]", cases_path.display()));
    }
    let mut output = String::new();
    let mut failed = 0;
    for (n, case) in cases.case.iter().enumerate() {
        let name = case
            .name
            .clone()
            .unwrap_or_else(|| format!("case {}", n + 1));
        match decide(&policy, &registry, case) {
            Err(e) => {
                failed += 1;
                let _ = writeln!(output, "FAIL  {name}: {e}");
            }
            Ok((got, rule, detail, approvers)) => {
                let rule_ok = case
                    .rule
                    .as_ref()
                    .is_none_or(|want| rule.as_deref() == Some(want))
                    && case.approvers.is_none_or(|want| approvers == Some(want));
                let shown = match &rule {
                    Some(rule) => format!("{got} (rule {rule}){detail}"),
                    None => format!("{got}{detail}"),
                };
                if got == case.expect && rule_ok {
                    let _ = writeln!(output, "ok    {name}: {shown}");
                } else {
                    failed += 1;
                    let mut want = match &case.rule {
                        Some(rule) => format!("{} (rule {rule})", case.expect),
                        None => case.expect.clone(),
                    };
                    if let Some(n) = case.approvers {
                        want.push_str(&format!(" by {n} approver(s)"));
                    }
                    let _ = writeln!(output, "FAIL  {name}: expected {want}, got {shown}");
                }
            }
        }
    }
    let total = cases.case.len();
    let _ = writeln!(
        output,
        "\n{} of {total} case{} passed",
        total - failed,
        if total == 1 { "" } else { "s" }
    );
    Report {
        output,
        code: if failed == 0 { 0 } else { 1 },
    }
}

/// (run | ask | deny, the deciding rule, more words, how many approvers an ask needs).
type Decided = (String, Option<String>, String, Option<u32>);

fn decide(policy: &Policy, registry: &ToolRegistry, case: &Case) -> Result<Decided, String> {
    if !["run", "ask", "deny"].contains(&case.expect.as_str()) {
        return Err(format!("expect = {:?}: use run, ask or deny", case.expect));
    }
    let tool = registry.get(&case.tool).ok_or_else(|| {
        format!(
            "unknown tool {:?} (known: {}; declare an MCP server's tools with [[tool]])",
            case.tool,
            registry.names().join(", ")
        )
    })?;
    let args = match &case.args {
        Some(args) => serde_json::to_value(args).map_err(|e| e.to_string())?,
        None => Value::Object(Default::default()),
    };
    validate(&tool.spec.parameters, &args)
        .map_err(|e| format!("the arguments do not fit {}: {e}", case.tool))?;
    let cents = |usd: Option<f64>| -> Result<i64, String> {
        let usd = usd.unwrap_or(0.0);
        if !usd.is_finite() || usd < 0.0 {
            return Err(format!(
                "a running total must be a positive amount, not {usd}"
            ));
        }
        Ok((usd * 100.0).round() as i64)
    };
    let now = match &case.now {
        None => crate::agent::clock::SystemClock.now_ms(),
        Some(text) => humantime::parse_rfc3339_weak(text)
            .map_err(|e| format!("now = {text:?}: {e} (use RFC 3339, e.g. 2026-11-26T09:30:00Z)"))?
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| format!("now = {text:?} is before 1970"))?
            .as_millis() as crate::agent::clock::Millis,
    };
    let chat = case.chat.clone().unwrap_or_else(|| "policy-test".into());
    policy.set_spent_today(cents(case.spent_today)?, now);
    let wallet = super::ChatWallet {
        paid_cents: cents(case.spent_in_chat)?,
        payees: case.paid_before.clone(),
    };
    let requester = match &case.requester {
        None => super::Requester::local(),
        Some(id) => super::Requester {
            id: id.clone(),
            name: id.clone(),
            roles: case
                .roles
                .iter()
                .map(|r| crate::agent::people::role_name(r).map_err(|e| format!("roles: {e}")))
                .collect::<Result<_, _>>()?,
        },
    };
    let mut decider = policy.decider(registry, &chat, &requester, wallet);
    Ok(match decider.decide("case", &tool.spec, &args, now) {
        Verdict::Run => ("run".into(), None, " (the tool's own setting)".into(), None),
        Verdict::Ruled(Ruling::AllowedByRule { rule }) => {
            ("run".into(), Some(rule), String::new(), None)
        }
        Verdict::Ruled(Ruling::AllowedByGrant { label, .. }) => {
            ("run".into(), None, format!(" (grant {label})"), None)
        }
        Verdict::Ruled(Ruling::DeniedByRule { rule, reason }) => {
            ("deny".into(), Some(rule), format!(": {reason}"), None)
        }
        Verdict::Ruled(Ruling::Asked { rule, needs, .. }) => {
            let needs = needs.unwrap_or_default();
            let detail = if needs.is_plain() {
                String::new()
            } else {
                format!(": needs {}", needs.words())
            };
            ("ask".into(), rule, detail, Some(needs.approvers.max(1)))
        }
    })
}
