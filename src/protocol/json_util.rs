//! Small serde helpers shared by the wire types of this module.
//!
//! Every wire type here is a JSON object discriminated by a `"type"` string
//! whose value space is open (`data-<name>`, `tool-<name>`, types added by
//! later AI SDK versions). serde's derived internally-tagged enums can neither
//! match a prefix nor keep an unknown object verbatim, so the enums implement
//! serde by hand: decode to a [`Value`], split off the tag here, dispatch on it,
//! and deserialize a derived payload struct from the remaining object.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Why a JSON value could not even be split into `type` + fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagError {
    NotAnObject,
    MissingType,
}

/// Splits `{"type": "...", ...}` into its type string and the object itself
/// (the `type` key stays in the map; payload structs ignore it).
pub(crate) fn split_tagged(value: Value) -> Result<(String, Map<String, Value>), TagError> {
    let Value::Object(map) = value else {
        return Err(TagError::NotAnObject);
    };
    match map.get("type") {
        Some(Value::String(kind)) => Ok((kind.clone(), map)),
        _ => Err(TagError::MissingType),
    }
}

/// Serializes `{"type": kind, ...body}` with `type` first, without building an
/// intermediate [`Value`]. Only used for serializing; decoding never uses
/// `flatten` (its buffering loses integer/float fidelity in some serde setups).
#[derive(Serialize)]
pub(crate) struct Tagged<'a, T: Serialize> {
    #[serde(rename = "type")]
    pub kind: &'a str,
    #[serde(flatten)]
    pub body: &'a T,
}

/// `deserialize_with` for `Option<Value>` fields that must keep an explicit
/// JSON `null` (`Some(Value::Null)`) apart from an absent key (`None`).
///
/// JavaScript's `JSON.stringify` drops `undefined` but keeps `null`, so a tool
/// whose output is `null` arrives as `"output": null` and must go back out
/// the same way. Combine with `#[serde(default, skip_serializing_if =
/// "Option::is_none")]`.
pub(crate) fn keep_null<'de, D>(deserializer: D) -> Result<Option<Value>, D::Error>
where
    D: Deserializer<'de>,
{
    Value::deserialize(deserializer).map(Some)
}

/// Deep merge with the AI SDK's `mergeObjects` semantics (`util/merge-objects.ts`,
/// used for `message.metadata`): objects merge key by key recursively, arrays
/// and primitives in `overrides` replace, and the prototype-polluting keys the
/// SDK skips (`__proto__`, `constructor`, `prototype`) are skipped here too so
/// both sides of the wire compute the same metadata.
///
/// One deliberate simplification: when either side is not an object the
/// override replaces the base (the SDK would spread a string or an array into
/// an object, which no real producer relies on).
pub(crate) fn deep_merge(base: &mut Value, overrides: Value) {
    match (base, overrides) {
        (Value::Object(base_map), Value::Object(override_map)) => {
            for (key, value) in override_map {
                if matches!(key.as_str(), "__proto__" | "constructor" | "prototype") {
                    continue;
                }
                match base_map.get_mut(&key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        deep_merge(existing, value);
                    }
                    _ => {
                        base_map.insert(key, value);
                    }
                }
            }
        }
        (base, overrides) => *base = overrides,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_tagged_requires_an_object_with_a_string_type() {
        assert_eq!(split_tagged(json!([1])), Err(TagError::NotAnObject));
        assert_eq!(
            split_tagged(json!({"kind": "x"})),
            Err(TagError::MissingType)
        );
        assert_eq!(split_tagged(json!({"type": 3})), Err(TagError::MissingType));
        let (kind, map) = split_tagged(json!({"type": "start", "a": 1})).unwrap();
        assert_eq!(kind, "start");
        assert_eq!(map.get("a"), Some(&json!(1)));
    }

    #[test]
    fn deep_merge_follows_merge_objects() {
        let mut base = json!({"usage": {"in": 1, "out": 2}, "tags": [1, 2], "model": "a"});
        deep_merge(
            &mut base,
            json!({"usage": {"out": 5}, "tags": [3], "model": null, "__proto__": {"x": 1}}),
        );
        assert_eq!(
            base,
            json!({"usage": {"in": 1, "out": 5}, "tags": [3], "model": null})
        );

        let mut scalar = json!("old");
        deep_merge(&mut scalar, json!({"a": 1}));
        assert_eq!(scalar, json!({"a": 1}));
    }
}
