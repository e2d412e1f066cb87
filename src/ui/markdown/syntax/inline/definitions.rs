//! Link reference definitions (`[label]: destination "title"`) and the pieces of link syntax
//! they share with inline links: labels, destinations, titles.

use std::collections::HashMap;

use super::unescape;

/// Link reference definitions: normalized label → destination.
pub(crate) type Definitions = HashMap<String, String>;

/// A label as definitions are looked up: inner whitespace collapsed, ASCII letters folded
/// (CommonMark folds all of Unicode; its case tables would be ~7 KB of the wasm bundle).
pub(super) fn normalize_label(label: &str) -> String {
    label
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

/// Reads the link reference definitions at the start of a paragraph's text into `defs` (the
/// first definition of a label wins) and returns how many bytes they take.
pub(crate) fn take_definitions(text: &str, defs: &mut Definitions) -> usize {
    let mut at = 0;
    while let Some((label, dest, end)) = definition(text, at) {
        defs.entry(label).or_insert(dest);
        at = end;
    }
    at
}

/// One definition at `at`: its normalized label, destination, and where the next line starts.
fn definition(text: &str, at: usize) -> Option<(String, String, usize)> {
    let rest = text.get(at..)?;
    let after_open = rest.strip_prefix('[')?;
    let close = label_end(after_open)?;
    let label = &after_open[..close];
    let mut i = at + 1 + close + 1;
    if !text[i..].starts_with(':') {
        return None;
    }
    i = skip_space(text, i + 1, true);
    let (dest, after_dest) = destination(text, i)?;
    if dest.is_empty() && !text[i..].starts_with('<') {
        return None;
    }
    let line_end = |from: usize| {
        let rest = &text[from..];
        let stop = rest.find('\n').unwrap_or(rest.len());
        rest[..stop]
            .trim()
            .is_empty()
            .then(|| (from + stop + 1).min(text.len()))
    };
    // An optional title, separated by whitespace; the definition must end its line.
    let title_at = skip_space(text, after_dest, true);
    let with_title = (title_at > after_dest)
        .then(|| title(text, title_at))
        .flatten()
        .and_then(line_end);
    let end = with_title.or_else(|| line_end(after_dest))?;
    Some((normalize_label(label), dest, end))
}

/// The end of a link label (the index of its `]` in `text`, which starts after the `[`).
pub(super) fn label_end(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' => return None,
            ']' => return (!text[..i].trim().is_empty() && i <= 999).then_some(i),
            _ => {}
        }
    }
    None
}

/// Skips spaces and tabs, and at most one line ending if `newline`.
pub(super) fn skip_space(text: &str, mut i: usize, newline: bool) -> usize {
    let bytes = text.as_bytes();
    let mut seen_newline = false;
    while let Some(&b) = bytes.get(i) {
        match b {
            b' ' | b'\t' => {}
            b'\n' if newline && !seen_newline => seen_newline = true,
            _ => break,
        }
        i += 1;
    }
    i
}

/// A link destination at `i` (`<…>` or raw with balanced parentheses), unescaped, and its end.
pub(super) fn destination(text: &str, i: usize) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    if bytes.get(i) == Some(&b'<') {
        let mut j = i + 1;
        while let Some(&b) = bytes.get(j) {
            match b {
                b'>' => return Some((unescape(&text[i + 1..j]), j + 1)),
                b'<' | b'\n' => return None,
                b'\\' => j += 1,
                _ => {}
            }
            j += 1;
        }
        return None;
    }
    let mut depth = 0usize;
    let mut j = i;
    while let Some(&b) = bytes.get(j) {
        match b {
            b'\\' if bytes.get(j + 1).is_some_and(u8::is_ascii_punctuation) => j += 1,
            b'(' => depth += 1,
            b')' if depth == 0 => break,
            b')' => depth -= 1,
            b if b <= b' ' => break,
            _ => {}
        }
        j += 1;
    }
    (depth == 0).then(|| (unescape(&text[i..j]), j))
}

/// A link title at `i` (`"…"`, `'…'` or `(…)`, in which a `(` must be escaped) and its end.
pub(super) fn title(text: &str, i: usize) -> Option<usize> {
    let close = match *text.as_bytes().get(i)? {
        b'"' => b'"',
        b'\'' => b'\'',
        b'(' => b')',
        _ => return None,
    };
    let bytes = text.as_bytes();
    let mut j = i + 1;
    while let Some(&b) = bytes.get(j) {
        if b == b'\\' {
            j += 1;
        } else if b == close {
            return Some(j + 1);
        } else if close == b')' && b == b'(' {
            return None;
        }
        j += 1;
    }
    None
}
