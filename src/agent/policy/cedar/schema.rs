//! The Cedar schema written from the tool registry: one action per tool, its arguments typed
//! from the tool's JSON Schema.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use crate::agent::policy::ToolFacts;

/// The Cedar schema (JSON form) of these tools: one action per tool, in `Action::"call"`, with
/// the context its arguments give.
pub(super) fn schema_json(tools: &[ToolFacts]) -> Value {
    let mut actions = Map::new();
    actions.insert("call".into(), json!({}));
    for tool in tools {
        let mut attributes = Map::new();
        if let Some(input) = record_type(&tool.parameters) {
            attributes.insert("input".into(), input);
        }
        attributes.insert("chat".into(), json!({"type": "String"}));
        attributes.insert("asks_by_default".into(), json!({"type": "Boolean"}));
        attributes.insert("spent_today_cents".into(), json!({"type": "Long"}));
        attributes.insert("spent_in_chat_cents".into(), json!({"type": "Long"}));
        attributes.insert(
            "now".into(),
            json!({"type": "Extension", "name": "datetime"}),
        );
        if tool.pays {
            attributes.insert("amount_cents".into(), json!({"type": "Long"}));
            attributes.insert("currency".into(), json!({"type": "String"}));
            attributes.insert("new_payee".into(), json!({"type": "Boolean"}));
        }
        actions.insert(
            tool.name.clone(),
            json!({
                "memberOf": [{"id": "call"}],
                "appliesTo": {
                    "principalTypes": ["Person"],
                    "resourceTypes": ["Server"],
                    "context": {"type": "Record", "attributes": attributes}
                }
            }),
        );
    }
    json!({
        "": {
            "entityTypes": {
                "Person": {
                    "memberOfTypes": ["Role"],
                    "shape": {
                        "type": "Record",
                        "attributes": {"name": {"type": "String"}}
                    }
                },
                "Role": {},
                "Server": {}
            },
            "actions": actions
        }
    })
}

/// The Cedar type of a JSON Schema, where there is one.
fn cedar_type(schema: &Value) -> Option<Value> {
    match json_type(schema)? {
        "string" => Some(json!({"type": "String"})),
        "integer" => Some(json!({"type": "Long"})),
        "number" => Some(json!({"type": "Extension", "name": "decimal"})),
        "boolean" => Some(json!({"type": "Boolean"})),
        "array" => {
            let element = cedar_type(schema.get("items")?)?;
            Some(json!({"type": "Set", "element": element}))
        }
        "object" => record_type(schema),
        _ => None,
    }
}

/// The record type of an object schema: its properties that have a Cedar type, the required ones
/// required.
fn record_type(schema: &Value) -> Option<Value> {
    let properties = schema.get("properties")?.as_object()?;
    let required: HashSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut attributes = Map::new();
    for (name, property) in properties {
        let Some(mut ty) = cedar_type(property) else {
            continue;
        };
        if !required.contains(name.as_str()) || nullable(property) {
            ty["required"] = Value::Bool(false);
        }
        attributes.insert(name.clone(), ty);
    }
    Some(json!({"type": "Record", "attributes": attributes}))
}

/// The one non-null type a schema names (`"string"`, or `["string", "null"]`).
pub(super) fn json_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(types) => {
            let mut named = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null");
            let one = named.next()?;
            named.next().is_none().then_some(one)
        }
        _ => None,
    }
}

fn nullable(schema: &Value) -> bool {
    matches!(schema.get("type"), Some(Value::Array(types)) if types.iter().any(|t| t == "null"))
}
