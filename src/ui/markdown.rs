//! Assistant text as Markdown, turned into Leptos views — never `inner_html` of model text.
//!
//! pulldown-cmark parses the text into events; [`parse`] folds them into a small tree and
//! [`Markdown`] renders the tree. Raw HTML in the text is shown as text, and links keep only
//! `http(s)`, `mailto` and same-site targets, so model output can never run script.

use leptos::prelude::*;
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::platform;

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

enum Frame {
    Paragraph,
    Heading(u8),
    Quote,
    Code(String, String),
    List(Option<u64>, Vec<Vec<Node>>),
    Item,
    Emphasis,
    Strong,
    Strike,
    Link(Option<String>),
    Image(Option<String>),
    Table(Vec<Vec<Node>>, Vec<Vec<Vec<Node>>>),
    TableHead,
    Row(Vec<Vec<Node>>),
    Cell,
    Other,
}

/// Parses Markdown into nodes.
pub fn parse(text: &str) -> Vec<Node> {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TABLES);
    let mut stack: Vec<(Frame, Vec<Node>)> = vec![(Frame::Other, Vec::new())];
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(tag) => {
                let frame = match tag {
                    Tag::Paragraph => Frame::Paragraph,
                    Tag::Heading { level, .. } => Frame::Heading(level as u8),
                    Tag::BlockQuote(_) => Frame::Quote,
                    Tag::CodeBlock(kind) => Frame::Code(
                        match kind {
                            CodeBlockKind::Fenced(lang) => lang.to_string(),
                            CodeBlockKind::Indented => String::new(),
                        },
                        String::new(),
                    ),
                    Tag::List(start) => Frame::List(start, Vec::new()),
                    Tag::Item => Frame::Item,
                    Tag::Emphasis => Frame::Emphasis,
                    Tag::Strong => Frame::Strong,
                    Tag::Strikethrough => Frame::Strike,
                    Tag::Link { dest_url, .. } => Frame::Link(safe_href(&dest_url)),
                    Tag::Image { dest_url, .. } => Frame::Image(safe_href(&dest_url)),
                    Tag::Table(_) => Frame::Table(Vec::new(), Vec::new()),
                    Tag::TableHead => Frame::TableHead,
                    Tag::TableRow => Frame::Row(Vec::new()),
                    Tag::TableCell => Frame::Cell,
                    _ => Frame::Other,
                };
                stack.push((frame, Vec::new()));
            }
            Event::End(end) => {
                if matches!(end, TagEnd::HtmlBlock) {
                    continue;
                }
                let Some((frame, children)) = stack.pop() else {
                    continue;
                };
                let node = match frame {
                    Frame::Paragraph => Some(Node::Paragraph(children)),
                    Frame::Heading(level) => Some(Node::Heading(level, children)),
                    Frame::Quote => Some(Node::Quote(children)),
                    Frame::Code(language, code) => Some(Node::Code { language, code }),
                    Frame::List(start, items) => Some(Node::List { start, items }),
                    Frame::Item => {
                        if let Some((Frame::List(_, items), _)) = stack.last_mut() {
                            items.push(children);
                        }
                        None
                    }
                    Frame::Emphasis => Some(Node::Emphasis(children)),
                    Frame::Strong => Some(Node::Strong(children)),
                    Frame::Strike => Some(Node::Strike(children)),
                    Frame::Link(href) => Some(Node::Link { href, children }),
                    // Images are shown as links: no request leaves the page on its own.
                    Frame::Image(href) => Some(Node::Link { href, children }),
                    Frame::Table(head, rows) => Some(Node::Table { head, rows }),
                    Frame::TableHead => {
                        if let Some((Frame::Table(head, _), _)) = stack.last_mut() {
                            *head = children.into_iter().map(|c| vec![c]).collect();
                        }
                        None
                    }
                    Frame::Row(cells) => {
                        if let Some((Frame::Table(_, rows), _)) = stack.last_mut() {
                            rows.push(cells);
                        }
                        None
                    }
                    Frame::Cell => {
                        match stack.last_mut() {
                            Some((Frame::Row(cells), _)) => cells.push(children),
                            Some((Frame::TableHead, siblings)) => {
                                siblings.push(Node::Paragraph(children));
                            }
                            _ => {}
                        }
                        None
                    }
                    Frame::Other => Some(Node::Paragraph(children)),
                };
                if let (Some(node), Some((_, parent))) = (node, stack.last_mut()) {
                    parent.push(node);
                }
            }
            Event::Text(text) => match stack.last_mut() {
                Some((Frame::Code(_, code), _)) => code.push_str(&text),
                Some((_, children)) => children.push(Node::Text(text.to_string())),
                None => {}
            },
            Event::Code(code) => {
                if let Some((_, children)) = stack.last_mut() {
                    children.push(Node::InlineCode(code.to_string()));
                }
            }
            // Raw HTML is shown as the text it is.
            Event::Html(html) | Event::InlineHtml(html) => {
                if let Some((_, children)) = stack.last_mut() {
                    children.push(Node::Text(html.to_string()));
                }
            }
            Event::SoftBreak => {
                if let Some((_, children)) = stack.last_mut() {
                    children.push(Node::Text("\n".into()));
                }
            }
            Event::HardBreak => {
                if let Some((_, children)) = stack.last_mut() {
                    children.push(Node::Break);
                }
            }
            Event::Rule => {
                if let Some((_, children)) = stack.last_mut() {
                    children.push(Node::Rule);
                }
            }
            _ => {}
        }
    }
    // Unclosed frames (a stream mid-way) still show their content.
    let mut nodes = Vec::new();
    while let Some((_, children)) = stack.pop() {
        let mut children = children;
        children.append(&mut nodes);
        nodes = children;
    }
    nodes
}

fn render(nodes: Vec<Node>) -> AnyView {
    nodes.into_iter().map(render_node).collect_view().into_any()
}

/// An element without attributes around `children`. Every element made here has one view type
/// (the tag is a value, not a type): each distinct view type erased to `AnyView` costs its own
/// copy of the rendering and hydration code in the wasm bundle.
fn plain(tag: &'static str, children: AnyView) -> AnyView {
    leptos::html::custom(tag).child(children).into_any()
}

/// `plain` elements around each of `items`, e.g. the `<li>`s of a list.
fn each(tag: &'static str, items: Vec<Vec<Node>>) -> AnyView {
    items
        .into_iter()
        .map(|item| plain(tag, render(item)))
        .collect_view()
        .into_any()
}

fn render_node(node: Node) -> AnyView {
    match node {
        Node::Paragraph(c) => plain("p", render(c)),
        Node::Heading(level, c) => plain(
            match level {
                1 => "h3",
                2 => "h4",
                _ => "h5",
            },
            render(c),
        ),
        Node::Quote(c) => plain("blockquote", render(c)),
        Node::Code { language, code } => {
            let copy_text = code.clone();
            view! {
                <div class="code-block">
                    <div class="code-bar">
                        <span class="code-lang">{language}</span>
                        <button type="button" class="copy" on:click=move |_| platform::copy(&copy_text)>
                            "Copy"
                        </button>
                    </div>
                    <pre><code>{code}</code></pre>
                </div>
            }
            .into_any()
        }
        Node::List {
            start: Some(start),
            items,
        } => view! { <ol start=start.to_string()>{each("li", items)}</ol> }.into_any(),
        Node::List { start: None, items } => plain("ul", each("li", items)),
        Node::Emphasis(c) => plain("em", render(c)),
        Node::Strong(c) => plain("strong", render(c)),
        Node::Strike(c) => plain("del", render(c)),
        Node::Link {
            href: Some(href),
            children,
        } => view! {
            <a href=href target="_blank" rel="noopener noreferrer nofollow">{render(children)}</a>
        }
        .into_any(),
        Node::Link {
            href: None,
            children,
        } => plain("span", render(children)),
        Node::InlineCode(code) => plain("code", code.into_any()),
        Node::Text(text) => text.into_any(),
        Node::Break => view! { <br/> }.into_any(),
        Node::Rule => view! { <hr/> }.into_any(),
        Node::Table { head, rows } => {
            let rows = rows
                .into_iter()
                .map(|row| plain("tr", each("td", row)))
                .collect_view()
                .into_any();
            view! {
                <div class="table-wrap">
                    <table>
                        <thead>{plain("tr", each("th", head))}</thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
            }
            .into_any()
        }
    }
}

/// Renders Markdown text.
#[component]
pub fn Markdown(#[prop(into)] text: Signal<String>) -> impl IntoView {
    move || render(parse(&text.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "<th><p>a</p></th>",
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
}
