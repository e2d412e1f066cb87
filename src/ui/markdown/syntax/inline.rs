//! Inline text: emphasis, strong, strikethrough, code spans, links, autolinks, escapes, entities
//! and breaks (CommonMark's inline rules, with GFM's `~~strikethrough~~`). Raw HTML stays text.
//!
//! The parser reads the text once, left to right; what each construct needs lives beside it:
//! [`definitions`] (link reference definitions and link syntax), [`escapes`] (backslashes and
//! entities), [`html`] (autolinks, raw HTML) and [`emphasis`] (delimiter runs and their
//! matching).

mod definitions;
mod emphasis;
mod escapes;
mod html;

use std::collections::HashMap;

use super::Node;

pub(super) use definitions::{Definitions, take_definitions};
pub(super) use escapes::unescape;

use definitions::{destination, label_end, normalize_label, skip_space, title};
use emphasis::{Delimiter, process_emphasis};
use escapes::entity;
use html::{autolink, raw_html};

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
