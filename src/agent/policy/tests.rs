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

mod cases;
use cases::cases;

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

pub(super) fn pay(amount: f64, recipient: &str) -> Value {
    json!({"amount": amount, "recipient": recipient})
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
