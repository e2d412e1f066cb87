//! Countersignatures: a large payment needs two approvers who are not the requester, each with a
//! passkey assertion bound to the arguments, from the inbox; a denial reaches the requester with
//! who and why.

use super::*;

#[tokio::test]
async fn a_large_payment_needs_two_approvers_who_are_not_the_requester_each_with_a_passkey() {
    let db = temp("quorum");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [mut ana, mut ben, _eve, cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-1";
    let (status, chunks) = post_chat(&app, &dan, say(chat, "Send $150 to Jack"), true).await;
    assert_eq!(status, 200);
    let request = of_type(&chunks, "tool-approval-request")[0];
    let approval = request["approvalId"].as_str().unwrap().to_owned();
    assert_eq!(
        request["approvalDescriptor"]["countersign"]["needs"]["approvers"],
        2
    );
    let progress = of_type(&chunks, "data-countersign");
    assert_eq!(progress.len(), 1, "{chunks:?}");
    assert_eq!(progress[0]["id"], approval);
    assert_eq!(progress[0]["data"]["state"], "waiting");
    assert_eq!(progress[0]["data"]["signatures"], json!([]));

    // Dan asked: he may not approve it himself, in his chat or from the inbox.
    let tool_call = request["toolCallId"].as_str().unwrap().to_owned();
    let message = chunks[0]["messageId"].as_str().unwrap().to_owned();
    let own = json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": message, "role": "assistant", "parts": [{
            "type": "tool-process_payment", "toolCallId": tool_call,
            "state": "approval-responded", "input": {"amount": 150, "recipient": "Jack"},
            "approval": {"id": approval, "approved": true}
        }]}
    ]});
    let (status, _) = post_chat(&app, &dan, own, false).await;
    assert_eq!(status, 403, "the requester approving their own");
    let inbox = call(&app, Some(&dan), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("You cannot approve it"),
        "{}",
        inbox.text
    );
    // Cy (finance) does not see it; Ben (approver) does.
    let inbox = call(&app, Some(&cy), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Nothing waits for you"),
        "{}",
        inbox.text
    );
    let inbox = call(&app, Some(&ben), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Approve with passkey"),
        "{}",
        inbox.text
    );
    assert_eq!(inbox.body["count"], 1);
    // Cy may not decide it, not even deny it.
    let refused = decide(&app, &cy, &approval, false, None).await;
    assert_eq!(refused.status, 404, "{}", refused.text);

    // Ben without a passkey confirmation: refused; with one bound to other arguments: refused.
    let bare = decide(&app, &ben, &approval, true, None).await;
    assert_eq!(bare.status, 422, "{}", bare.text);
    assert!(bare.text.contains("passkey"), "{}", bare.text);
    let other = json!({"amount": 15, "recipient": "Jack"});
    let assertion = confirm(&app, &mut ben, &approval, Some(other)).await;
    let mismatch = decide(&app, &ben, &approval, true, Some(assertion)).await;
    assert_eq!(mismatch.status, 422, "{}", mismatch.text);
    assert!(
        mismatch.text.contains("other arguments"),
        "{}",
        mismatch.text
    );

    // Ben confirms with his passkey: 1 of 2.
    let assertion = confirm(&app, &mut ben, &approval, None).await;
    let first = decide(&app, &ben, &approval, true, Some(assertion.clone())).await;
    assert_eq!(first.status, 200, "{}", first.text);
    assert!(first.text.contains("1 of 2"), "{}", first.text);
    // His assertion cannot sign for Ana; and he cannot sign twice.
    let replayed = decide(&app, &ana, &approval, true, Some(assertion)).await;
    assert_eq!(replayed.status, 403, "{}", replayed.text);
    let again = confirm(&app, &mut ben, &approval, None).await;
    let twice = decide(&app, &ben, &approval, true, Some(again)).await;
    assert_eq!(twice.status, 409, "{}", twice.text);

    // Ana completes it: the payment runs, in Dan's chat.
    let assertion = confirm(&app, &mut ana, &approval, None).await;
    let done = decide(&app, &ana, &approval, true, Some(assertion)).await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert!(done.text.contains("runs now"), "{}", done.text);
    let snapshot = wait_for_output(&app, &dan, chat).await;
    let parts = snapshot["messages"][1]["parts"].as_array().unwrap().clone();
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-process_payment")
        .unwrap();
    assert_eq!(tool["state"], "output-available", "{parts:?}");
    let progress = parts
        .iter()
        .find(|p| p["type"] == "data-countersign")
        .unwrap();
    assert_eq!(progress["data"]["state"], "complete");
    let names: Vec<&str> = progress["data"]["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Ben", "Ana"]);

    // The audit log: who signed, with which passkey, and an assertion anyone can check.
    let audit = audit_as(&app, &ana, chat).await;
    let kinds: Vec<&str> = audit.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["requested", "countersigned", "approved", "executed"],
        "{audit:?}"
    );
    let countersigned = &audit[1];
    assert_eq!(countersigned["actor"]["name"], "Ben");
    assert_eq!(countersigned["actor"]["transport"], "inbox");
    assert!(countersigned["actor"]["passkey"].is_string());
    let receipt = &countersigned["step_up"];
    let client: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(receipt["clientDataJSON"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    let binding = countersign::agent::people::passkeys::Binding {
        person: ben.id.clone(),
        chat: chat.into(),
        approval_id: approval.clone(),
        args_digest: countersigned["args_digest"].as_str().unwrap().to_owned(),
    };
    let nonce = URL_SAFE_NO_PAD
        .decode(receipt["nonce"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        client["challenge"].as_str().unwrap(),
        URL_SAFE_NO_PAD.encode(countersign::agent::people::passkeys::step_up_challenge(
            &binding, &nonce
        )),
        "the signed challenge is made of the approval and the arguments"
    );
    assert_eq!(audit[2]["actor"]["name"], "Ana");
    // The audit page says who: the person, the passkey that confirmed it (a step-up), and only
    // then the transport and address.
    let page = page_as(&app, &ana, &format!("/audit?session={chat}")).await;
    let who = who_cells(&page);
    assert_eq!(who.len(), 4, "{page}");
    let short: String = ben.credential.chars().take(8).collect();
    assert!(
        who.iter().any(|w| w.starts_with("Ben")
            && w.contains(&format!("step-up with passkey {short}…"))
            && w.contains("inbox · 127.0.0.1:")),
        "{who:?}"
    );
    assert!(who.iter().any(|w| w.starts_with("Ana")), "{who:?}");
    assert!(who.iter().any(|w| w.starts_with("the server")), "{who:?}");

    // Dan may not read the others' view of the audit beyond his chat; Cy sees nothing of it.
    let seen_by_cy = audit_as(&app, &cy, chat).await;
    assert!(seen_by_cy.is_empty(), "{seen_by_cy:?}");
    let seen_by_ben = audit_as(&app, &ben, chat).await;
    assert_eq!(
        seen_by_ben.len(),
        1,
        "only his own signature: {seen_by_ben:?}"
    );
    let seen_by_dan = audit_as(&app, &dan, chat).await;
    assert_eq!(seen_by_dan.len(), 4);
}

/// Issue #33: an approver's "no" reaches the person who asked — their card and its part say who
/// denied it and why — and the model is told who said no, so it does not tell the requester
/// that they declined.
#[tokio::test]
async fn an_approvers_denial_reaches_the_requester_with_who_and_why() {
    let db = temp("denial");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [ana, ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-3";
    let (status, chunks) = post_chat(&app, &dan, say(chat, "Send $150 to Jack"), true).await;
    assert_eq!(status, 200);
    let approval = of_type(&chunks, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();
    let denied = call(
        &app,
        Some(&ben),
        "decide_approval",
        json!({"approval_id": approval, "approve": false, "reason": "not this vendor"}),
    )
    .await;
    assert_eq!(denied.status, 200, "{}", denied.text);
    let mut snapshot = Value::Null;
    for _ in 0..100 {
        snapshot = get(&app, Some(&dan), &format!("/api/chats/{chat}")).await.1;
        let answered = snapshot["messages"][1]["parts"]
            .as_array()
            .is_some_and(|parts| parts.iter().any(|p| p["type"] == "text"));
        if answered {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let parts = snapshot["messages"][1]["parts"].as_array().unwrap().clone();
    let tool = parts
        .iter()
        .find(|p| p["type"] == "tool-process_payment")
        .unwrap();
    assert_eq!(tool["state"], "output-denied", "{parts:?}");
    assert_eq!(tool["approval"]["approved"], false, "{tool}");
    assert_eq!(
        tool["approval"]["reason"], "Denied by Ben: not this vendor",
        "{tool}"
    );
    let progress = parts
        .iter()
        .find(|p| p["type"] == "data-countersign")
        .unwrap();
    assert_eq!(progress["data"]["state"], "denied");
    assert_eq!(progress["data"]["deniedBy"], "Ben");
    assert_eq!(progress["data"]["reason"], "not this vendor");
    let said: String = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert!(
        said.contains("Ben denied the payment") && said.contains("not this vendor"),
        "{said}"
    );
    assert!(!said.contains("You declined"), "{said}");
    // The audit page says it was Ben, signed in with his passkey, from the inbox.
    let page = page_as(&app, &ana, &format!("/audit?session={chat}")).await;
    let short: String = ben.credential.chars().take(8).collect();
    let who = who_cells(&page);
    assert!(
        who.iter().any(|w| w.starts_with(&format!(
            "Ben signed in with passkey {short}… inbox · 127.0.0.1:"
        ))),
        "{who:?}"
    );
}

/// The HTML of page `path` as `who` sees it.
async fn page_as(app: &Binary, who: &Someone, path: &str) -> String {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", app.base))
        .header("cookie", who.cookie.as_deref().unwrap_or_default())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.text().await.unwrap()
}

/// The text of each "Who" cell of an audit page, its markup and comments left out.
fn who_cells(page: &str) -> Vec<String> {
    page.split("data-testid=\"audit-who\"")
        .skip(1)
        .map(|cell| {
            let cell = &cell[..cell.find("</td>").unwrap_or(cell.len())];
            let mut text = String::new();
            let mut in_tag = false;
            for c in cell.chars().skip_while(|c| *c != '>').skip(1) {
                match c {
                    '<' => {
                        in_tag = true;
                        text.push(' ');
                    }
                    '>' => in_tag = false,
                    c if !in_tag => text.push(c),
                    _ => {}
                }
            }
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect()
}
