//! Grants made from an approval: used by later calls until spent or revoked, kept across
//! kill -9, and refused for a call they do not allow.

use super::*;

#[tokio::test]
async fn a_grant_runs_later_calls_until_it_is_spent_or_revoked_and_survives_kill_9() {
    let db = temp("grants");
    let app = server(&db, None).await;
    let chat = "g1";

    // No policy file: a payment asks; the person approves and remembers "up to 100 USD".
    let (_, first, _) = post(&app, say(chat, "Send $50 to Jack"), Some("full")).await;
    let approval = waiting(&first);
    let grant = json!({"grant": {"scope": "budget", "seconds": 3600, "maxCents": 10_000}});
    let (status, paid, body) = post(&app, answer(chat, &approval, true, grant), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{body}");

    // 40 more fits: it runs by the grant, in another chat too.
    let (_, second, body) = post(&app, say("g2", "Send $40 to Jill"), Some("full")).await;
    let request = of_type(&second, "tool-approval-request")[0];
    assert_eq!(request["isAutomatic"], true, "{body}");
    assert_eq!(
        request["approvalDescriptor"]["countersign"]["decision"],
        "allowed_by_grant"
    );
    let grant_id = request["approvalDescriptor"]["countersign"]["grant"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(of_type(&second, "tool-output-available").len(), 1, "{body}");
    // 20 more would pass 100: it asks.
    let (_, third, body) = post(&app, say("g3", "Send $20 to Jim"), Some("full")).await;
    assert_ne!(
        of_type(&third, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );

    // The list shows what was used: GET /api/policy for scripts, and the page's panel (a server
    // function answering HTML).
    let grants = grants_of(&app.base).await;
    assert_eq!(grants[0]["id"], grant_id.as_str());
    assert_eq!(grants[0]["usedCents"], 9_000);
    assert_eq!(grants[0]["uses"], 1);
    assert_eq!(
        grants[0]["label"],
        "Payment up to 100.00 USD in all, in every chat"
    );

    // kill -9: the grant and its use come back.
    app.kill9();
    let app = server(&db, None).await;
    let grants = grants_of(&app.base).await;
    assert_eq!(grants[0]["usedCents"], 9_000, "{grants:?}");
    let (_, fourth, body) = post(&app, say("g4", "Send $10 to Jo"), Some("full")).await;
    assert_eq!(
        of_type(&fourth, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );

    // Revoked: nothing runs by it any more, and a second revoke says so.
    let (status, revoked) = fn_call(&app.base, "revoke_grant", json!({"id": grant_id})).await;
    assert_eq!(status, 200, "{revoked}");
    assert!(
        grants_of(&app.base).await[0]["revokedAtMs"]
            .as_i64()
            .is_some()
    );
    let (status, again) = fn_call(&app.base, "revoke_grant", json!({"id": grant_id})).await;
    assert!(status >= 400, "{again}");
    assert!(again.to_string().contains("already revoked"), "{again}");
    let (status, unknown) = fn_call(&app.base, "revoke_grant", json!({"id": "nope"})).await;
    assert!(
        status >= 400 && unknown.to_string().contains("not known"),
        "{unknown}"
    );
    let (_, fifth, body) = post(&app, say("g5", "Send $1 to Jo"), Some("full")).await;
    assert_ne!(
        of_type(&fifth, "tool-approval-request")[0]["isAutomatic"],
        true,
        "{body}"
    );

    let audit = app.audit(chat).await;
    assert!(
        audit
            .iter()
            .any(|e| e["kind"] == "granted" && e["grant"] == grant_id.as_str())
    );
    assert!(
        audit
            .iter()
            .any(|e| e["kind"] == "revoked" && e["grant"] == grant_id.as_str())
    );
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn a_grant_the_call_does_not_allow_is_refused_and_changes_nothing() {
    let db = temp("grant-refused");
    let app = server(&db, Some(example_policy())).await;
    let (_, first, _) = post(&app, say("r1", "Send $50 to Jack"), Some("full")).await;
    let approval = waiting(&first);
    for (grant, why) in [
        (
            json!({"scope": "budget", "seconds": 3600, "maxCents": 1_000}),
            "does not cover",
        ),
        (json!({"scope": "tool", "seconds": 3600}), "budget"),
        // How long a grant lasts: what the card offers and the README says, 15 minutes to
        // 7 days (the server once took a minute to 30 days).
        (json!({"scope": "call", "seconds": 99_999_999}), "7 days"),
        (json!({"scope": "call", "seconds": 8 * 86_400}), "7 days"),
        (json!({"scope": "call", "seconds": 60}), "15 minutes"),
        (json!({"scope": "everything", "seconds": 60}), "scope"),
    ] {
        let (status, _, body) = post(
            &app,
            answer("r1", &approval, true, json!({"grant": grant})),
            Some("full"),
        )
        .await;
        assert!(status == 422 || status == 400, "{status} {body}");
        assert!(body.contains(why), "{why}: {body}");
    }
    // Still waiting: a plain approval goes through.
    let (status, paid, body) =
        post(&app, answer("r1", &approval, true, json!({})), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1);
    let _ = std::fs::remove_file(&db);
}
