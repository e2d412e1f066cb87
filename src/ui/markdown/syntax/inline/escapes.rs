//! Backslash escapes and character references (`&amp;`, `&#35;`, `&#x22;`).

/// Resolves backslash escapes and entities (link destinations, code block info strings).
pub(crate) fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(c) = text[i..].chars().next() {
        match c {
            '\\' if text[i + 1..]
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_punctuation()) =>
            {
                out.push_str(&text[i + 1..i + 2]);
                i += 2;
            }
            '&' => match entity(&text[i..]) {
                Some((decoded, length)) => {
                    out.push(decoded);
                    i += length;
                }
                None => {
                    out.push('&');
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// The named entities recognized; any other `&name;` stays as written.
const ENTITIES: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("nbsp", '\u{a0}'),
    ("copy", '©'),
    ("reg", '®'),
    ("trade", '™'),
    ("hellip", '…'),
    ("mdash", '—'),
    ("ndash", '–'),
    ("lsquo", '‘'),
    ("rsquo", '’'),
    ("ldquo", '“'),
    ("rdquo", '”'),
    ("laquo", '«'),
    ("raquo", '»'),
    ("middot", '·'),
    ("bull", '•'),
    ("deg", '°'),
    ("times", '×'),
    ("divide", '÷'),
    ("plusmn", '±'),
    ("euro", '€'),
    ("pound", '£'),
    ("yen", '¥'),
    ("cent", '¢'),
    ("sect", '§'),
    ("para", '¶'),
    ("larr", '←'),
    ("rarr", '→'),
    ("uarr", '↑'),
    ("darr", '↓'),
    ("harr", '↔'),
    ("le", '≤'),
    ("ge", '≥'),
    ("ne", '≠'),
    ("asymp", '≈'),
    ("infin", '∞'),
];

/// An entity at the start of `text` (`&name;`, `&#123;`, `&#x1F;`): the character and length.
pub(super) fn entity(text: &str) -> Option<(char, usize)> {
    let end = text[1..]
        .char_indices()
        .take(33)
        .find(|(_, c)| *c == ';')?
        .0
        + 1;
    let body = &text[1..end];
    let decoded = if let Some(number) = body.strip_prefix('#') {
        let (digits, radix, max) = match number.strip_prefix(['x', 'X']) {
            Some(hex) => (hex, 16, 6),
            None => (number, 10, 7),
        };
        if digits.is_empty() || digits.len() > max || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        let code = u32::from_str_radix(digits, radix).ok()?;
        char::from_u32(code)
            .filter(|c| *c != '\0')
            .unwrap_or('\u{fffd}')
    } else {
        ENTITIES.iter().find(|(name, _)| *name == body)?.1
    };
    Some((decoded, end + 1))
}
