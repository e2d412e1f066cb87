//! Markdown text into a small tree of [`Node`]s: [`block`] finds the blocks, [`inline`] their
//! inline content. No Leptos here (the fuzz crate mounts this module as it is, to check the
//! parser against pulldown-cmark: `fuzz/src/targets/markdown.rs`).

mod block;
mod inline;

use self::block::Block;

/// One node of rendered Markdown.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Paragraph(Vec<Node>),
    Heading(u8, Vec<Node>),
    Quote(Vec<Node>),
    Code {
        language: String,
        code: String,
    },
    List {
        start: Option<u64>,
        items: Vec<Vec<Node>>,
    },
    Emphasis(Vec<Node>),
    Strong(Vec<Node>),
    Strike(Vec<Node>),
    /// `href` is `None` when the target is not safe; the text is shown without a link.
    Link {
        href: Option<String>,
        children: Vec<Node>,
    },
    InlineCode(String),
    Text(String),
    Break,
    Rule,
    Table {
        head: Vec<Vec<Node>>,
        rows: Vec<Vec<Vec<Node>>>,
    },
}

/// A link to `dest` (kept only if it cannot run script) showing `children` — or, when its
/// text is empty (`[](https://…)`), the destination itself, so nothing written is hidden.
pub fn link(dest: &str, children: Vec<Node>) -> Node {
    let children = if children.is_empty() && !dest.is_empty() {
        vec![Node::Text(dest.to_owned())]
    } else {
        children
    };
    Node::Link {
        href: safe_href(dest),
        children,
    }
}

/// Keeps only link targets that cannot run script.
pub fn safe_href(href: &str) -> Option<String> {
    let trimmed = href.trim();
    let lower = trimmed.to_ascii_lowercase();
    let ok = lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
        || (trimmed.starts_with('/') && !trimmed.starts_with("//"))
        || trimmed.starts_with('#');
    ok.then(|| trimmed.to_string())
}

/// Parses Markdown into nodes: CommonMark's blocks and inlines with GFM tables and
/// strikethrough. Raw HTML is text; images become links to their source.
pub fn parse(text: &str) -> Vec<Node> {
    let mut defs = inline::Definitions::new();
    let blocks = block::parse(text, &mut defs);
    let mut nodes = Vec::with_capacity(blocks.len());
    for block in blocks {
        push_block(&mut nodes, block, &defs, false);
    }
    nodes
}

/// Appends `block` as nodes; in a tight list item a paragraph is its bare inline content.
fn push_block(out: &mut Vec<Node>, block: Block, defs: &inline::Definitions, tight: bool) {
    let blocks = |blocks: Vec<Block>, tight: bool| {
        let mut nodes = Vec::new();
        for block in blocks {
            push_block(&mut nodes, block, defs, tight);
        }
        nodes
    };
    let node = match block {
        Block::Paragraph(text) if tight => {
            out.extend(inline::parse(&text, defs));
            return;
        }
        Block::Paragraph(text) => Node::Paragraph(inline::parse(&text, defs)),
        Block::Heading(level, text) => Node::Heading(level, inline::parse(&text, defs)),
        Block::Quote(inner) => Node::Quote(blocks(inner, false)),
        Block::Code { language, code } => Node::Code { language, code },
        Block::List {
            start,
            tight,
            items,
        } => Node::List {
            start,
            items: items.into_iter().map(|item| blocks(item, tight)).collect(),
        },
        Block::Rule => Node::Rule,
        Block::Table { head, rows } => Node::Table {
            head: head.iter().map(|cell| inline::parse(cell, defs)).collect(),
            rows: rows
                .iter()
                .map(|row| row.iter().map(|cell| inline::parse(cell, defs)).collect())
                .collect(),
        },
    };
    out.push(node);
}
