//! Understanding: a user message becomes a [`Plan`] of tool calls.
//!
//! The grammar is small and runs in five stages, each a plain function below:
//!
//! 1. **normalize** — fold full-width ASCII (Ｂｏｂ, ５０, ？) and typographic apostrophes to
//!    ASCII so one set of tables covers both keyboards.
//! 2. **split into steps** — cut at sequence markers ("then", "てから", "その後"). Each clause
//!    becomes one model step, executed after the previous one.
//! 3. **tokenize** — words, numbers (1,200 / 50.5 / fifty / 五十 / 1万), currency symbols and
//!    units, and Japanese runs cut after nouns at particles (花子|さん|に|50|ドル|送金して).
//! 4. **split into fragments** — cut at "and", commas, "、" and the particle "と". Fragments of
//!    one clause become parallel tool calls of one step. A fragment without a verb of its own
//!    ("…, $20 to Bob") borrows the topic of its neighbour: the previous one in English, the
//!    next one in Japanese, where the verb comes last ("Aliceに30ドル、Bobに40ドル送金して").
//!    A fragment that only adds to its neighbour ("for lunch and drinks", "to Alice and Bob",
//!    "Pay Alice and Bob 30 dollars") is glued back on instead of becoming a request.
//! 5. **extract** — per fragment and topic, read the slots (city, amount, currency, recipient,
//!    description, track) from the tokens. Missing or invalid slots give a
//!    [`Clarification`] instead of a guess.
//!
//! Everything the grammar knows about words lives in `super::lexicon`.

use std::ops::Range;

use serde_json::Value;

use super::lexicon::{self, Topic};

mod clauses;
mod extract;
mod fragments;
mod tokens;

#[cfg(test)]
mod tests;

use clauses::{normalize, slash_command, split_into_steps};
use fragments::understand_clause;
use tokens::is_japanese;

/// The language a reply should be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    En,
    Ja,
}

impl Lang {
    /// Japanese if the text contains any kana or kanji, otherwise English. Mixed messages such
    /// as "Aliceに30ドル" are Japanese: whoever types kana reads it.
    pub fn detect(text: &str) -> Lang {
        if text.chars().any(is_japanese) {
            Lang::Ja
        } else {
            Lang::En
        }
    }
}

/// One thing the user asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Intent {
    /// `get_weather`. `location` is the canonical English name for known cities ("東京" and
    /// "tokyo" both give "Tokyo"); unknown names are kept as written, title-cased.
    Weather { location: String },
    /// `process_payment`. `currency` is an ISO code (USD unless the text names another).
    /// `amount` is exactly what was written: zero or negative amounts are passed through for
    /// the tool to reject, never silently "fixed".
    Payment {
        amount: f64,
        currency: String,
        recipient: String,
        description: String,
    },
    /// `get_location` (the browser asks for permission).
    Location,
    /// `change_bgm`; `track` is always one of the valid tracks.
    ChangeBgm { track: u8 },
    /// `/lorem N`: exactly `words` words of filler, for benchmarks.
    Lorem { words: usize },
    /// "Who are you?", "What can you do?", "help", "何ができる？".
    Capabilities,
    /// "Hello", "こんにちは". Only produced when nothing else was asked.
    Greeting,
    /// A request the model recognised but must not act on without asking: an argument is
    /// missing, ambiguous or out of range. Whenever any fragment needs this, [`understand`]
    /// returns only the clarifications, so nothing runs before the person has answered.
    Clarify(Clarification),
}

/// Why the model has to ask instead of acting. Each variant carries what *was* understood, so
/// the question can be specific ("How much should I send to Bob?").
#[derive(Debug, Clone, PartialEq)]
pub enum Clarification {
    /// A payment with a recipient but no amount ("send money to Bob").
    PaymentAmount { recipient: String },
    /// A payment with an amount but no recipient ("pay 50 dollars").
    PaymentRecipient { amount: f64, currency: String },
    /// A payment with neither ("send money").
    PaymentDetails,
    /// One amount for several people ("send $5 to Alice and Bob"): each, or split?
    SeveralRecipients {
        recipients: Vec<String>,
        amount: Option<f64>,
        currency: String,
    },
    /// A weather request without a city ("what's the weather?").
    WeatherLocation,
    /// A music request without a track ("change the music").
    BgmTrack,
    /// A track that does not exist ("play track 3").
    TrackOutOfRange { requested: f64 },
}

/// A tool call ready for the runner: the tool's name from the spec and its JSON arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct IntendedCall {
    pub name: &'static str,
    pub args: Value,
}

impl Intent {
    /// The tool call this intent stands for, or `None` for intents answered directly
    /// (see `reply::direct`).
    pub fn tool_call(&self) -> Option<IntendedCall> {
        let (name, args) = match self {
            Intent::Weather { location } => (
                lexicon::GET_WEATHER,
                serde_json::json!({ "location": location }),
            ),
            Intent::Payment {
                amount,
                currency,
                recipient,
                description,
            } => (
                lexicon::PROCESS_PAYMENT,
                serde_json::json!({
                    "amount": json_number(*amount),
                    "recipient": recipient,
                    "currency": currency,
                    "description": description,
                }),
            ),
            Intent::Location => (lexicon::GET_LOCATION, serde_json::json!({})),
            Intent::ChangeBgm { track } => {
                (lexicon::CHANGE_BGM, serde_json::json!({ "track": track }))
            }
            Intent::Lorem { .. } | Intent::Capabilities | Intent::Greeting => return None,
            Intent::Clarify(_) => return None,
        };
        Some(IntendedCall { name, args })
    }

    fn is_small_talk(&self) -> bool {
        matches!(self, Intent::Capabilities | Intent::Greeting)
    }
}

/// Whole amounts go out as JSON integers (50, not 50.0), matching what an LLM would send.
fn json_number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        // Exact: |x| < 2^53 and integral, so the cast neither truncates nor rounds.
        serde_json::json!(x as i64)
    } else {
        serde_json::json!(x)
    }
}

/// What the demo model will do with a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The language to answer in.
    pub lang: Lang,
    /// Model steps in order. The intents of one step are independent and run in parallel; each
    /// later step runs after the previous step's results are in. Empty: not understood.
    pub steps: Vec<Vec<Intent>>,
}

impl Plan {
    /// Whether anything at all was understood.
    pub fn is_understood(&self) -> bool {
        self.steps.iter().any(|step| !step.is_empty())
    }

    /// The questions to ask before anything runs. When non-empty they are the whole plan.
    pub fn clarifications(&self) -> impl Iterator<Item = &Clarification> + '_ {
        self.steps
            .iter()
            .flatten()
            .filter_map(|intent| match intent {
                Intent::Clarify(c) => Some(c),
                _ => None,
            })
    }
}

/// Reads a message and decides what to do. Never fails: text it cannot read gives a plan with
/// no steps, and the caller answers with `reply::not_understood`. So does text longer than
/// `lexicon::MAX_INPUT_CHARS`: the grammar's cost grows faster than linearly with pathological
/// input, and no demo request is that long.
pub fn understand(text: &str) -> Plan {
    let text = normalize(text);
    let lang = Lang::detect(&text);
    if let Some(intent) = slash_command(&text) {
        return Plan {
            lang,
            steps: vec![vec![intent]],
        };
    }
    if text.chars().count() > lexicon::MAX_INPUT_CHARS {
        return Plan {
            lang,
            steps: Vec::new(),
        };
    }
    let steps = split_into_steps(&text)
        .into_iter()
        .map(|clause| understand_clause(clause, lang))
        .filter(|step| !step.is_empty())
        .collect();
    Plan {
        lang,
        steps: settle(steps),
    }
}

/// Plan-wide rules that no single clause can decide:
/// - any clarification replaces the whole plan (ask first, act after the answer);
/// - small talk is dropped when there is real work ("Hi! Weather in Sydney?");
/// - otherwise "what can you do" outranks "hello", and each is said once.
fn settle(steps: Vec<Vec<Intent>>) -> Vec<Vec<Intent>> {
    let mut questions: Vec<Intent> = Vec::new();
    for intent in steps.iter().flatten() {
        if matches!(intent, Intent::Clarify(_)) && !questions.contains(intent) {
            questions.push(intent.clone());
        }
    }
    if !questions.is_empty() {
        return vec![questions];
    }
    let has_work = steps.iter().flatten().any(|i| !i.is_small_talk());
    if has_work {
        return steps
            .into_iter()
            .map(|step| {
                step.into_iter()
                    .filter(|i| !i.is_small_talk())
                    .collect::<Vec<_>>()
            })
            .filter(|step| !step.is_empty())
            .collect();
    }
    for wanted in [Intent::Capabilities, Intent::Greeting] {
        if steps.iter().flatten().any(|i| *i == wanted) {
            return vec![vec![wanted]];
        }
    }
    Vec::new()
}

// ---------------------------------------------------------------------------------------------
// Stage 1: normalization and slash commands
// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Stage 2: sequence markers cut the text into steps
// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Stage 3: tokenizer
// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Stage 4: fragments
// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// Stage 5: slot extraction
// ---------------------------------------------------------------------------------------------
