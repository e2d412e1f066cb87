//! Stage 3: the tokenizer — words, numbers in every script, currency symbols, and Japanese
//! runs cut at particles.

use super::*;

pub(super) fn is_hiragana(c: char) -> bool {
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

pub(super) fn is_japanese(c: char) -> bool {
    is_hiragana(c) || is_katakana(c) || is_kanji(c)
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
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
pub(super) struct Token {
    pub(super) tok: Tok,
    /// Byte range in the clause text.
    pub(super) span: Range<usize>,
}

pub(super) fn tokenize(text: &str) -> Vec<Token> {
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
