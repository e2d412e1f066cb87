//! What nobody may read or answer: another person's chats, approvals and audit, alike on every
//! route and socket; a removed person's open pages are told once and lock nobody out.

use super::*;

#[tokio::test]
async fn no_one_reads_or_answers_what_they_may_not() {
    let db = temp("walls");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [ana, ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-2";
    let (_, chunks) = post_chat(&app, &dan, say(chat, "Send $50 to Jack"), false).await;
    let request = of_type(&chunks, "tool-approval-request")[0];
    let approval = request["approvalId"].as_str().unwrap().to_owned();
    // A plain approval is Dan's alone: not in Ben's inbox, not his to decide.
    let inbox = call(&app, Some(&ben), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Nothing waits for you"),
        "{}",
        inbox.text
    );
    let refused = decide(&app, &ben, &approval, true, None).await;
    assert_eq!(refused.status, 404, "{}", refused.text);
    // Ben cannot read, continue, stop, resume or answer questions in Dan's chat.
    // Someone else's chat reads exactly as one that does not exist: the same 404 and body, no
    // version that would tell which ids are in use.
    let (status, snapshot) = get(&app, Some(&ben), &format!("/api/chats/{chat}")).await;
    let (unknown_status, unknown) = get(&app, Some(&ben), "/api/chats/no-such-chat").await;
    assert_eq!((status, unknown_status), (404, 404), "{snapshot} {unknown}");
    assert_eq!(snapshot["error"]["code"], "chat_not_found", "{snapshot}");
    assert_eq!(snapshot, unknown);
    assert!(snapshot.get("version").is_none() && snapshot.get("messages").is_none());
    let (status, own) = get(&app, Some(&dan), &format!("/api/chats/{chat}")).await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["messages"].as_array().map(Vec::len), Some(2), "{own}");
    let (status, _) = post_chat(&app, &ben, say(chat, "Send $400 to Ben"), false).await;
    assert_eq!(status, 404);
    let stop = reqwest::Client::new()
        .post(format!("{}/api/chat/{chat}/stop", app.base))
        .header("cookie", ben.cookie.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status(), 404);
    let resume = reqwest::Client::new()
        .get(format!("{}/api/chat/{chat}/stream", app.base))
        .header("cookie", ben.cookie.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resume.status(), 404);
    let news = call(&app, Some(&ben), "chat_news", json!({"chat_id": chat})).await;
    assert_eq!(news.status, 404, "{}", news.text);
    // Dan's grants are his: the policy endpoint shows Ben none of them.
    let (_, policy) = get(&app, Some(&ben), "/api/policy").await;
    assert_eq!(policy["grants"], json!([]));
    // Dan decides his own, from the inbox too.
    let done = call(
        &app,
        Some(&dan),
        "decide_approval",
        json!({"approval_id": approval, "approve": false, "reason": "not today"}),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.text);
    // The admin sees the whole audit log; Dan's denial names him and the passkey he signed in
    // with (no confirmation was asked: the session's passkey is the one recorded).
    let audit = audit_as(&app, &ana, chat).await;
    let denied = audit
        .iter()
        .find(|e| e["kind"] == "denied")
        .unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!(denied["actor"]["name"], "Dan");
    assert_eq!(denied["actor"]["passkey"], dan.credential.as_str());
    // Without a cookie, nothing.
    assert_eq!(call(&app, None, "inbox_view", json!({})).await.status, 401);
}

/// Someone else's chat is refused alike on every socket route, as on the HTTP routes above: the
/// same `chat_not_found`, whatever the frame that names it — on `/api/live` a message, a resume
/// and voice's start; on ai@7's socket a send and a resume.
#[tokio::test]
async fn another_persons_chat_is_refused_alike_on_every_socket() {
    let db = temp("sockets");
    let (app, setup) = passkeys_server(&db, &[]).await;
    let [_ana, ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-3";
    let (status, _) = post_chat(&app, &dan, say(chat, "Send $50 to Jack"), false).await;
    assert_eq!(status, 200);
    let cookie = ben.cookie.as_deref().unwrap();
    let user = json!([{"id": "u-ben", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]);
    for frame in [
        json!({"type": "message", "id": chat, "messages": user}),
        json!({"type": "resume", "id": chat, "received": 0}),
        json!({"type": "audio_control", "action": "start", "id": chat}),
    ] {
        let mut live = open_socket(&app, cookie, "/api/live").await.unwrap();
        live.send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
        let said = next(&mut live).await;
        let Frame::Chunk(error) = &said else {
            panic!("{frame}: {said:?}")
        };
        assert_eq!(
            error["errorText"], "there is no chat with this id that is yours (chat_not_found)",
            "{frame}"
        );
    }
    let mut ai = open_socket(&app, cookie, "/api/chat").await.unwrap();
    for frame in [
        json!({"type": "send", "requestId": "r1", "id": chat, "trigger": "submit-message",
               "messages": user, "headers": {}, "body": {}}),
        json!({"type": "resume", "requestId": "r2", "id": chat, "headers": {}, "body": {}}),
    ] {
        ai.send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
        let said = next(&mut ai).await;
        let Frame::Control(answer) = &said else {
            panic!("{frame}: {said:?}")
        };
        assert_eq!(answer["type"], "error", "{answer}");
        assert_eq!(answer["requestId"], frame["requestId"], "{answer}");
        let error: Value = serde_json::from_str(answer["errorText"].as_str().unwrap()).unwrap();
        assert_eq!(error["error"]["code"], "chat_not_found", "{answer}");
    }
}

#[tokio::test]
async fn a_removed_persons_open_pages_are_told_once_and_lock_nobody_out() {
    let db = temp("removed-pages");
    // Three failed authentications a minute from an address, then it waits: the old rule made a
    // removed person's polling such failures, and after three of them everyone there got 429.
    let (app, setup) =
        passkeys_server(&db, &[("COUNTERSIGN_AUTH_FAILURE_RATE", "3".to_string())]).await;
    let [ana, mut ben, _eve, _cy, dan] = team(&app, &setup).await;
    let chat = "chat-dan-removed";
    let (status, _) = post_chat(&app, &dan, say(chat, "What time is it?"), false).await;
    assert_eq!(status, 200);
    let removed = call(&app, Some(&ana), "remove_person", json!({"person": dan.id})).await;
    assert_eq!(removed.status, 200, "{}", removed.text);

    // Dan's open pages keep asking, as they did: the inbox's long poll, the chat page's wait for
    // news, the page's data. Each is told he was removed — a stable code, never a 429 — and
    // his colleagues at the same address go on as before.
    for round in 0..10 {
        for (name, args) in [
            ("inbox_view", json!({})),
            ("chat_news", json!({"chat_id": chat})),
        ] {
            let answer = call(&app, Some(&dan), name, args).await;
            assert_eq!(
                answer.status, 401,
                "{name} (round {round}): {}",
                answer.text
            );
            assert_eq!(
                answer.body["error"]["code"], "signed_out",
                "{name}: {}",
                answer.text
            );
            assert!(
                answer.body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("You were removed")),
                "{}",
                answer.text
            );
        }
        let (status, page) = get(&app, Some(&dan), "/api/app").await;
        assert_eq!(status, 401, "{page}");
        assert_eq!(page["error"]["code"], "signed_out");
        let (status, _) = get(&app, Some(&ben), "/api/app").await;
        assert_eq!(status, 200, "Ben, at the same address, in round {round}");
        let inbox = call(&app, Some(&ben), "inbox_view", json!({})).await;
        assert_eq!(inbox.status, 200, "{}", inbox.text);
    }
    // A page of Dan's goes to the sign-in page, which says why (and comes back after).
    let (status, location, _) = get_from(&app, Some(&dan), "/approvals", [127, 0, 0, 1]).await;
    assert_eq!(status, 303);
    assert_eq!(location.as_deref(), Some("/signin?next=/approvals"));
    let (status, _, page) =
        get_from(&app, Some(&dan), "/signin?next=/approvals", [127, 0, 0, 1]).await;
    assert_eq!(status, 200);
    assert!(page.contains("You were removed"), "{page}");
    assert!(page.contains("data-reason=\"removed\""), "{page}");
    assert!(page.contains("data-next=\"/approvals\""), "{page}");
    // Someone else can still sign in there, and so can Ben.
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);

    // Ben signs out; his old cookie is told that, not counted either.
    let out = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/signout", app.base))
        .header("cookie", ben.cookie.clone().unwrap())
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    for _ in 0..5 {
        let answer = call(&app, Some(&ben), "inbox_view", json!({})).await;
        assert_eq!(answer.status, 401, "{}", answer.text);
        assert_eq!(answer.body["error"]["code"], "signed_out");
        assert!(
            answer.text.contains("You were signed out"),
            "{}",
            answer.text
        );
    }
    let (_, _, page) = get_from(&app, Some(&ben), "/signin", [127, 0, 0, 1]).await;
    assert!(page.contains("data-reason=\"ended\""), "{page}");
    // A cookie this server never signed is no failed attempt either (nothing in it can be
    // guessed): the address is not made to wait for it.
    let forged = Someone {
        cookie: Some("countersign_session=v3.x.p.k.99999999999999.AAAA".into()),
        ..Someone::new("Mallory")
    };
    for _ in 0..5 {
        let answer = call(&app, Some(&forged), "inbox_view", json!({})).await;
        assert_eq!(answer.status, 401, "{}", answer.text);
        assert_eq!(answer.body["error"]["code"], "signed_out");
    }
    assert_eq!(get(&app, Some(&ana), "/api/app").await.0, 200);
}
