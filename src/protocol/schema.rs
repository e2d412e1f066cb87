//! Validation of tool arguments against the subset of JSON Schema our tools declare.
//!
//! Arguments are checked before anything else happens to a call (before an approval is asked,
//! and again when a person edits them), so an invalid call becomes a tool error the model sees
//! instead of a question the person should never have been asked. The subset: `type` (object,
//! string, number, integer, boolean, array, null), `properties`, `required`,
//! `additionalProperties: false`, `enum`, `minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum`, `minLength`, `maxLength`, `items`. Anything else in a schema is ignored
//! (descriptions, defaults); our own tool schemas are tested to use only this subset.

use serde_json::Value;

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
    check(schema, value, "$")
}

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

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaError> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };

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

    if let Some(Value::Array(allowed)) = schema.get("enum") {
        let found = allowed.iter().any(|a| equal_json(a, value));
        if !found {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return fail(path, format!("must be one of {}", list.join(", ")));
        }
    }

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
        if let Some(min) = schema.get("exclusiveMinimum").and_then(Value::as_f64)
            && n <= min
        {
            return fail(path, format!("must be greater than {min}"));
        }
        if let Some(max) = schema.get("exclusiveMaximum").and_then(Value::as_f64)
            && n >= max
        {
            return fail(path, format!("must be less than {max}"));
        }
    }

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

    if let Some(items) = value.as_array()
        && let Some(item_schema) = schema.get("items")
    {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{path}[{i}]"))?;
        }
    }

    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return fail(&format!("{path}.{name}"), "is required");
                }
            }
        }
        if let Some(properties) = properties {
            for (name, prop_value) in object {
                match properties.get(name) {
                    Some(prop_schema) => check(prop_schema, prop_value, &format!("{path}.{name}"))?,
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return fail(&format!("{path}.{name}"), "is not an accepted argument");
                    }
                    None => {}
                }
            }
        }
    }
    Ok(())
}

/// JSON equality where 2 and 2.0 are the same number.
fn equal_json(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
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
