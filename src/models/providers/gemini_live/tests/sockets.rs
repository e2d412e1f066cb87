//! A socket's life across steps: closes and timeouts, seeding a fresh socket, diverged
//! histories, idle sockets resumed later, replaced sockets, refused handshakes, one socket per
//! session.

use super::*;

#[tokio::test]
async fn close_1008_fails_the_step_with_the_reason() {
    let mut server = FakeLive::start().await;
    let model = live(&server, "gemini-2.0-flash-live-001");
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    let reason = "models/gemini-2.0-flash-live-001 is not found for API version v1beta, or is not supported for bidiGenerateContent";
    conn.close(1008, reason).await;
    let error = until_error(&mut stream).await;
    assert_eq!(
        error,
        ModelError::Provider {
            status: 1008,
            message: reason.into()
        }
    );
    assert!(within("the end", stream.next()).await.is_none());
}

#[tokio::test]
async fn a_missing_setup_complete_times_out() {
    let mut server = FakeLive::start().await;
    let mut config = config(&server, NON_BLOCKING_MODEL);
    config.timeouts.setup = Duration::from_millis(300);
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let message = conn.recv().await;
    assert!(message.get("setup").is_some());
    let started = std::time::Instant::now();
    let error = until_error(&mut stream).await;
    assert!(
        matches!(&error, ModelError::Transport(m) if m.contains("setup")),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn silence_mid_step_times_out() {
    let mut server = FakeLive::start().await;
    let mut config = config(&server, NON_BLOCKING_MODEL);
    config.timeouts.silence = Duration::from_millis(300);
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("Hm").await;
    let error = until_error(&mut stream).await;
    assert!(
        matches!(&error, ModelError::Transport(m) if m.contains("sent nothing")),
        "{error:?}"
    );
}

/// A fresh socket for a conversation with history: `historyConfig`, the history as one
/// `clientContent` (calls and results as text), then the new message.
#[tokio::test]
async fn a_fresh_socket_seeds_the_history() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather in Tokyo?");
    let calls = chat.record(&[
        ModelEvent::TextDelta("Checking.".into()),
        ModelEvent::ReasoningDelta {
            text: "needs a tool".into(),
            provider_data: None,
        },
        ModelEvent::ToolCall(ToolCall {
            id: String::new(),
            name: "get_weather".into(),
            args: json!({"location": "Tokyo"}),
            provider_data: Some(json!({"google": {"id": "fc-old"}})),
        }),
    ]);
    chat.results(vec![(
        &calls[0],
        Outcome::Output {
            output: json!({"tempC": 21}),
        },
    )]);
    chat.record(&[ModelEvent::TextDelta("It is 21 degrees.".into())]);
    chat.user("Thanks!");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(
        setup["historyConfig"],
        json!({"initialHistoryInClientContent": true})
    );
    assert_eq!(
        conn.recv().await,
        json!({"clientContent": {"turns": [
            {"role": "user", "parts": [{"text": "Weather in Tokyo?"}]},
            {"role": "model", "parts": [
                {"text": "Checking."},
                {"text": "[Called the tool get_weather with arguments {\"location\":\"Tokyo\"}]"}
            ]},
            {"role": "user", "parts": [{"text": "[Result of the tool get_weather: {\"tempC\":21}]"}]},
            {"role": "model", "parts": [{"text": "It is 21 degrees."}]}
        ], "turnComplete": true}})
    );
    assert_eq!(conn.recv().await, user_turn("Thanks!"));
    conn.say("You're welcome.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "You're welcome.");
}

/// A chat that began with a client's copy of earlier messages (ADR 0020): the copy goes as the
/// seeded history, as plain text turns, and the person's message is the trigger.
#[tokio::test]
async fn client_context_seeds_a_fresh_socket_as_text() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.history = context_items([
        (ContextRole::User, "What time is it?".to_owned()),
        (ContextRole::Assistant, "It is 10:00.".to_owned()),
    ]);
    chat.user("And in Tokyo?");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(
        setup["historyConfig"],
        json!({"initialHistoryInClientContent": true})
    );
    assert_eq!(
        conn.recv().await,
        json!({"clientContent": {"turns": [
            {"role": "user", "parts": [{"text": format!("{CONTEXT_MARKER}\nWhat time is it?")}]},
            {"role": "model", "parts": [{"text": "It is 10:00."}]}
        ], "turnComplete": true}})
    );
    assert_eq!(conn.recv().await, user_turn("And in Tokyo?"));
    conn.say("19:00.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "19:00.");
}

/// History that is not what the socket saw (a restarted runner, an edited chat): a fresh,
/// seeded socket.
#[tokio::test]
async fn a_diverged_history_starts_a_fresh_session() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.say("First.").await;
    old.turn_complete().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-1", "resumable": true}}))
        .await;
    until_finish(&mut stream).await;

    let mut other = Chat::new();
    other.user("something else");
    other.record(&[ModelEvent::TextDelta("Other.".into())]);
    other.user("two");
    let mut stream = model.stream(other.request());
    old.expect_closed().await;
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(
        setup["sessionResumption"],
        json!({}),
        "the handle is not reused"
    );
    assert_eq!(
        setup["historyConfig"],
        json!({"initialHistoryInClientContent": true})
    );
    let seed = conn.recv().await;
    assert_eq!(
        seed["clientContent"]["turns"][0]["parts"][0]["text"],
        "something else"
    );
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// After the idle timeout the socket is closed; the next step resumes with the handle.
#[tokio::test]
async fn an_idle_socket_is_closed_and_resumed_later() {
    let mut server = FakeLive::start().await;
    let mut config = config(&server, NON_BLOCKING_MODEL);
    config.timeouts.idle_close = Duration::from_millis(200);
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.say("First.").await;
    old.turn_complete().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-2", "resumable": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    old.expect_closed().await;

    chat.user("two");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-2"}));
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// Results of calls made on an earlier socket cannot be a `toolResponse` (the ids are that
/// socket's): they go as text.
#[tokio::test]
async fn results_for_calls_of_an_earlier_socket_go_as_text() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather?");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-3", "resumable": true}}))
        .await;
    old.send(json!({"toolCall": {"functionCalls": [
        {"id": "fc-1", "name": "get_weather", "args": {"location": "Oslo"}}
    ]}}))
    .await;
    let events = until_finish(&mut stream).await;
    let calls = chat.record(&events);
    // The approval takes longer than the connection lives.
    old.send(json!({"goAway": {"timeLeft": "0s"}})).await;
    old.close(1000, "").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    chat.results(vec![(
        &calls[0],
        Outcome::Output {
            output: json!({"tempC": 3}),
        },
    )]);
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-3"}));
    // The handle covered the question, not the call: the call is replayed as the model's turn,
    // then the result as text.
    let context = conn.recv().await;
    assert_eq!(context["clientContent"]["turnComplete"], false, "{context}");
    assert_eq!(context["clientContent"]["turns"][0]["role"], "model");
    let trigger = conn.recv().await;
    assert_eq!(trigger["clientContent"]["turnComplete"], true);
    let text = trigger["clientContent"]["turns"][0]["parts"].to_string();
    assert!(
        text.contains("The tool calls you made earlier have finished"),
        "{text}"
    );
    assert!(
        text.contains("[Result of the tool get_weather: {\\\"tempC\\\":3}]"),
        "{text}"
    );
    conn.say("3 degrees.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "3 degrees.");
}

/// The person writes instead of answering: on a blocking model the open calls cannot be closed
/// cleanly on that socket, so a fresh one is seeded; on a non-blocking one the results go
/// `SILENT` and the message follows.
#[tokio::test]
async fn a_new_message_while_calls_are_open() {
    for model_name in [BLOCKING_MODEL, NON_BLOCKING_MODEL] {
        let mut server = FakeLive::start().await;
        let model = live(&server, model_name);
        let mut chat = Chat::new();
        chat.user("Pay 20");
        let mut stream = model.stream(chat.request());
        let mut conn = server.next_conn().await;
        conn.setup().await;
        conn.recv().await;
        conn.send(json!({"toolCall": {"functionCalls": [
            {"id": "fc-1", "name": "process_payment", "args": {"amount": 20}}
        ]}}))
        .await;
        if model_name == NON_BLOCKING_MODEL {
            conn.turn_complete().await;
        }
        let events = until_finish(&mut stream).await;
        let calls = chat.record(&events);
        chat.results(vec![(&calls[0], Outcome::Interrupted)]);
        chat.user("Never mind, what time is it?");
        let mut stream = model.stream(chat.request());
        if model_name == BLOCKING_MODEL {
            conn.expect_closed().await;
            let mut fresh = server.next_conn().await;
            let setup = fresh.setup().await;
            assert_eq!(setup["sessionResumption"], json!({}));
            assert!(setup.get("historyConfig").is_some());
            let seed = fresh.recv().await;
            assert_eq!(seed["clientContent"]["turnComplete"], true);
            let trigger = fresh.recv().await;
            let text = trigger["clientContent"]["turns"][0]["parts"].to_string();
            assert!(
                text.contains("[Result of the tool process_payment"),
                "{text}"
            );
            assert!(text.contains("Never mind, what time is it?"), "{text}");
            conn = fresh;
        } else {
            let response = conn.recv().await;
            let answer = &response["toolResponse"]["functionResponses"][0];
            assert_eq!(answer["id"], "fc-1");
            assert_eq!(answer["scheduling"], "SILENT");
            assert_eq!(answer["response"]["interrupted"], true);
            assert_eq!(conn.recv().await, user_turn("Never mind, what time is it?"));
        }
        conn.say("Noon.").await;
        conn.turn_complete().await;
        assert_eq!(
            text_of(&until_finish(&mut stream).await),
            "Noon.",
            "{model_name}"
        );
    }
}

/// A different tool list (or system prompt) needs a new setup: the socket is replaced, resuming
/// with the handle.
#[tokio::test]
async fn changed_tools_replace_the_socket() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut old = server.next_conn().await;
    old.setup().await;
    old.recv().await;
    old.say("First.").await;
    old.turn_complete().await;
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-4", "resumable": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    chat.user("two");
    let mut request = chat.request();
    request.tools.pop();
    let mut stream = model.stream(request);
    old.expect_closed().await;
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-4"}));
    assert_eq!(
        setup["tools"][0]["functionDeclarations"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// A call that arrives when no step is running is answered with an error at once (a blocking
/// model would wait forever), and what the model says after it does not leak into the next step.
#[tokio::test]
async fn a_call_between_steps_is_answered_with_an_error() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("First.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    conn.send(json!({"toolCall": {"functionCalls": [
        {"id": "fc-late", "name": "get_weather", "args": {"location": "Rome"}}
    ]}}))
    .await;
    let answer = conn.recv().await;
    let response = &answer["toolResponse"]["functionResponses"][0];
    assert_eq!(response["id"], "fc-late");
    assert_eq!(response["name"], "get_weather");
    assert!(response["response"]["error"].is_string(), "{answer}");
    assert!(
        response.get("scheduling").is_none(),
        "blocking: no scheduling"
    );

    chat.user("two");
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Sorry, I could not check Rome.").await;
    conn.turn_complete().await;
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

#[tokio::test]
async fn a_handshake_refused_with_429_is_rate_limiting() {
    let server = FakeLive::start_with(Handshake::Refuse(429)).await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let error = until_error(&mut stream).await;
    assert_eq!(
        error,
        ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
            message: "Quota exceeded for live sessions".into(),
        }
    );
}

/// `wss://` works with the TLS feature the crate enables (`rustls-tls-webpki-roots`): the client
/// gets as far as the TLS handshake (here with a plain TCP peer that hangs up) and reports a
/// transport error, instead of "TLS support not compiled in" or a crypto-provider panic.
#[tokio::test]
async fn wss_reaches_the_tls_handshake() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            drop(tcp);
        }
    });
    let mut config = GeminiLiveConfig::new(ProviderKey::new("k"));
    config.live_url = format!("wss://{addr}/ws");
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let error = until_error(&mut model.stream(chat.request())).await;
    let ModelError::Transport(message) = &error else {
        panic!("{error:?}");
    };
    assert!(!message.contains("TLS support"), "{message}");
    assert!(message.to_ascii_lowercase().contains("tls"), "{message}");
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut config = GeminiLiveConfig::new(ProviderKey::new("k"));
    config.live_url = format!("ws://{addr}/ws");
    let model = GeminiLiveModel::new(config).unwrap();
    let mut chat = Chat::new();
    chat.user("hi");
    let error = until_error(&mut model.stream(chat.request())).await;
    assert!(matches!(error, ModelError::Transport(_)), "{error:?}");
}

/// Each chat has its own socket.
#[tokio::test]
async fn sessions_do_not_share_sockets() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut a = Chat::with_id("a");
    a.user("from a");
    let mut b = Chat::with_id("b");
    b.user("from b");
    let mut stream_a = model.stream(a.request());
    let mut conn_a = server.next_conn().await;
    conn_a.setup().await;
    assert_eq!(conn_a.recv().await, user_turn("from a"));
    let mut stream_b = model.stream(b.request());
    let mut conn_b = server.next_conn().await;
    conn_b.setup().await;
    assert_eq!(conn_b.recv().await, user_turn("from b"));
    conn_b.say("B.").await;
    conn_b.turn_complete().await;
    conn_a.say("A.").await;
    conn_a.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream_a).await), "A.");
    assert_eq!(text_of(&until_finish(&mut stream_b).await), "B.");
}
