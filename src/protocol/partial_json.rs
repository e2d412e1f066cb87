//! Best-effort parsing of an incomplete JSON text.
//!
//! `tool-input-delta` streams a tool call's arguments as raw JSON text. After
//! every delta the client re-parses everything received so far and shows the
//! result as the part's `input` (protocols.md §A.2), so a half-written
//! `{"recipient": "Ri` must already render as `{"recipient": "Ri"}`.
//!
//! The observable behaviour follows the AI SDK's `parsePartialJson` +
//! `fixJson` (`packages/ai/src/util/`) for every prefix of a valid JSON text,
//! so the server and the browser agree on what a partial input looks like:
//!
//! * an open string is closed with what it has so far (an escape sequence cut
//!   in half is dropped);
//! * open arrays and objects are closed;
//! * an object key with no value yet (`{"a": 1, "b`, `{"a":`) is dropped, as is
//!   a trailing comma;
//! * a literal cut short is completed (`tr` → `true`, `nu` → `null`);
//! * a number cut short keeps its digits (`12.` → `12`, `1e-` → `1`); a lone
//!   `-` is dropped like a dangling key;
//! * text after a complete top-level value is ignored.
//!
//! Text that is not a prefix of any JSON text yields [`PartialJson::Failed`]
//! (the SDK then sets `input` to `undefined`). Nesting deeper than
//! [`MAX_DEPTH`] also fails, so hostile input cannot exhaust the stack. This
//! function never panics.

use serde_json::{Map, Number, Value};

/// Maximum nesting of arrays/objects, the same limit `serde_json` applies.
pub const MAX_DEPTH: usize = 128;

/// The outcome of [`parse_partial_json`].
#[derive(Debug, Clone, PartialEq)]
pub enum PartialJson {
    /// The text was complete, valid JSON.
    Complete(Value),
    /// The text was a prefix; this is the best value it describes.
    Repaired(Value),
    /// Nothing usable: empty input, a bare `-`, or not a JSON prefix.
    Failed,
}

impl PartialJson {
    /// The parsed value, if any.
    pub fn value(&self) -> Option<&Value> {
        match self {
            Self::Complete(value) | Self::Repaired(value) => Some(value),
            Self::Failed => None,
        }
    }

    /// The parsed value, if any, by value.
    pub fn into_value(self) -> Option<Value> {
        match self {
            Self::Complete(value) | Self::Repaired(value) => Some(value),
            Self::Failed => None,
        }
    }
}

/// Parses `text`, which may be cut off anywhere, into the best JSON value it
/// describes. See the module docs for the rules.
pub fn parse_partial_json(text: &str) -> PartialJson {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return PartialJson::Complete(value);
    }
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    match parser.value(0) {
        Ok(Parsed::Complete(value)) | Ok(Parsed::Truncated(Some(value))) => {
            PartialJson::Repaired(value)
        }
        Ok(Parsed::Truncated(None)) | Err(NotJson) => PartialJson::Failed,
    }
}

/// A value that ended properly, or one the input ended inside of (with the
/// best completion, if there is one).
enum Parsed<T> {
    Complete(T),
    Truncated(Option<T>),
}

/// The input is not a prefix of any JSON text (or nests too deeply).
struct NotJson;

type Step<T> = Result<Parsed<T>, NotJson>;

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Step<Value> {
        self.skip_whitespace();
        let Some(byte) = self.peek() else {
            return Ok(Parsed::Truncated(None));
        };
        match byte {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => Ok(match self.string()? {
                Parsed::Complete(text) => Parsed::Complete(Value::String(text)),
                Parsed::Truncated(text) => Parsed::Truncated(text.map(Value::String)),
            }),
            b't' | b'f' | b'n' => self.literal(),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(NotJson),
        }
    }

    fn object(&mut self, depth: usize) -> Step<Value> {
        if depth > MAX_DEPTH {
            return Err(NotJson);
        }
        self.pos += 1; // '{'
        let mut map = Map::new();
        self.skip_whitespace();
        match self.peek() {
            None => return Ok(Parsed::Truncated(Some(Value::Object(map)))),
            Some(b'}') => {
                self.pos += 1;
                return Ok(Parsed::Complete(Value::Object(map)));
            }
            Some(_) => {}
        }
        loop {
            // Any early end below drops the pending key (it has no value yet).
            let truncated =
                |map: Map<String, Value>| Ok(Parsed::Truncated(Some(Value::Object(map))));
            self.skip_whitespace();
            match self.peek() {
                None => return truncated(map),
                Some(b'"') => {}
                Some(_) => return Err(NotJson),
            }
            let key = match self.string()? {
                Parsed::Complete(key) => key,
                Parsed::Truncated(_) => return truncated(map),
            };
            self.skip_whitespace();
            match self.peek() {
                None => return truncated(map),
                Some(b':') => self.pos += 1,
                Some(_) => return Err(NotJson),
            }
            match self.value(depth)? {
                Parsed::Complete(value) => {
                    map.insert(key, value);
                }
                Parsed::Truncated(value) => {
                    if let Some(value) = value {
                        map.insert(key, value);
                    }
                    return truncated(map);
                }
            }
            self.skip_whitespace();
            match self.peek() {
                None => return truncated(map),
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Parsed::Complete(Value::Object(map)));
                }
                Some(_) => return Err(NotJson),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Step<Value> {
        if depth > MAX_DEPTH {
            return Err(NotJson);
        }
        self.pos += 1; // '['
        let mut items = Vec::new();
        self.skip_whitespace();
        match self.peek() {
            None => return Ok(Parsed::Truncated(Some(Value::Array(items)))),
            Some(b']') => {
                self.pos += 1;
                return Ok(Parsed::Complete(Value::Array(items)));
            }
            Some(_) => {}
        }
        loop {
            match self.value(depth)? {
                Parsed::Complete(value) => items.push(value),
                Parsed::Truncated(value) => {
                    items.extend(value);
                    return Ok(Parsed::Truncated(Some(Value::Array(items))));
                }
            }
            self.skip_whitespace();
            match self.peek() {
                None => return Ok(Parsed::Truncated(Some(Value::Array(items)))),
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Parsed::Complete(Value::Array(items)));
                }
                Some(_) => return Err(NotJson),
            }
        }
    }

    /// A string starting at the opening quote. A truncated string yields what
    /// it has so far (never `None`).
    fn string(&mut self) -> Step<String> {
        self.pos += 1; // '"'
        let mut out = String::new();
        loop {
            let Some(byte) = self.peek() else {
                return Ok(Parsed::Truncated(Some(out)));
            };
            match byte {
                b'"' => {
                    self.pos += 1;
                    return Ok(Parsed::Complete(out));
                }
                b'\\' => {
                    if !self.escape(&mut out)? {
                        return Ok(Parsed::Truncated(Some(out)));
                    }
                }
                0x00..=0x1f => return Err(NotJson),
                _ => {
                    // Copy the plain run up to the next quote, backslash or
                    // control byte. All three are ASCII, so the slice ends on a
                    // char boundary of the (valid UTF-8) input.
                    let run = self.bytes[self.pos..]
                        .iter()
                        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                        .map_or(self.bytes.len(), |offset| self.pos + offset);
                    out.push_str(self.text.get(self.pos..run).ok_or(NotJson)?);
                    self.pos = run;
                }
            }
        }
    }

    /// One escape sequence at a backslash. `Ok(false)` when the input ends
    /// inside it (the partial escape is dropped).
    fn escape(&mut self, out: &mut String) -> Result<bool, NotJson> {
        let Some(kind) = self.bytes.get(self.pos + 1).copied() else {
            return Ok(false);
        };
        let simple = match kind {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'/' => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            b'u' => None,
            _ => return Err(NotJson),
        };
        if let Some(ch) = simple {
            out.push(ch);
            self.pos += 2;
            return Ok(true);
        }
        let Some(unit) = self.hex4(self.pos + 2)? else {
            return Ok(false);
        };
        if (0xD800..0xDC00).contains(&unit) {
            // A high surrogate needs its low half (`\uD83D\uDE00`). If the
            // input ends while that half may still be arriving, drop both.
            let next = self.pos + 6;
            let tail = self.bytes.get(next..).unwrap_or(&[]);
            if tail.len() < 6 && could_start_unicode_escape(tail) {
                return Ok(false);
            }
            let low = if tail.starts_with(b"\\u") {
                self.hex4(next + 2)?
            } else {
                None
            };
            if let Some(low) = low.filter(|low| (0xDC00..0xE000).contains(low)) {
                let combined = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                out.push(char::from_u32(combined).unwrap_or('\u{FFFD}'));
                self.pos = next + 6;
                return Ok(true);
            }
            // An unpaired surrogate cannot live in a Rust string.
            out.push('\u{FFFD}');
            self.pos = next;
            return Ok(true);
        }
        out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
        self.pos += 6;
        Ok(true)
    }

    /// Four hex digits at `at`: `Ok(None)` if the input ends first.
    fn hex4(&self, at: usize) -> Result<Option<u32>, NotJson> {
        let available = self.bytes.get(at..).unwrap_or(&[]);
        let digits = &available[..available.len().min(4)];
        let mut unit = 0u32;
        for &digit in digits {
            let value = (digit as char).to_digit(16).ok_or(NotJson)?;
            unit = unit * 16 + value;
        }
        Ok((digits.len() == 4).then_some(unit))
    }

    fn literal(&mut self) -> Step<Value> {
        let rest = &self.bytes[self.pos..];
        for (word, value) in [
            (&b"true"[..], Value::Bool(true)),
            (&b"false"[..], Value::Bool(false)),
            (&b"null"[..], Value::Null),
        ] {
            if rest.starts_with(word) {
                self.pos += word.len();
                return Ok(Parsed::Complete(value));
            }
            if word.starts_with(rest) {
                // The input ends inside the literal: complete it.
                self.pos = self.bytes.len();
                return Ok(Parsed::Truncated(Some(value)));
            }
        }
        Err(NotJson)
    }

    fn number(&mut self) -> Step<Value> {
        let start = self.pos;
        let end = self.bytes[start..]
            .iter()
            .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .map_or(self.bytes.len(), |offset| start + offset);
        self.pos = end;
        let text = self.text.get(start..end).ok_or(NotJson)?;
        if end < self.bytes.len() {
            // Something follows, so the number is complete: it must be valid.
            return parse_number(text).map(Parsed::Complete).ok_or(NotJson);
        }
        // The input ends inside the number: keep it up to its last digit.
        let digits = text.trim_end_matches(|c: char| !c.is_ascii_digit());
        if digits.is_empty() || digits == "-" {
            return Ok(Parsed::Truncated(None));
        }
        parse_number(digits)
            .map(|value| Parsed::Truncated(Some(value)))
            .ok_or(NotJson)
    }
}

/// Whether `tail` (shorter than six bytes) is the start of a `\uXXXX` escape.
fn could_start_unicode_escape(tail: &[u8]) -> bool {
    tail.iter().enumerate().all(|(index, &byte)| match index {
        0 => byte == b'\\',
        1 => byte == b'u',
        _ => byte.is_ascii_hexdigit(),
    })
}

fn parse_number(text: &str) -> Option<Value> {
    serde_json::from_str::<Number>(text).ok().map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repaired(text: &str) -> Option<Value> {
        parse_partial_json(text).into_value()
    }

    #[test]
    fn complete_json_is_complete() {
        assert_eq!(
            parse_partial_json(r#"{"a": [1, 2]}"#),
            PartialJson::Complete(json!({"a": [1, 2]}))
        );
        assert_eq!(parse_partial_json(" 5 "), PartialJson::Complete(json!(5)));
    }

    #[test]
    fn open_structures_are_closed() {
        let cases = [
            ("{", json!({})),
            ("[", json!([])),
            (r#"{"recipient": "Ri"#, json!({"recipient": "Ri"})),
            (r#"{"a": [1, 2"#, json!({"a": [1, 2]})),
            (r#"{"a": {"b": {"c": "x"#, json!({"a": {"b": {"c": "x"}}})),
            (r#"[{"a": 1}, {"b"#, json!([{"a": 1}, {}])),
            (r#"["x", "y"#, json!(["x", "y"])),
            ("\"abc", json!("abc")),
        ];
        for (text, expected) in cases {
            assert_eq!(
                parse_partial_json(text),
                PartialJson::Repaired(expected),
                "{text}"
            );
        }
    }

    #[test]
    fn dangling_keys_and_trailing_commas_are_dropped() {
        assert_eq!(repaired(r#"{"a": 1, "b"#), Some(json!({"a": 1})));
        assert_eq!(repaired(r#"{"a": 1, "b""#), Some(json!({"a": 1})));
        assert_eq!(repaired(r#"{"a": 1, "b":"#), Some(json!({"a": 1})));
        assert_eq!(repaired(r#"{"a": 1, "b": "#), Some(json!({"a": 1})));
        assert_eq!(repaired(r#"{"a": 1,"#), Some(json!({"a": 1})));
        assert_eq!(repaired("[1, 2,"), Some(json!([1, 2])));
        assert_eq!(repaired(r#"{"a": -"#), Some(json!({})));
    }

    #[test]
    fn literals_and_numbers_cut_short() {
        assert_eq!(repaired("tr"), Some(json!(true)));
        assert_eq!(repaired(r#"{"ok": fa"#), Some(json!({"ok": false})));
        assert_eq!(repaired("[nu"), Some(json!([null])));
        assert_eq!(repaired("12"), Some(json!(12)));
        assert_eq!(repaired("12."), Some(json!(12)));
        assert_eq!(repaired("-3.5e"), Some(json!(-3.5)));
        assert_eq!(repaired("1e-"), Some(json!(1)));
        assert_eq!(repaired(r#"{"amount": 2"#), Some(json!({"amount": 2})));
        assert_eq!(repaired("-"), None);
    }

    #[test]
    fn escapes_cut_short_are_dropped() {
        assert_eq!(repaired(r#""ab\"#), Some(json!("ab")));
        assert_eq!(repaired(r#""ab\u00"#), Some(json!("ab")));
        assert_eq!(repaired(r#""a\nb\u00e9"#), Some(json!("a\nbé")));
        assert_eq!(repaired(r#""😀 \ud83d"#), Some(json!("😀 ")));
        assert_eq!(repaired(r#""\ud83d\ude0"#), Some(json!("")));
        assert_eq!(repaired(r#""\ud83d\ude00"#), Some(json!("😀")));
        assert_eq!(repaired(r#""\ud83dx"#), Some(json!("\u{FFFD}x")));
        assert_eq!(repaired(r#"{"k\"ey": "v"#), Some(json!({"k\"ey": "v"})));
    }

    #[test]
    fn trailing_text_after_a_complete_value_is_ignored() {
        assert_eq!(repaired("{} x"), Some(json!({})));
    }

    #[test]
    fn not_a_json_prefix_fails() {
        for text in [
            "",
            "   ",
            "x",
            "{a",
            "[1 2",
            r#"{"a" 1}"#,
            "{\"a\":1,}",
            "\"\\q\"",
            "01x",
            "[-]",
            "\"\u{1}\"",
        ] {
            assert_eq!(parse_partial_json(text), PartialJson::Failed, "{text:?}");
        }
    }

    #[test]
    fn deep_nesting_fails_instead_of_overflowing_the_stack() {
        let deep = "[".repeat(100_000);
        assert_eq!(parse_partial_json(&deep), PartialJson::Failed);
        let ok = "[".repeat(MAX_DEPTH);
        assert!(parse_partial_json(&ok).value().is_some());
    }

    #[test]
    fn every_prefix_of_a_realistic_input_parses_monotonically() {
        let full = r#"{"recipient": "Rin Okabe", "amount": 25.5, "currency": "EUR", "tags": ["rent", "june"], "note": "caf\u00e9 \"x\"", "urgent": false}"#;
        let expected: Value = serde_json::from_str(full).unwrap();
        let mut last_keys = 0;
        for end in 0..=full.len() {
            let Some(prefix) = full.get(..end) else {
                continue;
            };
            let value = parse_partial_json(prefix).into_value();
            if let Some(Value::Object(map)) = &value {
                assert!(map.len() >= last_keys, "keys never disappear: {prefix}");
                last_keys = map.len();
            }
        }
        assert_eq!(parse_partial_json(full), PartialJson::Complete(expected));
    }
}
