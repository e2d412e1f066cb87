//! What starts with `<`: autolinks become links; raw HTML is recognised only so that it can be
//! shown as the text it is.

use super::super::{Node, safe_href};

/// `<scheme:…>` or `<user@host>` at the start of `text`: a link to it, and its length.
pub(super) fn autolink(text: &str) -> Option<(Node, usize)> {
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
pub(super) fn raw_html(text: &str) -> Option<usize> {
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
