//! Reading tool outputs (JSON) and writing numbers, money and lists of names.

use super::*;

/// A field of a tool output, also looked up inside an `output` or `result` wrapper (browser
/// executors wrap their results). Null counts as absent.
pub(super) fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.get(key)
        .or_else(|| v.get("output").and_then(|o| o.get(key)))
        .or_else(|| v.get("result").and_then(|o| o.get(key)))
        .filter(|x| !x.is_null())
}

/// A non-blank string field.
pub(super) fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    field(v, key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// A finite number field; numeric strings ("950.0") are accepted too.
pub(super) fn number(v: &Value, key: &str) -> Option<f64> {
    let value = field(v, key)?;
    value
        .as_f64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
        .filter(|x: &f64| x.is_finite())
}

pub(super) fn classify(error: &str) -> Option<Failure> {
    let lower = error.to_lowercase();
    lexicon::FAILURE_PATTERNS
        .iter()
        .find(|(pattern, _)| lower.contains(pattern))
        .map(|(_, kind)| *kind)
}

/// An error text fit to quote: one line, no trailing full stop (the sentence adds its own),
/// at most 160 characters.
pub(super) fn clean_error(lang: Lang, error: &str) -> String {
    let one_line = error.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = one_line.trim_end_matches(['.', '。']);
    if trimmed.is_empty() {
        return pick(lang, "unknown error", "不明なエラー").to_string();
    }
    snippet(trimmed, 160)
}

/// Whitespace collapsed and cut to `max` characters, with an ellipsis if cut.
pub(super) fn snippet(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max).collect();
    cut.push('…');
    cut
}

/// `x` with at most `decimals` decimals and no trailing zeros: 9.60 → "9.6", 18.0 → "18".
pub(super) fn decimal(x: f64, decimals: usize) -> String {
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
pub(super) fn money(lang: Lang, amount: f64, code: &str) -> String {
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
pub(super) fn grouped(amount: f64) -> String {
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
pub(super) fn track_list(lang: Lang) -> String {
    let tracks: Vec<String> = lexicon::BGM_TRACKS.iter().map(u8::to_string).collect();
    match (lang, tracks.split_last()) {
        (_, None) => String::new(),
        (_, Some((last, []))) => last.clone(),
        (Lang::En, Some((last, rest))) => format!("{} or {last}", rest.join(", ")),
        (Lang::Ja, Some((last, rest))) => format!("{}か{last}", rest.join("、")),
    }
}

/// "Alice and Bob", "Alice, Bob and Carol" / "AliceとBob".
pub(super) fn join_names(lang: Lang, names: &[String]) -> String {
    match (lang, names.split_last()) {
        (_, None) => String::new(),
        (_, Some((last, []))) => last.clone(),
        (Lang::En, Some((last, rest))) => format!("{} and {last}", rest.join(", ")),
        (Lang::Ja, Some(_)) => names.join("と"),
    }
}

/// `before + piece + after` when the piece is known, otherwise nothing: the optional parts
/// of a sentence ("… (transaction txn_1)").
pub(super) fn around(piece: Option<&str>, before: &str, after: &str) -> String {
    piece
        .map(|p| format!("{before}{p}{after}"))
        .unwrap_or_default()
}

pub(super) fn parenthesized(inner: &str, open: &str, close: &str) -> String {
    if inner.is_empty() {
        String::new()
    } else {
        format!("{open}{inner}{close}")
    }
}

pub(super) fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

pub(super) fn pick(lang: Lang, en: &'static str, ja: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Ja => ja,
    }
}
