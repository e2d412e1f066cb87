//! Small serde helpers shared by the wire types of this module.
//!
//! Every wire type here is a JSON object discriminated by a `"type"` string
//! whose value space is open (`data-<name>`, `tool-<name>`, types added by
//! later AI SDK versions). serde's derived internally-tagged enums can neither
//! match a prefix nor keep an unknown object verbatim, so the enums implement
//! serde by hand: decode to a [`Value`], split off the tag here, dispatch on it,
//! and read the payload from the remaining object with [`Fields`].

use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Error, Map, Value};

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

/// Reads the fields of one wire object by hand, with the results and the errors of the serde
/// derive it replaces (`serde_json::from_value::<Payload>` on a `#[serde(rename_all =
/// "camelCase")]` struct).
///
/// Why by hand: wasm size. Each derived payload struct instantiated serde_json's map visitor
/// and sequence form for itself (31 copies for the chunk and part payloads, ~63 KB before
/// wasm-opt); this reader is compiled once and a payload is one struct expression over it.
/// Replacing the derives took the release hydrate bundle from 397,320 to 376,808 bytes gzip.
///
/// The serde semantics it keeps, field by field:
///
/// * unknown keys are ignored (the derive's `__ignore`);
/// * `Option<T>` fields: an absent key and `null` are both `None`;
/// * required fields: absent is ``missing field `key` ``, `null` is an invalid type;
/// * `#[serde(default)] Value` fields ([`Fields::value`]) are `null` when absent, and
///   `keep_null` fields ([`Fields::keep_null`]) keep an explicit `null` apart from absent;
/// * which error is reported when several fields are wrong: the derive visits the object's
///   keys in the map's order and stops at the first mistyped one; only when none is mistyped
///   does it report the first *missing* field in declaration order. serde_json's map (without
///   `preserve_order`, as this crate builds it) iterates keys sorted, so the mistyped key that
///   sorts first wins here, and callers read fields in declaration order.
///
/// Reads never fail on the spot: a wrong field yields a placeholder (`""`, `None`) and is
/// recorded; [`Fields::check`] reports it, and the placeholder value is then dropped.
pub(crate) struct Fields {
    map: Map<String, Value>,
    /// The mistyped key that comes first in the map's order, and serde's error for it.
    mistyped: Option<(&'static str, Error)>,
    /// The first required key (in read order) that is absent.
    missing: Option<&'static str>,
}

impl Fields {
    pub(crate) fn new(map: Map<String, Value>) -> Self {
        Self {
            map,
            mistyped: None,
            missing: None,
        }
    }

    /// The object as it is now (untouched if nothing was read).
    pub(crate) fn into_map(self) -> Map<String, Value> {
        self.map
    }

    /// The error serde would have reported for the fields read so far, if any; clears it.
    pub(crate) fn check(&mut self) -> Result<(), Error> {
        match (self.mistyped.take(), self.missing.take()) {
            (Some((_, error)), _) => Err(error),
            (None, Some(key)) => Err(Error::missing_field(key)),
            (None, None) => Ok(()),
        }
    }

    fn take(&mut self, key: &'static str) -> Option<Value> {
        self.map.remove(key)
    }

    fn required(&mut self, key: &'static str) -> Option<Value> {
        let value = self.take(key);
        if value.is_none() && self.missing.is_none() {
            self.missing = Some(key);
        }
        value
    }

    /// `Ok` as is; an error is recorded for `key` and `T::default()` stands in.
    fn record<T: Default>(&mut self, key: &'static str, result: Result<T, Error>) -> T {
        result.unwrap_or_else(|error| {
            if self.mistyped.as_ref().is_none_or(|(first, _)| key < *first) {
                self.mistyped = Some((key, error));
            }
            T::default()
        })
    }

    /// A required string (`String`).
    pub(crate) fn string(&mut self, key: &'static str) -> String {
        match self.required(key) {
            Some(value) => self.record(key, string_of(value)),
            None => String::new(),
        }
    }

    /// A required boolean (`bool`).
    pub(crate) fn bool(&mut self, key: &'static str) -> bool {
        match self.required(key) {
            Some(value) => self.record(key, bool_of(value)),
            None => false,
        }
    }

    /// An optional string (`Option<String>`).
    pub(crate) fn opt_string(&mut self, key: &'static str) -> Option<String> {
        let value = self.take(key)?;
        self.record(key, opt_string_of(value))
    }

    /// An optional boolean (`Option<bool>`).
    pub(crate) fn opt_bool(&mut self, key: &'static str) -> Option<bool> {
        let value = self.take(key)?;
        self.record(key, opt_bool_of(value))
    }

    /// An optional object (`Option<Map<String, Value>>`: `providerMetadata`, `toolMetadata`).
    pub(crate) fn opt_object(&mut self, key: &'static str) -> Option<Map<String, Value>> {
        let value = self.take(key)?;
        self.record(key, opt_object_of(value))
    }

    /// Any JSON value, `null` when absent (`#[serde(default)] Value`, the schema's `z.unknown()`).
    pub(crate) fn value(&mut self, key: &'static str) -> Value {
        self.take(key).unwrap_or_default()
    }

    /// Any JSON value with an explicit `null` kept as `Some(Value::Null)` and an absent key as
    /// `None` (the [`keep_null`] fields).
    pub(crate) fn keep_null(&mut self, key: &'static str) -> Option<Value> {
        self.take(key)
    }

    /// Any JSON value, `null` and absent both `None` (a plain `Option<Value>`).
    pub(crate) fn opt_value(&mut self, key: &'static str) -> Option<Value> {
        self.take(key).filter(|value| !value.is_null())
    }

    /// A required unit-only enum, as the index of its wire name in `names` (see
    /// [`variant_of`]); `None` when absent or invalid (then recorded).
    pub(crate) fn variant(
        &mut self,
        key: &'static str,
        names: &'static [&'static str],
    ) -> Option<usize> {
        let value = self.required(key)?;
        self.record(key, variant_of(value, names).map(Some))
    }

    /// An optional unit-only enum (`Option<Enum>`), as the index of its wire name in `names`.
    pub(crate) fn opt_variant(
        &mut self,
        key: &'static str,
        names: &'static [&'static str],
    ) -> Option<usize> {
        match self.take(key)? {
            Value::Null => None,
            value => self.record(key, variant_of(value, names).map(Some)),
        }
    }

    /// A required value of a type with its own reader.
    pub(crate) fn with<T: Default>(
        &mut self,
        key: &'static str,
        read: fn(Value) -> Result<T, Error>,
    ) -> T {
        match self.required(key) {
            Some(value) => self.record(key, read(value)),
            None => T::default(),
        }
    }

    /// An optional value of a type with its own reader (`Option<T>`: `null` is `None`).
    pub(crate) fn opt_with<T>(
        &mut self,
        key: &'static str,
        read: fn(Value) -> Result<T, Error>,
    ) -> Option<T> {
        match self.take(key)? {
            Value::Null => None,
            value => self.record(key, read(value).map(Some)),
        }
    }
}

/// What serde_json's `Value` reports itself as in an "invalid type" error.
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (None, Some(i), _) => Unexpected::Signed(i),
            (None, None, Some(f)) => Unexpected::Float(f),
            (None, None, None) => Unexpected::Other("number"),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// serde_json's "invalid type: …, expected {expected}" for `value`.
pub(crate) fn invalid_type(value: &Value, expected: &str) -> Error {
    Error::invalid_type(unexpected(value), &expected)
}

/// `String` (serde's expectation: "a string").
pub(crate) fn string_of(value: Value) -> Result<String, Error> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(invalid_type(&other, "a string")),
    }
}

/// `Option<String>`.
pub(crate) fn opt_string_of(value: Value) -> Result<Option<String>, Error> {
    match value {
        Value::Null => Ok(None),
        other => string_of(other).map(Some),
    }
}

/// `bool` (serde's expectation: "a boolean").
pub(crate) fn bool_of(value: Value) -> Result<bool, Error> {
    match value {
        Value::Bool(b) => Ok(b),
        other => Err(invalid_type(&other, "a boolean")),
    }
}

/// `i64` (serde's expectation: "i64").
pub(crate) fn i64_of(value: Value) -> Result<i64, Error> {
    match value.as_i64() {
        Some(n) => Ok(n),
        None => Err(invalid_type(&value, "i64")),
    }
}

/// `Option<bool>`.
pub(crate) fn opt_bool_of(value: Value) -> Result<Option<bool>, Error> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        other => Err(invalid_type(&other, "a boolean")),
    }
}

/// `Option<Map<String, Value>>`.
pub(crate) fn opt_object_of(value: Value) -> Result<Option<Map<String, Value>>, Error> {
    match value {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        other => Err(invalid_type(&other, "a map")),
    }
}

/// A derived unit-only enum (`#[derive(Deserialize)] enum E { A, B }` with renamed variants
/// `names`), read from a [`Value`] as serde_json does: the name as a string, or the externally
/// tagged form `{"name": null}`. The index of the name in `names`.
pub(crate) fn variant_of(value: Value, names: &'static [&'static str]) -> Result<usize, Error> {
    let (name, content) = match value {
        Value::String(name) => (name, None),
        Value::Object(map) => {
            let mut entries = map.into_iter();
            match (entries.next(), entries.next()) {
                (Some((name, content)), None) => (name, Some(content)),
                _ => {
                    return Err(Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    ));
                }
            }
        }
        other => return Err(invalid_type(&other, "string or map")),
    };
    let Some(index) = names.iter().position(|known| *known == name) else {
        return Err(Error::unknown_variant(&name, names));
    };
    match content {
        Some(content) if !content.is_null() => Err(invalid_type(&content, "unit")),
        _ => Ok(index),
    }
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

/// A copy of `value` whose objects list their keys in sorted order. The browser's `serde_json`
/// keeps objects sorted; the server's keeps insertion order (a dependency of the policy engine
/// turns on `preserve_order`), so what both render from a JSON object goes through this, and
/// the page the server renders is the page the browser hydrates. A no-op copy in the browser.
pub fn sorted(value: &Value) -> Value {
    let mut value = value.clone();
    value.sort_all_objects();
    value
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
