use super::super::intent::understand;
use super::format::money;
use super::*;
use proptest::prelude::*;
use serde_json::json;

fn ran(output: Value) -> Outcome {
    Outcome::Output { output }
}

fn errored(message: String) -> Outcome {
    Outcome::Error { message }
}

fn one(lang: Lang, tool: &str, args: Value, outcome: Outcome) -> String {
    summary(lang, &[ToolOutcome::new(tool, args, outcome)])
}

fn tokyo_weather() -> Value {
    json!({"location": "Tokyo", "temperature_c": 18.0, "condition": "Partly cloudy",
           "humidity": 65, "wind_kmh": 12.3, "source": "open-meteo"})
}

fn paid(amount: f64, currency: &str, recipient: &str, description: &str, balance: f64) -> Value {
    json!({"success": true, "transaction_id": "txn_60fb721bc781", "amount": amount,
           "currency": currency, "recipient": recipient, "description": description,
           "wallet_balance": balance, "timestamp": "2026-01-17T14:43:03Z"})
}

fn payment_args(amount: f64, currency: &str, recipient: &str) -> Value {
    json!({"amount": amount, "currency": currency, "recipient": recipient, "description": ""})
}

#[test]
fn weather_reports_readings_and_source() {
    let args = json!({"location": "Tokyo"});
    let english = one(Lang::En, "get_weather", args.clone(), ran(tokyo_weather()));
    assert_eq!(
        english,
        "Weather in Tokyo: partly cloudy, 18°C (humidity 65%, wind 12.3 km/h). \
         Source: Open-Meteo."
    );
    assert_eq!(
        one(Lang::Ja, "get_weather", args, ran(tokyo_weather())),
        "東京の天気: 晴れ時々曇り、18°C（湿度65%、風速12.3km/h）。出典: Open-Meteo。"
    );
}

#[test]
fn offline_weather_says_it_is_not_real() {
    let result = json!({"location": "Paris", "temperature_c": 9.6, "condition": "Rain", "source": "offline"});
    let args = json!({"location": "Paris"});
    assert_eq!(
        one(Lang::En, "get_weather", args.clone(), ran(result.clone())),
        "Weather in Paris: rain, 9.6°C. This is offline sample data, not a live reading."
    );
    assert_eq!(
        one(Lang::Ja, "get_weather", args, ran(result)),
        "パリの天気: 雨、9.6°C。※オフラインのサンプルデータで、実際の天気ではありません。"
    );
}

#[test]
fn weather_failure_names_the_city_and_the_error() {
    let args = json!({"location": "Atlantis"});
    let failed = || errored("City not found.".into());
    assert_eq!(
        one(Lang::En, "get_weather", args.clone(), failed()),
        "I couldn't get the weather for Atlantis: City not found."
    );
    assert_eq!(
        one(Lang::Ja, "get_weather", args, failed()),
        "Atlantisの天気を取得できませんでした（City not found）。"
    );
}

#[test]
fn payment_success_gives_amount_recipient_transaction_and_balance() {
    let args = payment_args(50.0, "USD", "Hanako");
    let ok = || ran(paid(50.0, "USD", "Hanako", "", 950.0));
    assert_eq!(
        one(Lang::En, "process_payment", args.clone(), ok()),
        "Sent $50 to Hanako (transaction txn_60fb721bc781). Your balance is now $950."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", args, ok()),
        "Hanakoに50ドルを送金しました（取引ID: txn_60fb721bc781）。残高は950ドルです。"
    );
}

#[test]
fn payment_edited_at_approval_states_the_amount_actually_paid() {
    let call = |lang| {
        summary(
            lang,
            &[ToolOutcome::new(
                "process_payment",
                payment_args(30.0, "EUR", "Bob"),
                ran(paid(30.0, "EUR", "Bob", "lunch", 970.0)),
            )
            .with_proposed(payment_args(50.0, "EUR", "Bob"))],
        )
    };
    assert_eq!(
        call(Lang::En),
        "Sent €30 to Bob for “lunch” (transaction txn_60fb721bc781). You changed the amount \
         from €50 to €30 when approving. Your balance is now €970."
    );
    assert_eq!(
        call(Lang::Ja),
        "「lunch」として、Bobに30ユーロを送金しました（取引ID: txn_60fb721bc781）。\
         承認時に金額が50ユーロから30ユーロに変更されました。残高は970ユーロです。"
    );
}

#[test]
fn payment_reads_the_executed_arguments_when_the_result_is_terse() {
    // The caller passes the executed (edited) args; a result without an amount must not
    // make the summary fall back to anything else.
    let text = one(
        Lang::En,
        "process_payment",
        payment_args(25.0, "USD", "Bob"),
        ran(json!({"success": true})),
    );
    assert_eq!(text, "Sent $25 to Bob.");
}

#[test]
fn payment_denied_quotes_the_reason() {
    let args = payment_args(40.0, "USD", "Bob");
    let denied = || Outcome::Denied {
        reason: Some("too much".into()),
        by: None,
    };
    assert_eq!(
        one(Lang::En, "process_payment", args.clone(), denied()),
        "You declined the payment of $40 to Bob, so no money was sent. Your reason: “too much”."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", args.clone(), denied()),
        "Bobへの40ドルの送金は拒否されたため、送金していません（理由:「too much」）。"
    );
    assert_eq!(
        one(
            Lang::En,
            "process_payment",
            args,
            Outcome::Denied {
                reason: Some("  ".into()),
                by: None,
            }
        ),
        "You declined the payment of $40 to Bob, so no money was sent."
    );
}

#[test]
fn a_payment_an_approver_denied_is_theirs_not_the_persons() {
    let args = payment_args(150.0, "USD", "Jack");
    let denied = || Outcome::Denied {
        reason: Some("not this vendor".into()),
        by: Some("Ben".into()),
    };
    assert_eq!(
        one(Lang::En, "process_payment", args.clone(), denied()),
        "Ben denied the payment of $150 to Jack, so no money was sent. Their reason: \
         “not this vendor”."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", args, denied()),
        "Jackへの150ドルの送金はBenさんに拒否されたため、送金していません（理由:「not this vendor」）。"
    );
}

#[test]
fn payment_insufficient_funds_says_so() {
    let args = payment_args(2000.0, "USD", "Bob");
    let failed = || errored("Insufficient funds. Balance: 1000.0 USD, Requested: 2000 USD".into());
    assert_eq!(
        one(Lang::En, "process_payment", args.clone(), failed()),
        "I couldn't send $2,000 to Bob: insufficient funds."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", args.clone(), failed()),
        "残高不足のため、Bobへの2,000ドルの送金はできませんでした。"
    );
    // A tool that reports failure inside a normal output is still a failure.
    let in_output =
        ran(json!({"success": false, "error": "Insufficient funds", "wallet_balance": 1000.0}));
    assert_eq!(
        one(Lang::En, "process_payment", args, in_output),
        "I couldn't send $2,000 to Bob: insufficient funds. Your balance is $1,000."
    );
}

#[test]
fn payment_other_failures() {
    let negative = payment_args(-5.0, "USD", "Bob");
    let invalid = || errored("Invalid amount: -5. Amount must be positive.".into());
    assert_eq!(
        one(Lang::En, "process_payment", negative.clone(), invalid()),
        "I couldn't send -$5 to Bob: the amount must be greater than zero."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", negative, invalid()),
        "金額は0より大きくする必要があるため、Bobへの-5ドルの送金はできませんでした。"
    );
    let yen = payment_args(1200.0, "JPY", "Taro");
    let offline = || errored("bank offline".into());
    assert_eq!(
        one(Lang::En, "process_payment", yen.clone(), offline()),
        "I couldn't send ¥1,200 to Taro: bank offline."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", yen, offline()),
        "Taroへの1,200円の送金に失敗しました（bank offline）。"
    );
}

#[test]
fn payment_refusals_from_the_wallet() {
    let euros = payment_args(20.0, "EUR", "Bob");
    let unsupported = || errored("Unsupported currency EUR: this wallet holds USD only.".into());
    assert_eq!(
        one(Lang::En, "process_payment", euros.clone(), unsupported()),
        "I couldn't send €20 to Bob: the wallet can't pay in EUR."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", euros, unsupported()),
        "ウォレットがEURでの支払いに対応していないため、Bobへの20ユーロの送金はできませんでした。"
    );
    let precise = payment_args(1.234, "USD", "Bob");
    let too_precise = || errored("Invalid amount 1.234: use at most two decimal places.".into());
    assert_eq!(
        one(Lang::En, "process_payment", precise.clone(), too_precise()),
        "I couldn't send 1.234 USD to Bob: amounts can have at most two decimal places."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", precise, too_precise()),
        "Bobへの1.234 USDの送金は、金額の小数点以下が2桁を超えているためできませんでした。"
    );
}

#[test]
fn payment_expired_says_nothing_was_done() {
    let args = payment_args(40.0, "USD", "Bob");
    assert_eq!(
        one(Lang::En, "process_payment", args.clone(), Outcome::Expired),
        "The approval request for the payment of $40 to Bob timed out, so no money was sent."
    );
    assert_eq!(
        one(Lang::Ja, "process_payment", args, Outcome::Expired),
        "Bobへの40ドルの送金は承認の期限が切れたため、送金していません。"
    );
}

#[test]
fn location_reports_city_and_coordinates() {
    let with_city = || {
        ran(
            json!({"latitude": 35.6762, "longitude": 139.6503, "accuracy": 20,
                           "city": "Tokyo", "country": "Japan"}),
        )
    };
    assert_eq!(
        one(Lang::En, "get_location", json!({}), with_city()),
        "You're in Tokyo, Japan (35.6762, 139.6503, accurate to about 20 m)."
    );
    assert_eq!(
        one(Lang::Ja, "get_location", json!({}), with_city()),
        "現在地は東京です（緯度35.6762、経度139.6503、誤差約20m）。"
    );
    let bare = || ran(json!({"latitude": 48.8566, "longitude": 2.3522}));
    assert_eq!(
        one(Lang::En, "get_location", json!({}), bare()),
        "You're at 48.8566, 2.3522."
    );
    assert_eq!(
        one(Lang::Ja, "get_location", json!({}), bare()),
        "現在地は緯度48.8566、経度2.3522です。"
    );
}

#[test]
fn location_browser_errors_in_words() {
    let denied = || errored("User denied Geolocation".into());
    assert_eq!(
        one(Lang::En, "get_location", json!({}), denied()),
        "Your browser blocked location access (permission denied). Allow it in the site \
         settings and ask again."
    );
    assert_eq!(
        one(Lang::Ja, "get_location", json!({}), denied()),
        "ブラウザが位置情報へのアクセスをブロックしました（許可されていません）。\
         サイトの設定で許可してから、もう一度お試しください。"
    );
    let timeout = || errored("Timeout expired".into());
    assert_eq!(
        one(Lang::En, "get_location", json!({}), timeout()),
        "Your browser couldn't determine your location in time. Please try again."
    );
    assert_eq!(
        one(Lang::Ja, "get_location", json!({}), timeout()),
        "ブラウザが時間内に現在地を取得できませんでした。もう一度お試しください。"
    );
}

#[test]
fn location_declined_or_expired() {
    let declined = || Outcome::Denied {
        reason: None,
        by: None,
    };
    assert_eq!(
        one(Lang::En, "get_location", json!({}), declined()),
        "You declined sharing your location, so I didn't access it."
    );
    assert_eq!(
        one(Lang::Ja, "get_location", json!({}), declined()),
        "位置情報の共有は拒否されたため、位置情報は取得していません。"
    );
    assert_eq!(
        one(Lang::En, "get_location", json!({}), Outcome::Expired),
        "The approval request for sharing your location timed out, so I didn't access it."
    );
    assert_eq!(
        one(Lang::Ja, "get_location", json!({}), Outcome::Expired),
        "位置情報の共有は承認の期限が切れたため、位置情報は取得していません。"
    );
}

#[test]
fn bgm_reports_the_track_or_the_blocked_audio() {
    let args = json!({"track": 2});
    let playing = || ran(json!({"track": 2, "playing": true}));
    assert_eq!(
        one(Lang::En, "change_bgm", args.clone(), playing()),
        "Now playing track 2."
    );
    assert_eq!(
        one(Lang::Ja, "change_bgm", args.clone(), playing()),
        "BGMをトラック2に切り替えました。"
    );
    // Browser executors wrap their result in "output".
    let wrapped = ran(json!({"success": true, "output": {"track": 1, "message": "BGM changed"}}));
    assert_eq!(
        one(Lang::En, "change_bgm", json!({"track": 1}), wrapped),
        "Now playing track 1."
    );
    let blocked =
        || errored("NotAllowedError: play() failed because the user didn't interact".into());
    assert_eq!(
        one(Lang::En, "change_bgm", args.clone(), blocked()),
        "Your browser blocked audio playback. Click anywhere on the page, then ask again."
    );
    assert_eq!(
        one(Lang::Ja, "change_bgm", args, blocked()),
        "ブラウザが音声の再生をブロックしました。ページをクリックしてから、もう一度お試しください。"
    );
}

#[test]
fn several_outcomes_one_line_each_in_call_order() {
    let outcomes = [
        ToolOutcome::new(
            "process_payment",
            payment_args(30.0, "USD", "Alice"),
            ran(paid(30.0, "USD", "Alice", "", 970.0)),
        ),
        ToolOutcome::new(
            "process_payment",
            payment_args(40.0, "USD", "Bob"),
            Outcome::Denied {
                reason: None,
                by: None,
            },
        ),
    ];
    assert_eq!(
        summary(Lang::Ja, &outcomes),
        "Aliceに30ドルを送金しました（取引ID: txn_60fb721bc781）。残高は970ドルです。\n\
         Bobへの40ドルの送金は拒否されたため、送金していません。"
    );
    assert_eq!(summary(Lang::En, &[]), "No tools were run.");
}

#[test]
fn unknown_tools_still_get_an_honest_sentence() {
    assert_eq!(
        one(Lang::En, "get_time", json!({}), ran(json!({}))),
        "The “get_time” call finished."
    );
    assert_eq!(
        one(Lang::Ja, "get_time", json!({}), errored(String::new())),
        "「get_time」の実行に失敗しました（不明なエラー）。"
    );
}

#[test]
fn missing_or_odd_fields_never_panic_and_still_say_something() {
    let odd = [
        json!(null),
        json!(42),
        json!("text"),
        json!([1, 2]),
        json!({}),
        json!({"amount": "12.5", "temperature_c": "hot", "track": null, "latitude": 1}),
    ];
    for tool in [
        "get_weather",
        "process_payment",
        "get_location",
        "change_bgm",
        "other",
    ] {
        for value in &odd {
            for lang in [Lang::En, Lang::Ja] {
                let text = one(lang, tool, value.clone(), ran(value.clone()));
                assert!(!text.trim().is_empty(), "{tool} {value}");
            }
        }
    }
    assert_eq!(
        one(Lang::En, "process_payment", json!({}), ran(json!({}))),
        "Sent the payment."
    );
    assert_eq!(
        one(
            Lang::En,
            "get_weather",
            json!({"location": "Oslo"}),
            ran(json!({}))
        ),
        "I got a weather result for Oslo, but it had no temperature or conditions."
    );
}

#[test]
#[rustfmt::skip]
fn clarifying_questions() {
    use Clarification as C;
    let cases = [
        (C::PaymentAmount { recipient: "Bob".into() },
         "How much should I send to Bob? For example: “Send $20 to Bob”.",
         "Bobにいくら送金しますか？（例:「Bobに20ドル送金して」）"),
        (C::PaymentRecipient { amount: 50.0, currency: "USD".into() },
         "Who should I send $50 to? For example: “Send $50 to Hanako”.",
         "50ドルを誰に送金しますか？（例:「花子さんに50ドル送金して」）"),
        (C::PaymentDetails,
         "How much should I send, and to whom? For example: “Send $20 to Hanako”.",
         "誰にいくら送金しますか？（例:「花子さんに20ドル送金して」）"),
        (C::SeveralRecipients { recipients: vec!["Alice".into(), "Bob".into()], amount: Some(5.0), currency: "USD".into() },
         "Should I send $5 to each of Alice and Bob, or split $5 between them? Please give one amount per person, for example: “Send $5 to Alice and $5 to Bob”.",
         "AliceとBobのそれぞれに5ドルずつ送金しますか？それとも5ドルを分けますか？1人ずつ金額を指定してください（例:「Aliceに5ドル、Bobに5ドル送金して」）。"),
        (C::WeatherLocation,
         "Which city should I check the weather for? For example: “What's the weather in Tokyo?”",
         "どの都市の天気を調べますか？（例:「東京の天気は？」）"),
        (C::BgmTrack,
         "Which track would you like: 1 or 2? For example: “Play track 2”.",
         "どのトラックにしますか？1か2を選べます（例:「トラック2に変更して」）。"),
        (C::TrackOutOfRange { requested: 3.0 },
         "There's no track 3; I can only play track 1 or 2. Which one would you like?",
         "トラック3はありません。選べるのはトラック1か2です。どちらにしますか？"),
    ];
    for (question, want_en, want_ja) in cases {
        assert_eq!(clarify(Lang::En, &question), want_en);
        assert_eq!(clarify(Lang::Ja, &question), want_ja);
    }
}

/// The prompts we offer people must work: every quoted prompt in capabilities, greeting,
/// not-understood and clarifying replies is understood without further questions.
#[test]
fn every_suggested_prompt_is_understood() {
    use Clarification as C;
    let mut replies = Vec::new();
    for lang in [Lang::En, Lang::Ja] {
        replies.push(capabilities(lang));
        replies.push(greeting(lang));
        replies.push(not_understood(lang, ""));
        for question in [
            C::PaymentAmount {
                recipient: "Bob".into(),
            },
            C::PaymentRecipient {
                amount: 50.0,
                currency: "EUR".into(),
            },
            C::PaymentDetails,
            C::SeveralRecipients {
                recipients: vec!["Alice".into(), "Bob".into(), "Carol".into()],
                amount: None,
                currency: "GBP".into(),
            },
            C::WeatherLocation,
            C::BgmTrack,
        ] {
            replies.push(clarify(lang, &question));
        }
    }
    let mut checked = 0;
    for reply in &replies {
        for quoted in quoted_prompts(reply) {
            let plan = understand(&quoted);
            assert!(plan.is_understood(), "{quoted:?} (from {reply:?})");
            assert_eq!(plan.clarifications().count(), 0, "{quoted:?} asks back");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} prompts found");
}

fn quoted_prompts(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [('“', '”'), ('「', '」')] {
        let mut rest = text;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            out.push(after[..end].to_string());
            rest = &after[end + close.len_utf8()..];
        }
    }
    out
}

#[test]
fn capabilities_are_honest() {
    assert!(capabilities(Lang::En).contains("offline demo model, not an LLM"));
    assert!(capabilities(Lang::Ja).contains("LLMではありません"));
    assert_eq!(
        direct(Lang::En, &Intent::Capabilities),
        Some(capabilities(Lang::En))
    );
}

#[test]
fn not_understood_quotes_the_text_and_suggests_prompts() {
    assert_eq!(
        not_understood(Lang::En, "Tell me a joke"),
        "Sorry, I didn't understand “Tell me a joke”. I'm an offline demo model, not an LLM, \
         so I only handle the weather, payments, your location and the background music. Try \
         “What's the weather in Tokyo?” or “Send $50 to Hanako”."
    );
    assert_eq!(
        not_understood(Lang::Ja, "冗談を言って"),
        "すみません、「冗談を言って」は理解できませんでした。私はLLMではなくオフラインのデモモデルなので、\
         天気・送金・現在地・BGMの依頼にだけ対応しています。例えば「東京の天気は？」や「花子さんに50ドル送金して」と話しかけてください。"
    );
    assert_eq!(
        not_understood(Lang::En, "   "),
        "Your message was empty. Try “What's the weather in Tokyo?” or “Send $50 to Hanako”."
    );
    let long = "x".repeat(200);
    assert!(not_understood(Lang::En, &long).contains(&format!("{}…", "x".repeat(40))));
    let too_long = "send $5 to Bob ".repeat(100);
    assert!(understand(&too_long).steps.is_empty());
    assert!(not_understood(Lang::En, &too_long).starts_with("That message is too long for me"));
    assert!(not_understood(Lang::Ja, &too_long).contains("1,000文字まで"));
}

#[test]
fn greetings() {
    assert!(greeting(Lang::En).starts_with("Hello! I'm Countersign's offline demo model."));
    assert!(
        greeting(Lang::Ja).starts_with("こんにちは！Countersignのオフライン・デモモデルです。")
    );
    assert_eq!(
        direct(Lang::Ja, &Intent::Greeting),
        Some(greeting(Lang::Ja))
    );
    assert_eq!(direct(Lang::En, &Intent::Location), None);
}

#[test]
fn lorem_is_deterministic_prose() {
    assert_eq!(lorem(0), "");
    assert_eq!(lorem(1), "Lorem.");
    assert_eq!(lorem(5), "Lorem ipsum dolor sit amet.");
    assert_eq!(lorem(20).split_whitespace().nth(19), Some("Ut."));
    assert_eq!(lorem(1000), lorem(1000));
    assert_eq!(
        lorem(usize::MAX).split_whitespace().count(),
        lexicon::MAX_LOREM_WORDS
    );
    assert_eq!(
        direct(Lang::En, &Intent::Lorem { words: 3 }),
        Some(lorem(3))
    );
}

#[test]
fn money_is_written_as_people_write_it() {
    assert_eq!(money(Lang::En, 1_234_567.5, "USD"), "$1,234,567.50");
    assert_eq!(money(Lang::En, -5.0, "GBP"), "-£5");
    assert_eq!(money(Lang::En, 0.004, "USD"), "$0");
    assert_eq!(money(Lang::Ja, 1200.0, "JPY"), "1,200円");
    assert_eq!(money(Lang::En, 50.0, "chf"), "50 CHF");
    assert_eq!(money(Lang::En, 50.0, "SEK"), "50 SEK");
    assert_eq!(money(Lang::En, 500.0, "INR"), "₹500");
    assert_eq!(money(Lang::Ja, 50.0, "CHF"), "50スイスフラン");
}

proptest! {
    #[test]
    fn lorem_has_exactly_n_words(n in 0usize..3000) {
        prop_assert_eq!(lorem(n).split_whitespace().count(), n);
    }

    /// Any JSON from a tool or browser, any outcome: a sentence, never a panic.
    #[test]
    fn summary_survives_any_json(value in arb_json(), tool in proptest::sample::select(vec![
        "get_weather", "process_payment", "get_location", "change_bgm", "x",
    ]), kind in 0u8..4, ja in any::<bool>()) {
        let outcome = match kind {
            0 => ran(value.clone()),
            1 => errored(value.to_string()),
            2 => Outcome::Denied {
                reason: value.as_str().map(str::to_string),
                by: (tool == "x").then(|| "Ben".to_owned()),
            },
            _ => Outcome::Expired,
        };
        let lang = if ja { Lang::Ja } else { Lang::En };
        let call = ToolOutcome::new(tool, value.clone(), outcome).with_proposed(value);
        prop_assert!(!summary(lang, &[call]).is_empty());
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let key = proptest::sample::select(vec![
        "amount",
        "currency",
        "recipient",
        "description",
        "transaction_id",
        "wallet_balance",
        "success",
        "error",
        "location",
        "temperature_c",
        "condition",
        "humidity",
        "wind_kmh",
        "source",
        "latitude",
        "longitude",
        "accuracy",
        "city",
        "track",
        "playing",
        "output",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(key.clone(), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}
