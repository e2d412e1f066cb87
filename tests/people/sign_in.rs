//! Who gets in and how: the first person from the link printed at start-up, invites, passkeys,
//! the API key's first person, refused passkey answers, sign-in and sign-out on any instance of a
//! shared database, anonymous sign-in options, and where a sign-in may send the browser.

use super::*;

#[tokio::test]
async fn people_come_from_one_time_links_and_sign_in_with_passkeys() {
    let db = temp("links");
    let (app, setup) = passkeys_server(&db, &[]).await;
    assert!(
        setup.starts_with("http://localhost:"),
        "the set-up link is printed: {setup:?}"
    );
    // Nobody is signed in: pages send to the sign-in page, the API says 401.
    let (status, _) = get(&app, None, "/").await;
    assert_eq!(status, 303, "a page redirects to /signin");
    assert_eq!(get(&app, None, "/api/app").await.0, 401);
    let welcome = reqwest::get(format!("{}/welcome/{}", app.base, token_of(&setup)))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(welcome.contains("Set up Countersign"), "{welcome}");
    assert!(welcome.contains("/passkey.js"));
    let bad = reqwest::get(format!("{}/welcome/made-up", app.base))
        .await
        .unwrap();
    assert_eq!(bad.status(), 404);

    let [ana, mut ben, _eve, _cy, dan] = team(&app, &setup).await;
    // A link works once.
    let again = call(
        &app,
        None,
        "passkey_register_begin",
        json!({"token": token_of(&setup), "name": "Mallory"}),
    )
    .await;
    assert_eq!(again.status, 404, "{}", again.text);
    assert!(again.text.contains("not valid"), "{}", again.text);
    // Only an admin invites.
    let refused = call(&app, Some(&dan), "invite_person", json!({"roles": "admin"})).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    // Bad roles are named.
    let bad = call(
        &app,
        Some(&ana),
        "invite_person",
        json!({"roles": "ad;min"}),
    )
    .await;
    assert_eq!(bad.status, 422, "{}", bad.text);

    // The admin's page lists everyone; Ben's shows him only.
    let people = call(&app, Some(&ana), "people_view", json!({})).await;
    assert!(people.text.contains("Ben") && people.text.contains("Invite someone"));
    let own = call(&app, Some(&ben), "people_view", json!({})).await;
    assert!(own.text.contains("Your passkeys") && !own.text.contains("Invite someone"));
    // Ben signs in on a new browser with his passkey; the assertion cannot be used twice.
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
    assert_eq!(signed.body["answer"], "/approvals");
    let (_, me) = get(&app, Some(&ben), "/api/app").await;
    assert_eq!(me["me"]["name"], "Ben");
    let replay = call(
        &app,
        None,
        "passkey_signin_finish",
        json!({"credential": signed.body["credential"], "next": "/"}),
    )
    .await;
    assert_eq!(replay.status, 403, "a replayed assertion: {}", replay.text);
    assert!(replay.cookie.is_none());

    // An admin removes Dan: his session ends at once.
    assert_eq!(
        call(&app, Some(&ana), "remove_person", json!({"person": dan.id}))
            .await
            .status,
        200
    );
    assert_eq!(get(&app, Some(&dan), "/api/app").await.0, 401);
    // The last admin cannot lose the role.
    let last = call(
        &app,
        Some(&ana),
        "set_person_roles",
        json!({"person": ana.id, "roles": "approver"}),
    )
    .await;
    assert_eq!(last.status, 409, "{}", last.text);
    // After a restart, people, passkeys and sessions are still there; no new set-up link.
    app.kill9();
    let (app, setup_again) = passkeys_server(&db, &[]).await;
    assert_eq!(setup_again, "", "an admin exists: no set-up link");
    let (_, me) = get(&app, Some(&ana), "/api/app").await;
    assert_eq!(me["me"]["roles"], json!(["admin", "approver"]));
}

#[tokio::test]
async fn the_api_key_sets_up_the_first_person_and_counts_for_no_quorum() {
    let db = temp("key");
    let key = "a-key-of-sixteen-or-more-chars";
    let (app, _setup) = passkeys_server(&db, &[("COUNTERSIGN_API_KEY", key.to_string())]).await;
    let invite = reqwest::Client::new()
        .post(format!("{}/api/fn/invite_person", app.base))
        .bearer_auth(key)
        .json(&json!({"name": "Ana", "roles": "admin approver"}))
        .send()
        .await
        .unwrap();
    assert_eq!(invite.status(), 200);
    let link: String = invite.json().await.unwrap();
    let mut ana = Someone::new("Ana");
    register(&app, &mut ana, &token_of(&link)).await;
    let (_, me) = get(&app, Some(&ana), "/api/app").await;
    assert_eq!(me["me"]["roles"], json!(["admin", "approver"]));
    // A script with the key starts a chat: its large payment waits for two approvers, and the
    // key is not one of them.
    let response = reqwest::Client::new()
        .post(format!("{}/api/chat", app.base))
        .bearer_auth(key)
        .json(&say("chat-script", "Send $200 to Jack"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let approval = response
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|c| c["type"] == "tool-approval-request")
        .map(|c| c["approvalId"].as_str().unwrap().to_owned())
        .expect("it asks");
    let by_key = reqwest::Client::new()
        .post(format!("{}/api/fn/decide_approval", app.base))
        .bearer_auth(key)
        .json(&json!({"approval_id": approval, "approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(by_key.status(), 403, "{}", by_key.text().await.unwrap());
    // Ana sees it in her inbox, asked by the local person (the API key).
    let inbox = call(&app, Some(&ana), "inbox_view", json!({})).await;
    assert!(
        inbox.text.contains("Asked by Local person"),
        "{}",
        inbox.text
    );
}

#[tokio::test]
async fn refused_passkey_answers_make_no_one_at_the_address_wait() {
    let db = temp("throttle");
    let (app, setup) =
        passkeys_server(&db, &[("COUNTERSIGN_AUTH_FAILURE_RATE", "3".to_string())]).await;
    let [_ana, mut ben, ..] = team(&app, &setup).await;
    // Answers to no challenge of this server, from Ben's address: each refused with its reason,
    // none counted (an assertion cannot be guessed; counting refusals let one client at a shared
    // address keep everyone there from signing in).
    let forged = json!({"id": "AA", "rawId": "AA", "type": "public-key", "extensions": {},
        "response": {"clientDataJSON": URL_SAFE_NO_PAD.encode(br#"{"challenge":"nope"}"#),
                     "authenticatorData": "AA", "signature": "AA", "userHandle": "AA"}});
    for _ in 0..10 {
        let answer = call(
            &app,
            None,
            "passkey_signin_finish",
            json!({"credential": forged}),
        )
        .await;
        assert_eq!(answer.status, 403, "{}", answer.text);
        assert!(
            answer.text.contains("no sign-in challenge"),
            "{}",
            answer.text
        );
    }
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
}

#[tokio::test]
async fn on_postgres_people_sign_in_and_out_on_any_instance() {
    let Some(url) = common::fresh_postgres("people").await else {
        return;
    };
    let db = std::path::PathBuf::from(&url);
    let (a, setup) = passkeys_server(&db, &[]).await;
    let (b, _) = passkeys_server(&db, &[]).await;
    // Ana's passkey: options from A, answer to B (no sticky sessions); her cookie works on both.
    let mut ana = Someone::new("Ana");
    assert_eq!(
        register_on(&a, &b, &mut ana, &token_of(&setup)).await,
        "/people"
    );
    for app in [&a, &b] {
        let (status, me) = get(app, Some(&ana), "/api/app").await;
        assert_eq!(status, 200, "{me}");
        assert_eq!(me["me"]["name"], "Ana");
    }
    // Invited on A, Ben registers on B; A knows him at once (its directory heard of it).
    let invite = call(
        &a,
        Some(&ana),
        "invite_person",
        json!({"name": "Ben", "roles": "approver"}),
    )
    .await;
    assert_eq!(invite.status, 200, "{}", invite.text);
    let mut ben = Someone::new("Ben");
    register(&b, &mut ben, &token_of(invite.body.as_str().unwrap())).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let people = call(&a, Some(&ana), "people_view", json!({})).await;
        if people.text.contains("Ben") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", people.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Ben signs in: options from B, answer to A.
    let signed = sign_in_on(&b, &a, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
    assert_eq!(get(&b, Some(&ben), "/api/app").await.0, 200);
    // He signs out on A: B refuses the cookie too.
    let out = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/signout", a.base))
        .header("cookie", ben.cookie.clone().unwrap())
        .header("origin", &a.base)
        .send()
        .await
        .unwrap();
    assert!(
        out.status().is_redirection() || out.status().is_success(),
        "{}",
        out.status()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while get(&b, Some(&ben), "/api/app").await.0 != 401 {
        assert!(std::time::Instant::now() < deadline, "B still lets Ben in");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Ana removes Ben on B: A's directory drops him.
    let removed = call(&b, Some(&ana), "remove_person", json!({"person": ben.id})).await;
    assert_eq!(removed.status, 200, "{}", removed.text);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let again = sign_in_on(&a, &a, &mut ben).await;
        if again.status == 403 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "A still signs Ben in: {}",
            again.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn anonymous_requests_for_sign_in_options_fill_nothing_and_stop_no_one() {
    let db = temp("flood");
    // No per-address rate limit: the flood is as large as anyone could make it.
    let (app, setup) = passkeys_server(&db, &[("COUNTERSIGN_IP_RATE", "0".to_string())]).await;
    let [_ana, mut ben, _eve, _cy, dan] = team(&app, &setup).await;
    let (status, chunks) =
        post_chat(&app, &dan, say("chat-dan-flood", "Send $150 to Jack"), true).await;
    assert_eq!(status, 200);
    let approval = of_type(&chunks, "tool-approval-request")[0]["approvalId"]
        .as_str()
        .unwrap()
        .to_owned();

    // 10,001 requests for sign-in options — more than the old shared cap of ceremonies in
    // progress — from eight addresses of one /24 at once.
    let started = std::time::Instant::now();
    let floods = (2..10u8).map(|host| {
        let url = format!("{}/api/fn/passkey_signin_begin", app.base);
        async move {
            let client = reqwest::Client::builder()
                .local_address(std::net::IpAddr::from([127, 0, 0, host]))
                .build()
                .unwrap();
            let mut refused = 0;
            for _ in 0..1_251 {
                let answer = client
                    .post(&url)
                    .json(&json!({}))
                    .send()
                    .await
                    .expect("sent");
                if answer.status() != 200 {
                    refused += 1;
                }
            }
            refused
        }
    });
    let refused: Vec<u32> = futures::future::join_all(floods).await;
    assert_eq!(refused, [0; 8], "every request was answered");
    eprintln!(
        "10,008 requests for sign-in options took {:?}",
        started.elapsed()
    );

    // Someone at another address signs in, and a signed-in approver confirms with a passkey.
    let signed = sign_in(&app, &mut ben).await;
    assert_eq!(signed.status, 200, "{}", signed.text);
    let assertion = confirm(&app, &mut ben, &approval, None).await;
    let decided = decide(&app, &ben, &approval, true, Some(assertion)).await;
    assert_eq!(decided.status, 200, "{}", decided.text);
    assert!(decided.text.contains("1 of 2"), "{}", decided.text);
}

/// The `next` values an attacker sends, and where a browser may then be sent: only a path of
/// this site.
const HOSTILE_NEXT: &[(&str, &str)] = &[
    ("/\t/evil.example", "/"),
    ("/\n/x", "/"),
    ("//evil.example", "/"),
    ("/\\evil.example", "/"),
    ("https:evil.example", "/"),
    ("https://evil.example/", "/"),
    ("/.//evil.example", "/"),
    ("/%2F%2Fevil.example", "/%2F%2Fevil.example"),
    ("/caf\u{e9}", "/caf%C3%A9"),
    ("/approvals?x=1", "/approvals?x=1"),
];

#[tokio::test]
async fn every_sign_in_route_sends_the_browser_only_to_a_path_of_this_site() {
    let db = temp("next");
    let key = "a-key-of-sixteen-or-more-chars";
    let (app, setup) = passkeys_server(&db, &[("COUNTERSIGN_API_KEY", key.to_string())]).await;
    let mut ana = Someone::new("Ana");
    register(&app, &mut ana, &token_of(&setup)).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let form_value = |text: &str| {
        percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    for (next, expected) in HOSTILE_NEXT {
        // The sign-in page writes the followed value into its forms.
        let (status, _, page) = get_from(
            &app,
            None,
            &format!("/signin?next={}", form_value(next)),
            [127, 0, 0, 1],
        )
        .await;
        assert_eq!(status, 200, "{next:?}");
        assert!(
            page.contains(&format!("data-next=\"{expected}\""))
                && page.contains(&format!("name=\"next\" value=\"{expected}\"")),
            "{next:?}: {page}"
        );
        // The key form redirects there, after making the session (never a 500).
        let signin = client
            .post(format!("{}/signin", app.base))
            .header("origin", &app.base)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("key={}&next={}", form_value(key), form_value(next)))
            .send()
            .await
            .unwrap();
        assert_eq!(signin.status(), 303, "{next:?}");
        assert_eq!(signin.headers()["location"], *expected, "{next:?}");
        assert!(signin.headers().contains_key("set-cookie"), "{next:?}");
        // The passkey sign-in answers it (public/passkey.js follows it as given).
        let begin = call(&app, None, "passkey_signin_begin", json!({})).await;
        let credential = assert_with(&app, &mut ana, begin.body);
        let finish = call(
            &app,
            None,
            "passkey_signin_finish",
            json!({"credential": credential, "next": next}),
        )
        .await;
        assert_eq!(finish.status, 200, "{next:?}: {}", finish.text);
        assert_eq!(finish.body, json!(expected), "{next:?}");
    }
}
