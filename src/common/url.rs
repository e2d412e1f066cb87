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
    let spaced = text.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

/// Bytes a query value keeps as they are (RFC 3986's unreserved characters).
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes a query value.
pub fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, UNRESERVED).to_string()
}

/// What a path keeps as it is in the sign-in page's `next` (the unreserved characters and `/`,
/// so the address reads as the path it names).
const PATH: &percent_encoding::AsciiSet = &UNRESERVED.remove(b'/');

/// The sign-in page that comes back to `here` (a path and query of this site) after: the one
/// place both the server's redirects and the page build it.
pub fn signin_url(here: &str) -> String {
    format!(
        "/signin?next={}",
        percent_encoding::utf8_percent_encode(here, PATH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sign_in_page_comes_back_to_the_page_it_left() {
        assert_eq!(signin_url("/approvals"), "/signin?next=/approvals");
        assert_eq!(signin_url("/a b?c"), "/signin?next=/a%20b%3Fc");
        assert_eq!(
            signin_url("/audit?session=c 1&kind=x"),
            "/signin?next=/audit%3Fsession%3Dc%201%26kind%3Dx"
        );
        let next = signin_url("/approvals/apv-1?x=1");
        let query = next.split_once('?').map(|(_, q)| q).unwrap_or_default();
        assert_eq!(
            query_param(query, "next").as_deref(),
            Some("/approvals/apv-1?x=1")
        );
    }

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
