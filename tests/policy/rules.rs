//! The rules: what runs, asks and is refused, in both dialects of the wire; edits and approvals
//! checked again against the rules in force; a payment in yen; `countersign policy test`.

use super::*;

#[tokio::test]
async fn rules_run_ask_and_refuse_in_both_dialects() {
    let db = temp("rules");
    let app = server(&db, Some(example_policy())).await;

    // A small payment runs by rule. ai@6.0.0's keys only: a call that ran, no approval at all.
    let (status, strict, body) = post(&app, say("c1", "Send $5 to Jack"), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        of_type(&strict, "tool-approval-request").is_empty(),
        "{body}"
    );
    assert!(
        of_type(&strict, "tool-approval-response").is_empty(),
        "{body}"
    );
    assert_eq!(
        of_type(&strict, "tool-output-available")[0]["output"]["wallet_balance"],
        995
    );

    // The same in the full (v7) dialect: an automatic approval, its response, then the output.
    let (_, full, body) = post(&app, say("c2", "Send $5 to Jill"), Some("full")).await;
    let request = of_type(&full, "tool-approval-request")[0];
    assert_eq!(request["isAutomatic"], true, "{body}");
    assert_eq!(
        request["approvalDescriptor"]["countersign"],
        json!({"decision": "allowed_by_rule", "rule": "small-payments"})
    );
    let response = of_type(&full, "tool-approval-response")[0];
    assert_eq!(response["approvalId"], request["approvalId"]);
    assert_eq!(response["approved"], true);
    assert_eq!(
        response["reason"],
        "Ran without asking: rule small-payments"
    );
    let order: Vec<&str> = full.iter().filter_map(|c| c["type"].as_str()).collect();
    let at = |kind: &str| order.iter().position(|t| *t == kind).unwrap();
    assert!(at("tool-approval-request") < at("tool-approval-response"));
    assert!(at("tool-approval-response") < at("tool-output-available"));

    // Over the limit: refused by a rule, the model told why.
    let (_, refused, body) = post(&app, say("c3", "Send $600 to Jack"), Some("full")).await;
    let request = of_type(&refused, "tool-approval-request")[0];
    assert_eq!(
        request["approvalDescriptor"]["countersign"]["decision"],
        "denied_by_rule"
    );
    assert_eq!(
        of_type(&refused, "tool-approval-response")[0]["approved"],
        false
    );
    assert_eq!(of_type(&refused, "tool-output-denied").len(), 1, "{body}");
    assert!(
        text_of(&refused).contains("policy does not allow"),
        "{body}"
    );
    let (_, refused_strict, _) = post(&app, say("c3b", "Send $600 to Jack"), None).await;
    assert!(of_type(&refused_strict, "tool-approval-request").is_empty());
    assert_eq!(of_type(&refused_strict, "tool-output-denied").len(), 1);
    assert_eq!(balance(&app.base, "c3").await, 1000.0);

    // 50 USD asks, and may be remembered.
    let (_, asked, body) = post(&app, say("c4", "Send $50 to Jack"), Some("full")).await;
    let request = of_type(&asked, "tool-approval-request")[0];
    assert_ne!(request["isAutomatic"], true, "{body}");
    assert_eq!(
        request["approvalDescriptor"]["countersign"],
        json!({"decision": "asked", "grantable": true})
    );
    assert_eq!(asked.last().unwrap()["type"], "finish");

    // The audit log names the rules and the policy's version.
    let audit = app.audit("c2").await;
    let allowed = audit
        .iter()
        .find(|e| e["kind"] == "allowed")
        .expect("allowed");
    assert_eq!(allowed["rule"], "small-payments");
    assert!(
        allowed["policy_version"]
            .as_str()
            .is_some_and(|v| v.len() == 12)
    );
    let audit = app.audit("c3").await;
    let refused = audit
        .iter()
        .find(|e| e["kind"] == "refused")
        .expect("refused");
    assert_eq!(refused["rule"], "payment-limit");
    assert!(refused["reason"].as_str().unwrap().contains("500 USD"));

    // /api/policy shows the rules in force.
    let status: Value = reqwest::get(format!("{}/api/policy", app.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rules: Vec<&str> = status["policy"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(
        rules,
        [
            "weather",
            "music",
            "small-payments",
            "blocked-recipients",
            "two-approvers",
            "payment-limit"
        ]
    );
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn edits_and_approvals_are_checked_again_against_the_rules_in_force() {
    let db = temp("reload");
    let policy = temp("reload.cedar");
    std::fs::write(&policy, std::fs::read_to_string(example_policy()).unwrap()).unwrap();
    let app = server(&db, Some(policy.display().to_string())).await;

    // An edit across the limit is refused with the rule's reason; the approval still waits.
    let (_, first, _) = post(&app, say("e1", "Send $50 to Jack"), Some("full")).await;
    let approval = waiting(&first);
    let edit = json!({"editedInput": {"amount": 600, "recipient": "Jack"}});
    let (status, _, body) = post(&app, answer("e1", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.contains("edit_forbidden") && body.contains("payment-limit"),
        "{body}"
    );
    let edit = json!({"editedInput": {"amount": 40, "recipient": "Jack"}});
    let (status, paid, body) = post(&app, answer("e1", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        of_type(&paid, "tool-output-available")[0]["output"]["amount"],
        40
    );

    // A call waits; the policy changes under it to forbid that payee: approving it now refuses it.
    let (_, second, _) = post(&app, say("e2", "Send $60 to Jill"), Some("full")).await;
    let approval = waiting(&second);
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(
        &policy,
        format!("{text}\n@id(\"no-jill\")\n@reason(\"Jill left the company.\")\nforbid (principal, action == Action::\"process_payment\", resource) when {{ context.input.recipient == \"Jill\" }};\n"),
    )
    .unwrap();
    policy_until(&app.base, |s| {
        s["policy"]["rules"].to_string().contains("no-jill")
    })
    .await;
    let (status, refused, body) =
        post(&app, answer("e2", &approval, true, json!({})), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&refused, "tool-output-denied").len(), 1, "{body}");
    assert!(
        text_of(&refused).contains("Jill left the company"),
        "{body}"
    );
    assert_eq!(balance(&app.base, "e2").await, 1000.0);
    let audit = app.audit("e2").await;
    assert!(
        audit
            .iter()
            .any(|e| e["kind"] == "refused" && e["rule"] == "no-jill"),
        "{audit:?}"
    );

    // A broken file keeps the rules in force and says why.
    std::fs::write(&policy, "@id(\"half\") permit (principal, action ==").unwrap();
    let status = policy_until(&app.base, |s| s["policy"]["reload_error"].is_string()).await;
    assert!(
        status["policy"]["reload_error"]
            .as_str()
            .unwrap()
            .contains("line 1")
    );
    assert!(status["policy"]["rules"].to_string().contains("no-jill"));
    let (_, small, _) = post(&app, say("e3", "Send $5 to Jack"), Some("full")).await;
    assert_eq!(
        of_type(&small, "tool-approval-request")[0]["isAutomatic"],
        true
    );
    let _ = std::fs::remove_file(&db);
    let _ = std::fs::remove_file(&policy);
}

#[tokio::test]
async fn a_payment_in_yen_is_converted_and_shows_both_amounts() {
    let db = temp("yen");
    let app = server(&db, Some(example_policy())).await;
    let (_, first, body) = post(&app, say("y1", "Send 3000 yen to Kenji"), Some("full")).await;
    let approval = waiting(&first);
    assert_eq!(approval.3["currency"], "JPY", "{body}");
    let (_, paid, body) = post(&app, answer("y1", &approval, true, json!({})), Some("full")).await;
    let output = &of_type(&paid, "tool-output-available")[0]["output"];
    assert_eq!(output["amount"], 3000, "{body}");
    assert_eq!(output["currency"], "JPY");
    assert_eq!(output["charged"], 20.1);
    assert_eq!(output["wallet_balance"], 979.9);
    // 1000 yen is 6.70 USD: under the rule's 10 USD, it runs.
    let (_, small, body) = post(&app, say("y2", "Send 1000 yen to Kenji"), Some("full")).await;
    assert_eq!(
        of_type(&small, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );
    let _ = std::fs::remove_file(&db);
}

#[test]
fn the_policy_test_command_runs_the_examples_cases() {
    let root = env!("CARGO_MANIFEST_DIR");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_countersign"))
            .current_dir(root)
            .args(args)
            .output()
            .expect("the binary runs")
    };
    let passed = run(&[
        "policy",
        "test",
        "examples/policy.cedar",
        "examples/policy-cases.toml",
    ]);
    let out = String::from_utf8_lossy(&passed.stdout);
    assert_eq!(passed.status.code(), Some(0), "{out}");
    assert!(out.contains("15 of 15 cases passed"), "{out}");
    assert!(
        out.contains(
            "ok    150 USD needs two approvers: ask (rule two-approvers): needs 2 different \
             people with the role approver, not the person who asked, each confirming with their \
             passkey"
        ),
        "{out}"
    );
    assert!(
        out.contains("ok    a 5 USD payment runs without asking: run (rule small-payments)"),
        "{out}"
    );

    let checked = run(&["policy", "check", "examples/policy.cedar"]);
    let out = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(0), "{out}");
    assert!(out.contains("6 rules"), "{out}");
    assert!(
        out.contains("ask   two-approvers (needs 2 different people with the role approver"),
        "{out}"
    );

    // A case that fails says what it expected and got; a broken policy names its line.
    let dir = temp("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let cases = dir.join("cases.toml");
    std::fs::write(
        &cases,
        "[[case]]\nname = \"wrong\"\ntool = \"process_payment\"\nargs = { amount = 5, recipient = \"Jack\" }\nexpect = \"ask\"\n",
    )
    .unwrap();
    let failed = run(&[
        "policy",
        "test",
        "examples/policy.cedar",
        cases.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{out}");
    assert!(
        out.contains("FAIL  wrong: expected ask, got run (rule small-payments)"),
        "{out}"
    );
    let broken = dir.join("broken.cedar");
    std::fs::write(
        &broken,
        "@id(\"a\") permit (principal, action, resource);\n@id(\"b\") forbid (",
    )
    .unwrap();
    let refused = run(&["policy", "check", broken.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&refused.stdout);
    assert_eq!(refused.status.code(), Some(2), "{out}");
    assert!(
        out.contains("line 2") && out.contains("rule \"b\""),
        "{out}"
    );
    let usage = run(&["policy"]);
    assert_eq!(usage.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
