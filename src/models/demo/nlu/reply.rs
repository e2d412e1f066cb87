//! Writing: the demo model's text, in the user's language.
//!
//! Every reply is built from what actually happened, never from what was planned: the summary
//! after tool calls reads the executed arguments and the results, so an amount edited at
//! approval, a refusal or an error is reported as such. Results come from tools and browsers,
//! so every field is optional here: a missing field shortens the sentence, it never panics.
//!
//! Replies are deterministic (no clock, no randomness) so scenario tests can assert them.

use serde_json::Value;

use super::intent::{Clarification, Intent, Lang};
use super::lexicon::{self, Failure};
use crate::agent::history::Outcome;

/// A finished tool call, as the summary needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The tool's name from the spec, e.g. `process_payment`.
    pub tool: String,
    /// The arguments the tool was *executed* with (after any edit at approval).
    pub args: Value,
    pub outcome: Outcome,
    /// The arguments the model originally proposed, when the person edited them while
    /// approving. Lets the summary say "you changed the amount from $50"; `None` if unknown or
    /// unchanged.
    pub proposed: Option<Value>,
}

impl ToolOutcome {
    /// An outcome whose arguments were not edited.
    pub fn new(tool: impl Into<String>, args: Value, outcome: Outcome) -> ToolOutcome {
        ToolOutcome {
            tool: tool.into(),
            args,
            outcome,
            proposed: None,
        }
    }

    /// Records the arguments the model proposed before the person edited them.
    pub fn with_proposed(mut self, proposed: Value) -> ToolOutcome {
        self.proposed = Some(proposed);
        self
    }
}

/// The answer after tool results: one sentence (or two) per tool call, in call order.
pub fn summary(lang: Lang, outcomes: &[ToolOutcome]) -> String {
    if outcomes.is_empty() {
        return pick(lang, "No tools were run.", "ツールは実行されませんでした。").to_string();
    }
    outcomes
        .iter()
        .map(|outcome| describe(lang, outcome))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An honest self-description with prompts that are guaranteed to work.
pub fn capabilities(lang: Lang) -> String {
    let tracks = track_list(lang);
    match lang {
        Lang::En => format!(
            "I'm Countersign's offline demo model, not an LLM: I recognise a fixed set of \
             requests and reply from templates. I can:\n\
             - check the weather in a city: “{}”\n\
             - send a payment once you approve it: “{}”\n\
             - look up your location once you approve it: “{}”\n\
             - switch the background music to track {tracks}: “{}”\n\
             I can also do things in order: “{}”.",
            EXAMPLES_EN[0], EXAMPLES_EN[1], EXAMPLES_EN[2], EXAMPLES_EN[3], EXAMPLES_EN[4]
        ),
        Lang::Ja => format!(
            "私はCountersignのオフライン・デモモデルで、LLMではありません。決まった形の依頼だけを理解し、\
             定型文で返答します。できること:\n\
             - 都市の天気を調べる:「{}」\n\
             - 承認をいただいてから送金する:「{}」\n\
             - 承認をいただいてから現在地を調べる:「{}」\n\
             - BGMをトラック{tracks}に切り替える:「{}」\n\
             複数の依頼を順番に実行することもできます:「{}」",
            EXAMPLES_JA[0], EXAMPLES_JA[1], EXAMPLES_JA[2], EXAMPLES_JA[3], EXAMPLES_JA[4]
        ),
    }
}

/// Prompts shown to people, in the order weather, payment, location, music, chain. A test
/// checks that the demo model understands every one of them.
const EXAMPLES_EN: [&str; 5] = [
    "What's the weather in Tokyo?",
    "Send $50 to Hanako",
    "Where am I?",
    "Play track 2",
    "Check the weather in Paris, then send Bob $5",
];
/// See [`EXAMPLES_EN`].
const EXAMPLES_JA: [&str; 5] = [
    "東京の天気は？",
    "花子さんに50ドル送金して",
    "現在地を教えて",
    "トラック2に変更して",
    "東京の天気を調べてから、花子に10ドル送って",
];

/// The reply to a message the demo model could not read: says so, says why (it is not an LLM)
/// and offers prompts that work.
pub fn not_understood(lang: Lang, text: &str) -> String {
    let snippet = snippet(text, 40);
    let (try_a, try_b) = match lang {
        Lang::En => (EXAMPLES_EN[0], EXAMPLES_EN[1]),
        Lang::Ja => (EXAMPLES_JA[0], EXAMPLES_JA[1]),
    };
    let too_long = text.chars().count() > lexicon::MAX_INPUT_CHARS;
    let limit = grouped(lexicon::MAX_INPUT_CHARS as f64);
    match (lang, snippet.is_empty(), too_long) {
        (Lang::En, true, _) => format!("Your message was empty. Try “{try_a}” or “{try_b}”."),
        (Lang::En, false, true) => format!(
            "That message is too long for me: I'm an offline demo model, not an LLM, and I only \
             read short requests (up to {limit} characters). Try “{try_a}” or “{try_b}”."
        ),
        (Lang::En, false, false) => format!(
            "Sorry, I didn't understand “{snippet}”. I'm an offline demo model, not an LLM, so \
             I only handle the weather, payments, your location and the background music. Try \
             “{try_a}” or “{try_b}”."
        ),
        (Lang::Ja, true, _) => {
            format!("メッセージが空でした。例えば「{try_a}」や「{try_b}」と話しかけてください。")
        }
        (Lang::Ja, false, true) => format!(
            "メッセージが長すぎます。私はLLMではなくオフラインのデモモデルなので、{limit}文字までの\
             短い依頼だけを読みます。例えば「{try_a}」や「{try_b}」と話しかけてください。"
        ),
        (Lang::Ja, false, false) => format!(
            "すみません、「{snippet}」は理解できませんでした。私はLLMではなくオフラインのデモモデルなので、\
             天気・送金・現在地・BGMの依頼にだけ対応しています。例えば「{try_a}」や「{try_b}」と話しかけてください。"
        ),
    }
}

/// The question to ask instead of acting. Each question quotes what was understood and ends
/// with a prompt the demo model will understand as the answer.
pub fn clarify(lang: Lang, question: &Clarification) -> String {
    match question {
        Clarification::PaymentAmount { recipient } => {
            let example = money(lang, 20.0, lexicon::DEFAULT_CURRENCY);
            match lang {
                Lang::En => format!(
                    "How much should I send to {recipient}? For example: “Send {example} to {recipient}”."
                ),
                Lang::Ja => format!(
                    "{recipient}にいくら送金しますか？（例:「{recipient}に{example}送金して」）"
                ),
            }
        }
        Clarification::PaymentRecipient { amount, currency } => {
            let m = money(lang, *amount, currency);
            match lang {
                Lang::En => format!("Who should I send {m} to? For example: “Send {m} to Hanako”."),
                Lang::Ja => format!("{m}を誰に送金しますか？（例:「花子さんに{m}送金して」）"),
            }
        }
        Clarification::PaymentDetails => {
            let example = money(lang, 20.0, lexicon::DEFAULT_CURRENCY);
            match lang {
                Lang::En => format!(
                    "How much should I send, and to whom? For example: “Send {example} to Hanako”."
                ),
                Lang::Ja => {
                    format!("誰にいくら送金しますか？（例:「花子さんに{example}送金して」）")
                }
            }
        }
        Clarification::SeveralRecipients {
            recipients,
            amount,
            currency,
        } => several_recipients(lang, recipients, *amount, currency),
        Clarification::WeatherLocation => match lang {
            Lang::En => format!(
                "Which city should I check the weather for? For example: “{}”",
                EXAMPLES_EN[0]
            ),
            Lang::Ja => format!("どの都市の天気を調べますか？（例:「{}」）", EXAMPLES_JA[0]),
        },
        Clarification::BgmTrack => match lang {
            Lang::En => format!(
                "Which track would you like: {}? For example: “{}”.",
                track_list(lang),
                EXAMPLES_EN[3]
            ),
            Lang::Ja => format!(
                "どのトラックにしますか？{}を選べます（例:「{}」）。",
                track_list(lang),
                EXAMPLES_JA[3]
            ),
        },
        Clarification::TrackOutOfRange { requested } => {
            let n = decimal(*requested, 2);
            match lang {
                Lang::En => format!(
                    "There's no track {n}; I can only play track {}. Which one would you like?",
                    track_list(lang)
                ),
                Lang::Ja => format!(
                    "トラック{n}はありません。選べるのはトラック{}です。どちらにしますか？",
                    track_list(lang)
                ),
            }
        }
    }
}

/// "Send $5 to Alice and Bob" could mean $5 each or $5 in total; a payment must not guess.
fn several_recipients(lang: Lang, names: &[String], amount: Option<f64>, currency: &str) -> String {
    let each = money(lang, amount.unwrap_or(10.0), currency);
    let everyone = join_names(lang, names);
    let example = match lang {
        Lang::En => {
            let parts: Vec<String> = names.iter().map(|n| format!("{each} to {n}")).collect();
            format!("Send {}", join_names(lang, &parts))
        }
        Lang::Ja => {
            let parts: Vec<String> = names.iter().map(|n| format!("{n}に{each}")).collect();
            format!("{}送金して", parts.join("、"))
        }
    };
    match (lang, amount) {
        (Lang::En, Some(_)) => format!(
            "Should I send {each} to each of {everyone}, or split {each} between them? Please \
             give one amount per person, for example: “{example}”."
        ),
        (Lang::En, None) => format!(
            "How much should I send to each of {everyone}? Please give one amount per person, \
             for example: “{example}”."
        ),
        (Lang::Ja, Some(_)) => format!(
            "{everyone}のそれぞれに{each}ずつ送金しますか？それとも{each}を分けますか？\
             1人ずつ金額を指定してください（例:「{example}」）。"
        ),
        (Lang::Ja, None) => format!(
            "{everyone}にそれぞれいくら送金しますか？1人ずつ金額を指定してください（例:「{example}」）。"
        ),
    }
}

/// The answer to "hello".
pub fn greeting(lang: Lang) -> String {
    match lang {
        Lang::En => format!(
            "Hello! I'm Countersign's offline demo model. I can check the weather, send a \
             payment, find your location or switch the music. Try “{}”.",
            EXAMPLES_EN[0]
        ),
        Lang::Ja => format!(
            "こんにちは！Countersignのオフライン・デモモデルです。天気の確認、送金、現在地の確認、\
             BGMの切り替えができます。例えば「{}」と聞いてみてください。",
            EXAMPLES_JA[0]
        ),
    }
}

/// Exactly `words` whitespace-separated words of classic filler, identical on every call
/// (capped at `lexicon::MAX_LOREM_WORDS`). Sentences start with a capital and the text ends
/// with a full stop, so it looks like prose in the UI.
pub fn lorem(words: usize) -> String {
    let count = words.min(lexicon::MAX_LOREM_WORDS);
    let mut out = String::with_capacity(count * 8);
    let mut capitalize = true;
    for word in lexicon::LOREM_WORDS.iter().cycle().take(count) {
        if !out.is_empty() {
            out.push(' ');
        }
        let mut chars = word.chars();
        if let (true, Some(first)) = (capitalize, chars.next()) {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        } else {
            out.push_str(word);
        }
        capitalize = word.ends_with('.');
    }
    if !out.is_empty() && !out.ends_with('.') {
        if out.ends_with(',') {
            out.pop();
        }
        out.push('.');
    }
    out
}

/// The text for an intent answered without tools (small talk, `/lorem`, clarifying
/// questions); `None` for intents that call a tool.
pub fn direct(lang: Lang, intent: &Intent) -> Option<String> {
    match intent {
        Intent::Greeting => Some(greeting(lang)),
        Intent::Capabilities => Some(capabilities(lang)),
        Intent::Lorem { words } => Some(lorem(*words)),
        Intent::Clarify(question) => Some(clarify(lang, question)),
        Intent::Weather { .. }
        | Intent::Payment { .. }
        | Intent::Location
        | Intent::ChangeBgm { .. } => None,
    }
}

// ---------------------------------------------------------------------------------------------
// One tool outcome → sentences
// ---------------------------------------------------------------------------------------------

/// An [`Outcome`] with failures hidden inside successful outputs brought to the surface: an
/// output with `"success": false` or an `error` field is still a failure. An error message is
/// what the tool or the browser said (e.g. "Insufficient funds", "User denied Geolocation"); an
/// interrupted call reads as the failure "interrupted".
enum Settled<'a> {
    Done(&'a Value),
    Failed {
        error: String,
        output: Option<&'a Value>,
    },
    /// Denied, with the reason, by someone other than the person (their name) or by them.
    Denied(Option<&'a str>, Option<&'a str>),
    Expired,
    /// A policy rule refused it (its reason).
    Refused(&'a str),
    /// The person set it aside without deciding, or wrote again before answering.
    Undecided,
}

fn settle(outcome: &Outcome) -> Settled<'_> {
    match outcome {
        Outcome::Output { output } => {
            let succeeded = output.get("success").and_then(Value::as_bool);
            let error = text(output, "error");
            if succeeded == Some(false) || (succeeded.is_none() && error.is_some()) {
                Settled::Failed {
                    error: error.unwrap_or_default().to_string(),
                    output: Some(output),
                }
            } else {
                Settled::Done(output)
            }
        }
        Outcome::Error { message } => Settled::Failed {
            error: message.clone(),
            output: None,
        },
        Outcome::Interrupted => Settled::Failed {
            error: "interrupted".into(),
            output: None,
        },
        Outcome::Denied { reason, by } => Settled::Denied(
            reason.as_deref().map(str::trim).filter(|r| !r.is_empty()),
            by.as_deref(),
        ),
        Outcome::Expired => Settled::Expired,
        Outcome::DeniedByRule { reason, .. } => Settled::Refused(reason),
        Outcome::Dismissed | Outcome::Superseded => Settled::Undecided,
    }
}

fn describe(lang: Lang, call: &ToolOutcome) -> String {
    let settled = settle(&call.outcome);
    match call.tool.as_str() {
        lexicon::GET_WEATHER => weather(lang, call, settled),
        lexicon::PROCESS_PAYMENT => payment(lang, call, settled),
        lexicon::GET_LOCATION => location(lang, settled),
        lexicon::CHANGE_BGM => bgm(lang, call, settled),
        _ => other_tool(lang, call, settled),
    }
}

/// What a call was about, for the sentences every tool shares (declined, expired).
struct Subject {
    en: String,
    ja: String,
    /// What did not happen, said after "so": "no money was sent".
    nothing_en: &'static str,
    nothing_ja: &'static str,
}

/// `by`: the approver who denied it, when it was not the person (who must not hear that they
/// declined it).
fn declined(lang: Lang, subject: &Subject, reason: Option<&str>, by: Option<&str>) -> String {
    match (lang, by) {
        (Lang::En, Some(by)) => format!(
            "{by} denied {}, so {}.{}",
            subject.en,
            subject.nothing_en,
            around(reason, " Their reason: “", "”.")
        ),
        (Lang::Ja, Some(by)) => format!(
            "{}は{by}さんに拒否されたため、{}{}。",
            subject.ja,
            subject.nothing_ja,
            around(reason, "（理由:「", "」）")
        ),
        (Lang::En, None) => format!(
            "You declined {}, so {}.{}",
            subject.en,
            subject.nothing_en,
            around(reason, " Your reason: “", "”.")
        ),
        (Lang::Ja, None) => format!(
            "{}は拒否されたため、{}{}。",
            subject.ja,
            subject.nothing_ja,
            around(reason, "（理由:「", "」）")
        ),
    }
}

fn refused(lang: Lang, subject: &Subject, reason: &str) -> String {
    match lang {
        Lang::En => format!(
            "The organisation's policy does not allow {}, so {}. {}",
            subject.en,
            subject.nothing_en,
            reason.trim()
        ),
        Lang::Ja => format!(
            "{}はポリシーで許可されていないため、{}。{}",
            subject.ja,
            subject.nothing_ja,
            reason.trim()
        ),
    }
}

fn undecided(lang: Lang, subject: &Subject) -> String {
    match lang {
        Lang::En => format!(
            "You haven't decided on {} yet, so {}. Ask me again from its card when you're ready.",
            subject.en, subject.nothing_en
        ),
        Lang::Ja => format!(
            "{}はまだ決定されていないため、{}。準備ができたらカードからもう一度依頼してください。",
            subject.ja, subject.nothing_ja
        ),
    }
}

fn expired(lang: Lang, subject: &Subject) -> String {
    match lang {
        Lang::En => format!(
            "The approval request for {} timed out, so {}.",
            subject.en, subject.nothing_en
        ),
        Lang::Ja => format!(
            "{}は承認の期限が切れたため、{}。",
            subject.ja, subject.nothing_ja
        ),
    }
}

fn weather(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let output = match &settled {
        Settled::Done(v) => Some(*v),
        Settled::Failed { output, .. } => *output,
        _ => None,
    };
    let place = output
        .and_then(|v| text(v, "location"))
        .or_else(|| text(&call.args, "location"));
    let place = match (lang, place) {
        (Lang::Ja, Some(p)) => lexicon::city_in_japanese(p).unwrap_or(p).to_string(),
        (_, Some(p)) => p.to_string(),
        (Lang::En, None) => "that city".to_string(),
        (Lang::Ja, None) => "その都市".to_string(),
    };
    let subject = Subject {
        en: format!("the weather lookup for {place}"),
        ja: format!("{place}の天気の取得"),
        nothing_en: "nothing was done",
        nothing_ja: "何も実行していません",
    };
    match settled {
        Settled::Done(v) => weather_report(lang, &place, v),
        Settled::Failed { error, .. } => {
            let error = clean_error(lang, &error);
            match lang {
                Lang::En => format!("I couldn't get the weather for {place}: {error}."),
                Lang::Ja => format!("{place}の天気を取得できませんでした（{error}）。"),
            }
        }
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

fn weather_report(lang: Lang, place: &str, v: &Value) -> String {
    let condition = text(v, "condition")
        .or_else(|| text(v, "description"))
        .map(|c| match lang {
            Lang::En => c.to_lowercase(),
            Lang::Ja => condition_in_japanese(c),
        });
    let temperature = number(v, "temperature_c")
        .or_else(|| number(v, "temperature"))
        .map(|t| format!("{}°C", decimal(t, 1)));
    let main: Vec<String> = condition.into_iter().chain(temperature).collect();
    if main.is_empty() {
        return match lang {
            Lang::En => format!(
                "I got a weather result for {place}, but it had no temperature or conditions."
            ),
            Lang::Ja => {
                format!("{place}の天気を取得しましたが、気温や天候の情報がありませんでした。")
            }
        };
    }
    let humidity = number(v, "humidity").map(|h| decimal(h, 0));
    let wind = number(v, "wind_kmh").map(|w| decimal(w, 1));
    let source = text(v, "source");
    let offline = source.is_some_and(|s| s.eq_ignore_ascii_case(lexicon::OFFLINE_SOURCE));
    let source_name = source.filter(|_| !offline).map(|s| {
        lexicon::WEATHER_SOURCES
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(s))
            .map_or(s, |(_, label)| label)
    });
    match lang {
        Lang::En => {
            let extras: Vec<String> = humidity
                .map(|h| format!("humidity {h}%"))
                .into_iter()
                .chain(wind.map(|w| format!("wind {w} km/h")))
                .collect();
            let extras = parenthesized(&extras.join(", "), " (", ")");
            let mut out = format!("Weather in {place}: {}{extras}.", main.join(", "));
            if offline {
                out.push_str(" This is offline sample data, not a live reading.");
            } else if let Some(name) = source_name {
                out.push_str(&format!(" Source: {name}."));
            }
            out
        }
        Lang::Ja => {
            let extras: Vec<String> = humidity
                .map(|h| format!("湿度{h}%"))
                .into_iter()
                .chain(wind.map(|w| format!("風速{w}km/h")))
                .collect();
            let extras = parenthesized(&extras.join("、"), "（", "）");
            let mut out = format!("{place}の天気: {}{extras}。", main.join("、"));
            if offline {
                out.push_str("※オフラインのサンプルデータで、実際の天気ではありません。");
            } else if let Some(name) = source_name {
                out.push_str(&format!("出典: {name}。"));
            }
            out
        }
    }
}

fn condition_in_japanese(condition: &str) -> String {
    let lower = condition.to_lowercase();
    lexicon::CONDITIONS_JA
        .iter()
        .find(|(en, _)| lower.contains(en))
        .map_or_else(|| condition.to_string(), |(_, ja)| ja.to_string())
}

/// The facts of a payment: the tool's output wins over the executed arguments, because the
/// output says what was actually done.
struct PaymentFacts {
    /// The amount as money ("$1,200.50"), rounded to cents like any price.
    amount: Option<String>,
    /// The amount exactly as the tool got it ("1.234"), for errors about precision.
    exact_amount: Option<String>,
    /// The ISO code of the payment's currency.
    currency: String,
    recipient: Option<String>,
    description: Option<String>,
    transaction: Option<String>,
    balance: Option<String>,
    /// "You changed the amount from X" when the executed amount differs from the proposal.
    edited_from: Option<String>,
}

fn payment_facts(lang: Lang, call: &ToolOutcome, output: Option<&Value>) -> PaymentFacts {
    let from_output = |key: &str| output.and_then(|v| text(v, key));
    let currency = from_output("currency")
        .or_else(|| text(&call.args, "currency"))
        .unwrap_or(lexicon::DEFAULT_CURRENCY);
    let paid = output
        .and_then(|v| number(v, "amount"))
        .or_else(|| number(&call.args, "amount"));
    let proposed = call.proposed.as_ref().and_then(|p| number(p, "amount"));
    let edited_from = match (proposed, paid) {
        (Some(before), Some(after)) if (before - after).abs() > 1e-9 => {
            let before_currency = call
                .proposed
                .as_ref()
                .and_then(|p| text(p, "currency"))
                .unwrap_or(currency);
            Some(money(lang, before, before_currency))
        }
        _ => None,
    };
    // The wallet's currency: a payment in another one says what it was charged in.
    let balance_currency = from_output("wallet_currency")
        .or_else(|| from_output("charged_currency"))
        .unwrap_or(currency);
    PaymentFacts {
        amount: paid.map(|a| money(lang, a, currency)),
        exact_amount: paid.map(|a| decimal(a, 9)),
        currency: currency.trim().to_uppercase(),
        recipient: from_output("recipient")
            .or_else(|| text(&call.args, "recipient"))
            .map(str::to_string),
        description: from_output("description")
            .or_else(|| text(&call.args, "description"))
            .map(str::to_string),
        transaction: from_output("transaction_id").map(str::to_string),
        balance: output
            .and_then(|v| number(v, "wallet_balance"))
            .map(|b| money(lang, b, balance_currency)),
        edited_from,
    }
}

fn payment(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let output = match &settled {
        Settled::Done(v) => Some(*v),
        Settled::Failed { output, .. } => *output,
        _ => None,
    };
    let facts = payment_facts(lang, call, output);
    let (amount, recipient) = (facts.amount.as_deref(), facts.recipient.as_deref());
    let subject = Subject {
        en: format!(
            "the payment{}{}",
            around(amount, " of ", ""),
            around(recipient, " to ", "")
        ),
        ja: format!(
            "{}{}送金",
            around(recipient, "", "への"),
            around(amount, "", "の")
        ),
        nothing_en: "no money was sent",
        nothing_ja: "送金していません",
    };
    // "send $5 to Bob", with whatever is known.
    let send_en = format!(
        "{}{}",
        amount.unwrap_or("the payment"),
        around(recipient, " to ", "")
    );
    // After a payment the balance is "now" lower; after a failure it is unchanged.
    let balance = |changed: bool| match (facts.balance.as_deref(), lang, changed) {
        (Some(b), Lang::En, true) => format!(" Your balance is now {b}."),
        (Some(b), Lang::En, false) => format!(" Your balance is {b}."),
        (Some(b), Lang::Ja, _) => format!("残高は{b}です。"),
        (None, ..) => String::new(),
    };
    let description = facts.description.as_deref();
    let transaction = facts.transaction.as_deref();
    let edited = facts.edited_from.as_deref().zip(amount);
    match settled {
        Settled::Done(_) => match lang {
            Lang::En => format!(
                "Sent {send_en}{}{}.{}{}",
                around(description, " for “", "”"),
                around(transaction, " (transaction ", ")"),
                edited
                    .map(|(before, after)| format!(
                        " You changed the amount from {before} to {after} when approving."
                    ))
                    .unwrap_or_default(),
                balance(true)
            ),
            Lang::Ja => format!(
                "{}{}{}送金しました{}。{}{}",
                around(description, "「", "」として、"),
                around(recipient, "", "に"),
                around(amount, "", "を"),
                around(transaction, "（取引ID: ", "）"),
                edited
                    .map(|(before, after)| format!(
                        "承認時に金額が{before}から{after}に変更されました。"
                    ))
                    .unwrap_or_default(),
                balance(true)
            ),
        },
        Settled::Failed { error, .. } => match (classify(&error), lang) {
            (Some(Failure::InsufficientFunds), Lang::En) => format!(
                "I couldn't send {send_en}: insufficient funds.{}",
                balance(false)
            ),
            (Some(Failure::InsufficientFunds), Lang::Ja) => format!(
                "残高不足のため、{}はできませんでした。{}",
                subject.ja,
                balance(false)
            ),
            // Rounded money would hide the problem ("$1.23"), so show the amount as given.
            (Some(Failure::TooPrecise), Lang::En) => format!(
                "I couldn't send {} {}{}: amounts can have at most two decimal places.",
                facts.exact_amount.as_deref().unwrap_or("that amount"),
                facts.currency,
                around(recipient, " to ", "")
            ),
            (Some(Failure::TooPrecise), Lang::Ja) => format!(
                "{}{} {}の送金は、金額の小数点以下が2桁を超えているためできませんでした。",
                around(recipient, "", "への"),
                facts.exact_amount.as_deref().unwrap_or(""),
                facts.currency
            ),
            (Some(Failure::UnsupportedCurrency), Lang::En) => format!(
                "I couldn't send {send_en}: the wallet can't pay in {}.",
                facts.currency
            ),
            (Some(Failure::UnsupportedCurrency), Lang::Ja) => format!(
                "ウォレットが{}での支払いに対応していないため、{}はできませんでした。",
                facts.currency, subject.ja
            ),
            (Some(Failure::InvalidAmount), Lang::En) => {
                format!("I couldn't send {send_en}: the amount must be greater than zero.")
            }
            (Some(Failure::InvalidAmount), Lang::Ja) => format!(
                "金額は0より大きくする必要があるため、{}はできませんでした。",
                subject.ja
            ),
            (Some(Failure::Refused), _) => declined(lang, &subject, None, None),
            (Some(Failure::TimedOut), Lang::En) => {
                format!(
                    "{} timed out, so no money was sent.",
                    capitalize(&subject.en)
                )
            }
            (Some(Failure::TimedOut), Lang::Ja) => {
                format!("{}はタイムアウトしたため、送金していません。", subject.ja)
            }
            (_, Lang::En) => format!("I couldn't send {send_en}: {}.", clean_error(lang, &error)),
            (_, Lang::Ja) => {
                format!(
                    "{}に失敗しました（{}）。",
                    subject.ja,
                    clean_error(lang, &error)
                )
            }
        },
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

fn location(lang: Lang, settled: Settled) -> String {
    let subject = Subject {
        en: "sharing your location".to_string(),
        ja: "位置情報の共有".to_string(),
        nothing_en: "I didn't access it",
        nothing_ja: "位置情報は取得していません",
    };
    match settled {
        Settled::Done(v) => location_report(lang, v),
        Settled::Failed { error, .. } => match classify(&error) {
            Some(Failure::Refused) => pick(
                lang,
                "Your browser blocked location access (permission denied). Allow it in the site \
                 settings and ask again.",
                "ブラウザが位置情報へのアクセスをブロックしました（許可されていません）。\
                 サイトの設定で許可してから、もう一度お試しください。",
            )
            .to_string(),
            Some(Failure::TimedOut) => pick(
                lang,
                "Your browser couldn't determine your location in time. Please try again.",
                "ブラウザが時間内に現在地を取得できませんでした。もう一度お試しください。",
            )
            .to_string(),
            Some(Failure::Unavailable) => pick(
                lang,
                "Your browser couldn't determine your location (position unavailable).",
                "ブラウザが現在地を特定できませんでした（位置情報を利用できません）。",
            )
            .to_string(),
            _ => match lang {
                Lang::En => format!(
                    "I couldn't get your location: {}.",
                    clean_error(lang, &error)
                ),
                Lang::Ja => format!(
                    "現在地を取得できませんでした（{}）。",
                    clean_error(lang, &error)
                ),
            },
        },
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

fn location_report(lang: Lang, v: &Value) -> String {
    let city = text(v, "city").map(|c| match lang {
        Lang::Ja => lexicon::city_in_japanese(c).unwrap_or(c).to_string(),
        Lang::En => format!("{c}{}", around(text(v, "country"), ", ", "")),
    });
    let coords = number(v, "latitude")
        .zip(number(v, "longitude"))
        .map(|(lat, lon)| (format!("{lat:.4}"), format!("{lon:.4}")));
    let accuracy = number(v, "accuracy").map(|a| decimal(a, 0));
    let accuracy = accuracy.as_deref();
    match (lang, city, coords) {
        (Lang::En, Some(city), Some((lat, lon))) => format!(
            "You're in {city} ({lat}, {lon}{}).",
            around(accuracy, ", accurate to about ", " m")
        ),
        (Lang::En, Some(city), None) => format!("You're in {city}."),
        (Lang::En, None, Some((lat, lon))) => format!(
            "You're at {lat}, {lon}{}.",
            around(accuracy, " (accurate to about ", " m)")
        ),
        (Lang::En, None, None) => "I got a location result, but it had no coordinates.".to_string(),
        (Lang::Ja, Some(city), Some((lat, lon))) => format!(
            "現在地は{city}です（緯度{lat}、経度{lon}{}）。",
            around(accuracy, "、誤差約", "m")
        ),
        (Lang::Ja, Some(city), None) => format!("現在地は{city}です。"),
        (Lang::Ja, None, Some((lat, lon))) => format!(
            "現在地は緯度{lat}、経度{lon}です{}。",
            around(accuracy, "（誤差約", "m）")
        ),
        (Lang::Ja, None, None) => {
            "位置情報を取得しましたが、座標が含まれていませんでした。".to_string()
        }
    }
}

fn bgm(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let output = match &settled {
        Settled::Done(v) => Some(*v),
        _ => None,
    };
    let track = output
        .and_then(|v| number(v, "track"))
        .or_else(|| number(&call.args, "track"))
        .map(|t| decimal(t, 0));
    let track = track.as_deref();
    let subject = Subject {
        en: format!("switching the music{}", around(track, " to track ", "")),
        ja: format!("{}BGM変更", around(track, "トラック", "への")),
        nothing_en: "nothing was changed",
        nothing_ja: "BGMは変更していません",
    };
    match settled {
        Settled::Done(v) => {
            let playing = field(v, "playing").and_then(Value::as_bool);
            match (lang, track, playing) {
                (Lang::En, Some(t), Some(false)) => format!("Track {t} is selected but not playing."),
                (Lang::En, Some(t), _) => format!("Now playing track {t}."),
                (Lang::En, None, _) => "The music was changed.".to_string(),
                (Lang::Ja, Some(t), Some(false)) => {
                    format!("トラック{t}を選択しましたが、再生されていません。")
                }
                (Lang::Ja, Some(t), _) => format!("BGMをトラック{t}に切り替えました。"),
                (Lang::Ja, None, _) => "BGMを切り替えました。".to_string(),
            }
        }
        Settled::Failed { error, .. } => match (classify(&error), lang) {
            (Some(Failure::AudioBlocked), _) => pick(
                lang,
                "Your browser blocked audio playback. Click anywhere on the page, then ask again.",
                "ブラウザが音声の再生をブロックしました。ページをクリックしてから、もう一度お試しください。",
            )
            .to_string(),
            (_, Lang::En) => format!(
                "I couldn't switch the music{}: {}.",
                around(track, " to track ", ""),
                clean_error(lang, &error)
            ),
            (_, Lang::Ja) => format!(
                "BGMを{}切り替えられませんでした（{}）。",
                around(track, "トラック", "に"),
                clean_error(lang, &error)
            ),
        },
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

/// Tools this module has no words for still get an honest, if plain, sentence.
fn other_tool(lang: Lang, call: &ToolOutcome, settled: Settled) -> String {
    let tool = call.tool.as_str();
    let subject = Subject {
        en: format!("the “{tool}” call"),
        ja: format!("「{tool}」の実行"),
        nothing_en: "nothing was done",
        nothing_ja: "何も実行していません",
    };
    match settled {
        Settled::Done(_) => match lang {
            Lang::En => format!("The “{tool}” call finished."),
            Lang::Ja => format!("「{tool}」を実行しました。"),
        },
        Settled::Failed { error, .. } => match lang {
            Lang::En => format!("The “{tool}” call failed: {}.", clean_error(lang, &error)),
            Lang::Ja => format!(
                "「{tool}」の実行に失敗しました（{}）。",
                clean_error(lang, &error)
            ),
        },
        Settled::Denied(reason, by) => declined(lang, &subject, reason, by),
        Settled::Expired => expired(lang, &subject),
        Settled::Refused(reason) => refused(lang, &subject, reason),
        Settled::Undecided => undecided(lang, &subject),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading JSON and writing numbers
// ---------------------------------------------------------------------------------------------

/// A field of a tool output, also looked up inside an `output` or `result` wrapper (browser
/// executors wrap their results). Null counts as absent.
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key)
        .or_else(|| v.get("output").and_then(|o| o.get(key)))
        .or_else(|| v.get("result").and_then(|o| o.get(key)))
        .filter(|x| !x.is_null())
}

/// A non-blank string field.
fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    field(v, key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// A finite number field; numeric strings ("950.0") are accepted too.
fn number(v: &Value, key: &str) -> Option<f64> {
    let value = field(v, key)?;
    value
        .as_f64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
        .filter(|x: &f64| x.is_finite())
}

fn classify(error: &str) -> Option<Failure> {
    let lower = error.to_lowercase();
    lexicon::FAILURE_PATTERNS
        .iter()
        .find(|(pattern, _)| lower.contains(pattern))
        .map(|(_, kind)| *kind)
}

/// An error text fit to quote: one line, no trailing full stop (the sentence adds its own),
/// at most 160 characters.
fn clean_error(lang: Lang, error: &str) -> String {
    let one_line = error.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = one_line.trim_end_matches(['.', '。']);
    if trimmed.is_empty() {
        return pick(lang, "unknown error", "不明なエラー").to_string();
    }
    snippet(trimmed, 160)
}

/// Whitespace collapsed and cut to `max` characters, with an ellipsis if cut.
fn snippet(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max).collect();
    cut.push('…');
    cut
}

/// `x` with at most `decimals` decimals and no trailing zeros: 9.60 → "9.6", 18.0 → "18".
fn decimal(x: f64, decimals: usize) -> String {
    let fixed = format!("{x:.decimals$}");
    let trimmed = if fixed.contains('.') {
        fixed.trim_end_matches('0').trim_end_matches('.')
    } else {
        fixed.as_str()
    };
    if trimmed == "-0" {
        "0".to_string()
    } else {
        trimmed.to_string()
    }
}

/// An amount of money as people write it: "$1,200", "-$5", "€12.50", "1,200円", "50 CHF".
fn money(lang: Lang, amount: f64, code: &str) -> String {
    let digits = grouped(amount.abs());
    let sign = if amount < 0.0 && digits != "0" {
        "-"
    } else {
        ""
    };
    match (lexicon::currency(code), lang) {
        (Some(c), Lang::En) if c.symbol.is_empty() => format!("{sign}{digits} {}", c.code),
        (Some(c), Lang::En) => format!("{sign}{}{digits}", c.symbol),
        (Some(c), Lang::Ja) => format!("{sign}{digits}{}", c.ja_unit),
        (None, _) => format!("{sign}{digits} {}", code.trim().to_uppercase()),
    }
}

/// A non-negative amount with thousands separators and cents only when there are any:
/// 1234567.5 → "1,234,567.50", 950.0 → "950".
fn grouped(amount: f64) -> String {
    let cents = (amount * 100.0).round();
    let whole = format!("{:.0}", (cents / 100.0).trunc());
    let mut out = String::with_capacity(whole.len() + whole.len() / 3 + 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    let rest = cents % 100.0;
    if rest != 0.0 {
        out.push_str(&format!(".{rest:02.0}"));
    }
    out
}

/// "1 or 2" / "1か2", from the lexicon's list of tracks.
fn track_list(lang: Lang) -> String {
    let tracks: Vec<String> = lexicon::BGM_TRACKS.iter().map(u8::to_string).collect();
    match (lang, tracks.split_last()) {
        (_, None) => String::new(),
        (_, Some((last, []))) => last.clone(),
        (Lang::En, Some((last, rest))) => format!("{} or {last}", rest.join(", ")),
        (Lang::Ja, Some((last, rest))) => format!("{}か{last}", rest.join("、")),
    }
}

/// "Alice and Bob", "Alice, Bob and Carol" / "AliceとBob".
fn join_names(lang: Lang, names: &[String]) -> String {
    match (lang, names.split_last()) {
        (_, None) => String::new(),
        (_, Some((last, []))) => last.clone(),
        (Lang::En, Some((last, rest))) => format!("{} and {last}", rest.join(", ")),
        (Lang::Ja, Some(_)) => names.join("と"),
    }
}

/// `before + piece + after` when the piece is known, otherwise nothing: the optional parts
/// of a sentence ("… (transaction txn_1)").
fn around(piece: Option<&str>, before: &str, after: &str) -> String {
    piece
        .map(|p| format!("{before}{p}{after}"))
        .unwrap_or_default()
}

fn parenthesized(inner: &str, open: &str, close: &str) -> String {
    if inner.is_empty() {
        String::new()
    } else {
        format!("{open}{inner}{close}")
    }
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn pick(lang: Lang, en: &'static str, ja: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Ja => ja,
    }
}

#[cfg(test)]
mod tests {
    use super::super::intent::understand;
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

    fn paid(
        amount: f64,
        currency: &str,
        recipient: &str,
        description: &str,
        balance: f64,
    ) -> Value {
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
        let failed =
            || errored("Insufficient funds. Balance: 1000.0 USD, Requested: 2000 USD".into());
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
        let unsupported =
            || errored("Unsupported currency EUR: this wallet holds USD only.".into());
        assert_eq!(
            one(Lang::En, "process_payment", euros.clone(), unsupported()),
            "I couldn't send €20 to Bob: the wallet can't pay in EUR."
        );
        assert_eq!(
            one(Lang::Ja, "process_payment", euros, unsupported()),
            "ウォレットがEURでの支払いに対応していないため、Bobへの20ユーロの送金はできませんでした。"
        );
        let precise = payment_args(1.234, "USD", "Bob");
        let too_precise =
            || errored("Invalid amount 1.234: use at most two decimal places.".into());
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
        let wrapped =
            ran(json!({"success": true, "output": {"track": 1, "message": "BGM changed"}}));
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
}
