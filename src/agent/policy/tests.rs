//! The policy, table by table: what the rules, grants and running totals decide for a call,
//! hostile calls included; and what a broken policy file says.

use std::{borrow::Cow, time::Duration};

use serde_json::{Value, json};

use super::*;

use crate::agent::tools::{
    ApprovalPolicy, Executor, ToolEffects, ToolLocation, ToolSettings, ToolSpec,
};
use crate::protocol::{
    ToolPresentation,
    grant::{GrantRequest, GrantScope},
};

pub(super) const EXAMPLE: &str = include_str!("../../../examples/policy.cedar");

/// The one local person, whose chats every table's calls are in.
pub(super) static LOCAL_REQUESTER: std::sync::LazyLock<Requester> =
    std::sync::LazyLock::new(Requester::local);

/// Noon UTC, 2026-11-26 (a Thursday).
pub(super) const NOON: Millis = 1_795_694_400_000;

/// Countersign's own tools and an MCP server `files` with a read and a write tool.
pub(super) fn registry() -> ToolRegistry {
    let registry = ToolRegistry::standard(&ToolSettings::default());
    for (name, asks) in [("read_file", false), ("write_file", true)] {
        registry.add(
            ToolSpec {
                name: format!("files__{name}").into(),
                description: Cow::Borrowed(""),
                purpose: Cow::Borrowed(""),
                presentation: ToolPresentation::new(name, format!("Run {name}")),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "content": {"type": "string"},
                        "size": {"type": "integer"},
                        "tags": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["path"]
                }),
                location: ToolLocation::Server,
                approval: if asks {
                    ApprovalPolicy::Always
                } else {
                    ApprovalPolicy::Never
                },
                approval_timeout: Duration::from_secs(300),
                result_timeout: Duration::from_secs(300),
                acknowledgment: None,
                effects: ToolEffects::ExternalOnce,
                server: Some("files".into()),
                pays: None,
                names: Vec::new(),
            },
            Executor::Browser,
        );
    }
    registry
}

pub(super) fn policy(text: &str) -> Policy {
    Policy::from_text(text, &ToolFacts::all(&registry())).unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn grant(id: &str, scope: GrantScope, tool: &str) -> Grant {
    Grant {
        id: id.into(),
        scope,
        tool: tool.into(),
        chat: (scope != GrantScope::Budget).then(|| "chat-1".into()),
        args: None,
        max_cents: None,
        used_cents: 0,
        uses: 0,
        created_at_ms: NOON - 60_000,
        expires_at_ms: NOON + 3_600_000,
        revoked_at_ms: None,
        approval_id: "apv-0".into(),
        granted_in: "chat-1".into(),
        person: None,
        label: format!("{tool} ({id})"),
    }
}

/// What a case expects.
#[derive(Debug, Clone, PartialEq)]
enum Want {
    /// Runs as its tool says (no ruling).
    Default,
    Rule(&'static str),
    Grant(&'static str),
    /// Asks; the rule that asks, and whether it may be granted.
    Ask(Option<&'static str>, bool),
    /// Asks this many people, by this rule.
    Approvers(&'static str, u32),
    Deny(&'static str),
}

pub(super) fn verdict_as_want(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Run => "Default".into(),
        Verdict::Ruled(Ruling::AllowedByRule { rule }) => format!("Rule({rule})"),
        Verdict::Ruled(Ruling::AllowedByGrant { grant, .. }) => format!("Grant({grant})"),
        Verdict::Ruled(Ruling::Asked {
            rule,
            grantable,
            needs: None,
        }) => format!("Ask({rule:?}, {grantable})"),
        Verdict::Ruled(Ruling::Asked {
            rule,
            needs: Some(needs),
            ..
        }) => format!("Ask({rule:?}, {})", needs.approvers),
        Verdict::Ruled(Ruling::DeniedByRule { rule, .. }) => format!("Deny({rule})"),
    }
}

fn want_as_string(want: &Want) -> String {
    match want {
        Want::Default => "Default".into(),
        Want::Rule(r) => format!("Rule({r})"),
        Want::Grant(g) => format!("Grant({g})"),
        Want::Ask(rule, grantable) => format!("Ask({:?}, {grantable})", rule.map(str::to_owned)),
        Want::Approvers(rule, n) => format!("Ask({:?}, {n})", Some(rule.to_owned())),
        Want::Deny(r) => format!("Deny({r})"),
    }
}

struct Case {
    name: &'static str,
    /// `None`: no policy file (each tool's own setting).
    policy: Option<&'static str>,
    chat: &'static str,
    tool: &'static str,
    args: Value,
    spent_today: i64,
    spent_in_chat: i64,
    payees: &'static [&'static str],
    grants: Vec<Grant>,
    now: Millis,
    want: Want,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            policy: Some(EXAMPLE),
            chat: "chat-1",
            tool: "process_payment",
            args: json!({}),
            spent_today: 0,
            spent_in_chat: 0,
            payees: &[],
            grants: Vec::new(),
            now: NOON,
            want: Want::Default,
        }
    }
}

pub(super) fn pay(amount: f64, recipient: &str) -> Value {
    json!({"amount": amount, "recipient": recipient})
}

fn pay_in(amount: f64, currency: &str, recipient: &str) -> Value {
    json!({"amount": amount, "currency": currency, "recipient": recipient})
}

const ASK_NEW_PAYEES: &str = r#"
@id("small") permit (principal, action == Action::"process_payment", resource)
  when { context.amount_cents <= 1000 };
@id("new-payees-ask") @ask forbid (principal, action == Action::"process_payment", resource)
  when { context.new_payee };
"#;

const FILES: &str = r#"
@id("reads") permit (principal, action, resource == Server::"files")
  when { context.asks_by_default == false };
@id("no-etc") @reason("Nothing under /etc is written from a chat.")
  forbid (principal, action == Action::"files__write_file", resource)
  when { context.input.path like "/etc/*" };
@id("tagged") permit (principal, action == Action::"files__write_file", resource)
  when { context.input has tags && context.input.tags.contains("scratch") };
"#;

const HOURS: &str = r#"
@id("office-hours") permit (principal, action == Action::"process_payment", resource)
  when { context.now.toTime() >= duration("9h") && context.now.toTime() < duration("17h") };
"#;

const NO_REASON: &str = r#"
@id("no-location") forbid (principal, action == Action::"get_location", resource);
"#;

const DECIMALS: &str = r#"
@id("exact-decimal") permit (principal, action == Action::"process_payment", resource)
  when { context.input.amount.lessThanOrEqual(decimal("2.5")) };
"#;

const SKIPPED_FORBID: &str = r#"
@id("all-payments") permit (principal, action == Action::"process_payment", resource);
@id("cheap-only") @reason("too much")
  forbid (principal, action == Action::"process_payment", resource)
  when { context.amount_cents > 100 };
"#;

fn cases() -> Vec<Case> {
    let revoked = {
        let mut g = grant("g-revoked", GrantScope::Budget, "process_payment");
        g.max_cents = Some(100_000);
        g.revoked_at_ms = Some(NOON - 1);
        g
    };
    let expired = {
        let mut g = grant("g-expired", GrantScope::Budget, "process_payment");
        g.max_cents = Some(100_000);
        g.expires_at_ms = NOON;
        g
    };
    let budget = |id: &'static str, max: i64, used: i64| {
        let mut g = grant(id, GrantScope::Budget, "process_payment");
        g.max_cents = Some(max);
        g.used_cents = used;
        g
    };
    let exact = {
        let mut g = grant("g-exact", GrantScope::Call, "process_payment");
        g.args = Some(pay(80.0, "Jack"));
        g
    };
    vec![
        // ---- the example policy ----
        Case {
            name: "weather runs by rule",
            tool: "get_weather",
            args: json!({"location": "Paris"}),
            want: Want::Rule("weather"),
            ..Case::default()
        },
        Case {
            name: "music runs by rule",
            tool: "change_bgm",
            args: json!({"track": 1}),
            want: Want::Rule("music"),
            ..Case::default()
        },
        Case {
            name: "location asks (nothing matches)",
            tool: "get_location",
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "5 USD runs",
            args: pay(5.0, "Jack"),
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "10 USD exactly runs",
            args: pay(10.0, "Jack"),
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "10.01 USD asks",
            args: pay(10.01, "Jack"),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a cent runs",
            args: pay(0.01, "Jack"),
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "1000 JPY (6.70 USD) runs",
            args: pay_in(1000.0, "JPY", "Kenji"),
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "1500 JPY (10.05 USD) asks",
            args: pay_in(1500.0, "JPY", "Kenji"),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "9 EUR (9.76 USD) runs",
            args: pay_in(9.0, "EUR", "Ana"),
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "10 GBP (12.92 USD) asks",
            args: pay_in(10.0, "GBP", "Ana"),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "daily total: 45 paid, 5 more runs",
            args: pay(5.0, "Jack"),
            spent_today: 4_500,
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "daily total: 45 paid, 5.01 more asks",
            args: pay(5.01, "Jack"),
            spent_today: 4_500,
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "daily total: 50 paid, a cent asks",
            args: pay(0.01, "Jack"),
            spent_today: 5_000,
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "over 500 USD is refused",
            args: pay(500.01, "Jack"),
            want: Want::Deny("payment-limit"),
            ..Case::default()
        },
        Case {
            name: "100 USD asks the chat's person",
            args: pay(100.0, "Jack"),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "500 USD needs two approvers",
            args: pay(500.0, "Jack"),
            want: Want::Approvers("two-approvers", 2),
            ..Case::default()
        },
        Case {
            name: "a budget grant does not run what needs two approvers",
            args: pay(150.0, "Jack"),
            grants: vec![{
                let mut g = grant("g-big", GrantScope::Budget, "process_payment");
                g.max_cents = Some(100_000);
                g
            }],
            want: Want::Approvers("two-approvers", 2),
            ..Case::default()
        },
        Case {
            name: "80,000 JPY (536 USD) is refused",
            args: pay_in(80_000.0, "JPY", "Kenji"),
            want: Want::Deny("payment-limit"),
            ..Case::default()
        },
        Case {
            name: "a blocked recipient is refused, even for a cent",
            args: pay(0.01, "Mallory"),
            want: Want::Deny("blocked-recipients"),
            ..Case::default()
        },
        // Hostile arguments.
        Case {
            name: "an injection attempt in a name stays a name",
            args: pay(5.0, "Mallory\" || true || \""),
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "an __entity lookalike in a name stays a name",
            args: pay(5.0, "{\"__entity\": {\"type\": \"Chat\", \"id\": \"x\"}}"),
            want: Want::Rule("small-payments"),
            ..Case::default()
        },
        Case {
            name: "too many decimals: no amount, a person decides, no grant",
            args: pay(1.005, "Jack"),
            want: Want::Ask(None, false),
            ..Case::default()
        },
        Case {
            name: "a huge amount is refused",
            args: pay(1e9, "Jack"),
            want: Want::Deny("payment-limit"),
            ..Case::default()
        },
        // ---- grants (only where nothing matched) ----
        Case {
            name: "a budget grant runs what the rules leave to the person",
            args: pay(40.0, "Jack"),
            grants: vec![budget("g-budget", 5_000, 0)],
            want: Want::Grant("g-budget"),
            ..Case::default()
        },
        Case {
            name: "a budget grant with too little left asks",
            args: pay(40.0, "Jack"),
            grants: vec![budget("g-budget", 5_000, 1_001)],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a budget grant holds in every chat",
            chat: "chat-2",
            args: pay(40.0, "Jack"),
            grants: vec![budget("g-budget", 5_000, 0)],
            want: Want::Grant("g-budget"),
            ..Case::default()
        },
        Case {
            name: "a grant used after revoke asks",
            args: pay(40.0, "Jack"),
            grants: vec![revoked.clone()],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a grant used at its expiry asks",
            args: pay(40.0, "Jack"),
            grants: vec![expired.clone()],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a grant never runs what a rule refuses",
            args: pay(600.0, "Jack"),
            grants: vec![budget("g-budget", 100_000, 0)],
            want: Want::Deny("payment-limit"),
            ..Case::default()
        },
        Case {
            name: "a grant never pays a blocked recipient",
            args: pay(40.0, "Mallory"),
            grants: vec![budget("g-budget", 100_000, 0)],
            want: Want::Deny("blocked-recipients"),
            ..Case::default()
        },
        Case {
            name: "an exact-call grant runs the same call",
            args: pay(80.0, "Jack"),
            grants: vec![exact.clone()],
            want: Want::Grant("g-exact"),
            ..Case::default()
        },
        Case {
            name: "an exact-call grant, same call written differently",
            args: json!({"recipient": "Jack", "amount": 80}),
            grants: vec![exact.clone()],
            want: Want::Grant("g-exact"),
            ..Case::default()
        },
        Case {
            name: "an exact-call grant does not run another recipient",
            args: pay(80.0, "Jill"),
            grants: vec![exact.clone()],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "an exact-call grant does not run another amount",
            args: pay(80.5, "Jack"),
            grants: vec![exact.clone()],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "an exact-call grant holds in its chat only",
            chat: "chat-2",
            args: pay(80.0, "Jack"),
            grants: vec![exact],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a tool grant runs the tool in its chat",
            tool: "get_location",
            grants: vec![grant("g-loc", GrantScope::Tool, "get_location")],
            want: Want::Grant("g-loc"),
            ..Case::default()
        },
        Case {
            name: "a tool grant for another tool does nothing",
            tool: "get_location",
            grants: vec![grant("g-w", GrantScope::Tool, "files__write_file")],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a grant where a rule failed to evaluate does nothing",
            args: pay(1.005, "Jack"),
            grants: vec![budget("g-budget", 100_000, 0)],
            want: Want::Ask(None, false),
            ..Case::default()
        },
        // ---- an @ask rule: asks whatever else matches, and cannot be granted ----
        Case {
            name: "@ask beats a permit",
            policy: Some(ASK_NEW_PAYEES),
            args: pay(5.0, "Stranger"),
            want: Want::Ask(Some("new-payees-ask"), false),
            ..Case::default()
        },
        Case {
            name: "@ask beats a grant",
            policy: Some(ASK_NEW_PAYEES),
            args: pay(50.0, "Stranger"),
            grants: vec![budget("g-budget", 100_000, 0)],
            want: Want::Ask(Some("new-payees-ask"), false),
            ..Case::default()
        },
        Case {
            name: "a known payee runs by the permit",
            policy: Some(ASK_NEW_PAYEES),
            args: pay(5.0, "jack "),
            payees: &["Jack"],
            want: Want::Rule("small"),
            ..Case::default()
        },
        Case {
            name: "a known payee over the limit may be granted",
            policy: Some(ASK_NEW_PAYEES),
            args: pay(50.0, "Jack"),
            payees: &["Jack"],
            want: Want::Ask(None, true),
            ..Case::default()
        },
        // ---- MCP servers' tools ----
        Case {
            name: "an MCP read runs by the server rule",
            policy: Some(FILES),
            tool: "files__read_file",
            args: json!({"path": "/tmp/a"}),
            want: Want::Rule("reads"),
            ..Case::default()
        },
        Case {
            name: "an MCP write asks",
            policy: Some(FILES),
            tool: "files__write_file",
            args: json!({"path": "/tmp/a", "content": "x"}),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "an MCP write under /etc is refused",
            policy: Some(FILES),
            tool: "files__write_file",
            args: json!({"path": "/etc/passwd", "content": "x"}),
            want: Want::Deny("no-etc"),
            ..Case::default()
        },
        Case {
            name: "an MCP write with a set argument runs",
            policy: Some(FILES),
            tool: "files__write_file",
            args: json!({"path": "/tmp/a", "tags": ["scratch", "x"]}),
            want: Want::Rule("tagged"),
            ..Case::default()
        },
        Case {
            name: "a refusal beats a permit",
            policy: Some(FILES),
            tool: "files__write_file",
            args: json!({"path": "/etc/x", "tags": ["scratch"]}),
            want: Want::Deny("no-etc"),
            ..Case::default()
        },
        Case {
            name: "an optional argument left out does not run",
            policy: Some(FILES),
            tool: "files__write_file",
            args: json!({"path": "/tmp/b"}),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        // ---- time, decimals, a forbid that cannot be evaluated ----
        Case {
            name: "office hours: noon runs",
            policy: Some(HOURS),
            args: pay(900.0, "Jack"),
            want: Want::Rule("office-hours"),
            ..Case::default()
        },
        Case {
            name: "office hours: 8 pm asks",
            policy: Some(HOURS),
            args: pay(900.0, "Jack"),
            now: NOON + 8 * 3_600_000,
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a decimal argument compares exactly",
            policy: Some(DECIMALS),
            args: pay(2.5, "Jack"),
            want: Want::Rule("exact-decimal"),
            ..Case::default()
        },
        Case {
            name: "a decimal argument just above asks",
            policy: Some(DECIMALS),
            args: pay(2.51, "Jack"),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "a forbid that fails to evaluate never lets a permit run",
            policy: Some(SKIPPED_FORBID),
            args: pay(1.005, "Jack"),
            want: Want::Ask(None, false),
            ..Case::default()
        },
        Case {
            name: "the same forbid, evaluated, refuses",
            policy: Some(SKIPPED_FORBID),
            args: pay(1.5, "Jack"),
            want: Want::Deny("cheap-only"),
            ..Case::default()
        },
        Case {
            name: "a forbid without @reason still refuses",
            policy: Some(NO_REASON),
            tool: "get_location",
            want: Want::Deny("no-location"),
            ..Case::default()
        },
        // ---- no policy file: each tool's own setting, and grants ----
        Case {
            name: "no policy: weather runs as it always did",
            policy: None,
            tool: "get_weather",
            args: json!({"location": "Paris"}),
            want: Want::Default,
            ..Case::default()
        },
        Case {
            name: "no policy: a payment asks",
            policy: None,
            args: pay(1.0, "Jack"),
            want: Want::Ask(None, true),
            ..Case::default()
        },
        Case {
            name: "no policy: a grant runs a payment",
            policy: None,
            args: pay(1.0, "Jack"),
            grants: vec![budget("g-budget", 5_000, 0)],
            want: Want::Grant("g-budget"),
            ..Case::default()
        },
        Case {
            name: "no policy: an MCP read its config trusts runs",
            policy: None,
            tool: "files__read_file",
            args: json!({"path": "/a"}),
            want: Want::Default,
            ..Case::default()
        },
        Case {
            name: "no policy: an MCP write asks",
            policy: None,
            tool: "files__write_file",
            args: json!({"path": "/a"}),
            want: Want::Ask(None, true),
            ..Case::default()
        },
    ]
}

#[test]
fn every_case_is_decided_as_expected() {
    let registry = registry();
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let policy = match case.policy {
            Some(text) => policy(text),
            None => Policy::tool_defaults(),
        }
        .with_book(
            case.grants.clone(),
            Spending::starting(case.now, case.spent_today),
        );
        let tool = registry.get(case.tool).expect("a known tool");
        if let Err(e) = crate::agent::schema::validate(&tool.spec.parameters, &case.args) {
            // Arguments a real call could not have (the gate validates them first).
            if !case.name.contains("huge") {
                failures.push(format!("{}: arguments do not fit the tool: {e}", case.name));
                continue;
            }
        }
        let wallet = ChatWallet {
            paid_cents: case.spent_in_chat,
            payees: case.payees.iter().map(|p| p.to_string()).collect(),
        };
        let mut decider = policy.decider(&registry, case.chat, &LOCAL_REQUESTER, wallet);
        let got = decider.decide("call-1", &tool.spec, &case.args, case.now);
        if verdict_as_want(&got) != want_as_string(&case.want) {
            failures.push(format!(
                "{}: expected {}, got {}",
                case.name,
                want_as_string(&case.want),
                verdict_as_want(&got)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Decides `payments` (call id, amount, payee) of `chat` as one step on `policy`: what each got.
async fn step(policy: &Policy, chat: &str, payments: &[(&str, f64, &str)]) -> Vec<String> {
    let registry = registry();
    let tool = registry.get("process_payment").unwrap();
    policy
        .decide(
            &registry,
            chat,
            &LOCAL_REQUESTER,
            &ChatWallet::default(),
            NOON,
            |decider| {
                payments
                    .iter()
                    .map(|(id, amount, payee)| {
                        verdict_as_want(&decider.decide(id, &tool.spec, &pay(*amount, payee), NOON))
                    })
                    .collect()
            },
        )
        .await
}

#[tokio::test]
async fn two_parallel_calls_cannot_both_fit_under_a_running_total() {
    let policy = policy(EXAMPLE).with_book(Vec::new(), Spending::starting(NOON, 3_000));
    // 30 USD paid today: 10 more fits under 50 once, not twice.
    let first = step(
        &policy,
        "chat-1",
        &[
            ("call-a", 10.0, "Jack"),
            ("call-b", 10.0, "Jill"),
            ("call-c", 10.0, "Jim"),
        ],
    )
    .await;
    assert_eq!(
        first,
        [
            "Rule(small-payments)",
            "Rule(small-payments)",
            "Ask(None, true)"
        ]
    );
    // Another chat deciding meanwhile sees the reservations too.
    let other = step(&policy, "chat-2", &[("call-d", 0.01, "Jo")]).await;
    assert_eq!(other, ["Ask(None, true)"]);
    // A reserved call that did not pay gives its share back once it is let go.
    policy.settle("call-b", false, None);
    policy.flush(NOON).await;
    let again = step(&policy, "chat-2", &[("call-e", 10.0, "Jo")]).await;
    assert_eq!(again, ["Rule(small-payments)"]);
}

#[tokio::test]
async fn a_budget_grant_is_spent_by_the_calls_it_runs_and_refunded_by_those_that_fail() {
    let mut g = grant("g-budget", GrantScope::Budget, "process_payment");
    g.max_cents = Some(5_000);
    let policy = Policy::tool_defaults().with_book(vec![g], Spending::starting(NOON, 0));
    let decided = step(
        &policy,
        "chat-1",
        &[("a", 30.0, "Jack"), ("b", 30.0, "Jack")],
    )
    .await;
    assert_eq!(
        decided,
        ["Grant(g-budget)", "Ask(None, true)"],
        "20 USD left"
    );
    assert_eq!(policy.grants()[0].used_cents, 3_000);
    // The payment failed (insufficient funds): the grant gets its 30 USD back.
    policy.settle("a", true, None);
    assert_eq!(policy.grants()[0].used_cents, 3_000, "once it is let go");
    policy.flush(NOON).await;
    assert_eq!(policy.grants()[0].used_cents, 0);
    assert_eq!(policy.grants()[0].uses, 0);
}

#[test]
fn a_revoked_grant_lets_nothing_run_from_then_on() {
    let registry = registry();
    let tool = registry.get("get_location").unwrap();
    let policy = Policy::tool_defaults().with_book(
        vec![grant("g-loc", GrantScope::Tool, "get_location")],
        Spending::default(),
    );
    let decide = |now| {
        let mut d = policy.decider(&registry, "chat-1", &LOCAL_REQUESTER, ChatWallet::default());
        verdict_as_want(&d.decide("c", &tool.spec, &json!({}), now))
    };
    assert_eq!(decide(NOON), "Grant(g-loc)");
    let revoked = policy.revoke_grant("g-loc", NOON + 1).unwrap();
    assert_eq!(revoked.revoked_at_ms, Some(NOON + 1));
    assert_eq!(decide(NOON + 2), "Ask(None, true)");
    assert_eq!(
        policy.revoke_grant("g-loc", NOON + 3),
        Err(GrantError::AlreadyRevoked("g-loc".into()))
    );
    assert_eq!(
        policy.revoke_grant("nope", NOON),
        Err(GrantError::Unknown("nope".into()))
    );
}

#[test]
fn an_approval_is_checked_again_with_the_arguments_that_run() {
    let registry = registry();
    let tool = registry.get("process_payment").unwrap();
    let policy = policy(EXAMPLE);
    let mut decider = policy.decider(&registry, "chat-1", &LOCAL_REQUESTER, ChatWallet::default());
    assert_eq!(decider.forbids(&tool.spec, &pay(400.0, "Jack"), NOON), None);
    // An edit across the limit, or to a blocked recipient, is refused with the rule's reason.
    let (rule, reason) = decider
        .forbids(&tool.spec, &pay(600.0, "Jack"), NOON)
        .unwrap();
    assert_eq!(rule, "payment-limit");
    assert!(reason.contains("500 USD"), "{reason}");
    assert_eq!(
        decider
            .forbids(&tool.spec, &pay(4.0, "Mallory"), NOON)
            .map(|(r, _)| r),
        Some("blocked-recipients".into())
    );
}

#[test]
fn a_policy_reloaded_mid_turn_decides_what_comes_after_and_a_broken_one_changes_nothing() {
    let dir = std::env::temp_dir().join(format!("countersign-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policy.cedar");
    std::fs::write(&path, EXAMPLE).unwrap();
    let registry = registry();
    let facts = ToolFacts::all(&registry);
    let policy = Policy::from_file(&path, &facts, Vec::new(), NOON).unwrap();
    let tool = registry.get("process_payment").unwrap();
    let decide = |args: Value| {
        let mut d = policy.decider(&registry, "chat-1", &LOCAL_REQUESTER, ChatWallet::default());
        verdict_as_want(&d.decide("c", &tool.spec, &args, NOON))
    };
    assert_eq!(decide(pay(5.0, "Jack")), "Rule(small-payments)");
    let before = policy.status().version;

    // Mid-turn, payments to Jack become forbidden: a waiting approval of one is now refused.
    std::fs::write(
        &path,
        format!(
            "{EXAMPLE}\n@id(\"no-jack\") @reason(\"Jack left.\")\nforbid (principal, action == Action::\"process_payment\", resource) when {{ context.input.recipient == \"Jack\" }};\n"
        ),
    )
    .unwrap();
    policy.reload(&facts, NOON + 1).unwrap();
    assert_ne!(policy.status().version, before);
    assert_eq!(decide(pay(5.0, "Jack")), "Deny(no-jack)");
    let mut d = policy.decider(&registry, "chat-1", &LOCAL_REQUESTER, ChatWallet::default());
    assert_eq!(
        d.forbids(&tool.spec, &pay(300.0, "Jack"), NOON)
            .map(|(r, _)| r),
        Some("no-jack".into())
    );
    drop(d);

    // A broken file keeps the rules in force and says why.
    std::fs::write(&path, "@id(\"half\") permit (principal, action ==").unwrap();
    let error = policy.reload(&facts, NOON + 2).unwrap_err();
    assert!(error.to_string().contains("line 1"), "{error}");
    assert_eq!(decide(pay(5.0, "Jack")), "Deny(no-jack)");
    let status = policy.status();
    assert!(status.reload_error.is_some());
    assert!(status.rules.iter().any(|r| r.id == "no-jack"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_policy_names_the_rule_and_where_it_is() {
    let facts = ToolFacts::all(&registry());
    let load = |text: &str| match CedarRules::load(text, &facts, &["files".into(), "mail".into()]) {
        Ok((_, warnings)) => Ok(warnings.iter().map(ToString::to_string).collect::<Vec<_>>()),
        Err(problems) => Err(problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")),
    };
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "a rule without a name",
            "permit (principal, action == Action::\"get_weather\", resource);",
            &["line 1", "has no @id"],
        ),
        (
            "two rules with one name",
            "@id(\"a\") permit (principal, action == Action::\"get_weather\", resource);\n@id(\"a\") permit (principal, action == Action::\"change_bgm\", resource);",
            &["line 2", "two rules are named \"a\"", "line 1)"],
        ),
        (
            "@ask on a permit",
            "@id(\"p\") @ask permit (principal, action, resource);",
            &["rule \"p\"", "@ask belongs on a forbid"],
        ),
        (
            "a syntax error names the rule it is in",
            "@id(\"ok\") permit (principal, action, resource);\n\n@id(\"broken\")\npermit (principal, action == Action::\"get_weather\", resource) when { context.amount_cents <= };",
            &["line 4", "rule \"broken\""],
        ),
        (
            "a misspelt attribute, with the one meant",
            "@id(\"typo\") permit (principal, action == Action::\"process_payment\", resource)\n  when { context.amount_cent <= 1000 };",
            &["line 2", "rule \"typo\"", "amount_cents"],
        ),
        (
            "an attribute of another tool",
            "@id(\"wrong-tool\") permit (principal, action == Action::\"get_weather\", resource)\n  when { context.amount_cents <= 1000 };",
            &["rule \"wrong-tool\"", "amount_cents"],
        ),
        (
            "a type mismatch",
            "@id(\"types\") permit (principal, action == Action::\"process_payment\", resource)\n  when { context.amount_cents <= \"10\" };",
            &["rule \"types\""],
        ),
        (
            "a tool nobody offers",
            "@id(\"ghost\") permit (principal, action == Action::\"proces_payment\", resource);",
            &["rule \"ghost\"", "proces_payment"],
        ),
        (
            "a template",
            "@id(\"t\") permit (principal == ?principal, action, resource);",
            &["templates"],
        ),
        (
            "approvers on a permit",
            "@id(\"p\") @approvers(\"2\") permit (principal, action, resource);",
            &["rule \"p\"", "belong on an @ask forbid"],
        ),
        (
            "no approvers",
            "@id(\"z\") @ask @approvers(\"0\") forbid (principal, action, resource);",
            &["rule \"z\"", "from 1 to 20"],
        ),
        (
            "a role that is not a word",
            "@id(\"r\") @ask @role(\"ad;min\") forbid (principal, action, resource);",
            &["rule \"r\"", "@role"],
        ),
        (
            "the old principal",
            "@id(\"chat\") permit (principal == Chat::\"c1\", action, resource);",
            &["rule \"chat\""],
        ),
    ];
    for (name, text, needles) in cases {
        let error = match load(text) {
            Ok(warnings) => panic!("{name}: loaded (warnings {warnings:?})"),
            Err(error) => error,
        };
        for needle in *needles {
            assert!(error.contains(needle), "{name}: {needle:?} not in\n{error}");
        }
    }
    // A configured MCP server's tool it has not listed yet is a warning, not an error.
    let warnings = load(
        "@id(\"mail\") permit (principal, action == Action::\"mail__send\", resource);\n@id(\"w\") @color(\"red\") permit (principal, action == Action::\"get_weather\", resource);",
    )
    .unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("mail__send") && w.contains("not listed")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("@color")),
        "{warnings:?}"
    );
    // The example loads cleanly.
    assert_eq!(load(EXAMPLE), Ok(Vec::new()));
}

#[test]
fn grant_requests_are_checked_against_the_call() {
    let registry = registry();
    let pay_tool = registry.get("process_payment").unwrap();
    let location = registry.get("get_location").unwrap();
    let ask = |tool: &ToolSpec, args: Value, scope, seconds, max| {
        grants::check_request(
            tool,
            &args,
            &GrantRequest {
                scope,
                seconds,
                max_cents: max,
            },
        )
    };
    assert_eq!(
        ask(
            &pay_tool.spec,
            pay(40.0, "J"),
            GrantScope::Budget,
            3600,
            Some(5_000)
        ),
        Ok(())
    );
    assert_eq!(
        ask(&pay_tool.spec, pay(40.0, "J"), GrantScope::Call, 900, None),
        Ok(())
    );
    assert_eq!(
        ask(&location.spec, json!({}), GrantScope::Tool, 86_400, None),
        Ok(())
    );
    // Every duration the card offers, the shortest and the longest included.
    for (seconds, _) in crate::protocol::grant::GRANT_DURATIONS {
        assert_eq!(
            ask(&location.spec, json!({}), GrantScope::Tool, seconds, None),
            Ok(())
        );
    }
    for (tool, args, scope, seconds, max, why) in [
        (
            &pay_tool.spec,
            pay(40.0, "J"),
            GrantScope::Tool,
            3600,
            None,
            "budget",
        ),
        (
            &pay_tool.spec,
            pay(40.0, "J"),
            GrantScope::Budget,
            3600,
            None,
            "needs its amount",
        ),
        (
            &pay_tool.spec,
            pay(40.0, "J"),
            GrantScope::Budget,
            3600,
            Some(3_999),
            "does not cover",
        ),
        (
            &pay_tool.spec,
            pay(40.0, "J"),
            GrantScope::Budget,
            7 * 86_400 + 1,
            Some(5_000),
            "15 minutes to 7 days",
        ),
        (
            &pay_tool.spec,
            pay(40.0, "J"),
            GrantScope::Call,
            15 * 60 - 1,
            None,
            "15 minutes to 7 days",
        ),
        (
            &location.spec,
            json!({}),
            GrantScope::Budget,
            3600,
            Some(100),
            "does not pay",
        ),
        (
            &location.spec,
            json!({}),
            GrantScope::Tool,
            3600,
            Some(100),
            "no amount",
        ),
    ] {
        let error = ask(tool, args, scope, seconds, max).unwrap_err();
        assert!(error.contains(why), "{scope:?} {seconds} {max:?}: {error}");
    }
    let label = grants::label(
        &pay_tool.spec,
        &pay(40.0, "J"),
        &GrantRequest {
            scope: GrantScope::Budget,
            seconds: 3600,
            max_cents: Some(5_000),
        },
    );
    assert_eq!(label, "Payment up to 50.00 USD in all, in every chat");
}

#[test]
fn decimals_are_read_exactly_from_the_numbers_text() {
    for (text, want) in [
        ("50", Some("50.0")),
        ("12.5", Some("12.5")),
        ("2.5000", Some("2.5")),
        ("1e3", Some("1000.0")),
        ("0.0001", Some("0.0001")),
        ("0.00001", None),
        ("-3.25", Some("-3.25")),
        ("1e20", None),
    ] {
        assert_eq!(cedar::decimal_text(text).as_deref(), want, "{text}");
    }
}

#[test]
fn rules_ask_for_people_and_read_the_requester_and_their_roles() {
    let policy = policy(&format!(
        "{EXAMPLE}\n\
         @id(\"finance-runs\") permit (principal in Role::\"finance\", action == \
         Action::\"process_payment\", resource) when {{ context.amount_cents <= 2000 }};\n\
         @id(\"ana-steps-up\") @ask @step_up forbid (principal == Person::\"p-ana\", action == \
         Action::\"process_payment\", resource) when {{ context.chat == \"chat-1\" }};\n"
    ));
    let registry = registry();
    let tool = registry.get("process_payment").unwrap();
    let decide = |requester: &Requester, chat: &str, amount: i64| {
        let mut decider = policy.decider(&registry, chat, requester, ChatWallet::default());
        decider.decide(
            "c",
            &tool.spec,
            &json!({"amount": amount, "recipient": "Jack"}),
            NOON,
        )
    };
    let finance = Requester {
        id: "p-cy".into(),
        name: "Cy".into(),
        roles: ["finance".to_string()].into(),
    };
    // A role a rule names lets its people's 15 USD run; others' ask.
    assert_eq!(
        verdict_as_want(&decide(&finance, "chat-9", 15)),
        "Rule(finance-runs)"
    );
    assert_eq!(
        verdict_as_want(&decide(&Requester::local(), "chat-9", 15)),
        "Ask(None, true)"
    );
    // Over 100 USD: two approvers, whoever asks (a forbid outranks the finance permit).
    let Verdict::Ruled(Ruling::Asked {
        rule,
        needs: Some(needs),
        ..
    }) = decide(&finance, "chat-9", 150)
    else {
        panic!("it asks")
    };
    assert_eq!(rule.as_deref(), Some("two-approvers"));
    assert_eq!(needs.approvers, 2);
    assert_eq!(needs.role.as_deref(), Some("approver"));
    assert!(needs.not_requester && needs.step_up);
    // Two rules that ask: all of both at once.
    let ana = Requester {
        id: "p-ana".into(),
        name: "Ana".into(),
        roles: Default::default(),
    };
    let Verdict::Ruled(Ruling::Asked {
        needs: Some(own), ..
    }) = decide(&ana, "chat-1", 50)
    else {
        panic!("it asks")
    };
    assert_eq!(own.approvers, 1);
    assert!(own.step_up && own.role.is_none());
    let Verdict::Ruled(Ruling::Asked {
        needs: Some(both), ..
    }) = decide(&ana, "chat-1", 150)
    else {
        panic!("it asks")
    };
    assert_eq!(both.approvers, 2);
    assert_eq!(both.role.as_deref(), Some("approver"));
    // Elsewhere Ana's own rule does not match.
    assert_eq!(
        verdict_as_want(&decide(&ana, "chat-2", 50)),
        "Ask(None, true)"
    );
}
