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

mod bgm;
mod format;
mod location;
mod outcome;
mod payment;
mod weather;

#[cfg(test)]
mod tests;

use format::{decimal, grouped, join_names, money, pick, snippet, track_list};
use outcome::describe;

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

/// Said (in a chat where the person speaks) with the calls of a step: the card is on the screen,
/// and words do not sign it.
pub fn awaiting_countersignature() -> String {
    "I've asked for it. If it needs your countersignature, the card is on your screen: \
     approve or deny it there, saying yes does not approve it.\n"
        .to_owned()
}

/// Said when the person speaks while a card waits (an aside, ADR 0035): it still waits, and
/// words do not sign it.
pub fn still_awaiting_countersignature() -> String {
    "It is still waiting for your countersignature: approve or deny it on the card on your \
     screen. Saying yes does not approve it.\n"
        .to_owned()
}
