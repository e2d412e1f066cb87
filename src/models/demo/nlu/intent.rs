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

/// Full-width ASCII (U+FF01–FF5E) becomes ASCII, the ideographic space a space, and
/// typographic apostrophes and minus signs their ASCII forms. Byte offsets are taken after this,
/// so names and descriptions are sliced from the normalized text.
fn normalize(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            '\u{3000}' => ' ',
            '\u{FFE5}' => '¥',
            '\u{FFE1}' => '£',
            '\u{2019}' | '\u{2018}' => '\'',
            '\u{2212}' => '-',
            _ => c,
        })
        .collect()
}

/// `/lorem N` and `/help`. A bare or unreadable `/lorem` gives the default length; a huge N is
/// capped (see `lexicon::MAX_LOREM_WORDS`).
fn slash_command(text: &str) -> Option<Intent> {
    let mut words = text.split_whitespace();
    let command = words.next()?.to_ascii_lowercase();
    if command == lexicon::LOREM_COMMAND {
        let words = words
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(lexicon::DEFAULT_LOREM_WORDS)
            .min(lexicon::MAX_LOREM_WORDS);
        Some(Intent::Lorem { words })
    } else if command == lexicon::HELP_COMMAND {
        Some(Intent::Capabilities)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 2: sequence markers cut the text into steps
// ---------------------------------------------------------------------------------------------

/// Cuts `text` at every sequence marker (leftmost first, longest at a position). Clauses may be
/// empty or hold only punctuation; they simply yield no intents.
fn split_into_steps(text: &str) -> Vec<&str> {
    let mut clauses = Vec::new();
    let mut clause_start = 0;
    let mut pos = 0;
    while pos < text.len() {
        match sequence_marker_at(text, pos) {
            Some((kept, cut)) => {
                clauses.push(&text[clause_start..pos + kept]);
                pos += kept + cut;
                clause_start = pos;
            }
            None => pos += text[pos..].chars().next().map_or(1, char::len_utf8),
        }
    }
    clauses.push(&text[clause_start..]);
    clauses
}

/// The marker starting at byte `pos`, as (bytes kept in the earlier clause, bytes dropped).
/// ASCII markers match case-insensitively and only as whole words ("then", not "authentic").
fn sequence_marker_at(text: &str, pos: usize) -> Option<(usize, usize)> {
    lexicon::SEQUENCE_MARKERS
        .iter()
        .filter(|(kept, cut)| {
            let split = pos + kept.len();
            let end = split + cut.len();
            let (Some(a), Some(b)) = (text.get(pos..split), text.get(split..end)) else {
                return false;
            };
            if kept.is_ascii() && cut.is_ascii() {
                let marker = || kept.chars().chain(cut.chars());
                a.eq_ignore_ascii_case(kept)
                    && b.eq_ignore_ascii_case(cut)
                    && !(marker().next().is_some_and(char::is_alphanumeric)
                        && ends_with_letter(&text[..pos]))
                    && !(marker().next_back().is_some_and(char::is_alphanumeric)
                        && starts_with_letter(&text[end..]))
            } else {
                a == *kept && b == *cut
            }
        })
        .max_by_key(|(kept, cut)| kept.len() + cut.len())
        .map(|(kept, cut)| (kept.len(), cut.len()))
}

fn ends_with_letter(s: &str) -> bool {
    s.chars().next_back().is_some_and(char::is_alphanumeric)
}

fn starts_with_letter(s: &str) -> bool {
    s.chars().next().is_some_and(char::is_alphanumeric)
}

// ---------------------------------------------------------------------------------------------
// Stage 3: tokenizer
// ---------------------------------------------------------------------------------------------

fn is_hiragana(c: char) -> bool {
    ('\u{3041}'..='\u{309F}').contains(&c)
}

fn is_katakana(c: char) -> bool {
    ('\u{30A0}'..='\u{30FF}').contains(&c)
        || ('\u{31F0}'..='\u{31FF}').contains(&c)
        || ('\u{FF66}'..='\u{FF9F}').contains(&c)
}

fn is_kanji(c: char) -> bool {
    ('\u{4E00}'..='\u{9FFF}').contains(&c)
        || ('\u{3400}'..='\u{4DBF}').contains(&c)
        || ('\u{F900}'..='\u{FAFF}').contains(&c)
        || c == '々'
}

fn is_japanese(c: char) -> bool {
    is_hiragana(c) || is_katakana(c) || is_kanji(c)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A Latin word, lowercased for matching (the original is in the text at `span`).
    Word(String),
    /// A number, from digits, English number words or kanji numerals.
    Num(f64),
    /// A currency symbol, word or unit, as its ISO code.
    Currency(&'static str),
    /// A minus sign; whether it negates an amount is decided during extraction.
    Minus,
    /// A Japanese content run (noun, verb with its endings, …).
    Cjk,
    /// A Japanese particle (に, を, の, として, …).
    Particle,
    /// A name suffix (さん, 様, …).
    Honorific,
    /// Any other single character.
    Punct(char),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    /// Byte range in the clause text.
    span: Range<usize>,
}

fn tokenize(text: &str) -> Vec<Token> {
    let mut toks = Vec::new();
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        let next = i + c.len_utf8();
        if c.is_whitespace() {
            i = next;
        } else if c.is_ascii_digit() {
            let (value, end) = scan_numeral(text, i).unwrap_or((0.0, next));
            toks.push(Token {
                tok: Tok::Num(value),
                span: i..end,
            });
            i = end;
        } else if c == '-' {
            toks.push(Token {
                tok: Tok::Minus,
                span: i..next,
            });
            i = next;
        } else if let Some(code) = lexicon::currency_by_symbol(c) {
            toks.push(Token {
                tok: Tok::Currency(code),
                span: i..next,
            });
            i = next;
        } else if is_japanese(c) {
            i = scan_japanese(text, i, &mut toks);
        } else if c.is_alphabetic() {
            i = scan_word(text, i, &mut toks);
        } else {
            toks.push(Token {
                tok: Tok::Punct(c),
                span: i..next,
            });
            i = next;
        }
    }
    merge_number_words(toks)
}

/// A Latin word: letters, with inner apostrophes and hyphens ("what's", "Mary-Jane",
/// "twenty-five"). Digits end it, so "track2" is "track" then 2.
fn scan_word(text: &str, start: usize, toks: &mut Vec<Token>) -> usize {
    let is_letter = |c: char| c.is_alphabetic() && !is_japanese(c);
    let mut end = start;
    let mut chars = text[start..].char_indices().peekable();
    while let Some((offset, c)) = chars.next() {
        let joins = (c == '\'' || c == '-') && chars.peek().is_some_and(|&(_, n)| is_letter(n));
        if !(is_letter(c) || (joins && end > start)) {
            break;
        }
        end = start + offset + c.len_utf8();
    }
    if end == start {
        // Unreachable for a letter at `start`; advance anyway so the caller cannot loop.
        end = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    let lower = text[start..end].to_lowercase();
    let tok = match lexicon::currency_by_word(&lower) {
        Some(code) => Tok::Currency(code),
        None => Tok::Word(lower),
    };
    toks.push(Token {
        tok,
        span: start..end,
    });
    end
}

/// Reads a number written with ASCII digits and/or kanji numerals starting at `start`:
/// "1,200", "50.5", "五十", "千五百", "1万", "1万2千". Returns the value and the end offset,
/// or `None` if no numeral is there.
fn scan_numeral(text: &str, start: usize) -> Option<(f64, usize)> {
    let (mut total, mut group, mut current) = (0.0_f64, 0.0_f64, None::<f64>);
    let mut pos = start;
    let mut seen = false;
    while let Some(c) = text[pos..].chars().next() {
        if c.is_ascii_digit() {
            if current.is_some() {
                break;
            }
            let (value, len) = scan_ascii_decimal(&text[pos..]);
            current = Some(value);
            pos += len;
        } else if let Some(&(_, digit)) = lexicon::KANJI_DIGITS.iter().find(|(k, _)| *k == c) {
            current = Some(current.unwrap_or(0.0) * 10.0 + f64::from(digit));
            pos += c.len_utf8();
        } else if let Some(&(_, power, big)) = lexicon::KANJI_UNITS.iter().find(|(k, ..)| *k == c) {
            if big {
                let multiplicand = group + current.unwrap_or(if group == 0.0 { 1.0 } else { 0.0 });
                total += multiplicand * power;
                group = 0.0;
            } else {
                group += current.unwrap_or(1.0) * power;
            }
            current = None;
            pos += c.len_utf8();
        } else {
            break;
        }
        seen = true;
    }
    seen.then(|| (total + group + current.unwrap_or(0.0), pos))
}

/// "1,200.50" → (1200.5, 8). Commas count as thousands separators only before exactly three
/// digits, so "10,20" stays two numbers.
fn scan_ascii_decimal(text: &str) -> (f64, usize) {
    let bytes = text.as_bytes();
    let digits_from = |i: usize| bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    let mut end = digits_from(0);
    let mut literal: String = text[..end].to_string();
    while bytes.get(end) == Some(&b',') && digits_from(end + 1) == 3 {
        literal.push_str(&text[end + 1..end + 4]);
        end += 4;
    }
    if bytes.get(end) == Some(&b'.') && digits_from(end + 1) > 0 {
        let fraction = digits_from(end + 1);
        literal.push_str(&text[end..end + 1 + fraction]);
        end += 1 + fraction;
    }
    (literal.parse().unwrap_or(0.0), end)
}

/// A run of kana and kanji, cut into content, particles, honorifics, numbers and units.
fn scan_japanese(text: &str, start: usize, toks: &mut Vec<Token>) -> usize {
    let flush = |toks: &mut Vec<Token>, from: usize, to: usize| {
        if to > from {
            toks.push(Token {
                tok: Tok::Cjk,
                span: from..to,
            });
        }
    };
    let mut segment = start;
    let mut pos = start;
    while let Some(c) = text[pos..].chars().next() {
        if !is_japanese(c) {
            break;
        }
        // Hiragana followed by kanji or katakana starts a new word: "いる|花子", "お|天気".
        if pos > segment
            && !is_hiragana(c)
            && text[..pos].chars().next_back().is_some_and(is_hiragana)
        {
            flush(toks, segment, pos);
            segment = pos;
        }
        match japanese_piece_at(text, pos, segment, toks.last().map(|t| &t.tok)) {
            Some((tok, end)) => {
                flush(toks, segment, pos);
                toks.push(Token {
                    tok,
                    span: pos..end,
                });
                pos = end;
                segment = end;
            }
            None => pos += c.len_utf8(),
        }
    }
    flush(toks, segment, pos);
    pos
}

/// A token that ends the current content run at `pos`, if one starts there: a unit right after
/// a number ("50|ドル"), a kanji number with a unit or counter after it ("五十ドル", but not
/// "千葉"), an honorific after a name ("花子|さん|に"), or a particle after a noun.
fn japanese_piece_at(
    text: &str,
    pos: usize,
    segment: usize,
    last: Option<&Tok>,
) -> Option<(Tok, usize)> {
    let rest = &text[pos..];
    let unit = || {
        let after_number = pos == segment && matches!(last, Some(Tok::Num(_)));
        after_number
            .then(|| lexicon::currency_unit_at(rest))
            .flatten()
            .map(|(code, len)| (Tok::Currency(code), pos + len))
    };
    let kanji_number = || {
        let (value, end) = scan_numeral(text, pos)?;
        let counted = lexicon::currency_unit_at(&text[end..]).is_some()
            || lexicon::NUMERAL_COUNTERS
                .iter()
                .any(|k| text[end..].starts_with(k));
        counted.then_some((Tok::Num(value), end))
    };
    let honorific = || {
        let after_name = pos > segment || matches!(last, Some(Tok::Word(_)));
        after_name
            .then(|| honorific_at(text, pos))
            .flatten()
            .map(|len| (Tok::Honorific, pos + len))
    };
    let particle = || {
        particle_may_start(text, pos, segment, last)
            .then(|| particle_at(rest))
            .flatten()
            .map(|len| (Tok::Particle, pos + len))
    };
    unit()
        .or_else(kanji_number)
        .or_else(honorific)
        .or_else(particle)
}

/// Particles follow nouns. Nouns end in kanji, katakana, Latin letters or digits; a hiragana
/// before the candidate means we are inside a verb ending ("教えて") or a hiragana word, unless
/// an honorific was just split off ("さん|に").
fn particle_may_start(text: &str, pos: usize, segment: usize, last: Option<&Tok>) -> bool {
    match text[..pos].chars().next_back() {
        Some(p) if is_hiragana(p) => pos == segment && matches!(last, Some(Tok::Honorific)),
        Some(p) if p.is_alphanumeric() => true,
        _ => pos == segment && matches!(last, Some(Tok::Word(_) | Tok::Num(_) | Tok::Currency(_))),
    }
}

fn particle_at(rest: &str) -> Option<usize> {
    lexicon::PARTICLES
        .iter()
        .filter(|p| rest.starts_with(*p))
        .map(|p| p.len())
        .max()
}

fn honorific_at(text: &str, pos: usize) -> Option<usize> {
    lexicon::HONORIFICS.iter().find_map(|h| {
        let rest = text[pos..].strip_prefix(h)?;
        let ends_name =
            rest.chars().next().is_none_or(|n| !is_japanese(n)) || particle_at(rest).is_some();
        ends_name.then_some(h.len())
    })
}

/// Folds English number words into numbers: "fifty" → 50, "twenty-five" → 25,
/// "one hundred and five" → 105, "a thousand" → 1000.
fn merge_number_words(toks: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::with_capacity(toks.len());
    let mut k = 0;
    while k < toks.len() {
        match number_phrase(&toks[k..]) {
            Some((value, used)) => {
                let span = toks[k].span.start..toks[k + used - 1].span.end;
                out.push(Token {
                    tok: Tok::Num(value),
                    span,
                });
                k += used;
            }
            None => {
                out.push(toks[k].clone());
                k += 1;
            }
        }
    }
    out
}

fn number_phrase(toks: &[Token]) -> Option<(f64, usize)> {
    let word = |k: usize| match toks.get(k).map(|t| &t.tok) {
        Some(Tok::Word(w)) => Some(w.as_str()),
        _ => None,
    };
    let cardinal = |w: &str| -> Option<f64> {
        // "twenty-five" is one word token; every part must be a number word.
        w.split('-').try_fold(0.0, |sum, part| {
            lexicon::NUMBER_WORDS
                .iter()
                .find(|(name, _)| *name == part)
                .map(|(_, v)| sum + f64::from(*v))
        })
    };
    let scale = |w: &str| {
        lexicon::SCALE_WORDS
            .iter()
            .find(|(name, _)| *name == w)
            .map(|(_, v)| *v)
    };

    let (mut total, mut current, mut used, mut k) = (0.0, 0.0, 0, 0);
    let article = word(0).is_some_and(|w| lexicon::NUMBER_ARTICLES.contains(&w));
    if article && word(1).and_then(scale).is_some() {
        current = 1.0;
        k = 1;
    }
    while let Some(w) = word(k) {
        if let Some(v) = cardinal(w) {
            current += v;
        } else if let Some(s) = scale(w) {
            if s < 1e3 {
                current = current.max(1.0) * s;
            } else {
                total += current.max(1.0) * s;
                current = 0.0;
            }
        } else if w == lexicon::NUMBER_AND && used > 0 && word(k - 1).and_then(scale).is_some() {
            // "one hundred and five": only an "and" between a scale and a number word.
            if word(k + 1).and_then(cardinal).is_none() {
                break;
            }
        } else {
            break;
        }
        k += 1;
        if w != lexicon::NUMBER_AND {
            used = k;
        }
    }
    (used > 0).then_some((total + current, used))
}

// ---------------------------------------------------------------------------------------------
// Stage 4: fragments
// ---------------------------------------------------------------------------------------------

/// A window on some tokens of one clause, with the lookups extraction needs.
#[derive(Clone, Copy)]
struct View<'a> {
    text: &'a str,
    toks: &'a [Token],
    /// Per token: could it be (part of) a name? Computed once per clause by
    /// [`token_is_name`], because extraction asks this many times per token.
    names: &'a [bool],
}

impl<'a> View<'a> {
    fn len(&self) -> usize {
        self.toks.len()
    }

    fn tok(&self, k: usize) -> Option<&'a Tok> {
        self.toks.get(k).map(|t| &t.tok)
    }

    fn word(&self, k: usize) -> Option<&'a str> {
        match self.tok(k) {
            Some(Tok::Word(w)) => Some(w),
            _ => None,
        }
    }

    fn raw(&self, k: usize) -> &'a str {
        self.toks.get(k).map_or("", |t| &self.text[t.span.clone()])
    }

    fn is_particle(&self, k: usize, set: &[&str]) -> bool {
        matches!(self.tok(k), Some(Tok::Particle)) && set.contains(&self.raw(k))
    }

    fn is_word_in(&self, k: usize, set: &[&str]) -> bool {
        self.word(k).is_some_and(|w| set.contains(&w))
    }

    /// The original text of tokens `range`, spacing and case preserved.
    fn slice(&self, range: Range<usize>) -> &'a str {
        match (
            self.toks.get(range.start),
            range.end.checked_sub(1).and_then(|e| self.toks.get(e)),
        ) {
            (Some(first), Some(last)) if range.start < range.end => {
                &self.text[first.span.start..last.span.end]
            }
            _ => "",
        }
    }

    fn byte_range(&self) -> Range<usize> {
        match (self.toks.first(), self.toks.last()) {
            (Some(first), Some(last)) => first.span.start..last.span.end,
            _ => 0..0,
        }
    }

    /// Where `phrase` occurs: (token range, byte offset). ASCII phrases match whole words,
    /// others match as substrings (see the lexicon's conventions).
    fn find(&self, phrase: &str) -> Option<(Range<usize>, usize)> {
        if phrase.is_ascii() {
            let words: Vec<&str> = phrase.split_whitespace().collect();
            let n = words.len();
            (0..self.len())
                .find(|&k| (0..n).all(|j| self.word(k + j) == Some(words[j])))
                .map(|k| (k..k + n, self.toks[k].span.start))
        } else {
            let whole = self.byte_range();
            let at = whole.start + self.text[whole.clone()].find(phrase)?;
            let end = at + phrase.len();
            let first = self.toks.iter().position(|t| t.span.end > at)?;
            let last = self.toks.iter().rposition(|t| t.span.start < end)?;
            Some((first..last + 1, at))
        }
    }

    fn contains_any(&self, phrases: &[&str]) -> bool {
        phrases.iter().any(|p| self.find(p).is_some())
    }

    /// Could token `k` be (part of) a person's or place's name?
    fn is_name(&self, k: usize) -> bool {
        self.names.get(k).copied().unwrap_or(false)
    }

    fn has_number(&self) -> bool {
        (0..self.len()).any(|k| matches!(self.tok(k), Some(Tok::Num(_))))
    }

    fn sub(&self, range: Range<usize>) -> View<'a> {
        View {
            text: self.text,
            toks: &self.toks[range.clone()],
            names: &self.names[range],
        }
    }
}

/// Whether token `k` of a clause could be (part of) a name: a Latin word with no job in the
/// grammar, or a Japanese noun. Japanese verbs and adjectives end in hiragana; names rarely do,
/// unless an honorific follows ("はなこさん").
fn token_is_name(text: &str, toks: &[Token], k: usize) -> bool {
    match toks.get(k).map(|t| &t.tok) {
        Some(Tok::Word(w)) => !lexicon::is_reserved_word(w),
        Some(Tok::Cjk) => {
            let word = toks.get(k).map_or("", |t| &text[t.span.clone()]);
            let noun_like = word.chars().next_back().is_some_and(|c| !is_hiragana(c))
                || matches!(toks.get(k + 1).map(|t| &t.tok), Some(Tok::Honorific));
            noun_like && !lexicon::is_reserved_japanese(word)
        }
        _ => false,
    }
}

fn understand_clause(clause: &str, lang: Lang) -> Vec<Intent> {
    let toks = tokenize(clause);
    let names: Vec<bool> = (0..toks.len())
        .map(|k| token_is_name(clause, &toks, k))
        .collect();
    let whole = View {
        text: clause,
        toks: &toks,
        names: &names,
    };
    let mut frags: Vec<Fragment> = split_into_fragments(&whole)
        .into_iter()
        .map(|range| Fragment {
            topics: topics(&whole.sub(range.clone())),
            range,
            borrowed: None,
        })
        .collect();
    lend_topics(&whole, &mut frags, lang);

    let mut intents: Vec<Intent> = Vec::new();
    for frag in &frags {
        let view = whole.sub(frag.range.clone());
        let intent = fragment_intent(&whole, frag).map(|(_, intent)| intent);
        for intent in intent.into_iter().flat_map(|i| split_each(i, &view)) {
            if !intents.contains(&intent) {
                intents.push(intent);
            }
        }
    }
    intents
}

/// "Send $5 each to Alice and Bob" / "花子と太郎に10ドルずつ": with "each", one amount for
/// several people is no longer ambiguous, so it becomes one payment per person.
fn split_each(intent: Intent, view: &View) -> Vec<Intent> {
    match intent {
        Intent::Clarify(Clarification::SeveralRecipients {
            recipients,
            amount: Some(amount),
            currency,
        }) if view.contains_any(lexicon::EACH_WORDS) => {
            let description = description(view, None);
            recipients
                .into_iter()
                .map(|recipient| Intent::Payment {
                    amount,
                    currency: currency.clone(),
                    recipient,
                    description: description.clone(),
                })
                .collect()
        }
        other => vec![other],
    }
}

/// A stretch of one clause that asks for one thing.
struct Fragment {
    /// Token range in the clause.
    range: Range<usize>,
    /// Topics its own words trigger, in table order.
    topics: Vec<Topic>,
    /// The topic taken from a neighbour when it has no trigger of its own.
    borrowed: Option<Topic>,
}

/// Cuts a clause at parallel separators. Separator tokens belong to no fragment; empty
/// fragments are dropped.
fn split_into_fragments(view: &View) -> Vec<Range<usize>> {
    let is_separator = |k: usize| match view.tok(k) {
        Some(Tok::Punct(c)) => lexicon::PARALLEL_PUNCT.contains(c),
        Some(Tok::Word(w)) => lexicon::PARALLEL_WORDS.contains(&w.as_str()),
        Some(Tok::Particle) => lexicon::PARALLEL_PARTICLES.contains(&view.raw(k)),
        _ => false,
    };
    let mut out = Vec::new();
    let mut start = 0;
    for k in 0..=view.len() {
        if k == view.len() || is_separator(k) {
            if k > start {
                out.push(start..k);
            }
            start = k + 1;
        }
    }
    out
}

/// The topics a fragment's own words trigger. "send"/"give"/"送って" count as a payment only
/// when money is mentioned too.
fn topics(view: &View) -> Vec<Topic> {
    let mut out: Vec<Topic> = lexicon::TRIGGERS
        .iter()
        .filter(|(_, phrases)| view.contains_any(phrases))
        .map(|(topic, _)| *topic)
        .collect();
    if !out.contains(&Topic::Payment)
        && view.contains_any(lexicon::SEND_VERBS)
        && mentions_money(view)
    {
        out.insert(0, Topic::Payment);
    }
    out
}

/// A currency, a money word, or a number that is not counting something ("send 20 to Bob"
/// yes, "send 5 messages to Bob" no).
fn mentions_money(view: &View) -> bool {
    view.contains_any(lexicon::MONEY_WORDS)
        || (0..view.len()).any(|k| match view.tok(k) {
            Some(Tok::Currency(_)) => true,
            Some(Tok::Num(_)) => {
                !matches!(view.tok(k + 1), Some(Tok::Word(_))) || !view.is_name(k + 1)
            }
            _ => false,
        })
}

/// Fragments without a tool topic of their own borrow one from the nearest neighbour that has
/// one, looking first where the verb usually is (before in English, after in Japanese).
///
/// A borrowing fragment becomes its own request ("…, $20 to Bob") unless it would add to its
/// neighbour rather than stand beside it; then it is glued back on. That happens when it is too
/// thin to be a request ("for lunch and drinks" stays one description, "to Alice and Bob" one
/// list of names), or when the neighbour is itself incomplete and this fragment completes it
/// ("Pay Alice and Bob 30 dollars", "お天気はどう？東京"). A fragment that names its own
/// recipient ("Aliceに…", "… to Bob") is never glued, so no name is silently dropped.
fn lend_topics(whole: &View, frags: &mut Vec<Fragment>, lang: Lang) {
    let order: Vec<usize> = match lang {
        Lang::En => (0..frags.len()).collect(),
        Lang::Ja => (0..frags.len()).rev().collect(),
    };
    let mut glued: Vec<usize> = Vec::new();
    for i in order {
        let view = whole.sub(frags[i].range.clone());
        if !frags[i].topics.is_empty() || !has_content(&view) {
            continue;
        }
        let is_head = |j: usize| {
            let f: &Fragment = &frags[j];
            !glued.contains(&j) && (f.borrowed.is_some() || f.topics.iter().any(|t| t.is_tool()))
        };
        let before = (0..i).rev().find(|&j| is_head(j));
        let after = (i + 1..frags.len()).find(|&j| is_head(j));
        let head = match lang {
            Lang::En => before.or(after),
            Lang::Ja => after.or(before),
        };
        let Some(h) = head else { continue };
        let Some((topic, head_intent)) = fragment_intent(whole, &frags[h]) else {
            continue;
        };
        let completes_head = matches!(head_intent, Intent::Clarify(_));
        let glue = !names_own_recipient(&view) && (completes_head || !stands_alone(topic, &view));
        if glue {
            let range = &frags[i].range;
            let merged = frags[h].range.start.min(range.start)..frags[h].range.end.max(range.end);
            frags[h].range = merged;
            glued.push(i);
        } else {
            frags[i].borrowed = Some(topic);
        }
    }
    let mut index = 0;
    frags.retain(|_| {
        let keep = !glued.contains(&index);
        index += 1;
        keep
    });
}

/// The topic and intent of a fragment as it stands now.
fn fragment_intent(whole: &View, frag: &Fragment) -> Option<(Topic, Intent)> {
    let view = whole.sub(frag.range.clone());
    match frag.borrowed {
        Some(topic) => Some((topic, extract(topic, &view, true))),
        None => best_intent(&view, &frag.topics),
    }
}

/// Whether a fragment has its own recipient marker with a name: "to Bob", "Aliceに".
fn names_own_recipient(view: &View) -> bool {
    (0..view.len()).any(|k| {
        (view.is_word_in(k, lexicon::RECIPIENT_WORDS) && !names_after(view, k + 1).is_empty())
            || (view.is_particle(k, lexicon::RECIPIENT_PARTICLES)
                && !names_before(view, k).is_empty())
    })
}

/// Whether a verbless fragment carries enough to be its own request of `topic`.
fn stands_alone(topic: Topic, view: &View) -> bool {
    match topic {
        Topic::Payment => view.has_number(),
        Topic::Weather => known_city(view).is_some() || (0..view.len()).any(|k| view.is_name(k)),
        Topic::Bgm => view.has_number() || ordinal(view).is_some(),
        Topic::Location | Topic::Capabilities | Topic::Greeting => false,
    }
}

/// Whether a fragment says anything beyond filler ("please", "thanks", "教えて").
fn has_content(view: &View) -> bool {
    (0..view.len())
        .any(|k| matches!(view.tok(k), Some(Tok::Num(_) | Tok::Currency(_))) || view.is_name(k))
        || known_city(view).is_some()
}

/// The intent a fragment most plausibly asks for: the first complete request among its tool
/// topics, else the first that needs a question, else small talk.
fn best_intent(view: &View, topics: &[Topic]) -> Option<(Topic, Intent)> {
    let candidates: Vec<(Topic, Intent)> = topics
        .iter()
        .filter(|t| t.is_tool())
        .map(|&t| (t, extract(t, view, false)))
        .collect();
    if let Some(pos) = candidates
        .iter()
        .position(|(_, i)| !matches!(i, Intent::Clarify(_)))
    {
        return candidates.into_iter().nth(pos);
    }
    if let Some(first) = candidates.into_iter().next() {
        return Some(first);
    }
    [Topic::Capabilities, Topic::Greeting]
        .into_iter()
        .find(|t| topics.contains(t))
        .map(|t| (t, extract(t, view, false)))
}

// ---------------------------------------------------------------------------------------------
// Stage 5: slot extraction
// ---------------------------------------------------------------------------------------------

/// Builds the intent for `topic` from a fragment. `verbless` fragments borrowed their topic, so
/// a payment's recipient may simply be the first name in them ("…, Bob 40 dollars").
fn extract(topic: Topic, view: &View, verbless: bool) -> Intent {
    match topic {
        Topic::Payment => payment(view, verbless),
        Topic::Weather => weather(view),
        Topic::Location => Intent::Location,
        Topic::Bgm => bgm(view),
        Topic::Capabilities => Intent::Capabilities,
        Topic::Greeting => Intent::Greeting,
    }
}

fn payment(view: &View, verbless: bool) -> Intent {
    let amount = amount(view);
    let currency = amount
        .as_ref()
        .and_then(|a| a.currency)
        .or_else(|| {
            (0..view.len()).find_map(|k| match view.tok(k) {
                Some(Tok::Currency(code)) => Some(*code),
                _ => None,
            })
        })
        .unwrap_or(lexicon::DEFAULT_CURRENCY)
        .to_string();
    let mut recipients = recipients(view, verbless);
    if recipients.len() > 1 {
        return Intent::Clarify(Clarification::SeveralRecipients {
            recipients,
            amount: amount.map(|a| a.value),
            currency,
        });
    }
    match (amount, recipients.pop()) {
        (Some(a), Some(recipient)) => Intent::Payment {
            amount: a.value,
            currency,
            recipient,
            description: description(view, Some(a.at)),
        },
        (Some(a), None) => Intent::Clarify(Clarification::PaymentRecipient {
            amount: a.value,
            currency,
        }),
        (None, Some(recipient)) => Intent::Clarify(Clarification::PaymentAmount { recipient }),
        (None, None) => Intent::Clarify(Clarification::PaymentDetails),
    }
}

struct Amount {
    value: f64,
    currency: Option<&'static str>,
    /// Token index of the number.
    at: usize,
}

/// The payment amount: the first number with a currency next to it ("$50", "30 dollars",
/// "50ドル"), else the first number. A minus sign or "minus" in front makes it negative.
fn amount(view: &View) -> Option<Amount> {
    let currency_at = |k: Option<usize>| match k.and_then(|k| view.tok(k)) {
        Some(Tok::Currency(code)) => Some(*code),
        _ => None,
    };
    let is_negation = |k: Option<usize>| {
        k.is_some_and(|k| {
            matches!(view.tok(k), Some(Tok::Minus))
                || lexicon::NEGATIVE_WORDS.contains(&view.word(k).unwrap_or(view.raw(k)))
        })
    };
    let mut first: Option<Amount> = None;
    for k in 0..view.len() {
        let Some(Tok::Num(x)) = view.tok(k) else {
            continue;
        };
        let prev = k.checked_sub(1);
        let prev2 = k.checked_sub(2);
        let prefix = currency_at(prev).or_else(|| {
            if matches!(prev.and_then(|p| view.tok(p)), Some(Tok::Minus)) {
                currency_at(prev2)
            } else {
                None
            }
        });
        let negative = is_negation(prev) || (currency_at(prev).is_some() && is_negation(prev2));
        let found = Amount {
            value: if negative { -x } else { *x },
            currency: prefix.or_else(|| currency_at(Some(k + 1))),
            at: k,
        };
        if found.currency.is_some() {
            return Some(found);
        }
        first.get_or_insert(found);
    }
    first
}

/// Who to pay, in order of how explicit the text is:
/// 1. the name before the last に/へ ("花子さんに", "Aliceに"),
/// 2. the name after "to" ("to Bob"),
/// 3. the name right after the verb ("pay Alice", "send Bob $5"),
/// 4. in a verbless fragment, its first name ("…, Bob 40 dollars").
///
/// Names joined by "and"/"と" are all returned, so the caller can ask how to split.
fn recipients(view: &View, verbless: bool) -> Vec<String> {
    // The last に wins: in "ニューヨークにいる花子に" the recipient is next to the verb.
    for k in (0..view.len()).rev() {
        if view.is_particle(k, lexicon::RECIPIENT_PARTICLES) {
            let names = names_before(view, k);
            if !names.is_empty() {
                return names;
            }
        }
    }
    let verbs = |k: usize| {
        view.word(k).is_some_and(|w| {
            lexicon::SEND_VERBS.contains(&w)
                || lexicon::TRIGGERS
                    .iter()
                    .any(|(t, phrases)| *t == Topic::Payment && phrases.contains(&w))
        })
    };
    let after_word = (0..view.len())
        .filter(|&k| view.is_word_in(k, lexicon::RECIPIENT_WORDS))
        .chain((0..view.len()).filter(|&k| verbs(k)));
    for k in after_word {
        let names = names_after(view, k + 1);
        if !names.is_empty() {
            return names;
        }
    }
    if verbless {
        for k in 0..view.len() {
            let names = names_after(view, k);
            if !names.is_empty() {
                return names;
            }
        }
    }
    Vec::new()
}

/// Names starting at token `k` (after optional determiners), joined by "and", "," or "と".
fn names_after(view: &View, mut k: usize) -> Vec<String> {
    while view.is_word_in(k, lexicon::DETERMINERS) {
        k += 1;
    }
    let mut names = Vec::new();
    while let Some((name, next)) = name_run(view, k) {
        names.push(name);
        match next {
            Some(joiner)
                if is_name_joiner(view, joiner) && name_run(view, joiner + 1).is_some() =>
            {
                k = joiner + 1
            }
            _ => break,
        }
    }
    names
}

/// A run of name tokens starting at `k`: (the name, the token after it and any honorific).
fn name_run(view: &View, k: usize) -> Option<(String, Option<usize>)> {
    let end = (k..view.len())
        .find(|&j| !view.is_name(j))
        .unwrap_or(view.len());
    if end == k {
        return None;
    }
    let after = if matches!(view.tok(end), Some(Tok::Honorific)) {
        end + 1
    } else {
        end
    };
    Some((
        view.slice(k..end).to_string(),
        (after < view.len()).then_some(after),
    ))
}

/// Names ending just before the particle at `k`, walking back over honorifics and joiners:
/// "AliceとBobに" gives [Alice, Bob].
fn names_before(view: &View, k: usize) -> Vec<String> {
    let mut names = Vec::new();
    let mut end = k;
    loop {
        if end > 0 && matches!(view.tok(end - 1), Some(Tok::Honorific)) {
            end -= 1;
        }
        let start = (0..end).rev().take_while(|&j| view.is_name(j)).last();
        let Some(start) = start else { break };
        names.push(view.slice(start..end).to_string());
        match start.checked_sub(1) {
            Some(joiner) if is_name_joiner(view, joiner) => end = joiner,
            _ => break,
        }
    }
    names.reverse();
    names
}

fn is_name_joiner(view: &View, k: usize) -> bool {
    let raw = view.raw(k);
    lexicon::NAME_JOINERS.contains(&raw)
        && matches!(
            view.tok(k),
            Some(Tok::Word(_) | Tok::Punct(_) | Tok::Particle)
        )
}

/// What the payment is for: "for lunch" / "as a gift", or "ランチ代として". Stops before the
/// recipient or the amount, and drops trailing politeness ("for lunch please" → "lunch").
fn description(view: &View, amount_at: Option<usize>) -> String {
    for k in 0..view.len() {
        if view.is_particle(k, lexicon::DESCRIPTION_PARTICLES) {
            let start = (0..k)
                .rev()
                .take_while(|&j| {
                    matches!(view.tok(j), Some(Tok::Cjk | Tok::Word(_)))
                        || view.is_particle(j, lexicon::NOUN_LINKERS)
                })
                .last();
            if let Some(start) = start {
                return view.slice(start..k).to_string();
            }
        }
    }
    for k in 0..view.len() {
        if !view.is_word_in(k, lexicon::DESCRIPTION_WORDS) {
            continue;
        }
        let start = k + 1;
        let mut end = (start..view.len())
            .find(|&j| {
                view.is_word_in(j, lexicon::RECIPIENT_WORDS)
                    || matches!(view.tok(j), Some(Tok::Currency(_)))
                    || Some(j) == amount_at
            })
            .unwrap_or(view.len());
        while end > start
            && (view.is_word_in(end - 1, lexicon::TRAILING_FILLERS)
                || matches!(view.tok(end - 1), Some(Tok::Punct(_))))
        {
            end -= 1;
        }
        if end > start {
            return view.slice(start..end).to_string();
        }
    }
    String::new()
}

fn weather(view: &View) -> Intent {
    match weather_location(view) {
        Some(location) => Intent::Weather { location },
        None => Intent::Clarify(Clarification::WeatherLocation),
    }
}

/// The city to look up, most reliable first:
/// 1. a city from the lexicon anywhere (canonical English name);
/// 2. a name after "in"/"for"/"at" ("weather in Springfield");
/// 3. a name before の/は/で ahead of the weather word ("札幌の天気");
/// 4. a name right before the weather word ("springfield weather").
fn weather_location(view: &View) -> Option<String> {
    if let Some(city) = known_city(view) {
        return Some(city.to_string());
    }
    for k in 0..view.len() {
        if view.is_word_in(k, lexicon::LOCATION_WORDS) {
            let mut start = k + 1;
            while view.is_word_in(start, lexicon::DETERMINERS) {
                start += 1;
            }
            if let Some((name, _)) = name_run(view, start) {
                return Some(title_case(&name));
            }
        }
    }
    let trigger = lexicon::TRIGGERS
        .iter()
        .filter(|(t, _)| *t == Topic::Weather)
        .flat_map(|(_, phrases)| phrases.iter())
        .filter_map(|p| view.find(p).map(|(range, _)| range.start))
        .min()?;
    let before_particle = (1..trigger)
        .rev()
        .find(|&k| view.is_particle(k, lexicon::LOCATION_PARTICLES) && view.is_name(k - 1));
    if let Some(k) = before_particle {
        return Some(title_case(view.raw(k - 1)));
    }
    let start = (0..trigger).rev().take_while(|&j| view.is_name(j)).last()?;
    Some(title_case(view.slice(start..trigger)))
}

/// The leftmost (then longest) city alias in the fragment, as its canonical name.
fn known_city(view: &View) -> Option<&'static str> {
    lexicon::CITIES
        .iter()
        .flat_map(|(name, aliases)| aliases.iter().map(move |a| (*name, *a)))
        .filter_map(|(name, alias)| view.find(alias).map(|(_, at)| (at, alias.len(), name)))
        .min_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map(|(_, _, name)| name)
}

/// "springfield" → "Springfield"; words with capitals already ("McAllen") are left alone, as is
/// non-Latin text.
fn title_case(name: &str) -> String {
    name.split(' ')
        .map(|word| {
            if word.chars().any(char::is_uppercase) {
                return word.to_string();
            }
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn bgm(view: &View) -> Intent {
    let right_after_trigger = lexicon::TRIGGERS
        .iter()
        .filter(|(t, _)| *t == Topic::Bgm)
        .flat_map(|(_, phrases)| phrases.iter())
        .filter_map(|p| view.find(p))
        .find_map(|(range, _)| match view.tok(range.end) {
            Some(Tok::Num(n)) => Some(*n),
            _ => None,
        });
    let any_number = || {
        (0..view.len()).find_map(|k| match view.tok(k) {
            Some(Tok::Num(n)) => Some(*n),
            _ => None,
        })
    };
    let requested = right_after_trigger
        .or_else(|| ordinal(view))
        .or_else(any_number);
    match requested {
        None => Intent::Clarify(Clarification::BgmTrack),
        Some(n) => match lexicon::BGM_TRACKS.iter().find(|&&t| f64::from(t) == n) {
            Some(&track) => Intent::ChangeBgm { track },
            None => Intent::Clarify(Clarification::TrackOutOfRange { requested: n }),
        },
    }
}

fn ordinal(view: &View) -> Option<f64> {
    (0..view.len()).find_map(|k| {
        let w = view.word(k)?;
        lexicon::ORDINALS
            .iter()
            .find(|(name, _)| *name == w)
            .map(|(_, v)| f64::from(*v))
    })
}

#[cfg(test)]
mod tests {
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
}
