//! Asking again: "not now" leaves a call undecided, an edit is a new proposal that needs what its
//! arguments need, and a call is asked again at most once and never pays twice.

use super::*;

#[tokio::test]
async fn not_now_leaves_a_call_undecided_and_it_can_be_asked_again() {
    let db = temp("dismiss");
    let app = server(&db, None).await;
    let chat = "d1";
    let (_, first, _) = post(&app, say(chat, "Send $50 to Hanako"), Some("full")).await;
    let approval = waiting(&first);
    let (status, undecided, body) = post(
        &app,
        answer(chat, &approval, false, json!({"dismissed": true})),
        Some("full"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let error = of_type(&undecided, "tool-output-error")[0]["errorText"]
        .as_str()
        .unwrap();
    assert!(error.starts_with("Not decided"), "{error}");
    assert!(text_of(&undecided).contains("haven't decided"), "{body}");

    // Ask again: the same payment asks again, as a new call.
    let ask_again = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u-again", "role": "user", "parts": [{"type": "text", "text": "Ask me again: Pay 50.00 USD to Hanako"}],
         "metadata": {"countersign": {"askAgain": approval.1}}}
    ]});
    let (status, again, body) = post(&app, ask_again.clone(), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    let second = waiting(&again);
    assert_ne!(second.1, approval.1, "a new call");
    assert_eq!(second.3, approval.3, "the same arguments");
    let (_, paid, body) = post(&app, answer(chat, &second, true, json!({})), Some("full")).await;
    assert_eq!(
        of_type(&paid, "tool-output-available")[0]["output"]["wallet_balance"],
        950,
        "{body}"
    );

    // A call that ran cannot be asked again; nor one this chat never made.
    let again_paid = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u-again-2", "role": "user", "parts": [{"type": "text", "text": "Ask me again"}],
         "metadata": {"countersign": {"askAgain": second.1}}}
    ]});
    let (status, _, body) = post(&app, again_paid, Some("full")).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("cannot_ask_again") && body.contains("ran already"),
        "{body}"
    );
    let forged = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u-again-3", "role": "user", "parts": [{"type": "text", "text": "Ask me again"}],
         "metadata": {"countersign": {"askAgain": "call_forged"}}}
    ]});
    let (status, _, body) = post(&app, forged, Some("full")).await;
    assert_eq!(status, 409, "{body}");
    let audit = app.audit(chat).await;
    assert!(audit.iter().any(|e| e["kind"] == "dismissed"), "{audit:?}");
    let _ = std::fs::remove_file(&db);
}

/// `metadata.countersign.askAgain` of call `call`: the page's "Ask again".
fn ask_again(chat: &str, id: &str, call: &str) -> Value {
    json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": id, "role": "user", "parts": [{"type": "text", "text": "Ask me again"}],
         "metadata": {"countersign": {"askAgain": call}}}
    ]})
}

#[tokio::test]
async fn an_edit_is_a_new_proposal_that_needs_what_its_arguments_need() {
    let db = temp("proposal");
    let app = server(&db, Some(example_policy())).await;

    // 20 USD is the person's own to approve; edited to 150 USD it needs two approvers (not the
    // person who asked), so nothing runs and the card is told what it needs now.
    let (_, first, _) = post(&app, say("p1", "Send $20 to Vendor"), Some("full")).await;
    let approval = waiting(&first);
    assert_eq!(approval.3["amount"], 20);
    let edit = json!({"editedInput": {"amount": 150, "recipient": "Vendor"}});
    let (status, proposed, body) =
        post(&app, answer("p1", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        of_type(&proposed, "tool-output-available").is_empty(),
        "{body}"
    );
    let progress = of_type(&proposed, "data-countersign");
    let progress = progress.last().unwrap_or_else(|| panic!("{body}"));
    assert_eq!(progress["data"]["needs"]["approvers"], 2, "{body}");
    assert_eq!(progress["data"]["needs"]["notRequester"], true);
    assert_eq!(progress["data"]["args"]["amount"], 150);
    assert_eq!(progress["data"]["signatures"], json!([]));
    // Approving it again is not theirs to do any more.
    let (status, _, body) =
        post(&app, answer("p1", &approval, true, json!({})), Some("full")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("not_an_approver"), "{body}");
    assert_eq!(balance(&app.base, "p1").await, 1000.0);
    let audit = app.audit("p1").await;
    let proposal = audit
        .iter()
        .find(|e| e["kind"] == "proposed")
        .unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!(proposal["edited_args"]["amount"], 150, "{proposal}");
    assert!(!audit.iter().any(|e| e["kind"] == "executed"), "{audit:?}");

    // 40 KWD is about 130 USD: the same.
    let (_, second, _) = post(&app, say("p2", "Send $20 to Vendor"), Some("full")).await;
    let approval = waiting(&second);
    let edit = json!({"editedInput": {"amount": 40, "currency": "KWD", "recipient": "Vendor"}});
    let (status, proposed, body) =
        post(&app, answer("p2", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        of_type(&proposed, "tool-output-available").is_empty(),
        "{body}"
    );
    assert_eq!(balance(&app.base, "p2").await, 1000.0);

    // Names the rules block are blocked however they are written; invisible characters are
    // refused rather than dropped.
    let (_, third, _) = post(&app, say("p3", "Send $20 to Vendor"), Some("full")).await;
    let approval = waiting(&third);
    for written in [" Mallory", "Mallory ", "\u{a0}Mallory", "Mallory\t"] {
        let edit = json!({"editedInput": {"amount": 20, "recipient": written}});
        let (status, _, body) = post(&app, answer("p3", &approval, true, edit), Some("full")).await;
        assert_eq!(status, 422, "{written:?}: {body}");
        assert!(
            body.contains("edit_forbidden") && body.contains("blocked-recipients"),
            "{written:?}: {body}"
        );
    }
    let edit = json!({"editedInput": {"amount": 20, "recipient": "Mal\u{200b}lory"}});
    let (status, _, body) = post(&app, answer("p3", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.contains("invalid_edit") && body.contains("U+200B"),
        "{body}"
    );
    // The name the person approves is the name the ledger records.
    let edit = json!({"editedInput": {"amount": 20, "recipient": "  Vendor\u{a0} Co "}});
    let (status, paid, body) = post(&app, answer("p3", &approval, true, edit), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        of_type(&paid, "tool-output-available")[0]["output"]["recipient"],
        "Vendor Co",
        "{body}"
    );
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn a_call_is_asked_again_at_most_once_and_never_pays_twice() {
    let db = temp("again-once");
    let app = server(&db, None).await;
    let chat = "a1";
    let (_, first, _) = post(&app, say(chat, "Send $50 to Hanako"), Some("full")).await;
    let original = waiting(&first);
    let (status, _, body) = post(
        &app,
        answer(chat, &original, false, json!({"dismissed": true})),
        Some("full"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Asked again, approved and remembered as "this exact payment": it pays once.
    let (status, again, body) =
        post(&app, ask_again(chat, "u-a1", &original.1), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    let reissued = waiting(&again);
    let grant = json!({"grant": {"scope": "call", "seconds": 3600}});
    let (status, paid, body) = post(&app, answer(chat, &reissued, true, grant), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(of_type(&paid, "tool-output-available").len(), 1, "{body}");
    assert_eq!(balance(&app.base, chat).await, 950.0);
    // The original cannot be asked again: its re-proposal ran. Neither can the one that ran.
    for (id, call) in [
        ("u-a2", &original.1),
        ("u-a3", &original.1),
        ("u-a4", &reissued.1),
    ] {
        let (status, _, body) = post(&app, ask_again(chat, id, call), Some("full")).await;
        assert_eq!(status, 409, "{body}");
        assert!(body.contains("cannot_ask_again"), "{body}");
    }
    assert_eq!(balance(&app.base, chat).await, 950.0, "paid once");
    let audit = app.audit(chat).await;
    assert_eq!(
        audit.iter().filter(|e| e["kind"] == "executed").count(),
        1,
        "{audit:?}"
    );

    // A re-proposal that is itself set aside is the one to ask again, once.
    let (_, first, _) = post(&app, say("a2", "Send $5 to Jo"), Some("full")).await;
    let original = waiting(&first);
    let not_now = |approval: &(String, String, String, Value)| {
        answer("a2", approval, false, json!({"dismissed": true}))
    };
    assert_eq!(post(&app, not_now(&original), Some("full")).await.0, 200);
    let (_, again, _) = post(&app, ask_again("a2", "u-b1", &original.1), Some("full")).await;
    let second = waiting(&again);
    assert_eq!(post(&app, not_now(&second), Some("full")).await.0, 200);
    let (status, _, body) = post(&app, ask_again("a2", "u-b2", &original.1), Some("full")).await;
    assert_eq!(status, 409, "{body}");
    let (status, again, body) = post(&app, ask_again("a2", "u-b3", &second.1), Some("full")).await;
    assert_eq!(status, 200, "{body}");
    let third = waiting(&again);
    assert_ne!(third.1, second.1);
    let _ = std::fs::remove_file(&db);
}
