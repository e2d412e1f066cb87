//! The table of cases: one call each (a policy file or none, the chat's spending and payees,
//! grants, the time) and what the policy must decide for it, hostile calls included.

use super::*;

pub(super) struct Case {
    pub(super) name: &'static str,
    /// `None`: no policy file (each tool's own setting).
    pub(super) policy: Option<&'static str>,
    pub(super) chat: &'static str,
    pub(super) tool: &'static str,
    pub(super) args: Value,
    pub(super) spent_today: i64,
    pub(super) spent_in_chat: i64,
    pub(super) payees: &'static [&'static str],
    pub(super) grants: Vec<Grant>,
    pub(super) now: Millis,
    pub(super) want: Want,
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

pub(super) fn cases() -> Vec<Case> {
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
