//! Assistant text as Markdown, turned into Leptos views — never `inner_html` of model text.
//!
//! [`parse`] reads the text into a small tree of [`Node`]s (`block` finds the blocks, `inline`
//! their inline content) and [`Markdown`] renders the tree. The parser is ours, not a CommonMark
//! crate's: it is re-run on every streamed delta, and a full CommonMark crate was ~55 KB of the
//! wasm bundle (most of it HTML-entity and HTML-block tables that model text never needs here). Raw HTML in the text is shown as text, and links keep only
//! `http(s)`, `mailto` and same-site targets, so model output can never run script.

#[cfg(test)]
pub(crate) mod reference;
mod syntax;
#[cfg(test)]
mod tests;

use leptos::prelude::*;

pub use self::syntax::{Node, parse, safe_href};
use super::platform;

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
