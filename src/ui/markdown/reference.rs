//! The reference the parser is checked against: the same text as pulldown-cmark reads it,
//! folded into [`Node`]s the way the parser shapes them. Used by the unit tests (`tests.rs`) and
//! mounted by the fuzz crate's differential target (`fuzz/src/targets/markdown.rs`), so both
//! compare the same way. Never shipped: pulldown-cmark is a dev-dependency.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::{Node, parse, syntax::link};

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
    Link(String),
    Image(String),
    Table(Vec<Vec<Node>>, Vec<Vec<Vec<Node>>>),
    TableHead,
    Row(Vec<Vec<Node>>),
    Cell,
    Other,
}

/// The same text as pulldown-cmark reads it, folded into nodes the way the parser shapes them.
pub fn reference(text: &str) -> Vec<Node> {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TABLES);
    let mut stack: Vec<(Frame, Vec<Node>)> = vec![(Frame::Other, Vec::new())];
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(tag) => stack.push((frame_of(tag), Vec::new())),
            Event::End(TagEnd::HtmlBlock) => {}
            Event::End(_) => {
                let Some((frame, children)) = stack.pop() else {
                    continue;
                };
                if let (Some(node), Some((_, parent))) =
                    (close(frame, children, &mut stack), stack.last_mut())
                {
                    parent.push(node);
                }
            }
            Event::Text(text) => match stack.last_mut() {
                Some((Frame::Code(_, code), _)) => code.push_str(&text),
                Some((_, children)) => children.push(Node::Text(text.to_string())),
                None => {}
            },
            other => {
                if let (Some(node), Some((_, children))) = (leaf(other), stack.last_mut()) {
                    children.push(node);
                }
            }
        }
    }
    // Unclosed frames (a stream mid-way) still show their content.
    let mut nodes = Vec::new();
    while let Some((_, children)) = stack.pop() {
        let mut children = children;
        children.append(&mut nodes);
        nodes = children;
    }
    merge_text(nodes)
}

/// The frame a start tag opens.
fn frame_of(tag: Tag<'_>) -> Frame {
    match tag {
        Tag::Paragraph => Frame::Paragraph,
        Tag::Heading { level, .. } => Frame::Heading(level as u8),
        Tag::BlockQuote(_) => Frame::Quote,
        Tag::CodeBlock(kind) => Frame::Code(
            match kind {
                CodeBlockKind::Fenced(info) => info
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                CodeBlockKind::Indented => String::new(),
            },
            String::new(),
        ),
        Tag::List(start) => Frame::List(start, Vec::new()),
        Tag::Item => Frame::Item,
        Tag::Emphasis => Frame::Emphasis,
        Tag::Strong => Frame::Strong,
        Tag::Strikethrough => Frame::Strike,
        Tag::Link { dest_url, .. } => Frame::Link(dest_url.to_string()),
        Tag::Image { dest_url, .. } => Frame::Image(dest_url.to_string()),
        Tag::Table(_) => Frame::Table(Vec::new(), Vec::new()),
        Tag::TableHead => Frame::TableHead,
        Tag::TableRow => Frame::Row(Vec::new()),
        Tag::TableCell => Frame::Cell,
        _ => Frame::Other,
    }
}

/// A frame closed with its `children`: the node it makes, or `None` when it went into the
/// frame below it (a list's item, a table's head, row or cell).
fn close(frame: Frame, children: Vec<Node>, stack: &mut [(Frame, Vec<Node>)]) -> Option<Node> {
    match frame {
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
        Frame::Link(dest) => Some(link(&dest, children)),
        // Images are shown as links: no request leaves the page on its own.
        Frame::Image(dest) => Some(link(&dest, children)),
        Frame::Table(head, rows) => Some(Node::Table { head, rows }),
        Frame::TableHead => {
            if let Some((Frame::Table(head, _), _)) = stack.last_mut() {
                *head = children
                    .into_iter()
                    .map(|c| match c {
                        Node::Paragraph(inline) => inline,
                        other => vec![other],
                    })
                    .collect();
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
                Some((Frame::TableHead, siblings)) => siblings.push(Node::Paragraph(children)),
                _ => {}
            }
            None
        }
        Frame::Other => Some(Node::Paragraph(children)),
    }
}

/// The node an event without children makes (raw HTML is shown as the text it is).
fn leaf(event: Event<'_>) -> Option<Node> {
    match event {
        Event::Code(code) => Some(Node::InlineCode(code.to_string())),
        Event::Html(html) | Event::InlineHtml(html) => Some(Node::Text(html.to_string())),
        Event::SoftBreak => Some(Node::Text("\n".into())),
        Event::HardBreak => Some(Node::Break),
        Event::Rule => Some(Node::Rule),
        _ => None,
    }
}

/// Adjacent text nodes as one (pulldown-cmark splits text at every event boundary).
pub fn merge_text(nodes: Vec<Node>) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    for mut node in nodes {
        for list in child_lists(&mut node) {
            *list = merge_text(std::mem::take(list));
        }
        match (out.last_mut(), node) {
            (_, Node::Text(text)) if text.is_empty() => {}
            (Some(Node::Text(previous)), Node::Text(text)) => previous.push_str(&text),
            (_, node) => out.push(node),
        }
    }
    out
}

/// Every list of nodes directly inside `node`: its children, a list's items, a table's cells.
pub fn child_lists(node: &mut Node) -> Vec<&mut Vec<Node>> {
    match node {
        Node::Paragraph(c)
        | Node::Heading(_, c)
        | Node::Quote(c)
        | Node::Emphasis(c)
        | Node::Strong(c)
        | Node::Strike(c)
        | Node::Link { children: c, .. } => vec![c],
        Node::List { items, .. } => items.iter_mut().collect(),
        Node::Table { head, rows } => head.iter_mut().chain(rows.iter_mut().flatten()).collect(),
        _ => Vec::new(),
    }
}

/// What may differ from pulldown-cmark in a text cut off mid-stream or in generated corners,
/// and is not worth matching: whether a code block's last, unfinished line of only spaces is
/// shown yet, and spaces inside a code span that spans lines (pulldown-cmark keeps a continuation
/// line's indentation there; CommonMark strips it first).
pub fn normalized(mut nodes: Vec<Node>) -> Vec<Node> {
    for node in &mut nodes {
        match node {
            Node::Code { code, .. } => {
                let last_line = code.rfind('\n').map_or(0, |i| i + 1);
                if code[last_line..].trim().is_empty() {
                    code.truncate(last_line);
                }
            }
            Node::InlineCode(code) => *code = code.split_whitespace().collect::<Vec<_>>().join(" "),
            _ => {}
        }
        for list in child_lists(node) {
            *list = normalized(std::mem::take(list));
        }
    }
    nodes
}

/// How deep the parser builds trees before it reads deeper markers as text.
const NESTING_CUT_OFF: usize = 16;

/// How many nodes deep `nodes` go.
pub fn depth(nodes: &[Node]) -> usize {
    nodes
        .iter()
        .map(|node| {
            let mut node = node.clone();
            1 + child_lists(&mut node)
                .into_iter()
                .map(|c| depth(c))
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

/// Whether tabs indent text inside a container: some line opens a block quote or a list item,
/// and some line has a tab in its indentation (or right after a marker). CommonMark measures such
/// a tab from the line's own tab stops through every container; the parser hands a container's
/// lines on without their columns, so it reads them from the container's content column, which
/// differs when that column is not a tab stop. Models do not indent nested blocks with tabs: a
/// deliberate difference, not a bug to chase.
fn tabs_inside_containers(text: &str) -> bool {
    let opens_container = |line: &str| {
        let rest = line.trim_start_matches([' ', '\t']);
        let marker = rest.starts_with('>')
            || ["- ", "* ", "+ ", "-\t", "*\t", "+\t"]
                .iter()
                .any(|m| rest.starts_with(m))
            || {
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                digits > 0 && matches!(rest.as_bytes().get(digits), Some(b'.' | b')'))
            };
        marker || ["-", "*", "+"].contains(&rest)
    };
    let tab_in_indentation = |line: &str| {
        line.chars()
            .take_while(|c| {
                matches!(c, ' ' | '\t' | '>' | '-' | '*' | '+' | '.' | ')') || c.is_ascii_digit()
            })
            .any(|c| c == '\t')
    };
    text.lines().any(opens_container) && text.lines().any(tab_in_indentation)
}

/// Whether `text` reads the same to the parser as to pulldown-cmark, apart from the known,
/// deliberate differences: raw HTML blocks (paragraph text here, raw text outside any paragraph
/// there), a single `~` inside a `~~` pair and tabs ending a heading line (pulldown-cmark's own
/// corners), tabs indenting text in
/// a container ([`tabs_inside_containers`]), nesting past the parser's cut-off, and what
/// [`normalized`] evens out. `Err` holds both readings.
pub fn compare(text: &str) -> Result<(), (Vec<Node>, Vec<Node>)> {
    let html = Parser::new_ext(text, Options::empty()).any(|e| matches!(e, Event::Html(_)));
    let tildes =
        text.contains("~~") && (text.replace("~~", "").contains('~') || text.contains("\\~"));
    // CommonMark lets a heading line and a closing code fence end in spaces or tabs (a closing
    // `#` sequence or the fence still counts); pulldown-cmark reads a tab there as content.
    let heading_tab = text.lines().any(|l| {
        let tail = &l[l.trim_end_matches([' ', '\t']).len()..];
        let fence = ["```", "~~~"].iter().any(|f| l.trim_start().starts_with(f));
        tail.contains('\t') && (l.contains('#') || fence)
    });
    if html || tildes || heading_tab || tabs_inside_containers(text) {
        return Ok(());
    }
    let theirs = reference(text);
    // Nesting past the parser's cut-off (16 containers or inline levels) is text on purpose.
    if depth(&theirs) > NESTING_CUT_OFF {
        return Ok(());
    }
    let ours = normalized(parse(text));
    let theirs = normalized(theirs);
    if ours == theirs {
        return Ok(());
    }
    // A table may begin right under a paragraph's line here, as on GitHub; pulldown-cmark wants
    // a blank line first. With that blank line, it must read the text as the parser does.
    let separated = blank_line_before_tables(text);
    if separated != text && normalized(reference(&separated)) == ours {
        return Ok(());
    }
    Err((ours, theirs))
}

/// The cells of a table row, as GFM splits it: at unescaped `|`, the outer pipes dropped (a
/// lone `|` has none).
fn row_cells(line: &str) -> Vec<String> {
    let trimmed = line.trim();
    let leading = trimmed.starts_with('|');
    let inner = trimmed.strip_prefix('|').unwrap_or(trimmed);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.as_str().starts_with('|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell).trim().to_owned()),
            c => cell.push(c),
        }
    }
    if !cell.trim().is_empty() || (cells.is_empty() && !leading) {
        cells.push(cell.trim().to_owned());
    }
    cells
}

/// Whether `line` has a `|` that is not escaped.
fn has_pipe(line: &str) -> bool {
    // A `|` right after a backslash is escaped, whatever came before the backslash.
    let bytes = line.as_bytes();
    (0..bytes.len()).any(|i| bytes[i] == b'|' && (i == 0 || bytes[i - 1] != b'\\'))
}

/// Whether `line` is a table's delimiter row (`| --- | :-: |`).
fn delimiter_row(line: &str) -> bool {
    let cells = row_cells(line);
    !cells.is_empty()
        && (has_pipe(line) || cells.len() > 1)
        && cells.iter().all(|c| {
            let core = c.strip_prefix(':').unwrap_or(c);
            let core = core.strip_suffix(':').unwrap_or(core);
            !core.is_empty() && core.bytes().all(|b| b == b'-')
        })
}

/// `text` with a blank line before every line that a delimiter row follows, where the line
/// before it is not blank.
fn blank_line_before_tables(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::with_capacity(lines.len() + 2);
    // Inside a table every line up to a blank one is a row, never a new header.
    let mut in_table = false;
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            in_table = false;
        }
        let header = !in_table
            && has_pipe(line)
            && lines.get(i + 1).is_some_and(|next| {
                delimiter_row(next) && row_cells(next).len() == row_cells(line).len()
            });
        if header {
            in_table = true;
            if i > 0 && !lines[i - 1].trim().is_empty() {
                out.push("");
            }
        }
        out.push(line);
    }
    out.join("\n")
}
