//! The parser's own cases, and a differential check against pulldown-cmark (a dev-dependency
//! only: the shipped parser is ours) on the Markdown models actually write.

use super::{
    reference::{child_lists, normalized, reference},
    *,
};

/// The server's HTML of each element kind: one generic element type renders every plain
/// tag, so the tags themselves are checked here (and after hydration in end2end/).
#[cfg(feature = "ssr")]
#[test]
fn every_element_renders_with_its_own_tag() {
    let html = render(parse(
        "## T\n\n**b** *i* ~~s~~ `c` [l](https://x.test)\n\n- x\n\n2. y\n\n> q\n\n| a |\n| - |\n| 1 |\n\n---\n",
    ))
    .to_html()
    // Hydration markers of lists of views.
    .replace("<!>", "");
    for expected in [
        "<h4>T</h4>",
        "<strong>b</strong>",
        "<em>i</em>",
        "<del>s</del>",
        "<code>c</code>",
        "<a href=\"https://x.test\"",
        "<ul><li>x</li></ul>",
        "<ol start=\"2\"><li>y</li></ol>",
        "<blockquote><p>q</p></blockquote>",
        "<th>a</th>",
        "<td>1</td>",
        "<hr>",
    ] {
        assert!(html.contains(expected), "{expected} in {html}");
    }
}

#[test]
fn common_markdown_becomes_nodes() {
    let nodes = parse("Hello **world** and `code`.\n\n- a\n- b\n\n```rust\nfn x() {}\n```\n");
    assert_eq!(
        nodes[0],
        Node::Paragraph(vec![
            Node::Text("Hello ".into()),
            Node::Strong(vec![Node::Text("world".into())]),
            Node::Text(" and ".into()),
            Node::InlineCode("code".into()),
            Node::Text(".".into()),
        ])
    );
    assert!(matches!(&nodes[1], Node::List { start: None, items } if items.len() == 2));
    assert_eq!(
        nodes[2],
        Node::Code {
            language: "rust".into(),
            code: "fn x() {}\n".into()
        }
    );
}

#[test]
fn script_never_survives() {
    let nodes = parse(
        "<script>alert(1)</script>\n\n[click](javascript:alert(1)) <img src=x onerror=alert(1)>",
    );
    let text = format!("{nodes:?}");
    assert!(
        text.contains("<script>alert(1)</script>"),
        "shown as text: {text}"
    );
    assert!(
        matches!(&nodes[1], Node::Paragraph(c) if matches!(&c[0], Node::Link { href: None, .. }))
    );
    assert!(text.contains("onerror"), "the tag is text, not an element");
}

#[test]
fn only_safe_hrefs_are_kept() {
    assert_eq!(
        safe_href("https://example.com"),
        Some("https://example.com".into())
    );
    assert_eq!(safe_href("mailto:a@b.c"), Some("mailto:a@b.c".into()));
    assert_eq!(safe_href("/local"), Some("/local".into()));
    assert_eq!(safe_href(" JavaScript:alert(1)"), None);
    assert_eq!(safe_href("data:text/html,x"), None);
    assert_eq!(safe_href("//evil.example"), None);
}

#[test]
fn an_unfinished_stream_still_renders() {
    let nodes = parse("Streaming **bold");
    assert!(!nodes.is_empty());
}

/// Markdown as models write it, and the CommonMark corners around it. Each must read exactly as
/// pulldown-cmark reads it.
const CORPUS: &[&str] = &[
    "Hello **world** and `code`.",
    "# Title\n\nSome *emphasis*, some __strong__, some ~~strike~~.",
    "## Steps\n\n1. First\n2. Second\n3. Third\n",
    "- a\n- b\n  - nested\n  - more\n- c\n",
    "- loose\n\n- list\n",
    "* star\n* list\n\n+ plus\n+ list\n",
    "3. starts at three\n4. four\n",
    "1) paren\n2) list\n",
    "text\n- interrupts\n- a paragraph\n",
    "text\n2. does not interrupt\n",
    "> quoted\n> lines\n\n> another\nlazy line\n",
    "> - list in quote\n> - two\n",
    "- item\n\n  second paragraph\n- next\n",
    "- item\n  continued lazily\nand more\n",
    "```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n",
    "```\nno language\n```",
    "~~~python extra info\nprint(1)\n~~~\n",
    "```\nunclosed fence\nstill code",
    "    indented code\n    more\n\nafter",
    "para\n    not code\n",
    "Line one  \nhard break\\\nand backslash break",
    "soft\nbreak   \n",
    "---\n\n***\n\n___\n",
    "Heading\n=======\n\nSub\n---\n",
    "| Col A | Col B |\n| --- | :---: |\n| 1 | **two** |\n| `x|y` | \\| |\n",
    "| only |\n|---|\n| one |\n| two | extra |\n",
    "a | b\n--|--\n1 | 2\n",
    "[link](https://example.com) and [titled](https://example.com \"Title\")",
    "[angle](<https://example.com/a b>) and [paren](https://x.test/(a)b)",
    "![alt text](https://example.com/a.png)",
    "[ref] and [full][ref] and [collapsed][]\n\n[ref]: https://example.com/ref\n[collapsed]: /local 'title'",
    "<https://auto.example> and <mailto:me@example.com>",
    "[bad](javascript:alert(1)) stays text",
    "*a **b** c*",
    "**a *b* c**",
    "***both***",
    "*unclosed",
    "**still streaming",
    "foo*bar*baz and foo_bar_baz",
    "_under_ and __double__",
    "*(*foo*)*",
    "**foo*bar**",
    "snake_case_word and 2*3*4",
    "a * b * c",
    "`code with ``backticks`` inside`",
    "`` `lone` ``",
    "``unmatched",
    "escaped \\*stars\\* and \\[brackets\\]",
    "entities &amp; &lt;tag&gt; &copy; &#35; &#x41; &unknownentity;",
    "[not a link] and [also](",
    "nested [link [inner](https://a.test)](https://b.test)",
    "# Heading with `code` and *em* #",
    "#NoSpace is text",
    "###### six\n####### seven",
    "1. one\n\n   indented para\n\n2. two\n",
    "- [ ] task\n- [x] done\n",
    "Numbers: 3.14, 1,000 and 50%.",
    "Emoji 🎉 and CJK 日本語の**太字**です。",
    "Japanese list:\n\n- 東京: 晴れ\n- 大阪: 曇り\n",
    "The weather in **Tokyo** is 18°C.\n\nWould you like me to *check* another city?",
    "> **Note**\n> This is important.\n",
    "1. Step one\n   ```bash\n   ls -la\n   ```\n2. Step two\n",
    "- a\n\n  - b\n\n  - c\n",
    "Paragraph\n\n\n\nAfter many blanks",
    "  leading spaces\n   three spaces\n",
    "tab\tinside text",
    "```go\nfunc main() {\n\tfmt.Println(\"tabs stay\")\n}\n```\n",
    "\tindented by a tab\n",
    "-\ttab after marker\n>\ttab after quote\n",
    "-\tdash tab item\n",
    "* * *\n- - -\n",
    "- a\n* b\n",
    "10. ten\n11. eleven\n",
    "trailing spaces   ",
    "",
    "\n\n",
    "a\r\nwindows\r\nlines\r\n",
    // Found by the differential fuzz target (fuzz/src/targets/markdown.rs):
    "-\tword\n\n    code",
    "*\ta\n\n\tb",
    "|\n| --- |\n|other|",
    "|word|\n| --- |\n|\n|",
    "[ref]: https://r.test\n(](https://x.test)",
    ">|a|\n| --- |\n|other|",
    "| a |\n| --- |\n| 1 |\n*\n",
    "*    code\n    code\nmore",
    "\\*<!decl<https://a.test>|",
    "see <a href=\"*x*\">*y*</a> and <b>*z*</b>",
];

#[test]
fn reads_like_pulldown_cmark() {
    let mut failures = Vec::new();
    for text in CORPUS {
        let ours = parse(text);
        let theirs = reference(text);
        if ours != theirs {
            failures.push(format!(
                "{text:?}\n  ours:   {ours:?}\n  theirs: {theirs:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        CORPUS.len(),
        failures.join("\n")
    );
}

/// Where the parser deliberately reads differently from pulldown-cmark.
#[test]
fn deliberate_differences() {
    // An email autolink is a mailto: link (pulldown-cmark's destination is the bare address,
    // which no safe link allows).
    assert_eq!(
        parse("<me@example.com>"),
        vec![Node::Paragraph(vec![Node::Link {
            href: Some("mailto:me@example.com".into()),
            children: vec![Node::Text("me@example.com".into())],
        }])]
    );
    // Only common named entities are known; others stay as written.
    assert_eq!(
        parse("&hearts; &amp;"),
        vec![Node::Paragraph(vec![Node::Text("&hearts; &".into())])]
    );
    // A code block's language is the first word of its info string.
    assert!(
        matches!(&parse("```rust ignore\nx\n```")[0], Node::Code { language, .. } if language == "rust")
    );
}

/// A streamed answer is parsed again at every delta: every prefix of the corpus must read as
/// pulldown-cmark reads it too.
#[test]
fn every_prefix_reads_like_pulldown_cmark() {
    let mut failures = Vec::new();
    for text in CORPUS {
        for end in text.char_indices().map(|(i, _)| i).chain([text.len()]) {
            let prefix = &text[..end];
            let (ours, theirs) = (normalized(parse(prefix)), normalized(reference(prefix)));
            if ours != theirs {
                failures.push(format!(
                    "{prefix:?}\n  ours:   {ours:?}\n  theirs: {theirs:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Generated text from Markdown's building blocks (a fixed seed): the corners no corpus lists.
#[test]
fn generated_markdown_reads_like_pulldown_cmark() {
    const PIECES: &[&str] = &[
        "word",
        "other",
        " ",
        " ",
        "**",
        "*",
        "_",
        "__",
        "~~",
        "~",
        "`",
        "[",
        "](https://x.test)",
        "]",
        "\n",
        "\n\n",
        "- ",
        "* ",
        "1. ",
        "2. ",
        "> ",
        "# ",
        "## ",
        "```",
        "|",
        "  ",
        "(",
        ")",
        "!",
        "\\",
        "&amp;",
        "<",
        ">",
        "   ",
        "    ",
        "---",
        "a_b",
        "3*4",
        "。",
        "日本",
    ];
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut failures = Vec::new();
    for _ in 0..20_000 {
        let length = 1 + next() % 12;
        let text: String = (0..length)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        if let Err((ours, theirs)) = super::reference::compare(&text) {
            failures.push(format!(
                "{text:?}\n  ours:   {ours:?}\n  theirs: {theirs:?}"
            ));
        }
    }
    let count = failures.len();
    failures.truncate(20);
    assert!(
        failures.is_empty(),
        "{count} differ:\n{}",
        failures.join("\n")
    );
}

/// Hostile nesting is cut off at a fixed depth (the rest is text) instead of building a tree
/// too deep to render or drop.
#[test]
fn deep_nesting_is_bounded() {
    fn depth(nodes: &mut [Node]) -> usize {
        nodes
            .iter_mut()
            .map(|node| {
                let inner = child_lists(node).into_iter().map(|c| depth(c)).max();
                inner.map_or(1, |d| 1 + d)
            })
            .max()
            .unwrap_or(0)
    }
    let quotes = ">".repeat(100_000) + " deep";
    let lists = "- ".repeat(50_000) + "deep";
    let emphasis = "*a ".repeat(50_000) + &" a*".repeat(50_000);
    let links = "[".repeat(50_000) + "x" + &"](/a)".repeat(50_000);
    let strong = "**".repeat(20_000) + "x" + &"**".repeat(20_000);
    for text in [quotes, lists, emphasis, links, strong] {
        let mut nodes = parse(&text);
        let levels = depth(&mut nodes);
        assert!(levels <= 40, "{}: depth {levels}", &text[..20]);
        assert!(
            format!("{nodes:?}").contains('a')
                || format!("{nodes:?}").contains('x')
                || format!("{nodes:?}").contains("deep")
        );
    }
}

/// A link with no text shows its destination (a refused one as plain text), so nothing written
/// is hidden.
#[test]
fn a_link_without_text_shows_its_destination() {
    assert_eq!(
        parse("[](https://a.example/x)"),
        vec![Node::Paragraph(vec![Node::Link {
            href: Some("https://a.example/x".into()),
            children: vec![Node::Text("https://a.example/x".into())],
        }])]
    );
    assert_eq!(
        parse("[](javascript:alert(1))"),
        vec![Node::Paragraph(vec![Node::Link {
            href: None,
            children: vec![Node::Text("javascript:alert(1)".into())],
        }])]
    );
}

proptest::proptest! {
    /// Any text at all parses, and no text is lost: every letter and digit of the input is
    /// somewhere in the output (markup characters may be consumed). A link's destination is
    /// markup, not text: one that is refused (not http(s)/mailto) is not shown — unless the
    /// link has no text, when the destination is its text — so the check skips what follows
    /// `](` up to the next `)`. A link reference definition (`[label]: destination`, CommonMark
    /// §4.7) is markup too and shows nothing: the check skips every line that may be one (one
    /// that starts with `[` and has `]:`).
    #[test]
    fn any_text_parses_and_keeps_its_words(text in "\\PC{0,200}") {
        let nodes = parse(&text);
        let shown = format!("{nodes:?}");
        let mut words = String::new();
        let text: String = text
            .split_inclusive('\n')
            .filter(|line| !(line.trim_start().starts_with('[') && line.contains("]:")))
            .collect();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            words.push_str(&rest[..at]);
            rest = rest[at + 2..].find(')').map_or("", |end| &rest[at + 2 + end..]);
        }
        words.push_str(rest);
        for c in words.chars().filter(|c| c.is_ascii_alphanumeric()) {
            proptest::prop_assert!(shown.contains(c), "{c:?} of {text:?} lost: {shown}");
        }
    }
}
