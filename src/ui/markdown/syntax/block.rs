//! Block structure: lines become paragraphs, headings, quotes, lists, code blocks, rules and
//! tables (CommonMark's block rules with GFM tables). Inline text is left raw for `inline`.

use super::inline::{Definitions, take_definitions, unescape};

/// One block, its inline text not yet parsed.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Block {
    Paragraph(String),
    Heading(u8, String),
    Quote(Vec<Block>),
    Code {
        language: String,
        code: String,
    },
    List {
        start: Option<u64>,
        tight: bool,
        items: Vec<Vec<Block>>,
    },
    Rule,
    Table {
        head: Vec<String>,
        rows: Vec<Vec<String>>,
    },
}

/// Splits `text` into blocks; link reference definitions go to `defs`.
pub(super) fn parse(text: &str, defs: &mut Definitions) -> Vec<Block> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let lines: Vec<String> = body
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line).to_owned())
        .collect();
    blocks(&lines, defs, !text.ends_with('\n'), 0).0
}

/// A code block that runs to the end of a text still streaming in: its last line has no line
/// ending yet, and a last line of only spaces is not shown yet.
fn unterminated(code: &mut String) {
    code.pop();
    let last_line = code.rfind('\n').map_or(0, |i| i + 1);
    if is_blank(&code[last_line..]) {
        code.truncate(last_line);
    }
}

/// The columns of a line's indentation (a tab advances to the next multiple of four).
fn indent(line: &str) -> usize {
    indent_at(line, 0)
}

/// The columns of `text`'s leading spaces and tabs when it starts at column `start` of its line
/// (a tab's width depends on where it is: it advances to the next multiple of four).
fn indent_at(text: &str, start: usize) -> usize {
    let mut column = start;
    for b in text.bytes() {
        match b {
            b' ' => column += 1,
            b'\t' => column += 4 - column % 4,
            _ => break,
        }
    }
    column - start
}

/// `line` without its indentation.
fn unindented(line: &str) -> &str {
    line.trim_start_matches([' ', '\t'])
}

fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| b == b' ' || b == b'\t')
}

/// `line` without up to `columns` columns of indentation (the rest of a tab that straddles the
/// boundary becomes spaces); tabs after that are kept, e.g. in code.
fn strip_columns(line: &str, columns: usize) -> String {
    strip_columns_at(line, 0, columns)
}

/// [`strip_columns`] of `text` starting at column `start` of its line.
fn strip_columns_at(text: &str, start: usize, columns: usize) -> String {
    let mut column = start;
    let end = start + columns;
    for (i, b) in text.bytes().enumerate() {
        if column >= end {
            return text[i..].to_owned();
        }
        match b {
            b' ' => column += 1,
            b'\t' => {
                column += 4 - column % 4;
                if column > end {
                    return " ".repeat(column - end) + &text[i + 1..];
                }
            }
            _ => return text[i..].to_owned(),
        }
    }
    String::new()
}

fn thematic_break(rest: &str) -> bool {
    let mut marker = None;
    let mut count = 0;
    for b in rest.bytes() {
        match b {
            b' ' | b'\t' => {}
            b'-' | b'*' | b'_' if marker.is_none_or(|m| m == b) => {
                marker = Some(b);
                count += 1;
            }
            _ => return false,
        }
    }
    count >= 3
}

/// An ATX heading: its level and content.
fn atx(rest: &str) -> Option<(u8, &str)> {
    let level = rest.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let content = &rest[level..];
    if !(content.is_empty() || content.starts_with(' ') || content.starts_with('\t')) {
        return None;
    }
    let content = content.trim();
    // An optional closing sequence of `#`s, after a space (or making up the whole content).
    let without = content.trim_end_matches('#');
    let content = if without.is_empty() {
        without
    } else if without.ends_with(' ') || without.ends_with('\t') {
        without.trim_end()
    } else {
        content
    };
    Some((level as u8, content))
}

/// An opening code fence: its character, length and info string.
fn fence_open(rest: &str) -> Option<(u8, usize, &str)> {
    let fence = *rest.as_bytes().first()?;
    if fence != b'`' && fence != b'~' {
        return None;
    }
    let length = rest.bytes().take_while(|b| *b == fence).count();
    let info = rest[length..].trim();
    (length >= 3 && !(fence == b'`' && info.contains('`'))).then_some((fence, length, info))
}

fn fence_closes(rest: &str, fence: u8, length: usize) -> bool {
    let run = rest.bytes().take_while(|b| *b == fence).count();
    run >= length && is_blank(&rest[run..])
}

/// A setext heading underline: `=` (level 1) or `-` (level 2).
fn setext(rest: &str) -> Option<u8> {
    let marker = *rest
        .as_bytes()
        .first()
        .filter(|b| **b == b'=' || **b == b'-')?;
    let run = rest.bytes().take_while(|b| *b == marker).count();
    if !is_blank(&rest[run..]) {
        return None;
    }
    match marker {
        b'=' => Some(1),
        b'-' => Some(2),
        _ => None,
    }
}

/// A list item's marker.
#[derive(Debug, Clone, Copy)]
struct Marker {
    /// `-`, `+` or `*` for a bullet; `.` or `)` for an ordered item.
    symbol: u8,
    start: Option<u64>,
    /// Bytes of the marker itself.
    width: usize,
    /// Spaces between the marker and the content (1 when the content is empty or indented code).
    spaces: usize,
    empty: bool,
}

impl Marker {
    fn same_list(&self, other: &Marker) -> bool {
        self.symbol == other.symbol && self.start.is_some() == other.start.is_some()
    }

    /// Whether the item may interrupt a paragraph.
    fn interrupts(&self) -> bool {
        !self.empty && self.start.is_none_or(|n| n == 1)
    }
}

/// The list marker `rest` begins with, if any; `rest` starts at column `column` of its line (a
/// tab after the marker is as wide as that makes it).
fn list_marker(rest: &str, column: usize) -> Option<Marker> {
    let bytes = rest.as_bytes();
    let (symbol, start, width) = match *bytes.first()? {
        b @ (b'-' | b'+' | b'*') => (b, None, 1),
        b'0'..=b'9' => {
            let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            let symbol = *bytes.get(digits)?;
            if digits > 9 || (symbol != b'.' && symbol != b')') {
                return None;
            }
            (symbol, rest[..digits].parse().ok(), digits + 1)
        }
        _ => return None,
    };
    let after = &rest[width..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let empty = is_blank(after);
    let spaces = indent_at(after, column + width);
    let spaces = if empty || spaces > 4 { 1 } else { spaces };
    Some(Marker {
        symbol,
        start,
        width,
        spaces,
        empty,
    })
}

/// Whether `line` starts a block that ends a paragraph. `lazy`: the paragraph is in a container
/// (quote, list item) the line is not part of, so any list item ends it, even an empty one or one
/// not numbered 1, which could not interrupt a paragraph of their own level.
fn starts_block(line: &str, lazy: bool) -> bool {
    let ind = indent(line);
    if is_blank(line) {
        return true;
    }
    if ind >= 4 {
        return false;
    }
    let rest = unindented(line);
    thematic_break(rest)
        || atx(rest).is_some()
        || fence_open(rest).is_some()
        || rest.starts_with('>')
        || list_marker(rest, ind).is_some_and(|m| lazy || m.interrupts())
}

/// `line` without the quote markers and list markers that open it.
fn content(line: &str) -> &str {
    let mut rest = line;
    // Deeper markers are text (see MAX_NESTING); the bound also keeps this linear.
    for _ in 0..=MAX_NESTING {
        let ind = indent(rest);
        if ind >= 4 {
            return rest;
        }
        let trimmed = unindented(rest);
        if let Some(after) = trimmed.strip_prefix('>') {
            rest = after.strip_prefix(' ').unwrap_or(after);
        } else if let Some(marker) = list_marker(trimmed, ind).filter(|_| !thematic_break(trimmed))
        {
            rest = &trimmed[marker.width..];
            rest = rest.strip_prefix(' ').unwrap_or(rest);
        } else {
            return rest;
        }
    }
    rest
}

/// The lines of a quote or list item being collected, and whether they leave a code fence open
/// (kept as lines come, so checking the last line costs the same however many there are).
#[derive(Default)]
struct Collected {
    lines: Vec<String>,
    fence: Option<(u8, usize)>,
    /// The last line was a lazy continuation of a paragraph (whatever its indentation).
    lazy: bool,
}

impl Collected {
    /// Adds a line that continues the container's last paragraph lazily (it lacks the
    /// container's markers or indentation, so it can only be paragraph text). It is joined to
    /// the line before, so the container's own parse cannot read it as anything but that
    /// paragraph's text (not a table's delimiter row, not a heading's underline).
    fn push_lazy(&mut self, line: String) {
        match self.lines.last_mut() {
            Some(last) => {
                last.push('\n');
                last.push_str(&line);
            }
            None => self.lines.push(line),
        }
        self.lazy = true;
    }

    fn push(&mut self, line: String) {
        self.lazy = false;
        let inner = content(&line);
        let rest = if indent(inner) < 4 {
            unindented(inner)
        } else {
            inner
        };
        self.fence = match self.fence {
            Some((fence, length)) if fence_closes(rest, fence, length) => None,
            Some(open) => Some(open),
            None => fence_open(rest).map(|(fence, length, _)| (fence, length)),
        };
        self.lines.push(line);
    }

    /// Whether the last line leaves a paragraph open (so the next may continue it lazily).
    fn paragraph_open(&self) -> bool {
        let Some(last) = self.lines.last() else {
            return false;
        };
        if self.lazy {
            return true;
        }
        let last = content(last);
        let rest = last.trim_start();
        self.fence.is_none()
            && !is_blank(last)
            && indent(last) < 4
            && atx(rest).is_none()
            && !thematic_break(rest)
            && fence_open(rest).is_none()
    }
}

/// How deeply quotes and list items may nest; deeper markers are read as text, so hostile input
/// cannot build a tree too deep to render or drop.
const MAX_NESTING: usize = 16;

/// One nesting level being parsed.
#[derive(Default)]
struct Level {
    blocks: Vec<Block>,
    paragraph: Vec<String>,
    /// A blank line has been seen since the last block.
    blank: bool,
    /// Two blocks of this level are separated by a blank line (a list item so is loose).
    gap: bool,
}

impl Level {
    fn begin(&mut self) {
        if self.blank && !self.blocks.is_empty() {
            self.gap = true;
        }
        self.blank = false;
    }

    fn flush(&mut self, defs: &mut Definitions) {
        if self.paragraph.is_empty() {
            return;
        }
        let text = self.paragraph.join("\n");
        self.paragraph.clear();
        let rest = &text[take_definitions(&text, defs)..];
        let rest = rest.trim_end();
        if !rest.is_empty() {
            self.blocks.push(Block::Paragraph(rest.to_owned()));
        }
    }

    fn push(&mut self, block: Block, defs: &mut Definitions) {
        self.flush(defs);
        self.begin();
        self.blocks.push(block);
    }
}

/// The blocks of `lines`, and whether a blank line separates two of them. `open_end`: the last
/// of `lines` is the text's last line and has no line ending.
fn blocks(
    lines: &[String],
    defs: &mut Definitions,
    open_end: bool,
    depth: usize,
) -> (Vec<Block>, bool) {
    let nest = depth < MAX_NESTING;
    let mut level = Level::default();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        if is_blank(line) {
            level.flush(defs);
            level.blank = true;
            i += 1;
            continue;
        }
        let ind = indent(line);
        let rest = unindented(line);
        if ind >= 4 {
            if !level.paragraph.is_empty() {
                level.paragraph.push(rest.to_owned());
                i += 1;
                continue;
            }
            let (code, next) = indented_code(lines, i, open_end);
            level.push(code, defs);
            i = next;
            continue;
        }
        if !level.paragraph.is_empty()
            && let Some(heading) = setext(rest)
        {
            let text = level.paragraph.join("\n");
            level.paragraph.clear();
            let rest = text[take_definitions(&text, defs)..].trim().to_owned();
            if rest.is_empty() {
                // Only definitions: the underline is a paragraph (`=`) or a rule (`-`).
                level.paragraph.push(line.trim().to_owned());
                if heading == 2 && thematic_break(line.trim()) {
                    level.paragraph.clear();
                    level.push(Block::Rule, defs);
                }
            } else {
                level.blocks.push(Block::Heading(heading, rest));
            }
            i += 1;
            continue;
        }
        if thematic_break(rest) {
            level.push(Block::Rule, defs);
            i += 1;
            continue;
        }
        if let Some((heading, content)) = atx(rest) {
            level.push(Block::Heading(heading, content.to_owned()), defs);
            i += 1;
            continue;
        }
        if let Some(open) = fence_open(rest) {
            let (code, next) = fenced_code(lines, i, ind, open, open_end);
            level.push(code, defs);
            i = next;
            continue;
        }
        if nest && rest.starts_with('>') {
            let (quote, next) = quote(lines, i, defs, open_end, depth);
            level.push(quote, defs);
            i = next;
            continue;
        }
        if let Some(marker) = list_marker(rest, ind).filter(|_| nest)
            && (level.paragraph.is_empty() || marker.interrupts())
        {
            let (list, next) = list(lines, i, ind, marker, defs, open_end, depth);
            level.push(list, defs);
            i = next;
            continue;
        }
        if let Some((table, next)) = table(lines, i) {
            level.push(table, defs);
            i = next;
            continue;
        }
        if level.paragraph.is_empty() {
            level.begin();
        }
        level.paragraph.push(rest.to_owned());
        i += 1;
    }
    level.flush(defs);
    (level.blocks, level.gap)
}

/// The indented code block starting at `lines[i]` (trailing blank lines are not its) and the
/// index of the first line after it.
fn indented_code(lines: &[String], mut i: usize, open_end: bool) -> (Block, usize) {
    let mut code: Vec<String> = Vec::new();
    while let Some(l) = lines.get(i).filter(|l| is_blank(l) || indent(l) >= 4) {
        code.push(strip_columns(l, 4));
        i += 1;
    }
    while code.last().is_some_and(|l| is_blank(l)) {
        code.pop();
        i -= 1;
    }
    let mut code: String = code.iter().map(|l| format!("{l}\n")).collect();
    if open_end && i == lines.len() {
        unterminated(&mut code);
    }
    let block = Block::Code {
        language: String::new(),
        code,
    };
    (block, i)
}

/// The fenced code block opened at `lines[i]` (indented by `ind`, with `fence_open`'s fence
/// character, length and info string) up to its closing fence or the end, and the index of the
/// first line after it.
fn fenced_code(
    lines: &[String],
    mut i: usize,
    ind: usize,
    (fence, length, info): (u8, usize, &str),
    open_end: bool,
) -> (Block, usize) {
    let language = unescape(info.split_whitespace().next().unwrap_or_default());
    i += 1;
    let mut code = String::new();
    let mut closed = false;
    while let Some(l) = lines.get(i) {
        i += 1;
        let li = indent(l);
        if li < 4 && fence_closes(unindented(l), fence, length) {
            closed = true;
            break;
        }
        code.push_str(&strip_columns(l, ind));
        code.push('\n');
    }
    if open_end && !closed && !code.is_empty() {
        unterminated(&mut code);
    }
    (Block::Code { language, code }, i)
}

/// The block quote starting at `lines[i]` (its `>` lines and their lazy continuations, parsed
/// one level deeper) and the index of the first line after it.
fn quote(
    lines: &[String],
    mut i: usize,
    defs: &mut Definitions,
    open_end: bool,
    depth: usize,
) -> (Block, usize) {
    let mut inner = Collected::default();
    while let Some(l) = lines.get(i) {
        let li = indent(l);
        if li < 4 && unindented(l).starts_with('>') {
            let after = &unindented(l)[1..];
            // One column after `>` is its optional space (a tab there counts as spaces).
            inner.push(match after.strip_prefix('\t') {
                Some(rest) => " ".repeat(3 - (li + 1) % 4) + rest,
                None => after.strip_prefix(' ').unwrap_or(after).to_owned(),
            });
        } else if !starts_block(l, true) && inner.paragraph_open() {
            inner.push_lazy(l.clone());
        } else {
            break;
        }
        i += 1;
    }
    let quote = Block::Quote(blocks(&inner.lines, defs, open_end && i == lines.len(), depth + 1).0);
    (quote, i)
}

/// The list starting at `lines[i]` and the index of the first line after it.
fn list(
    lines: &[String],
    mut i: usize,
    mut ind: usize,
    mut marker: Marker,
    defs: &mut Definitions,
    open_end: bool,
    depth: usize,
) -> (Block, usize) {
    let start = marker.start;
    let mut items = Vec::new();
    let mut loose = false;
    loop {
        let width = ind + marker.width + marker.spaces;
        let line = &lines[i];
        let first = strip_columns_at(
            &unindented(line)[marker.width..],
            ind + marker.width,
            marker.spaces,
        );
        let mut item = Collected::default();
        item.push(first);
        i += 1;
        while let Some(l) = lines.get(i) {
            if is_blank(l) {
                // An item can begin with at most one blank line.
                if marker.empty && item.lines.len() == 1 {
                    break;
                }
                item.push(String::new());
            } else if indent(l) >= width {
                item.push(strip_columns(l, width));
            } else if indent(l) < 4
                && list_marker(l.trim_start(), indent(l)).is_some_and(|m| m.same_list(&marker))
            {
                // The next item of this list.
                break;
            } else if !starts_block(l, true) && item.paragraph_open() {
                item.push_lazy(l.clone());
            } else {
                break;
            }
            i += 1;
        }
        // Trailing blank lines belong to whatever follows the item (unless they are in a code
        // fence the item leaves open: a block still streaming in).
        while item.lines.len() > 1
            && item.lines.last().is_some_and(|l| is_blank(l))
            && item.fence.is_none()
        {
            item.lines.pop();
            i -= 1;
        }
        let (content, gap) = blocks(&item.lines, defs, open_end && i == lines.len(), depth + 1);
        loose |= gap;
        items.push(content);
        let mut next = i;
        while lines.get(next).is_some_and(|l| is_blank(l)) {
            next += 1;
        }
        let Some(l) = lines.get(next) else {
            break;
        };
        let li = indent(l);
        match list_marker(unindented(l), li) {
            Some(m) if li < 4 && m.same_list(&marker) && !thematic_break(unindented(l)) => {
                loose |= next > i;
                i = next;
                ind = li;
                marker = m;
            }
            _ => break,
        }
    }
    (
        Block::List {
            start,
            tight: !loose,
            items,
        },
        i,
    )
}

/// A GFM table whose header row is `lines[i]`, and the index of the first line after it.
fn table(lines: &[String], i: usize) -> Option<(Block, usize)> {
    let header = &lines[i];
    let delimiter = lines.get(i + 1)?;
    if !has_unescaped_pipe(header) || indent(delimiter) >= 4 {
        return None;
    }
    let columns = cells(delimiter);
    let is_delimiter = |cell: &String| {
        let core = cell.strip_prefix(':').unwrap_or(cell);
        let core = core.strip_suffix(':').unwrap_or(core);
        !cell.is_empty() && core.bytes().all(|b| b == b'-')
    };
    if columns.is_empty()
        || !columns.iter().all(is_delimiter)
        || (columns.len() == 1 && !delimiter.contains('|'))
    {
        return None;
    }
    let head = cells(header);
    if head.len() != columns.len() {
        return None;
    }
    let width = head.len();
    let mut rows = Vec::new();
    let mut next = i + 2;
    while let Some(l) = lines
        .get(next)
        .filter(|l| !starts_block(l, true) && l.trim() != "|")
    {
        let mut row = cells(l);
        row.resize(width, String::new());
        rows.push(row);
        next += 1;
    }
    Some((Block::Table { head, rows }, next))
}

/// Whether `line` has a `|` that is not escaped (a table's header row needs one).
fn has_unescaped_pipe(line: &str) -> bool {
    // A `|` right after a backslash is escaped, whatever came before the backslash.
    let bytes = line.as_bytes();
    (0..bytes.len()).any(|i| bytes[i] == b'|' && (i == 0 || bytes[i - 1] != b'\\'))
}

/// The cells of a table row: split at unescaped `|`, outer pipes and spaces trimmed.
fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    let leading_pipe = line.starts_with('|');
    let line = line.strip_prefix('|').unwrap_or(line);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            // A `|` right after a backslash is part of the cell, whatever came before that
            // backslash (GFM drops the escaping backslash before inline parsing).
            '\\' => cell.push('\\'),
            '|' => cells.push(std::mem::take(&mut cell).trim().to_owned()),
            c => cell.push(c),
        }
    }
    // A lone `|` is a row of no cells (GFM), `||` one of one empty cell.
    if !cell.trim().is_empty() || (cells.is_empty() && !leading_pipe) {
        cells.push(cell.trim().to_owned());
    }
    cells
}
