//! The server's share of schema checking: `const`, `multipleOf`, item and field counts,
//! `uniqueItems`, positional items, `anyOf`, `oneOf`, `allOf`, `not`, local `$ref`s and
//! `pattern` (ECMA-262 patterns read by the `regex` crate; a pattern it cannot read fails the
//! check rather than passing it). Kept out of the browser build: the wasm bundle has a size
//! budget, and the server checks every edit again.

use serde_json::{Map, Value};

use super::{Checker, SchemaError, equal_json, fail};

pub(super) fn check(
    checker: &Checker<'_>,
    schema: &Map<String, Value>,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<(), SchemaError> {
    check_value(schema, value, path)?;
    if let Some(items) = value.as_array() {
        check_array(checker, schema, items, path, depth)?;
    }
    if let Some(object) = value.as_object() {
        counted(
            schema,
            "minProperties",
            "maxProperties",
            object.len(),
            "field(s)",
            path,
        )?;
    }
    check_combined(checker, schema, value, path, depth)?;
    check_pattern(schema, value, path)?;
    Ok(())
}

/// `const` and `multipleOf`.
fn check_value(schema: &Map<String, Value>, value: &Value, path: &str) -> Result<(), SchemaError> {
    if let Some(constant) = schema.get("const")
        && !equal_json(constant, value)
    {
        return fail(path, format!("must be {constant}"));
    }
    if let (Some(step), Some(n)) = (
        schema.get("multipleOf").and_then(Value::as_f64),
        value.as_f64(),
    ) && step > 0.0
    {
        let ratio = n / step;
        if (ratio - ratio.round()).abs() > 1e-9 {
            return fail(path, format!("must be a multiple of {step}"));
        }
    }
    Ok(())
}

/// An array's item count, `uniqueItems` and its positional items.
fn check_array(
    checker: &Checker<'_>,
    schema: &Map<String, Value>,
    items: &[Value],
    path: &str,
    depth: usize,
) -> Result<(), SchemaError> {
    counted(schema, "minItems", "maxItems", items.len(), "item(s)", path)?;
    if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
        for (i, item) in items.iter().enumerate() {
            if items[..i].iter().any(|earlier| equal_json(earlier, item)) {
                return fail(&format!("{path}[{i}]"), "repeats an earlier item");
            }
        }
    }
    // Positional schemas: 2020-12 `prefixItems`, or draft 4's list form of `items` (the
    // core checks `items` as one schema past them).
    let positional = match (schema.get("prefixItems"), schema.get("items")) {
        (Some(Value::Array(prefix)), _) | (None, Some(Value::Array(prefix))) => prefix.as_slice(),
        _ => &[],
    };
    for (i, (item, item_schema)) in items.iter().zip(positional).enumerate() {
        checker.check(item_schema, item, &format!("{path}[{i}]"), depth + 1)?;
    }
    Ok(())
}

/// The schemas the value is checked against again: a local `$ref`, `allOf`, `anyOf`, `oneOf`
/// and `not`.
fn check_combined(
    checker: &Checker<'_>,
    schema: &Map<String, Value>,
    value: &Value,
    path: &str,
    depth: usize,
) -> Result<(), SchemaError> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let Some(target) = resolve(checker.root, reference) else {
            return fail(
                path,
                format!("the schema's reference {reference:?} leads nowhere"),
            );
        };
        checker.check(target, value, path, depth + 1)?;
    }
    if let Some(Value::Array(all)) = schema.get("allOf") {
        for sub in all {
            checker.check(sub, value, path, depth + 1)?;
        }
    }
    if let Some(Value::Array(any)) = schema.get("anyOf") {
        let mut first = None;
        for sub in any {
            match checker.check(sub, value, path, depth + 1) {
                Ok(()) => {
                    first = None;
                    break;
                }
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first {
            return Err(e.or_else_among(any.len()));
        }
    }
    if let Some(Value::Array(one)) = schema.get("oneOf") {
        let matching = one
            .iter()
            .filter(|sub| checker.check(sub, value, path, depth + 1).is_ok())
            .count();
        match matching {
            1 => {}
            0 => return fail(path, "matches none of the allowed forms"),
            _ => return fail(path, "matches more than one of the allowed forms"),
        }
    }
    if let Some(not) = schema.get("not")
        && checker.check(not, value, path, depth + 1).is_ok()
    {
        return fail(path, "is a form that is not allowed");
    }
    Ok(())
}

/// `pattern`, for a string.
fn check_pattern(
    schema: &Map<String, Value>,
    value: &Value,
    path: &str,
) -> Result<(), SchemaError> {
    if let (Some(pattern), Some(text)) = (
        schema.get("pattern").and_then(Value::as_str),
        value.as_str(),
    ) {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(text) => {}
            Ok(_) => return fail(path, format!("must match the pattern {pattern}")),
            Err(_) => {
                return fail(
                    path,
                    format!("cannot be checked: the schema's pattern {pattern} is not readable"),
                );
            }
        }
    }
    Ok(())
}

/// A count between `min_key` and `max_key`.
fn counted(
    schema: &Map<String, Value>,
    min_key: &str,
    max_key: &str,
    count: usize,
    what: &str,
    path: &str,
) -> Result<(), SchemaError> {
    let count = count as u64;
    if let Some(min) = schema.get(min_key).and_then(Value::as_u64)
        && count < min
    {
        return fail(path, format!("must have at least {min} {what}"));
    }
    if let Some(max) = schema.get(max_key).and_then(Value::as_u64)
        && count > max
    {
        return fail(path, format!("must have at most {max} {what}"));
    }
    Ok(())
}

impl SchemaError {
    /// An `anyOf` failure: the first alternative's reason, said as one of several.
    fn or_else_among(self, alternatives: usize) -> Self {
        if alternatives <= 1 {
            return self;
        }
        SchemaError {
            message: format!(
                "matches none of the {alternatives} allowed forms ({})",
                self.message
            ),
            path: self.path,
        }
    }
}

/// The schema a local reference names: `#`, `#/$defs/<name>`, `#/definitions/<name>` (with
/// JSON-pointer escapes).
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{unsupported, validate};

    #[test]
    fn combinators_references_and_patterns() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "pattern": "^/tmp/"},
                "mode": {"anyOf": [{"const": "r"}, {"const": "w"}]},
                "edits": {"type": "array", "items": {"$ref": "#/$defs/edit"}, "minItems": 1},
                "either": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}]},
                "other": {"not": {"type": "null"}},
                "both": {"allOf": [{"minLength": 2}, {"maxLength": 3}]}
            },
            "$defs": {"edit": {"type": "object", "properties": {"old": {"type": "string"}},
                               "required": ["old"], "additionalProperties": false}}
        });
        assert_eq!(unsupported(&schema), Vec::<String>::new());
        assert_eq!(
            validate(
                &schema,
                &json!({"path": "/tmp/a", "mode": "w", "edits": [{"old": "x"}],
                                       "either": 2.5 + 0.5, "other": 1, "both": "ab"})
            ),
            Ok(())
        );
        for (value, path, says) in [
            (
                json!({"path": "/etc/passwd"}),
                "$.path",
                "must match the pattern ^/tmp/",
            ),
            (
                json!({"mode": "x"}),
                "$.mode",
                "matches none of the 2 allowed forms",
            ),
            (json!({"edits": []}), "$.edits", "at least 1 item"),
            (
                json!({"edits": [{"new": "x"}]}),
                "$.edits[0].old",
                "is required",
            ),
            (json!({"either": 7}), "$.either", "more than one"),
            (
                json!({"either": "7"}),
                "$.either",
                "none of the allowed forms",
            ),
            (json!({"other": null}), "$.other", "not allowed"),
            (json!({"both": "abcd"}), "$.both", "at most 3"),
        ] {
            let e = validate(&schema, &value).unwrap_err();
            assert_eq!(e.path, path, "{value}: {e}");
            assert!(e.message.contains(says), "{value}: {e}");
        }
    }

    #[test]
    fn unknown_keywords_and_foreign_references_are_listed() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "if": {"minLength": 1}},
                "b": {"$ref": "https://example.com/s.json"},
                "c": {"type": "array", "items": {"contains": {"type": "string"}}}
            },
            "dependentRequired": {}
        });
        let found = unsupported(&schema);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(
            found.iter().any(|f| f == "$.properties.a: \"if\""),
            "{found:?}"
        );
        assert!(
            found.iter().any(|f| f.contains("$.properties.b.$ref")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|f| f == "$.properties.c.items: \"contains\""),
            "{found:?}"
        );
        assert!(
            found.iter().any(|f| f == "$: \"dependentRequired\""),
            "{found:?}"
        );
    }

    #[test]
    fn constants_steps_counts_and_positions() {
        let schema = json!({
            "type": "object",
            "properties": {
                "kind": {"const": "file"},
                "step": {"type": "number", "multipleOf": 0.5},
                "tags": {"type": "array", "uniqueItems": true, "maxItems": 3},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                         "items": {"type": "boolean"}},
                "meta": {"type": "object", "maxProperties": 1}
            }
        });
        assert_eq!(
            validate(
                &schema,
                &json!({"kind": "file", "step": 1.5, "tags": ["a", "b"],
                                       "pair": ["x", 2, true], "meta": {"a": 1}})
            ),
            Ok(())
        );
        for (value, path, says) in [
            (json!({"kind": "dir"}), "$.kind", "must be \"file\""),
            (json!({"step": 0.3}), "$.step", "multiple of 0.5"),
            (json!({"tags": ["a", "a"]}), "$.tags[1]", "repeats"),
            (json!({"tags": [1, 2, 3, 4]}), "$.tags", "at most 3 item(s)"),
            (json!({"pair": [1, 2]}), "$.pair[0]", "expected string"),
            (
                json!({"pair": ["x", 2, 3]}),
                "$.pair[2]",
                "expected boolean",
            ),
            (
                json!({"meta": {"a": 1, "b": 2}}),
                "$.meta",
                "at most 1 field(s)",
            ),
        ] {
            let e = validate(&schema, &value).unwrap_err();
            assert_eq!(e.path, path, "{value}: {e}");
            assert!(e.message.contains(says), "{value}: {e}");
        }
    }

    #[test]
    fn a_reference_cycle_is_cut() {
        let schema = json!({"$ref": "#"});
        assert!(validate(&schema, &json!(1)).is_err());
    }
}
