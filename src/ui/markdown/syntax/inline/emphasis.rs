//! Emphasis, strong and strikethrough: delimiter runs are scanned as the parser meets them
//! (the flanking rules), then matched once the inline text is read (CommonMark's "process
//! emphasis").

use super::super::Node;
use super::{Item, Parser, nest};

/// A run of `*`, `_` or `~` that may open or close emphasis.
#[derive(Debug, Clone, Copy)]
pub(super) struct Delimiter {
    pub(super) marker: u8,
    pub(super) count: usize,
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

impl Parser<'_> {
    /// A delimiter run at `i`: whether it may open or close (the flanking rules).
    pub(super) fn delimiter(&mut self, i: usize, marker: u8) -> usize {
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
}

/// The end of the item list in `process_emphasis`.
const END: usize = usize::MAX;

/// Matches emphasis delimiters (CommonMark's "process emphasis") and returns the items in order.
pub(super) fn process_emphasis(mut items: Vec<Item>) -> Vec<Item> {
    let mut chain = Chain::new(items.len());
    // Per marker, whether the closer can also open, and its length mod 3: delimiters below this
    // index were already searched in vain for such a closer.
    let mut floor = [[[0usize; 3]; 2]; 3];
    let mut c = chain.head;
    while c != END {
        let closer = match &items[c] {
            Item::Delimiter(d) if d.closes && d.count > 0 => *d,
            _ => {
                c = chain.next[c];
                continue;
            }
        };
        let slot = &mut floor[closer.kind()][closer.opens as usize][closer.original % 3];
        let Some((o, open)) = find_opener(&items, &chain, c, &closer, *slot) else {
            *slot = c;
            if !closer.opens
                && let Item::Delimiter(d) = &mut items[c]
            {
                d.closes = false;
            }
            c = chain.next[c];
            continue;
        };
        let used = if closer.marker == b'~' {
            closer.count
        } else if open.count >= 2 && closer.count >= 2 {
            2
        } else {
            1
        };
        let (children, depth) = nest(chain.take_between(&mut items, o, c));
        let node = match (closer.marker, used) {
            (b'~', _) => Node::Strike(children),
            (_, 2) => Node::Strong(children),
            _ => Node::Emphasis(children),
        };
        chain.push_between(&mut items, Item::Node(node, depth), o, c);
        for index in [o, c] {
            let Item::Delimiter(d) = &mut items[index] else {
                continue;
            };
            d.count -= used;
            if d.count == 0 {
                items[index] = Item::Gone;
                chain.unlink(index);
            }
        }
        if matches!(items[c], Item::Gone) {
            c = chain.next[c];
        }
    }
    chain.into_order(&mut items)
}

/// The nearest delimiter before the closer at `closer_at` that pairs with it, searching no
/// lower than `floor`.
fn find_opener(
    items: &[Item],
    chain: &Chain,
    closer_at: usize,
    closer: &Delimiter,
    floor: usize,
) -> Option<(usize, Delimiter)> {
    let mut o = chain.prev[closer_at];
    while o != END {
        if let Item::Delimiter(d) = &items[o] {
            if o < floor {
                return None;
            }
            if d.pairs_with(closer) {
                return Some((o, *d));
            }
        }
        o = chain.prev[o];
    }
    None
}

impl Delimiter {
    /// Whether this run opens what `closer` closes: the same marker, and for `*` and `_` the
    /// "multiple of 3" rule; `~` pairs only with a run of its own length.
    fn pairs_with(&self, closer: &Delimiter) -> bool {
        self.marker == closer.marker
            && self.opens
            && self.count > 0
            && if closer.marker == b'~' {
                self.count == closer.count
            } else {
                let both = self.closes || closer.opens;
                !(both
                    && (self.original + closer.original).is_multiple_of(3)
                    && !(self.original.is_multiple_of(3) && closer.original.is_multiple_of(3)))
            }
    }
}

/// The items as a doubly linked list while matching, so what a match folds into a node is
/// unlinked once and never walked again.
struct Chain {
    next: Vec<usize>,
    prev: Vec<usize>,
    head: usize,
}

impl Chain {
    fn new(len: usize) -> Self {
        Self {
            next: (1..=len).map(|i| if i < len { i } else { END }).collect(),
            prev: (0..len).map(|i| i.checked_sub(1).unwrap_or(END)).collect(),
            head: if len == 0 { END } else { 0 },
        }
    }

    /// The items strictly between `from` and `to`, taken out of `items` (left as `Gone`).
    fn take_between(&self, items: &mut [Item], from: usize, to: usize) -> Vec<Item> {
        let mut taken = Vec::new();
        let mut i = self.next[from];
        while i != to {
            taken.push(std::mem::replace(&mut items[i], Item::Gone));
            i = self.next[i];
        }
        taken
    }

    /// Pushes `item` onto `items` and links it between `before` and `after` instead of what
    /// was there.
    fn push_between(&mut self, items: &mut Vec<Item>, item: Item, before: usize, after: usize) {
        let m = items.len();
        items.push(item);
        self.next.push(after);
        self.prev.push(before);
        self.next[before] = m;
        self.prev[after] = m;
    }

    fn unlink(&mut self, index: usize) {
        let (before, after) = (self.prev[index], self.next[index]);
        if before == END {
            self.head = after;
        } else {
            self.next[before] = after;
        }
        if after != END {
            self.prev[after] = before;
        }
    }

    /// The linked items in order, taken out of `items`.
    fn into_order(self, items: &mut [Item]) -> Vec<Item> {
        let mut ordered = Vec::new();
        let mut i = self.head;
        while i != END {
            ordered.push(std::mem::replace(&mut items[i], Item::Gone));
            i = self.next[i];
        }
        ordered
    }
}
