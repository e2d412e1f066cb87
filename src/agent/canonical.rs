//! One canonical form for a tool call's arguments (ADR 0027): what the policy's rules see, what
//! the card shows, what the audit digest and a step-up assertion are bound to, and what the tool
//! runs are the same value, made once where arguments enter — a model's call
//! ([`crate::agent::turn`]), a person's edit ([`crate::agent::gate`]), the inbox's edit form.
//!
//! * Every string, anywhere in the arguments (object keys too): Unicode NFC, and no control
//!   character other than tab, line feed and carriage return, and none of the invisible
//!   characters that reorder text (bidirectional embeddings, overrides and isolates) — refused,
//!   never dropped, so nobody signs a value other than the one they were shown.
//! * A **name** (a field its tool declares as one, [`ToolSpec::names`]: a recipient, a
//!   currency, a city): also trimmed, every run of whitespace (a tab, a no-break space, an
//!   ideographic space, a line break) one space, and no invisible format character at all
//!   (zero-width spaces and joiners, soft hyphens, marks that set direction). `" Mallory"`,
//!   `"Mallory\t"` and `"\u{a0}Mallory"` are all `"Mallory"`; `"Mal\u{200b}lory"` is refused.
//! * Everything else (free text, code, paths of an MCP server's tools) keeps its whitespace:
//!   indentation and blank lines mean something there, and the tool gets exactly what the
//!   rules saw.
//!
//! Pure and idempotent: the canonical form of a canonical value is itself.
//!
//! [`ToolSpec::names`]: crate::agent::tools::ToolSpec::names

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::protocol::schema::SchemaError;

/// The canonical form of `args`, whose top-level fields `names` are names; or where and why a
/// string cannot be put in it (the same error type as the schema's: a call with such arguments
/// is invalid, whoever wrote it).
pub fn canonical<S: AsRef<str>>(args: &Value, names: &[S]) -> Result<Value, SchemaError> {
    match args {
        Value::Object(fields) => {
            let mut out = Map::with_capacity(fields.len());
            for (key, value) in fields {
                let path = format!("$.{key}");
                let key = text(key, &path)?;
                let value = match value {
                    Value::String(s) if names.iter().any(|n| n.as_ref() == key) => {
                        Value::String(name(s, &path)?)
                    }
                    other => walk(other, &path, 1)?,
                };
                if out.insert(key.clone(), value).is_some() {
                    return Err(problem(
                        &path,
                        format!("two fields are named {key:?} once normalised"),
                    ));
                }
            }
            Ok(Value::Object(out))
        }
        other => walk(other, "$", 0),
    }
}

/// How deep arguments may nest (the schema module's own bound).
const MAX_DEPTH: usize = 64;

fn walk(value: &Value, path: &str, depth: usize) -> Result<Value, SchemaError> {
    if depth > MAX_DEPTH {
        return Err(problem(
            path,
            format!("nested deeper than {MAX_DEPTH} levels"),
        ));
    }
    Ok(match value {
        Value::String(s) => Value::String(text(s, path)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| walk(item, &format!("{path}[{i}]"), depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(fields) => {
            let mut out = Map::with_capacity(fields.len());
            for (key, item) in fields {
                let at = format!("{path}.{key}");
                let key = text(key, &at)?;
                let item = walk(item, &at, depth + 1)?;
                if out.insert(key.clone(), item).is_some() {
                    return Err(problem(
                        &at,
                        format!("two fields are named {key:?} once normalised"),
                    ));
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

/// Free text: NFC, with its whitespace as written.
fn text(s: &str, path: &str) -> Result<String, SchemaError> {
    for c in s.chars() {
        if matches!(c, '\t' | '\n' | '\r') {
            continue;
        }
        if c.is_control() {
            return Err(problem(
                path,
                format!("contains the control character {}", code(c)),
            ));
        }
        if reorders(c) {
            return Err(problem(
                path,
                format!(
                    "contains {}, an invisible character that reorders the text around it",
                    code(c)
                ),
            ));
        }
    }
    Ok(nfc(s))
}

/// A name: NFC, trimmed, one space for every run of whitespace, nothing invisible.
fn name(s: &str, path: &str) -> Result<String, SchemaError> {
    for c in s.chars() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_control() {
            return Err(problem(
                path,
                format!("contains the control character {}", code(c)),
            ));
        }
        if c.general_category() == GeneralCategory::Format {
            return Err(problem(
                path,
                format!(
                    "contains {}, an invisible character; write the name without it",
                    code(c)
                ),
            ));
        }
    }
    let normal = nfc(s);
    let mut out = String::with_capacity(normal.len());
    for word in normal.split(char::is_whitespace).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    Ok(out)
}

fn nfc(s: &str) -> String {
    if unicode_normalization::is_nfc(s) {
        s.to_owned()
    } else {
        s.nfc().collect()
    }
}

/// The bidirectional embeddings, overrides and isolates ("Trojan Source"): they make text
/// read in another order than it is stored.
fn reorders(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn code(c: char) -> String {
    format!("U+{:04X}", c as u32)
}

fn problem(path: &str, message: String) -> SchemaError {
    SchemaError {
        path: path.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn recipient(s: &str) -> Result<Value, SchemaError> {
        canonical(&json!({"recipient": s, "amount": 5}), &["recipient"])
            .map(|v| v["recipient"].clone())
    }

    #[test]
    fn a_name_written_with_extra_or_unusual_whitespace_is_the_same_name() {
        for written in [
            " Mallory",
            "Mallory ",
            "\u{a0}Mallory",
            "Mallory\t",
            "Mallory\n",
            "\u{3000}Mallory\u{2003}",
            "\r\nMallory",
        ] {
            assert_eq!(recipient(written), Ok(json!("Mallory")), "{written:?}");
        }
        assert_eq!(recipient("Ana  \u{a0} Lima"), Ok(json!("Ana Lima")));
        assert_eq!(recipient("Ana\tLima"), Ok(json!("Ana Lima")));
    }

    #[test]
    fn a_name_is_in_nfc() {
        // "Zoë" with a combining diaeresis and with the precomposed letter.
        assert_eq!(recipient("Zoe\u{308}"), Ok(json!("Zo\u{eb}")));
        assert_eq!(recipient("Zo\u{eb}"), Ok(json!("Zo\u{eb}")));
        // Hangul jamo compose to the syllable.
        assert_eq!(recipient("\u{1100}\u{1161}"), Ok(json!("\u{ac00}")));
    }

    #[test]
    fn invisible_and_control_characters_in_a_name_are_refused_not_dropped() {
        for (written, code) in [
            ("Mal\u{200b}lory", "U+200B"),
            ("Mal\u{200d}lory", "U+200D"),
            ("\u{feff}Mallory", "U+FEFF"),
            ("Mal\u{ad}lory", "U+00AD"),
            ("\u{202e}yrollaM", "U+202E"),
            ("Mallory\u{7}", "U+0007"),
            ("Mallory\u{9b}x", "U+009B"),
            ("Mal\u{0}lory", "U+0000"),
        ] {
            let error = recipient(written).expect_err(written);
            assert_eq!(error.path, "$.recipient");
            assert!(error.message.contains(code), "{written:?}: {error}");
        }
    }

    #[test]
    fn text_keeps_its_whitespace_and_refuses_controls_and_reordering() {
        let content = "fn main() {\n    println!(\"hi\");\n}\n";
        let args = json!({"path": " /tmp/a b.txt", "content": content, "opts": {"note": "  x  "}});
        assert_eq!(canonical(&args, &[] as &[&str]), Ok(args.clone()));
        let bell = json!({"content": "a\u{7}b"});
        assert!(canonical(&bell, &[] as &[&str]).is_err());
        let trojan = json!({"items": ["ok", "access = \"user\u{202e} \u{2066}// admin\u{2069}\""]});
        let error = canonical(&trojan, &[] as &[&str]).expect_err("reordering");
        assert_eq!(error.path, "$.items[1]");
        // Zero-width joiners belong in emoji and some scripts: text keeps them.
        let family = json!({"note": "\u{1f468}\u{200d}\u{1f469}"});
        assert_eq!(canonical(&family, &[] as &[&str]), Ok(family.clone()));
        // NFC everywhere, keys too.
        assert_eq!(
            canonical(&json!({"cafe\u{301}": ["e\u{301}"]}), &[] as &[&str]),
            Ok(json!({"caf\u{e9}": ["\u{e9}"]}))
        );
    }

    #[test]
    fn keys_that_become_one_are_refused() {
        let args = json!({"caf\u{e9}": 1, "cafe\u{301}": 2});
        assert!(canonical(&args, &[] as &[&str]).is_err());
    }

    #[test]
    fn the_canonical_form_is_canonical() {
        let args = json!({"recipient": " Zoe\u{308}\u{a0} Lima ", "description": " lunch\n", "n": [1, "e\u{301}"]});
        let once = canonical(&args, &["recipient"]).expect("canonical");
        assert_eq!(canonical(&once, &["recipient"]), Ok(once.clone()));
        assert_eq!(once["recipient"], json!("Zo\u{eb} Lima"));
    }

    #[test]
    fn non_string_values_are_untouched_and_depth_is_bounded() {
        let args = json!({"amount": 1.5, "ok": true, "none": null});
        assert_eq!(canonical(&args, &["amount"]), Ok(args.clone()));
        let mut deep = json!("x");
        for _ in 0..100 {
            deep = json!([deep]);
        }
        assert!(canonical(&json!({ "deep": deep }), &[] as &[&str]).is_err());
    }
}
