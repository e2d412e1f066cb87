//! Inline text: emphasis, strong, strikethrough, code spans, links, autolinks, escapes, entities
//! and breaks (CommonMark's inline rules, with GFM's `~~strikethrough~~`). Raw HTML stays text.

use std::collections::HashMap;

use super::{Node, safe_href};

/// Link reference definitions: normalized label → destination.
pub(super) type Definitions = HashMap<String, String>;

/// A label as definitions are looked up: inner whitespace collapsed, ASCII letters folded
/// (CommonMark folds all of Unicode; its case tables would be ~7 KB of the wasm bundle).
fn normalize_label(label: &str) -> String {
    label
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

/// Reads the link reference definitions at the start of a paragraph's text into `defs` (the
/// first definition of a label wins) and returns how many bytes they take.
pub(super) fn take_definitions(text: &str, defs: &mut Definitions) -> usize {
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
fn label_end(text: &str) -> Option<usize> {
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
fn skip_space(text: &str, mut i: usize, newline: bool) -> usize {
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
fn destination(text: &str, i: usize) -> Option<(String, usize)> {
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
fn title(text: &str, i: usize) -> Option<usize> {
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

/// Resolves backslash escapes and entities (link destinations, code block info strings).
pub(super) fn unescape(text: &str) -> String {
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
fn entity(text: &str) -> Option<(char, usize)> {
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

/// A run of `*`, `_` or `~` that may open or close emphasis.
#[derive(Debug, Clone, Copy)]
struct Delimiter {
    marker: u8,
    count: usize,
    original: usize,
    opens: bool,
    closes: bool,
}

impl Delimiter {
    fn kind(&self) -> usize {
        match self.marker {
            b'*' => 0,
            b'_' => 1,
            _ => 2,
        }
    }
}

/// How deeply inline nodes may nest (emphasis in links in emphasis…); deeper markup is kept as
/// its text, so hostile input cannot build a tree too deep to render or drop.
const MAX_DEPTH: usize = 16;

#[derive(Debug)]
enum Item {
    /// A node and how deeply nodes nest inside it (0 for a leaf).
    Node(Node, usize),
    Delimiter(Delimiter),
    /// A `[` (or `![`) that may open a link; `start` is where its text begins.
    Bracket {
        image: bool,
        active: bool,
        start: usize,
    },
    /// Folded into a node elsewhere.
    Gone,
}

/// Whether `c` counts as punctuation for the flanking rules: ASCII punctuation, and the Unicode
/// blocks of punctuation and symbols text actually uses (Latin-1, general punctuation, currency,
/// arrows, maths, shapes, CJK and full-width punctuation, emoji). Ranges rather than Unicode's
/// category tables, which would cost the wasm bundle more than this whole parser.
fn punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c,
            '\u{a1}'..='\u{bf}'
            | '\u{d7}'
            | '\u{f7}'
            | '\u{2010}'..='\u{2027}'
            | '\u{2030}'..='\u{205e}'
            | '\u{20a0}'..='\u{20cf}'
            | '\u{2100}'..='\u{2bff}'
            | '\u{3001}'..='\u{303f}'
            | '\u{fe10}'..='\u{fe1f}'
            | '\u{fe30}'..='\u{fe4f}'
            | '\u{ff01}'..='\u{ff0f}'
            | '\u{ff1a}'..='\u{ff20}'
            | '\u{ff3b}'..='\u{ff40}'
            | '\u{ff5b}'..='\u{ff65}'
            | '\u{1f000}'..='\u{1faff}')
}

struct Parser<'a> {
    source: &'a str,
    defs: &'a Definitions,
    items: Vec<Item>,
    text: String,
    brackets: Vec<usize>,
    /// Start positions of backtick runs by run length (found on first use).
    backticks: Option<HashMap<usize, Vec<usize>>>,
}

/// Parses inline text into nodes.
pub(super) fn parse(source: &str, defs: &Definitions) -> Vec<Node> {
    let mut p = Parser {
        source,
        defs,
        items: Vec::new(),
        text: String::new(),
        brackets: Vec::new(),
        backticks: None,
    };
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        i = match bytes[i] {
            b'\\' => match bytes.get(i + 1) {
                Some(b'\n') => {
                    p.node(Node::Break);
                    skip_space(source, i + 2, false)
                }
                Some(b) if b.is_ascii_punctuation() => {
                    p.text.push(*b as char);
                    i + 2
                }
                _ => {
                    p.text.push('\\');
                    i + 1
                }
            },
            b'`' => p.code_span(i),
            b @ (b'*' | b'_' | b'~') => p.delimiter(i, b),
            b'!' if bytes.get(i + 1) == Some(&b'[') => p.bracket(i + 2, true),
            b'[' => p.bracket(i + 1, false),
            b']' => p.close_bracket(i),
            b'<' => match autolink(&source[i..]) {
                Some((node, length)) => {
                    p.node(node);
                    i + length
                }
                // Raw HTML is shown as the text it is, and nothing inside it is Markdown.
                None => match raw_html(&source[i..]) {
                    Some(length) => {
                        p.text.push_str(&source[i..i + length]);
                        i + length
                    }
                    None => {
                        p.text.push('<');
                        i + 1
                    }
                },
            },
            b'&' => match entity(&source[i..]) {
                Some((c, length)) => {
                    p.text.push(c);
                    i + length
                }
                None => {
                    p.text.push('&');
                    i + 1
                }
            },
            b'\n' => {
                let kept = p.text.trim_end_matches([' ', '\t']).len();
                let hard = p.text.len() - kept >= 2;
                p.text.truncate(kept);
                if hard {
                    p.node(Node::Break);
                } else {
                    p.text.push('\n');
                }
                skip_space(source, i + 1, false)
            }
            _ => {
                let c = source[i..].chars().next().unwrap_or(' ');
                p.text.push(c);
                i + c.len_utf8()
            }
        };
    }
    p.flush();
    nodes(process_emphasis(p.items))
}

impl Parser<'_> {
    fn flush(&mut self) {
        if !self.text.is_empty() {
            let text = std::mem::take(&mut self.text);
            self.items.push(Item::Node(Node::Text(text), 0));
        }
    }

    fn node(&mut self, node: Node) {
        self.flush();
        let depth = usize::from(matches!(node, Node::Link { .. }));
        self.items.push(Item::Node(node, depth));
    }

    fn code_span(&mut self, i: usize) -> usize {
        let bytes = self.source.as_bytes();
        let length = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let runs = self.backticks.get_or_insert_with(|| {
            let mut runs: HashMap<usize, Vec<usize>> = HashMap::new();
            let mut j = 0;
            while j < bytes.len() {
                if bytes[j] == b'`' {
                    let n = bytes[j..].iter().take_while(|b| **b == b'`').count();
                    runs.entry(n).or_default().push(j);
                    j += n;
                } else {
                    j += 1;
                }
            }
            runs
        });
        let close = runs.get(&length).and_then(|starts| {
            let k = starts.partition_point(|s| *s <= i);
            starts.get(k).copied()
        });
        let Some(close) = close else {
            self.text.push_str(&self.source[i..i + length]);
            return i + length;
        };
        let content = self.source[i + length..close].replace('\n', " ");
        let content = match content.strip_prefix(' ').and_then(|c| c.strip_suffix(' ')) {
            Some(inner) if !content.bytes().all(|b| b == b' ') => inner.to_owned(),
            _ => content,
        };
        self.node(Node::InlineCode(content));
        close + length
    }

    fn delimiter(&mut self, i: usize, marker: u8) -> usize {
        let count = self.source.as_bytes()[i..]
            .iter()
            .take_while(|b| **b == marker)
            .count();
        let end = i + count;
        if marker == b'~' && count > 2 {
            self.text.push_str(&self.source[i..end]);
            return end;
        }
        let before = self.source[..i].chars().next_back().unwrap_or(' ');
        let after = self.source[end..].chars().next().unwrap_or(' ');
        let left = !after.is_whitespace()
            && (!punctuation(after) || before.is_whitespace() || punctuation(before));
        let right = !before.is_whitespace()
            && (!punctuation(before) || after.is_whitespace() || punctuation(after));
        let (opens, closes) = if marker == b'~' {
            // GFM strikethrough: `~~` may sit inside a word; a single `~` may not.
            (
                !after.is_whitespace()
                    && (count > 1 || before.is_whitespace() || punctuation(before)),
                !before.is_whitespace()
                    && ((count > 1 && !punctuation(before))
                        || after.is_whitespace()
                        || punctuation(after)),
            )
        } else if marker == b'_' {
            (
                left && (!right || punctuation(before)),
                right && (!left || punctuation(after)),
            )
        } else {
            (left, right)
        };
        self.flush();
        self.items.push(Item::Delimiter(Delimiter {
            marker,
            count,
            original: count,
            opens,
            closes,
        }));
        end
    }

    fn bracket(&mut self, start: usize, image: bool) -> usize {
        self.flush();
        self.brackets.push(self.items.len());
        self.items.push(Item::Bracket {
            image,
            active: true,
            start,
        });
        start
    }

    fn close_bracket(&mut self, i: usize) -> usize {
        let opener = self.brackets.last().and_then(|&o| match self.items[o] {
            Item::Bracket {
                image,
                active,
                start,
            } => Some((o, image, active, start)),
            _ => None,
        });
        let Some((o, image, active, start)) = opener else {
            self.text.push(']');
            return i + 1;
        };
        let target = if active {
            self.link_target(start, i)
        } else {
            None
        };
        let Some((dest, end)) = target else {
            self.brackets.pop();
            self.text.push(']');
            return i + 1;
        };
        self.flush();
        let inner = process_emphasis(self.items.split_off(o + 1));
        let (children, depth) = nest(inner);
        self.items[o] = Item::Node(super::link(&dest, children), depth);
        self.brackets.pop();
        if !image {
            // No links inside links.
            for &b in &self.brackets {
                if let Item::Bracket {
                    image: false,
                    active,
                    ..
                } = &mut self.items[b]
                {
                    *active = false;
                }
            }
        }
        end
    }

    /// The destination of the link whose text is `source[start..close]`, and where it ends:
    /// `(dest "title")`, `[label]`, `[]` or a shortcut `[text]` with a definition.
    fn link_target(&self, start: usize, close: usize) -> Option<(String, usize)> {
        let source = self.source;
        let after = close + 1;
        if source[after..].starts_with('(') {
            let i = skip_space(source, after + 1, true);
            let inline = destination(source, i).and_then(|(dest, j)| {
                let k = skip_space(source, j, true);
                let k = if k > j {
                    title(source, k).map_or(k, |t| skip_space(source, t, true))
                } else {
                    k
                };
                source[k..].starts_with(')').then_some((dest, k + 1))
            });
            if inline.is_some() {
                return inline;
            }
        }
        let lookup = |label: &str| self.defs.get(&normalize_label(label)).cloned();
        if source[after..].starts_with("[]") {
            return lookup(&source[start..close]).map(|dest| (dest, after + 2));
        }
        if let Some(rest) = source[after..].strip_prefix('[')
            && let Some(end) = label_end(rest)
        {
            return lookup(&rest[..end]).map(|dest| (dest, after + 1 + end + 1));
        }
        lookup(&source[start..close]).map(|dest| (dest, after))
    }
}

/// `<scheme:…>` or `<user@host>` at the start of `text`: a link to it, and its length.
fn autolink(text: &str) -> Option<(Node, usize)> {
    let end = text.find('>')?;
    let inner = &text[1..end];
    if inner.is_empty() || inner.contains(|c: char| c.is_whitespace() || c == '<') {
        return None;
    }
    let href = if let Some((scheme, _)) = inner.split_once(':') {
        let valid = (2..=32).contains(&scheme.len())
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'));
        valid.then(|| inner.to_owned())?
    } else {
        let (local, domain) = inner.split_once('@')?;
        let local_ok = !local.is_empty()
            && local
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".!#$%&'*+/=?^_`{|}~-".contains(c));
        let domain_ok = domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
        (local_ok && domain_ok).then(|| format!("mailto:{inner}"))?
    };
    let node = Node::Link {
        href: safe_href(&href),
        children: vec![Node::Text(inner.to_owned())],
    };
    Some((node, end + 1))
}

/// The length of the raw HTML at the start of `text` (CommonMark 6.6): an open or closing tag, a
/// comment, a processing instruction, a declaration or a CDATA section.
fn raw_html(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let after =
        |marker: &str, from: usize| text[from..].find(marker).map(|at| from + at + marker.len());
    if text.starts_with("<!-->") {
        return Some(5);
    }
    if text.starts_with("<!--->") {
        return Some(6);
    }
    if text.starts_with("<!--") {
        return after("-->", 4);
    }
    if text.starts_with("<?") {
        return after("?>", 2);
    }
    if text.starts_with("<![CDATA[") {
        return after("]]>", 9);
    }
    if text.starts_with("<!") {
        return bytes
            .get(2)
            .filter(|b| b.is_ascii_alphabetic())
            .and_then(|_| after(">", 3));
    }
    if let Some(rest) = text.strip_prefix("</") {
        let name = tag_name(rest)?;
        let j = 2 + name + skip_html_space(&bytes[2 + name..]);
        return (bytes.get(j) == Some(&b'>')).then_some(j + 1);
    }
    let name = tag_name(&text[1..])?;
    let mut j = 1 + name;
    loop {
        let space = skip_html_space(&bytes[j..]);
        match bytes.get(j + space)? {
            b'>' => return Some(j + space + 1),
            b'/' => return (bytes.get(j + space + 1) == Some(&b'>')).then_some(j + space + 2),
            _ if space > 0 => j += space + attribute(&bytes[j + space..])?,
            _ => return None,
        }
    }
}

/// The length of a tag name (an ASCII letter, then letters, digits and `-`).
fn tag_name(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if !bytes.first()?.is_ascii_alphabetic() {
        return None;
    }
    Some(
        bytes
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count(),
    )
}

/// Spaces, tabs and line endings at the start of `bytes`.
fn skip_html_space(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .count()
}

/// The length of an attribute (a name, optionally `=` and a value) at the start of `bytes`.
fn attribute(bytes: &[u8]) -> Option<usize> {
    let first = *bytes.first()?;
    if !(first.is_ascii_alphabetic() || first == b'_' || first == b':') {
        return None;
    }
    let mut j = 1 + bytes[1..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
        .count();
    let space = skip_html_space(&bytes[j..]);
    if bytes.get(j + space) != Some(&b'=') {
        return Some(j);
    }
    j += space + 1;
    j += skip_html_space(&bytes[j..]);
    match *bytes.get(j)? {
        quote @ (b'"' | b'\'') => {
            let close = bytes[j + 1..].iter().position(|b| *b == quote)?;
            Some(j + 1 + close + 1)
        }
        _ => {
            let value = bytes[j..]
                .iter()
                .take_while(|b| {
                    !matches!(
                        b,
                        b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'=' | b'<' | b'>' | b'`'
                    )
                })
                .count();
            (value > 0).then_some(j + value)
        }
    }
}

/// The end of the item list in `process_emphasis`.
const END: usize = usize::MAX;

/// Matches emphasis delimiters (CommonMark's "process emphasis") and returns the items in order.
/// The items are a linked list while matching, so what a match folds into a node is unlinked
/// once and never walked again.
fn process_emphasis(mut items: Vec<Item>) -> Vec<Item> {
    let len = items.len();
    let mut next: Vec<usize> = (1..=len).map(|i| if i < len { i } else { END }).collect();
    let mut prev: Vec<usize> = (0..len).map(|i| i.checked_sub(1).unwrap_or(END)).collect();
    let mut head = if len == 0 { END } else { 0 };
    // Per marker, whether the closer can also open, and its length mod 3: delimiters below this
    // index were already searched in vain for such a closer.
    let mut floor = [[[0usize; 3]; 2]; 3];
    let mut c = head;
    while c != END {
        let closer = match &items[c] {
            Item::Delimiter(d) if d.closes && d.count > 0 => *d,
            _ => {
                c = next[c];
                continue;
            }
        };
        let slot = &mut floor[closer.kind()][closer.opens as usize][closer.original % 3];
        let mut o = prev[c];
        let mut opener = None;
        while o != END {
            if let Item::Delimiter(d) = &items[o] {
                if o < *slot {
                    break;
                }
                let matches = d.marker == closer.marker
                    && d.opens
                    && d.count > 0
                    && if closer.marker == b'~' {
                        d.count == closer.count
                    } else {
                        let both = d.closes || closer.opens;
                        !(both
                            && (d.original + closer.original) % 3 == 0
                            && !(d.original % 3 == 0 && closer.original % 3 == 0))
                    };
                if matches {
                    opener = Some((o, *d));
                    break;
                }
            }
            o = prev[o];
        }
        let Some((o, open)) = opener else {
            *slot = c;
            if !closer.opens
                && let Item::Delimiter(d) = &mut items[c]
            {
                d.closes = false;
            }
            c = next[c];
            continue;
        };
        let used = if closer.marker == b'~' {
            closer.count
        } else if open.count >= 2 && closer.count >= 2 {
            2
        } else {
            1
        };
        let mut taken = Vec::new();
        let mut i = next[o];
        while i != c {
            taken.push(std::mem::replace(&mut items[i], Item::Gone));
            i = next[i];
        }
        let (children, depth) = nest(taken);
        let node = match (closer.marker, used) {
            (b'~', _) => Node::Strike(children),
            (_, 2) => Node::Strong(children),
            _ => Node::Emphasis(children),
        };
        let m = items.len();
        items.push(Item::Node(node, depth));
        next.push(c);
        prev.push(o);
        next[o] = m;
        prev[c] = m;
        for index in [o, c] {
            let Item::Delimiter(d) = &mut items[index] else {
                continue;
            };
            d.count -= used;
            if d.count == 0 {
                items[index] = Item::Gone;
                let (before, after) = (prev[index], next[index]);
                if before == END {
                    head = after;
                } else {
                    next[before] = after;
                }
                if after != END {
                    prev[after] = before;
                }
            }
        }
        if matches!(items[c], Item::Gone) {
            c = next[c];
        }
    }
    let mut ordered = Vec::with_capacity(len);
    let mut i = head;
    while i != END {
        ordered.push(std::mem::replace(&mut items[i], Item::Gone));
        i = next[i];
    }
    ordered
}

/// The children of a new node made of `items`, and the new node's depth. Beyond `MAX_DEPTH`
/// the children are their plain text.
fn nest(items: impl IntoIterator<Item = Item>) -> (Vec<Node>, usize) {
    let mut depth = 0;
    let items: Vec<Item> = items
        .into_iter()
        .inspect(|item| {
            if let Item::Node(_, d) = item {
                depth = depth.max(*d);
            }
        })
        .collect();
    let children = nodes(items);
    if depth < MAX_DEPTH {
        (children, depth + 1)
    } else {
        let mut text = String::new();
        plain_text(&children, &mut text);
        (vec![Node::Text(text)], 1)
    }
}

/// The text of `nodes` without their markup.
fn plain_text(nodes: &[Node], out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) | Node::InlineCode(text) => out.push_str(text),
            Node::Break => out.push('\n'),
            Node::Emphasis(children)
            | Node::Strong(children)
            | Node::Strike(children)
            | Node::Link { children, .. } => plain_text(children, out),
            _ => {}
        }
    }
}

/// Items as nodes: unmatched delimiters and brackets become their text, adjacent text merges.
fn nodes(items: impl IntoIterator<Item = Item>) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for item in items {
        let node = match item {
            Item::Node(node, _) => node,
            Item::Delimiter(d) if d.count > 0 => {
                Node::Text((d.marker as char).to_string().repeat(d.count))
            }
            Item::Bracket { image, .. } => Node::Text(if image { "![" } else { "[" }.to_owned()),
            Item::Delimiter(_) | Item::Gone => continue,
        };
        match (out.last_mut(), node) {
            (Some(Node::Text(previous)), Node::Text(text)) => previous.push_str(&text),
            (_, node) => out.push(node),
        }
    }
    out
}
