use super::tokens::{Tok, tokenize};
use super::*;
use proptest::prelude::*;
use serde_json::json;

fn en(steps: Vec<Vec<Intent>>) -> Plan {
    Plan {
        lang: Lang::En,
        steps,
    }
}

fn ja(steps: Vec<Vec<Intent>>) -> Plan {
    Plan {
        lang: Lang::Ja,
        steps,
    }
}

fn weather_in(city: &str) -> Intent {
    Intent::Weather {
        location: city.to_string(),
    }
}

fn pay(amount: f64, currency: &str, recipient: &str) -> Intent {
    pay_for(amount, currency, recipient, "")
}

fn pay_for(amount: f64, currency: &str, recipient: &str, description: &str) -> Intent {
    Intent::Payment {
        amount,
        currency: currency.to_string(),
        recipient: recipient.to_string(),
        description: description.to_string(),
    }
}

fn ask(question: Clarification) -> Intent {
    Intent::Clarify(question)
}

fn track(track: u8) -> Intent {
    Intent::ChangeBgm { track }
}

/// Every phrasing the demo model must understand, with the exact plan it must produce.
/// One phrasing per line, so the table reads (and diffs) like the lexicon.
#[rustfmt::skip]
fn phrasings() -> Vec<(&'static str, Plan)> {
    use Clarification as C;
    vec![
        // Weather, English.
        ("What's the weather in Tokyo?", en(vec![vec![weather_in("Tokyo")]])),
        ("weather in paris", en(vec![vec![weather_in("Paris")]])),
        ("How's the weather in New York today?", en(vec![vec![weather_in("New York")]])),
        ("Is it raining in London?", en(vec![vec![weather_in("London")]])),
        ("tokyo weather", en(vec![vec![weather_in("Tokyo")]])),
        ("What's the forecast for San Francisco?", en(vec![vec![weather_in("San Francisco")]])),
        ("What's the weather like in Berlin tomorrow?", en(vec![vec![weather_in("Berlin")]])),
        ("weather in springfield", en(vec![vec![weather_in("Springfield")]])),
        ("weather in rio", en(vec![vec![weather_in("Rio de Janeiro")]])),
        ("What's the weather in Tokyo and Osaka?", en(vec![vec![weather_in("Tokyo"), weather_in("Osaka")]])),
        ("give me the weather in Seoul", en(vec![vec![weather_in("Seoul")]])),
        ("What's the weather?", en(vec![vec![ask(C::WeatherLocation)]])),
        // Weather, Japanese.
        ("東京の天気は?", ja(vec![vec![weather_in("Tokyo")]])),
        ("大阪の天気を教えて", ja(vec![vec![weather_in("Osaka")]])),
        ("ロンドンの天気はどう？", ja(vec![vec![weather_in("London")]])),
        ("東京と大阪の天気を教えて", ja(vec![vec![weather_in("Tokyo"), weather_in("Osaka")]])),
        ("京都は雨ですか？", ja(vec![vec![weather_in("Kyoto")]])),
        ("東京都の天気", ja(vec![vec![weather_in("Tokyo")]])),
        ("千葉の天気", ja(vec![vec![weather_in("Chiba")]])),
        ("ニューヨークの気温は？", ja(vec![vec![weather_in("New York")]])),
        ("明日の北京の天気は？", ja(vec![vec![weather_in("Beijing")]])),
        ("函館の天気", ja(vec![vec![weather_in("函館")]])),
        ("お天気はどう？東京", ja(vec![vec![weather_in("Tokyo")]])),
        ("今日の天気は？", ja(vec![vec![ask(C::WeatherLocation)]])),
        // Payments, English.
        ("Send $50 to Hanako", en(vec![vec![pay(50.0, "USD", "Hanako")]])),
        ("Pay Alice 30 dollars", en(vec![vec![pay(30.0, "USD", "Alice")]])),
        ("Transfer 20 euros to Bob for lunch", en(vec![vec![pay_for(20.0, "EUR", "Bob", "lunch")]])),
        ("send 1,200 yen to Taro", en(vec![vec![pay(1200.0, "JPY", "Taro")]])),
        ("Send 3000 yen to Kenji", en(vec![vec![pay(3000.0, "JPY", "Kenji")]])),
        ("Pay Priya 500 rupees", en(vec![vec![pay(500.0, "INR", "Priya")]])),
        ("Send 100 CHF to Heidi", en(vec![vec![pay(100.0, "CHF", "Heidi")]])),
        ("send 40 cad to Jacques", en(vec![vec![pay(40.0, "CAD", "Jacques")]])),
        ("Send ₩50000 to Minji", en(vec![vec![pay(50000.0, "KRW", "Minji")]])),
        ("Process a payment of $100 to Alice", en(vec![vec![pay(100.0, "USD", "Alice")]])),
        ("Send Bob fifty dollars", en(vec![vec![pay(50.0, "USD", "Bob")]])),
        ("send one hundred and five dollars to Bob", en(vec![vec![pay(105.0, "USD", "Bob")]])),
        ("pay £12.50 to Carol", en(vec![vec![pay(12.5, "GBP", "Carol")]])),
        ("Can you send 20 bucks to alice please?", en(vec![vec![pay(20.0, "USD", "alice")]])),
        ("I want to pay Bob 5 dollars", en(vec![vec![pay(5.0, "USD", "Bob")]])),
        ("Send Hanako Yamada $50", en(vec![vec![pay(50.0, "USD", "Hanako Yamada")]])),
        ("send 20 to Bob", en(vec![vec![pay(20.0, "USD", "Bob")]])),
        ("Send -5 dollars to Bob", en(vec![vec![pay(-5.0, "USD", "Bob")]])),
        ("send -$5 to Bob", en(vec![vec![pay(-5.0, "USD", "Bob")]])),
        ("send 0 dollars to Bob", en(vec![vec![pay(0.0, "USD", "Bob")]])),
        ("Send $1,200.50 to Ｂｏｂ", en(vec![vec![pay(1200.5, "USD", "Bob")]])),
        ("pay Bob $5 as a gift", en(vec![vec![pay_for(5.0, "USD", "Bob", "a gift")]])),
        ("Transfer 20 euros to Bob for lunch and drinks", en(vec![vec![pay_for(20.0, "EUR", "Bob", "lunch and drinks")]])),
        // Payments, Japanese.
        ("花子さんに50ドル送金してください", ja(vec![vec![pay(50.0, "USD", "花子")]])),
        ("次郎さんに200ドル送金して", ja(vec![vec![pay(200.0, "USD", "次郎")]])),
        ("100ドルをAliceに送金して", ja(vec![vec![pay(100.0, "USD", "Alice")]])),
        ("Hanakoさんに50ドル送金して", ja(vec![vec![pay(50.0, "USD", "Hanako")]])),
        ("花子に五十ドル送って", ja(vec![vec![pay(50.0, "USD", "花子")]])),
        ("太郎に1万円送金して", ja(vec![vec![pay(10000.0, "JPY", "太郎")]])),
        ("花子さんに三千五百円送金して", ja(vec![vec![pay(3500.0, "JPY", "花子")]])),
        ("５０ドルを花子に送金して", ja(vec![vec![pay(50.0, "USD", "花子")]])),
        ("花子さんへ１万円を送金", ja(vec![vec![pay(10000.0, "JPY", "花子")]])),
        ("ランチ代として花子に1000円送金して", ja(vec![vec![pay_for(1000.0, "JPY", "花子", "ランチ代")]])),
        ("ニューヨークにいる花子に20ドル送金して", ja(vec![vec![pay(20.0, "USD", "花子")]])),
        ("はなこさんに5ドル送金して", ja(vec![vec![pay(5.0, "USD", "はなこ")]])),
        // Several payments in one step.
        ("Pay Alice 30 dollars and Bob 40 dollars", en(vec![vec![pay(30.0, "USD", "Alice"), pay(40.0, "USD", "Bob")]])),
        ("Send $10 to Alice, $20 to Bob and $30 to Carol", en(vec![vec![pay(10.0, "USD", "Alice"), pay(20.0, "USD", "Bob"), pay(30.0, "USD", "Carol")]])),
        ("send ¥500 to Taro and €20 to Hans", en(vec![vec![pay(500.0, "JPY", "Taro"), pay(20.0, "EUR", "Hans")]])),
        ("Send $5 each to Alice and Bob for lunch", en(vec![vec![pay_for(5.0, "USD", "Alice", "lunch"), pay_for(5.0, "USD", "Bob", "lunch")]])),
        ("Aliceに30ドル、Bobに40ドル送金して", ja(vec![vec![pay(30.0, "USD", "Alice"), pay(40.0, "USD", "Bob")]])),
        ("Aliceに30ドル、Bobに40ドル送金してください", ja(vec![vec![pay(30.0, "USD", "Alice"), pay(40.0, "USD", "Bob")]])),
        ("花子と太郎に10ドルずつ送金して", ja(vec![vec![pay(10.0, "USD", "花子"), pay(10.0, "USD", "太郎")]])),
        // Location.
        ("Where am I?", en(vec![vec![Intent::Location]])),
        ("What's my location?", en(vec![vec![Intent::Location]])),
        ("私の位置を教えて", ja(vec![vec![Intent::Location]])),
        ("現在地を教えて", ja(vec![vec![Intent::Location]])),
        // Music.
        ("Switch the music to track 2", en(vec![vec![track(2)]])),
        ("play track 1", en(vec![vec![track(1)]])),
        ("change bgm to 2", en(vec![vec![track(2)]])),
        ("switch to the second track", en(vec![vec![track(2)]])),
        ("トラック1に変更して", ja(vec![vec![track(1)]])),
        ("BGMを2に変えて", ja(vec![vec![track(2)]])),
        ("play track 3", en(vec![vec![ask(C::TrackOutOfRange { requested: 3.0 })]])),
        ("トラック3に変更して", ja(vec![vec![ask(C::TrackOutOfRange { requested: 3.0 })]])),
        ("change the music", en(vec![vec![ask(C::BgmTrack)]])),
        ("BGMを変えて", ja(vec![vec![ask(C::BgmTrack)]])),
        // Chains: one step per clause.
        ("check the weather in Paris, then send Bob $5", en(vec![vec![weather_in("Paris")], vec![pay(5.0, "USD", "Bob")]])),
        ("東京の天気を調べてから、花子に10ドル送って", ja(vec![vec![weather_in("Tokyo")], vec![pay(10.0, "USD", "花子")]])),
        ("first get my location and then check the weather in Tokyo", en(vec![vec![Intent::Location], vec![weather_in("Tokyo")]])),
        ("Pay Alice 30 dollars, then pay Bob 40 dollars", en(vec![vec![pay(30.0, "USD", "Alice")], vec![pay(40.0, "USD", "Bob")]])),
        ("Send $20 to Bob. Then play track 2.", en(vec![vec![pay(20.0, "USD", "Bob")], vec![track(2)]])),
        ("Tell me the weather in Paris and London then pay Alice $3", en(vec![vec![weather_in("Paris"), weather_in("London")], vec![pay(3.0, "USD", "Alice")]])),
        ("大阪の天気を調べて、その後トラック2に変えて", ja(vec![vec![weather_in("Osaka")], vec![track(2)]])),
        ("現在地を教えてから東京の天気を調べて", ja(vec![vec![Intent::Location], vec![weather_in("Tokyo")]])),
        // Independent requests joined by "and" stay in one parallel step.
        ("Check the weather in Berlin and play track 2", en(vec![vec![weather_in("Berlin"), track(2)]])),
        // Small talk, and small talk dropped next to real work.
        ("who are you?", en(vec![vec![Intent::Capabilities]])),
        ("what can you do", en(vec![vec![Intent::Capabilities]])),
        ("help", en(vec![vec![Intent::Capabilities]])),
        ("/help", en(vec![vec![Intent::Capabilities]])),
        ("あなたは誰？", ja(vec![vec![Intent::Capabilities]])),
        ("何ができる？", ja(vec![vec![Intent::Capabilities]])),
        ("Hi, what can you do?", en(vec![vec![Intent::Capabilities]])),
        ("hello", en(vec![vec![Intent::Greeting]])),
        ("こんにちは", ja(vec![vec![Intent::Greeting]])),
        ("Hi! What's the weather in Sydney?", en(vec![vec![weather_in("Sydney")]])),
        ("help me send $5 to Bob", en(vec![vec![pay(5.0, "USD", "Bob")]])),
        // Benchmarks.
        ("/lorem 5", en(vec![vec![Intent::Lorem { words: 5 }]])),
        ("/lorem", en(vec![vec![Intent::Lorem { words: lexicon::DEFAULT_LOREM_WORDS }]])),
        ("/lorem 999999999", en(vec![vec![Intent::Lorem { words: lexicon::MAX_LOREM_WORDS }]])),
        // Honest negatives: not understood.
        ("Tell me a joke", en(vec![])),
        ("What is 2+2?", en(vec![])),
        ("", en(vec![])),
        ("send a message to Bob", en(vec![])),
        ("send 5 messages to Bob", en(vec![])),
        ("Where is Paris?", en(vec![])),
        ("¥500 to Taro", en(vec![])),
        ("then", en(vec![])),
        // Honest negatives: ask rather than guess, and act on nothing until answered.
        ("send money to Bob", en(vec![vec![ask(C::PaymentAmount { recipient: "Bob".into() })]])),
        ("pay bob", en(vec![vec![ask(C::PaymentAmount { recipient: "bob".into() })]])),
        ("pay 50 dollars", en(vec![vec![ask(C::PaymentRecipient { amount: 50.0, currency: "USD".into() })]])),
        ("send money", en(vec![vec![ask(C::PaymentDetails)]])),
        ("ボブにお金を送って", ja(vec![vec![ask(C::PaymentAmount { recipient: "ボブ".into() })]])),
        ("たろうに5ドル送って", ja(vec![vec![ask(C::PaymentRecipient { amount: 5.0, currency: "USD".into() })]])),
        ("Send $5 to Alice and Bob", en(vec![vec![ask(C::SeveralRecipients { recipients: vec!["Alice".into(), "Bob".into()], amount: Some(5.0), currency: "USD".into() })]])),
        ("Pay Alice and Bob 30 dollars", en(vec![vec![ask(C::SeveralRecipients { recipients: vec!["Alice".into(), "Bob".into()], amount: Some(30.0), currency: "USD".into() })]])),
        ("AliceとBobに30ドル送金して", ja(vec![vec![ask(C::SeveralRecipients { recipients: vec!["Alice".into(), "Bob".into()], amount: Some(30.0), currency: "USD".into() })]])),
        ("send money to Alice and $20 to Bob", en(vec![vec![ask(C::PaymentAmount { recipient: "Alice".into() })]])),
        ("Aliceにお金、Bobに40ドル送金して", ja(vec![vec![ask(C::PaymentAmount { recipient: "Alice".into() })]])),
        ("check the weather in Paris, then send money to Bob", en(vec![vec![ask(C::PaymentAmount { recipient: "Bob".into() })]])),
    ]
}

#[test]
fn understands_every_phrasing_exactly() {
    let cases = phrasings();
    let misread: Vec<String> = cases
        .iter()
        .filter_map(|(text, want)| {
            let got = understand(text);
            (got != *want).then(|| format!("{text:?}\n   want {want:?}\n    got {got:?}"))
        })
        .collect();
    assert!(
        misread.is_empty(),
        "{} of {} phrasings misread:\n{}",
        misread.len(),
        cases.len(),
        misread.join("\n")
    );
}

#[test]
fn covers_at_least_45_phrasings_in_both_languages() {
    let cases = phrasings();
    let japanese = cases
        .iter()
        .filter(|(_, plan)| plan.lang == Lang::Ja)
        .count();
    assert!(cases.len() >= 45, "only {} phrasings", cases.len());
    assert!(japanese >= 20 && cases.len() - japanese >= 20);
}

#[test]
fn every_city_alias_in_the_lexicon_is_understood() {
    for (canonical, aliases) in lexicon::CITIES {
        for alias in *aliases {
            let text = if alias.is_ascii() {
                format!("weather in {alias}")
            } else {
                format!("{alias}の天気は？")
            };
            let want = vec![vec![weather_in(canonical)]];
            assert_eq!(understand(&text).steps, want, "{text}");
        }
    }
}

#[test]
fn every_currency_alias_in_the_lexicon_is_understood() {
    for currency in lexicon::CURRENCIES {
        for alias in currency.aliases {
            let text = if !alias.chars().any(char::is_alphanumeric) {
                format!("send {alias}7 to Bob")
            } else if alias.is_ascii() {
                format!("send 7 {alias} to Bob")
            } else {
                format!("Bobに7{alias}送金して")
            };
            let want = vec![vec![pay(7.0, currency.code, "Bob")]];
            assert_eq!(understand(&text).steps, want, "{text}");
        }
    }
}

#[test]
fn intents_become_the_spec_tool_calls() {
    let call = pay_for(50.0, "USD", "Hanako", "lunch").tool_call();
    assert_eq!(
        call,
        Some(IntendedCall {
            name: "process_payment",
            args: json!({"amount": 50, "recipient": "Hanako", "currency": "USD", "description": "lunch"}),
        })
    );
    let fractional = pay(12.5, "GBP", "Carol")
        .tool_call()
        .map(|c| c.args["amount"].clone());
    assert_eq!(fractional, Some(json!(12.5)));
    assert_eq!(
        weather_in("Tokyo").tool_call(),
        Some(IntendedCall {
            name: "get_weather",
            args: json!({"location": "Tokyo"})
        })
    );
    assert_eq!(
        Intent::Location.tool_call(),
        Some(IntendedCall {
            name: "get_location",
            args: json!({})
        })
    );
    assert_eq!(
        track(2).tool_call(),
        Some(IntendedCall {
            name: "change_bgm",
            args: json!({"track": 2})
        })
    );
    assert_eq!(Intent::Greeting.tool_call(), None);
    assert_eq!(ask(Clarification::BgmTrack).tool_call(), None);
}

#[test]
fn plan_helpers_report_understanding_and_questions() {
    assert!(!understand("Tell me a joke").is_understood());
    assert!(understand("weather in Paris").is_understood());
    let plan = understand("pay 50 dollars");
    assert_eq!(plan.clarifications().count(), 1);
    assert_eq!(understand("weather in Paris").clarifications().count(), 0);
}

#[test]
fn numerals_in_every_script() {
    let value = |text: &str| match tokenize(text).first().map(|t| t.tok.clone()) {
        Some(Tok::Num(n)) => Some(n),
        _ => None,
    };
    assert_eq!(value("1,200"), Some(1200.0));
    assert_eq!(value("10,20"), Some(10.0));
    assert_eq!(value("50.5"), Some(50.5));
    assert_eq!(value("twenty-five"), Some(25.0));
    assert_eq!(value("a thousand"), Some(1000.0));
    assert_eq!(value("two thousand five hundred"), Some(2500.0));
    assert_eq!(value("五十ドル"), Some(50.0));
    assert_eq!(value("百円"), Some(100.0));
    assert_eq!(value("千五百円"), Some(1500.0));
    assert_eq!(value("1万2千円"), Some(12000.0));
    assert_eq!(value("三百万円"), Some(3_000_000.0));
    // Kanji numerals without a unit are part of a word.
    assert_eq!(value("千葉"), None);
}

#[test]
fn japanese_runs_split_at_particles_not_inside_verbs() {
    let clause = "花子さんに50ドル送金してください";
    let pieces: Vec<&str> = tokenize(clause)
        .iter()
        .map(|t| &clause[t.span.clone()])
        .collect();
    assert_eq!(
        pieces,
        ["花子", "さん", "に", "50", "ドル", "送金してください"]
    );
}

proptest! {
    /// Whatever arrives, understanding never panics, and a plan with a question holds
    /// nothing but questions.
    #[test]
    fn never_panics_and_questions_stand_alone(text in "\\PC{0,60}") {
        let plan = understand(&text);
        let questions = plan.clarifications().count();
        if questions > 0 {
            prop_assert_eq!(plan.steps.len(), 1);
            prop_assert_eq!(plan.steps[0].len(), questions);
        }
    }

    /// The same, on text built from the grammar's own pieces, which reaches deep paths.
    #[test]
    fn survives_grammar_soup(parts in proptest::collection::vec(proptest::sample::select(vec![
        "send", "pay", "$", "€", "5", "1,200", "fifty", "to", "Bob", "and", ",", "then", "for",
        "lunch", "weather", "in", "tokyo", "track", "2", "-", "each", "花子", "さん", "に", "と",
        "ドル", "円", "五十", "万", "送金して", "天気", "の", "を", "てから", "、", "トラック",
    ]), 0..14)) {
        let text = parts.concat();
        let _ = understand(&text);
        let spaced = parts.join(" ");
        let _ = understand(&spaced);
    }
}
