//! Query strings: reading the page's own (the audit filters) and writing the ones its links and
//! requests carry.

/// The value of the first `name=value` pair in a query string (form encoding: `+` is a space,
/// `%XX` a byte; a malformed escape is kept as written, bytes that are not UTF-8 become U+FFFD),
/// trimmed.
pub fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(key) == name).then(|| decode(value).trim().to_owned())
    })
}

/// Decodes one form-encoded query component.
pub fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match (b, hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
            (b'+', ..) => out.push(b' '),
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes a query value.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_form_decoded() {
        assert_eq!(encode("a b&c"), "a%20b%26c");
        let query =
            "session=chat%2D1+x&tool=&kind=approved&kind=denied&before=12&bad=%zz%4&u=%E2%9C%8D";
        assert_eq!(query_param(query, "session").as_deref(), Some("chat-1 x"));
        assert_eq!(query_param(query, "tool").as_deref(), Some(""));
        assert_eq!(query_param(query, "kind").as_deref(), Some("approved"));
        assert_eq!(query_param(query, "bad").as_deref(), Some("%zz%4"));
        assert_eq!(query_param(query, "u").as_deref(), Some("✍"));
        assert_eq!(query_param(query, "missing"), None);
        assert_eq!(query_param("", "session"), None);
        assert_eq!(query_param("flag", "flag").as_deref(), Some(""));
        assert_eq!(decode("%FF"), "\u{FFFD}");
        for text in ["a b&c", "✍ ünï", "%+="] {
            assert_eq!(decode(&encode(text)), text);
        }
    }
}
