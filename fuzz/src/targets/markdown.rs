//! Differential: the page's Markdown parser against pulldown-cmark, on text built from
//! Markdown's own building blocks.
//!
//! Each input byte picks a piece (`PIECES`: words, delimiters, list and quote markers, fences,
//! table pipes, escapes, entities, line breaks, CJK text), so almost every input is the kind of
//! Markdown the parser has to get right, rather than noise.
//!
//! Invariants:
//! * nothing panics, and the tree stays at most [`MAX_DEPTH`] deep;
//! * the text reads as pulldown-cmark reads it (`reference::compare`: the same nodes, apart from
//!   the documented deliberate differences);
//! * every prefix of the text (a streamed answer is re-parsed at every delta) parses too.

use crate::markdown::{parse, reference};

/// What the input's bytes choose from.
const PIECES: &[&str] = &[
    "word",
    "other",
    " ",
    "  ",
    "**",
    "*",
    "_",
    "__",
    "~~",
    "`",
    "```",
    "[",
    "](https://x.test)",
    "]",
    "](/local \"title\")",
    "\n",
    "\n\n",
    "- ",
    "* ",
    "+ ",
    "1. ",
    "2) ",
    "> ",
    "# ",
    "## ",
    "|",
    "| --- |",
    "\\",
    "&amp;",
    "&#35;",
    "<",
    ">",
    "<https://a.test>",
    "    ",
    "\t",
    "---",
    "a_b",
    "3*4",
    "。",
    "日本",
    "!",
    "(",
    ")",
    "[ref]",
    "\n[ref]: https://r.test\n",
    "~~~",
    "<b>",
    "    code",
    "1.",
    "-",
];

/// The deepest tree the parser may build (it cuts hostile nesting off at a fixed depth).
pub const MAX_DEPTH: usize = 40;

/// One fuzz input: panics when an invariant above does not hold.
pub fn check(input: &[u8]) {
    let text: String = input
        .iter()
        .take(64)
        .map(|&b| PIECES[usize::from(b) % PIECES.len()])
        .collect();
    let nodes = parse(&text);
    assert!(
        reference::depth(&nodes) <= MAX_DEPTH,
        "{text:?} nests too deep"
    );
    if let Err((ours, theirs)) = reference::compare(&text) {
        panic!("{text:?}\n  ours:   {ours:?}\n  theirs: {theirs:?}");
    }
    for end in text.char_indices().map(|(i, _)| i) {
        parse(&text[..end]);
    }
}
