//! Validation of tool arguments against JSON Schema.
//!
//! Arguments are checked before anything else happens to a call (before an approval is asked,
//! and again when a person edits them), so an invalid call becomes a tool error the model sees
//! instead of a question the person should never have been asked.
//!
//! What is checked here, in both builds (what a person's edit of our own tools' arguments
//! meets in the browser): `type` (object, string, number, integer, boolean, array, null, or a
//! list of them), `properties`, `required`, `additionalProperties` (false or a schema), `enum`,
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (the number form, and draft 4's
//! boolean form), `minLength`, `maxLength`, `items` (one schema). On the server only
//! ([`extended`]): `const`, `multipleOf`, `minItems`, `maxItems`, `uniqueItems`, `prefixItems`
//! and draft 4's list form of `items`, `minProperties`, `maxProperties`, `anyOf`, `oneOf`,
//! `allOf`, `not`, local `$ref`s (`#/$defs/…`, `#/definitions/…`, `#`) and `pattern`; the
//! browser's check of an edit skips those (the server checks every edit again, and the wasm
//! bundle has a size budget).
//!
//! Annotations are not rules: `title`, `description`, `default`, `examples`, `format`, `$schema`,
//! `$id`, `$comment`, `deprecated`, `readOnly`, `writeOnly`, `contentEncoding`,
//! `contentMediaType`. Anything else is a keyword this module does not know: [`unsupported`]
//! lists them, and a tool whose schema has one is refused rather than checked loosely (an MCP
//! server's tools come with schemas nobody here wrote).

use serde_json::Value;

/// A schema object (a JSON object of keywords).
type Schema = serde_json::Map<String, Value>;

/// Where and why a value does not match its schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaError {
    /// JSON-pointer-like location, `$` for the root (e.g. `$.amount`).
    pub path: String,
    pub message: String,
}

/// Checks `value` against `schema`; the first problem found is returned.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    Checker { root: schema }.check(schema, value, "$", 0)
}

/// Keywords that are rules, checked here (or, for the extended ones, on the server).
pub const RULES: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "$ref",
    "$defs",
    "definitions",
];

/// Keywords that describe and never reject.
pub const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "format",
    "$schema",
    "$id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
];

/// The keywords of `schema` (and of every schema inside it) that are neither a rule this module
/// checks nor an annotation, each with where it is (`$.properties.path: "if"`).
pub fn unsupported(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_unsupported(schema, "$", &mut found, 0);
    found
}

fn walk_unsupported(schema: &Value, path: &str, found: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        found.push(format!("{path}: nested deeper than {MAX_DEPTH} levels"));
        return;
    }
    let Some(object) = schema.as_object() else {
        if !schema.is_boolean() {
            found.push(format!("{path}: a schema must be an object or a boolean"));
        }
        return;
    };
    for (key, value) in object {
        let at = format!("{path}.{key}");
        if !RULES.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
            found.push(format!("{path}: {key:?}"));
            continue;
        }
        match key.as_str() {
            "properties" | "$defs" | "definitions" => {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    walk_unsupported(sub, &format!("{at}.{name}"), found, depth + 1);
                }
            }
            "items" | "prefixItems" | "anyOf" | "oneOf" | "allOf" if value.is_array() => {
                for (i, sub) in value.as_array().into_iter().flatten().enumerate() {
                    walk_unsupported(sub, &format!("{at}[{i}]"), found, depth + 1);
                }
            }
            "items" | "not" => walk_unsupported(value, &at, found, depth + 1),
            "additionalProperties" if value.is_object() => {
                walk_unsupported(value, &at, found, depth + 1)
            }
            "$ref" => {
                let local = value.as_str().is_some_and(|r| {
                    r == "#" || r.starts_with("#/$defs/") || r.starts_with("#/definitions/")
                });
                if !local {
                    found.push(format!(
                        "{at}: only local references (#/$defs/…) are followed"
                    ));
                }
            }
            _ => {}
        }
    }
}

/// How deep schemas (and `$ref` chains) are followed.
const MAX_DEPTH: usize = 64;

fn fail(path: &str, message: impl Into<String>) -> Result<(), SchemaError> {
    Err(SchemaError {
        path: path.to_string(),
        message: message.into(),
    })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn matches_type(expected: &str, value: &Value) -> bool {
    match expected {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        // 2.0 is an integer in JSON Schema; models often send whole numbers as floats.
        "integer" => value
            .as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0),
        _ => true,
    }
}

/// Checks values against the schemas of one root (which `$ref`s point into).
struct Checker<'a> {
    root: &'a Value,
}

impl Checker<'_> {
    fn check(
        &self,
        schema: &Value,
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        if depth > MAX_DEPTH {
            return fail(path, "the schema is nested too deeply to check");
        }
        if schema == &Value::Bool(false) {
            return fail(path, "is not accepted here");
        }
        let Some(schema) = schema.as_object() else {
            return Ok(());
        };
        extended::check(self, schema, value, path, depth)?;

        check_type(schema, value, path)?;
        check_enum(schema, value, path)?;
        check_number(schema, value, path)?;
        check_string(schema, value, path)?;
        self.check_items(schema, value, path, depth)?;
        self.check_object(schema, value, path, depth)?;
        Ok(())
    }

    /// `items`: one schema for every item (past the positional ones, which the server checks).
    fn check_items(
        &self,
        schema: &Schema,
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        if let Some(items) = value.as_array()
            && let Some(item_schema @ Value::Object(_)) = schema.get("items")
        {
            let skip = schema
                .get("prefixItems")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            for (i, item) in items.iter().enumerate().skip(skip) {
                self.check(item_schema, item, &format!("{path}[{i}]"), depth + 1)?;
            }
        }
        Ok(())
    }

    /// `required`, `properties` and `additionalProperties`.
    fn check_object(
        &self,
        schema: &Schema,
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(), SchemaError> {
        if let Some(object) = value.as_object() {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !object.contains_key(name) {
                        return fail(&format!("{path}.{name}"), "is required");
                    }
                }
            }
            for (name, prop_value) in object {
                let at = format!("{path}.{name}");
                match (
                    properties.and_then(|p| p.get(name)),
                    schema.get("additionalProperties"),
                ) {
                    (Some(prop_schema), _) => {
                        self.check(prop_schema, prop_value, &at, depth + 1)?
                    }
                    (None, Some(Value::Bool(false))) => {
                        return fail(&at, "is not an accepted argument");
                    }
                    (None, Some(other @ Value::Object(_))) => {
                        self.check(other, prop_value, &at, depth + 1)?
                    }
                    (None, _) => {}
                }
            }
        }
        Ok(())
    }
}

/// `type`: one type name, or a list of them.
fn check_type(schema: &Schema, value: &Value, path: &str) -> Result<(), SchemaError> {
    match schema.get("type") {
        Some(Value::String(t)) if !matches_type(t, value) => {
            return fail(path, format!("expected {t}, got {}", type_name(value)));
        }
        Some(Value::Array(types)) => {
            let ok = types
                .iter()
                .filter_map(Value::as_str)
                .any(|t| matches_type(t, value));
            if !ok {
                return fail(
                    path,
                    format!(
                        "expected one of {}, got {}",
                        Value::Array(types.clone()),
                        type_name(value)
                    ),
                );
            }
        }
        _ => {}
    }
    Ok(())
}

/// `enum`: one of the values listed.
fn check_enum(schema: &Schema, value: &Value, path: &str) -> Result<(), SchemaError> {
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        let found = allowed.iter().any(|a| equal_json(a, value));
        if !found {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return fail(path, format!("must be one of {}", list.join(", ")));
        }
    }
    Ok(())
}

/// A number's bounds: `minimum`, `maximum` and their exclusive forms.
fn check_number(schema: &Schema, value: &Value, path: &str) -> Result<(), SchemaError> {
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return fail(path, format!("must be at least {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return fail(path, format!("must be at most {max}"));
        }
        if let Some(min) = exclusive(schema, "exclusiveMinimum", "minimum")
            && n <= min
        {
            return fail(path, format!("must be greater than {min}"));
        }
        if let Some(max) = exclusive(schema, "exclusiveMaximum", "maximum")
            && n >= max
        {
            return fail(path, format!("must be less than {max}"));
        }
    }
    Ok(())
}

/// A string's length, in characters: `minLength`, `maxLength`.
fn check_string(schema: &Schema, value: &Value, path: &str) -> Result<(), SchemaError> {
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            return fail(
                path,
                if min == 1 {
                    "must not be empty".to_string()
                } else {
                    format!("must be at least {min} characters")
                },
            );
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            return fail(path, format!("must be at most {max} characters"));
        }
    }
    Ok(())
}

/// An exclusive bound: the number form (2019+), or draft 4's `true` beside `minimum`/`maximum`.
fn exclusive(schema: &Schema, key: &str, bound: &str) -> Option<f64> {
    match schema.get(key) {
        Some(Value::Bool(true)) => schema.get(bound).and_then(Value::as_f64),
        Some(other) => other.as_f64(),
        None => None,
    }
}

/// JSON equality where 2 and 2.0 are the same number.
fn equal_json(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

#[cfg(feature = "ssr")]
mod extended;
/// The browser's check of an edit: the extended keywords are the server's (it checks every
/// edit again).
#[cfg(not(feature = "ssr"))]
mod extended {
    pub(super) fn check(
        checker: &super::Checker<'_>,
        _: &serde_json::Map<String, serde_json::Value>,
        _: &serde_json::Value,
        _: &str,
        _: usize,
    ) -> Result<(), super::SchemaError> {
        // References are followed on the server only.
        let _ = checker.root;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payment_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000},
                "recipient": {"type": "string", "minLength": 1, "maxLength": 100},
                "currency": {"type": "string", "enum": ["USD"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "track": {"type": "integer", "enum": [1, 2]}
            },
            "required": ["amount", "recipient"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_arguments_pass() {
        let s = payment_schema();
        assert_eq!(
            validate(&s, &json!({"amount": 50, "recipient": "Hanako"})),
            Ok(())
        );
        assert_eq!(
            validate(
                &s,
                &json!({"amount": 0.5, "recipient": "B", "currency": "USD", "track": 2.0})
            ),
            Ok(())
        );
    }

    #[test]
    fn each_rule_reports_path_and_reason() {
        let s = payment_schema();
        let cases = [
            (json!({"recipient": "B"}), "$.amount", "is required"),
            (
                json!({"amount": "5", "recipient": "B"}),
                "$.amount",
                "expected number, got string",
            ),
            (
                json!({"amount": 0, "recipient": "B"}),
                "$.amount",
                "must be greater than 0",
            ),
            (
                json!({"amount": -3, "recipient": "B"}),
                "$.amount",
                "must be greater than 0",
            ),
            (
                json!({"amount": 2e6, "recipient": "B"}),
                "$.amount",
                "must be at most 1000000",
            ),
            (
                json!({"amount": 1, "recipient": ""}),
                "$.recipient",
                "must not be empty",
            ),
            (
                json!({"amount": 1, "recipient": "B", "currency": "EUR"}),
                "$.currency",
                "must be one of \"USD\"",
            ),
            (
                json!({"amount": 1, "recipient": "B", "x": 1}),
                "$.x",
                "is not an accepted argument",
            ),
            (
                json!({"amount": 1, "recipient": "B", "tags": ["a", 2]}),
                "$.tags[1]",
                "expected string, got integer",
            ),
            (
                json!({"amount": 1, "recipient": "B", "track": 1.5}),
                "$.track",
                "expected integer, got number",
            ),
            (json!([1]), "$", "expected object, got array"),
        ];
        for (value, path, message) in cases {
            let err = validate(&s, &value).unwrap_err();
            assert_eq!(
                (err.path.as_str(), err.message.as_str()),
                (path, message),
                "{value}"
            );
        }
    }

    #[test]
    fn long_strings_are_measured_in_characters() {
        let s = json!({"type": "string", "maxLength": 3});
        assert_eq!(
            validate(&s, &json!("花子さん")).unwrap_err().message,
            "must be at most 3 characters"
        );
        assert_eq!(validate(&s, &json!("花子")), Ok(()));
    }
}
