//! Stages 1 and 2: the text normalized (full-width ASCII, typographic apostrophes), slash
//! commands, and sequence markers cutting the text into steps.

use super::*;

/// Full-width ASCII (U+FF01–FF5E) becomes ASCII, the ideographic space a space, and
/// typographic apostrophes and minus signs their ASCII forms. Byte offsets are taken after this,
/// so names and descriptions are sliced from the normalized text.
pub(super) fn normalize(text: &str) -> String {
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
pub(super) fn slash_command(text: &str) -> Option<Intent> {
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

/// Cuts `text` at every sequence marker (leftmost first, longest at a position). Clauses may be
/// empty or hold only punctuation; they simply yield no intents.
pub(super) fn split_into_steps(text: &str) -> Vec<&str> {
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
