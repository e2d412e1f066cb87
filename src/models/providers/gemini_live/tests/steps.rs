//! A step on one socket: what the setup declares, what a step reads and sends, calls and their
//! approvals, cancellations, interruptions, reconnecting mid-step.

use super::*;

#[tokio::test]
async fn setup_asks_for_audio_with_transcripts_tools_and_the_key_header() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    assert_eq!(model.label(), "gemini-live:gemini-3.8-live");
    assert_eq!(model.model_version(), "gemini-3.8-live");
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());

    let mut conn = server.next_conn().await;
    assert_eq!(
        conn.headers
            .get("x-goog-api-key")
            .map(|v| v.to_str().unwrap()),
        Some("test-key")
    );
    assert!(
        !conn.uri.contains("key="),
        "the key never goes in the URL: {}",
        conn.uri
    );
    assert!(
        conn.uri.ends_with("GenerativeService.BidiGenerateContent"),
        "{}",
        conn.uri
    );

    let setup = conn.setup().await;
    assert_eq!(
        setup,
        json!({
            "model": "models/gemini-3.8-live",
            "generationConfig": {"responseModalities": ["AUDIO"]},
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Current weather for a place",
                    "parametersJsonSchema": weather_tool().parameters,
                    "behavior": "NON_BLOCKING"
                },
                {
                    "name": "process_payment",
                    "description": "Pay an amount",
                    "parametersJsonSchema": payment_tool().parameters,
                    "behavior": "NON_BLOCKING"
                }
            ]}],
            "inputAudioTranscription": {},
            "outputAudioTranscription": {},
            "sessionResumption": {},
            "contextWindowCompression": {"slidingWindow": {}}
        })
    );
    assert_eq!(conn.recv().await, user_turn("hi"));

    // Text comes as the transcript; the same words as modelTurn text are not repeated, audio is
    // the agent's speech (ADR 0035), a text frame is read like a binary one.
    conn.send(json!({"serverContent": {"modelTurn": {"parts": [
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AQACAA=="}},
        {"text": "Hello there!"}
    ]}}}))
    .await;
    conn.say("Hello ").await;
    conn.send_text_frame(json!({"serverContent": {"outputTranscription": {"text": "there!"}}}))
        .await;
    conn.send(json!({"serverContent": {"generationComplete": true}}))
        .await;
    conn.send(json!({
        "serverContent": {"turnComplete": true},
        "usageMetadata": {"promptTokenCount": 12, "responseTokenCount": 5,
                          "thoughtsTokenCount": 2, "totalTokenCount": 19}
    }))
    .await;
    let events = until_finish(&mut stream).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::Audio(Arc::from(vec![1u8, 0, 2, 0])),
            ModelEvent::TextDelta("Hello ".into()),
            ModelEvent::TextDelta("there!".into()),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage {
                    input_tokens: Some(12),
                    output_tokens: Some(7),
                    total_tokens: Some(19),
                },
            },
        ]
    );
}

#[tokio::test]
async fn the_blocking_model_declares_blocking_tools() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    assert_eq!(model.tool_behavior(), ToolBehavior::Blocking);
    let mut chat = Chat::new();
    chat.user("hi");
    let _stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["model"], "models/gemini-3.1-flash-live-preview");
    for declaration in setup["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
    {
        assert_eq!(declaration["behavior"], "BLOCKING");
    }
}

#[tokio::test]
async fn model_turn_text_is_a_fallback_and_thoughts_are_reasoning() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("hi");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(json!({"serverContent": {"modelTurn": {"parts": [
        {"text": "Planning a greeting", "thought": true},
        {"text": "Hi!"}
    ]}}}))
    .await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::ReasoningDelta {
                text: "Planning a greeting".into(),
                provider_data: None
            },
            ModelEvent::TextDelta("Hi!".into()),
            ModelEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage::default()
            },
        ]
    );
}

/// Two parallel calls on a blocking model; the person takes a while; the results go back as one
/// `toolResponse` with the Live ids, on the same socket. A bare `turnComplete` some models send
/// after a blocking call does not end the next step.
#[tokio::test]
async fn parallel_calls_wait_for_approval_then_answer_on_the_same_socket() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather in Tokyo, and pay 20");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    assert_eq!(conn.recv().await, user_turn("Weather in Tokyo, and pay 20"));
    conn.send(two_calls()).await;
    let events = until_finish(&mut stream).await;
    drop(stream);
    let calls = calls_of(&events);
    assert_eq!(finish_of(&events).0, FinishReason::ToolCalls);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "", "the runner assigns ids");
    assert_eq!(calls[0].name, "get_weather");
    assert_eq!(calls[0].args, json!({"location": "Tokyo"}));
    assert_eq!(
        calls[0].provider_data,
        Some(json!({"google": {"id": "fc-1"}}))
    );
    assert_eq!(calls[1].name, "process_payment");
    assert_eq!(
        calls[1].provider_data,
        Some(json!({"google": {"id": "fc-2"}}))
    );

    // The person thinks it over.
    let calls = chat.record(&events);
    tokio::time::sleep(Duration::from_millis(300)).await;
    chat.results(vec![
        (
            &calls[0],
            Outcome::Output {
                output: json!({"tempC": 21}),
            },
        ),
        (
            &calls[1],
            Outcome::Output {
                output: json!("paid"),
            },
        ),
    ]);
    let mut stream = model.stream(chat.request());
    assert_eq!(
        conn.recv().await,
        json!({"toolResponse": {"functionResponses": [
            {"id": "fc-1", "name": "get_weather", "response": {"tempC": 21}},
            {"id": "fc-2", "name": "process_payment", "response": {"result": "paid"}}
        ]}})
    );
    conn.turn_complete().await; // the closed generation's end marker
    conn.say("21 degrees, and paid.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "21 degrees, and paid.");
    assert_eq!(finish_of(&events).0, FinishReason::Stop);
    assert_eq!(server.accepted(), 1, "the second step reused the socket");
    server.no_new_conn(100).await;
}

/// A non-blocking model goes on talking after its call; the step lasts until `turnComplete`.
/// A denial goes back as a response with an error, scheduled `WHEN_IDLE`.
#[tokio::test]
async fn a_denial_is_a_response_with_an_error() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Pay 500");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(json!({"toolCall": {"functionCalls": [
        {"id": "fc-9", "name": "process_payment", "args": {"amount": 500}}
    ]}}))
    .await;
    conn.say("I've asked for the payment.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "I've asked for the payment.");
    assert_eq!(finish_of(&events).0, FinishReason::ToolCalls);
    let calls = chat.record(&events);
    chat.results(vec![(
        &calls[0],
        Outcome::Denied {
            reason: Some("too much".into()),
            by: None,
        },
    )]);
    let mut stream = model.stream(chat.request());
    let response = conn.recv().await;
    let answer = &response["toolResponse"]["functionResponses"][0];
    assert_eq!(answer["id"], "fc-9");
    assert_eq!(answer["name"], "process_payment");
    assert_eq!(answer["scheduling"], "WHEN_IDLE");
    assert_eq!(answer["response"]["denied"], true);
    assert_eq!(answer["response"]["reason"], "too much");
    assert!(
        answer["response"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("denied")),
        "{answer}"
    );
    conn.say("Understood, no payment.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "Understood, no payment.");
}

/// `goAway`, a handle, then the socket closes mid-answer: the client reconnects with the handle
/// and the step goes on. The handle came after the input, so the input is not sent again.
#[tokio::test]
async fn go_away_mid_step_resumes_with_the_handle_and_the_step_goes_on() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Tell me a story");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("Once upon a time, ").await;
    conn.send(json!({"sessionResumptionUpdate": {"newHandle": "h-1", "resumable": true}}))
        .await;
    conn.send(json!({"goAway": {"timeLeft": "1s"}})).await;
    conn.close(1000, "").await;

    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-1"}));
    assert!(setup.get("historyConfig").is_none(), "{setup}");
    conn.say("the end.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "Once upon a time, the end.");
    assert_eq!(finish_of(&events).0, FinishReason::Stop);
    conn.silent_for(150).await;
    assert_eq!(server.accepted(), 2);
}

/// When the latest handle predates the step, a mid-step reconnect re-sends the step's input.
#[tokio::test]
async fn a_mid_step_reconnect_resends_what_the_handle_does_not_cover() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("First.").await;
    conn.turn_complete().await;
    conn.send(json!({"sessionResumptionUpdate": {"newHandle": "h-0", "resumable": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    // A handle while generating is not resumable and is ignored.
    chat.user("two");
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.send(json!({"sessionResumptionUpdate": {"newHandle": "", "resumable": false}}))
        .await;
    conn.close(1001, "going away").await;

    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-0"}));
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.say("Second.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "Second.");
}

/// `goAway` between steps: the next step opens a new socket with the latest handle (and closes
/// the old one), and sends only the new message.
#[tokio::test]
async fn go_away_while_idle_reconnects_with_the_handle_at_the_next_step() {
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
    let events = until_finish(&mut stream).await;
    chat.record(&events);
    old.send(json!({"sessionResumptionUpdate": {"newHandle": "h-7", "resumable": true}}))
        .await;
    old.send(json!({"goAway": {"timeLeft": "10s"}})).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    chat.user("two");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    let setup = conn.setup().await;
    assert_eq!(setup["sessionResumption"], json!({"handle": "h-7"}));
    assert!(setup.get("historyConfig").is_none());
    assert_eq!(conn.recv().await, user_turn("two"));
    old.expect_closed().await;
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// A cancellation before the step ends removes the call before the runner sees it.
#[tokio::test]
async fn a_call_cancelled_before_the_step_ends_is_dropped() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Weather and pay");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(two_calls()).await;
    conn.send(json!({"toolCallCancellation": {"ids": ["fc-1"]}}))
        .await;
    conn.say("On it.").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    let calls = calls_of(&events);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "process_payment");
    assert_eq!(finish_of(&events).0, FinishReason::ToolCalls);
}

/// A cancellation while the runner waits: published, and the result is not sent. When nothing
/// else is left to send, the results go as text so the model still answers.
#[tokio::test]
async fn a_call_cancelled_after_the_step_is_not_answered() {
    let mut server = FakeLive::start().await;
    let model = live(&server, BLOCKING_MODEL);
    let mut cancellations = model.call_cancellations();
    let mut chat = Chat::new();
    chat.user("Weather and pay");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.send(two_calls()).await;
    let events = until_finish(&mut stream).await;
    let calls = chat.record(&events);
    conn.send(json!({"toolCallCancellation": {"ids": ["fc-2"]}}))
        .await;
    let notice = within("the cancellation notice", cancellations.recv())
        .await
        .expect("notice");
    assert_eq!(
        notice,
        CallNotice::Withdrawn {
            session_id: "chat-1".into(),
            provider_call_id: "fc-2".into()
        }
    );
    chat.results(vec![
        (
            &calls[0],
            Outcome::Output {
                output: json!({"tempC": 21}),
            },
        ),
        (
            &calls[1],
            Outcome::Output {
                output: json!({"paid": true}),
            },
        ),
    ]);
    let mut stream = model.stream(chat.request());
    assert_eq!(
        conn.recv().await,
        json!({"toolResponse": {"functionResponses": [
            {"id": "fc-1", "name": "get_weather", "response": {"tempC": 21}}
        ]}})
    );
    conn.say("21 degrees.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "21 degrees.");

    // Only a cancelled call's result left: it goes as text.
    let events = {
        chat.record(&[ModelEvent::TextDelta("21 degrees.".into())]);
        chat.user("Pay 5");
        let mut stream = model.stream(chat.request());
        assert_eq!(conn.recv().await, user_turn("Pay 5"));
        conn.send(json!({"toolCall": {"functionCalls": [
            {"id": "fc-3", "name": "process_payment", "args": {"amount": 5}}
        ]}}))
        .await;
        until_finish(&mut stream).await
    };
    let calls = chat.record(&events);
    conn.send(json!({"toolCallCancellation": {"ids": ["fc-3"]}}))
        .await;
    within("the cancellation notice", cancellations.recv())
        .await
        .expect("notice");
    chat.results(vec![(
        &calls[0],
        Outcome::Output {
            output: json!({"paid": true}),
        },
    )]);
    let mut stream = model.stream(chat.request());
    let message = conn.recv().await;
    assert_eq!(message["clientContent"]["turnComplete"], true, "{message}");
    let turns = message["clientContent"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["role"], "user");
    let text = turns[0]["parts"].to_string();
    assert!(
        text.contains(r#"[Result of the tool process_payment: {\"paid\":true}]"#),
        "{text}"
    );
    conn.say("Paid.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Paid.");
}

/// `interrupted` ends the step; the bare `turnComplete` that follows it does not end the next.
#[tokio::test]
async fn interrupted_ends_the_step() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("one");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("I was say").await;
    conn.send(json!({"serverContent": {"interrupted": true}}))
        .await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "I was say");
    assert_eq!(finish_of(&events).0, FinishReason::Other);
    chat.record(&events);
    chat.user("two");
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("two"));
    conn.turn_complete().await;
    conn.say("Second.").await;
    conn.turn_complete().await;
    assert_eq!(text_of(&until_finish(&mut stream).await), "Second.");
}

/// The runner drops a step mid-answer (Stop). The rest of that answer, even when it arrives after
/// the next step's input, never reaches the next step.
#[tokio::test]
async fn a_dropped_step_does_not_leak_into_the_next() {
    let mut server = FakeLive::start().await;
    let model = live(&server, NON_BLOCKING_MODEL);
    let mut chat = Chat::new();
    chat.user("Tell me a long story");
    let mut stream = model.stream(chat.request());
    let mut conn = server.next_conn().await;
    conn.setup().await;
    conn.recv().await;
    conn.say("Once upon").await;
    let first = within("the first delta", stream.next()).await;
    assert_eq!(first, Some(Ok(ModelEvent::TextDelta("Once upon".into()))));
    drop(stream);
    chat.record(&[ModelEvent::TextDelta("Once upon".into())]);
    chat.user("Stop. What is 2+2?");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut stream = model.stream(chat.request());
    assert_eq!(conn.recv().await, user_turn("Stop. What is 2+2?"));
    conn.say(" a time there was a dragon").await;
    conn.send(json!({"serverContent": {"interrupted": true}}))
        .await;
    conn.turn_complete().await;
    conn.say("4").await;
    conn.turn_complete().await;
    let events = until_finish(&mut stream).await;
    assert_eq!(text_of(&events), "4");
    assert_eq!(finish_of(&events).0, FinishReason::Stop);
}
