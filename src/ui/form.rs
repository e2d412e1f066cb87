//! Forms generated from a flat JSON Schema object: the fields of an approval's Edit (the tool's
//! arguments) and of a question a tool asks (an MCP server's elicitation). Text, numbers,
//! yes/no, one choice (`enum`, titled with `enumNames` or `oneOf` consts) and several choices
//! (an array of `enum` / `anyOf` consts); `date`, `email` and `uri` formats get the browser's
//! own inputs.
//!
//! The fields are written as an HTML string ([`fields_html`], every text escaped) and read back
//! from the submitted form's entries ([`values_from`]): one generated view per field type cost
//! the wasm bundle ~20 KB, a string and one reader cost almost nothing (ADR 0022). The schema
//! says how each entry becomes a JSON value.

use serde_json::{Map, Value};

use super::html::escape;
use crate::protocol::{json_util::sorted, presentation::show};

/// A choice: the value sent and the words shown.
fn choices(prop: &Value) -> Vec<(Value, String)> {
    if let Some(list) = prop.get("enum").and_then(Value::as_array) {
        let names = prop.get("enumNames").and_then(Value::as_array);
        return list
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let name = names.and_then(|n| n.get(i)).and_then(Value::as_str);
                (v.clone(), name.map_or_else(|| show(v), str::to_owned))
            })
            .collect();
    }
    prop.get("oneOf")
        .or_else(|| prop.get("anyOf"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let value = c.get("const")?.clone();
            let title = c.get("title").and_then(Value::as_str);
            Some((
                value.clone(),
                title.map_or_else(|| show(&value), str::to_owned),
            ))
        })
        .collect()
}

/// The properties with whether each is required, the required ones first, each group by name
/// (the order a server wrote them in is not kept: the browser reads JSON objects sorted by name,
/// and the server sorts them the same way, `protocol::json_util::sorted`).
fn ordered(schema: &Value) -> Vec<(&String, &Value, bool)> {
    let required = |name: &str| {
        schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
    };
    // Two passes rather than a sort: a sort's code costs the wasm bundle ~1 KB.
    let fields = properties(schema).map(|(n, p)| (n, p, required(n)));
    let (first, rest): (Vec<_>, Vec<_>) = fields.partition(|(_, _, required)| *required);
    first.into_iter().chain(rest).collect()
}

/// A field's label (its title, else its description, else its name) and hint (the
/// description, when the title is the label).
fn label_of<'a>(name: &str, prop: &'a Value) -> (String, Option<&'a str>) {
    let text = |key: &str| prop.get(key).and_then(Value::as_str);
    match text("title") {
        Some(title) => (title.to_owned(), text("description")),
        None => (
            text("description").map_or_else(|| name.replace('_', " "), str::to_owned),
            None,
        ),
    }
}

/// What was answered, as `<dt>`/`<dd>` pairs: each field by its label, each choice by its title.
pub fn answer_html(schema: &Value, answer: &Map<String, Value>) -> String {
    let mut html = String::new();
    let mut answer = answer.clone();
    answer.sort_keys();
    for (name, value) in &answer {
        let prop = schema
            .get("properties")
            .and_then(|p| p.get(name))
            .unwrap_or(&Value::Null);
        let label = label_of(name, prop).0;
        let mut titles = choices(prop);
        titles.extend(prop.get("items").map(choices).unwrap_or_default());
        let title = |v: &Value| {
            titles
                .iter()
                .find(|(c, _)| c == v)
                .map_or_else(|| show(v), |(_, t)| t.clone())
        };
        let shown = match value {
            Value::Array(list) => list.iter().map(title).collect::<Vec<_>>().join(", "),
            other => title(other),
        };
        html.push_str(&format!(
            "<dt>{}</dt><dd>{}</dd>",
            escape(&label),
            escape(&shown)
        ));
    }
    html
}

/// A schema's properties, by name (callers pass a schema [`sorted`] first).
fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn kind(prop: &Value) -> &str {
    prop.get("type").and_then(Value::as_str).unwrap_or("string")
}

/// The fields of `schema`'s properties as HTML, showing `values`.
pub fn fields_html(schema: &Value, values: &Map<String, Value>) -> String {
    let schema = &sorted(schema);
    let mut html = String::new();
    for (name, prop, required) in ordered(schema) {
        let text = |key: &str| prop.get(key).and_then(Value::as_str);
        let (label, hint) = label_of(name, prop);
        let mut label = escape(&label);
        if required {
            label.push_str(" <abbr class=\"required\" title=\"required\">*</abbr>");
        }
        let name_attr = escape(name);
        let current = values.get(name);
        let options = choices(prop);
        let items = prop.get("items").map(choices).unwrap_or_default();
        let hint = hint
            .map(|h| format!("<small class=\"field-hint\">{}</small>", escape(h)))
            .unwrap_or_default();
        if kind(prop) == "array" && !items.is_empty() {
            html.push_str(&format!(
                "<fieldset class=\"edit-field\" data-testid=\"edit-field-{name_attr}\"><legend>{label}</legend>"
            ));
            for (value, title) in items {
                let checked = current
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.contains(&value));
                html.push_str(&format!(
                    "<label><input type=\"checkbox\" name=\"{name_attr}\" value=\"{}\"{}> {}</label>",
                    escape(&show_input(&value)),
                    if checked { " checked" } else { "" },
                    escape(&title)
                ));
            }
            html.push_str(&hint);
            html.push_str("</fieldset>");
            continue;
        }
        let input = if kind(prop) == "boolean" {
            let checked = current == Some(&Value::Bool(true));
            format!(
                "<input type=\"checkbox\" name=\"{name_attr}\" data-testid=\"edit-field-{name_attr}\"{}>",
                if checked { " checked" } else { "" }
            )
        } else if !options.is_empty() {
            let mut select = format!(
                "<select name=\"{name_attr}\" data-testid=\"edit-field-{name_attr}\"><option value=\"\" disabled{}>Choose…</option>",
                if current.is_none() { " selected" } else { "" }
            );
            for (value, title) in options {
                select.push_str(&format!(
                    "<option value=\"{}\"{}>{}</option>",
                    escape(&show_input(&value)),
                    if current == Some(&value) {
                        " selected"
                    } else {
                        ""
                    },
                    escape(&title)
                ));
            }
            select + "</select>"
        } else {
            let input_type = match (kind(prop), text("format")) {
                ("number" | "integer", _) => "number\" step=\"any",
                (_, Some("date")) => "date",
                (_, Some("email")) => "email",
                (_, Some("uri")) => "url",
                _ => "text",
            };
            format!(
                "<input type=\"{input_type}\" name=\"{name_attr}\" data-testid=\"edit-field-{name_attr}\" value=\"{}\">",
                escape(&current.map(show_input).unwrap_or_default())
            )
        };
        html.push_str(&format!(
            "<label class=\"edit-field\"><span>{label}</span>{input}{hint}</label>"
        ));
    }
    html
}

/// The JSON values of a submitted form: each of `schema`'s properties from the form's
/// `entries` (name, value). An empty text or choice is left out (so `required` can say so); a
/// number that does not read as one stays text (so the schema check says so).
pub fn values_from(schema: &Value, entries: &[(String, String)]) -> Map<String, Value> {
    let mut values = Map::new();
    for (name, prop) in properties(schema) {
        let mut raw = entries
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str());
        let choice = |raw: &str, options: &[(Value, String)]| {
            options
                .iter()
                .find(|(v, _)| show_input(v) == raw)
                .map(|(v, _)| v.clone())
        };
        let value = match kind(prop) {
            "boolean" => Some(Value::Bool(raw.next().is_some())),
            "array" => {
                let items = prop.get("items").map(choices).unwrap_or_default();
                let picked: Vec<Value> = raw.filter_map(|r| choice(r, &items)).collect();
                Some(Value::Array(picked))
            }
            kind => match raw.next().filter(|r| !r.trim().is_empty()) {
                None => None,
                Some(r) => match choice(r, &choices(prop)) {
                    Some(value) => Some(value),
                    None if kind == "number" || kind == "integer" => {
                        Some(number(r.trim()).unwrap_or_else(|| Value::String(r.to_owned())))
                    }
                    None => Some(Value::String(r.to_owned())),
                },
            },
        };
        if let Some(value) = value {
            values.insert(name.clone(), value);
        }
    }
    values
}

/// The schema's `default`s: a question's form starts from them.
pub fn defaults(schema: &Value) -> Map<String, Value> {
    let mut values = Map::new();
    for (name, prop) in properties(schema) {
        if let Some(default) = prop.get("default") {
            values.insert(name.clone(), default.clone());
        }
    }
    values
}

/// A typed number: serde_json's parser (the client already has it; a second float parser from
/// core costs ~14 KB of wasm); whole numbers become integers.
fn number(raw: &str) -> Option<Value> {
    let n = raw.parse::<serde_json::Number>().ok()?.as_f64()?;
    if n.fract() == 0.0 && n.abs() < 1e15 {
        Some(Value::from(n as i64))
    } else {
        serde_json::Number::from_f64(n).map(Value::Number)
    }
}

/// How a value sits in a text input.
fn show_input(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn everything() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Name", "description": "Your <full> name"},
            "agree": {"type": "boolean"},
            "count": {"type": "integer", "default": 42},
            "pet": {"type": "string", "enum": ["pet-1", "pet-2"], "enumNames": ["Cats", "Dogs"]},
            "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}]},
            "level": {"type": "integer", "enum": [1, 2]},
            "fish": {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Trout"}]}},
            "born": {"type": "string", "format": "date"}
        }})
    }

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn choices_read_every_way_a_schema_titles_them() {
        assert_eq!(
            choices(&json!({"enum": ["a", "b"], "enumNames": ["Apple"]})),
            vec![
                (json!("a"), "Apple".to_owned()),
                (json!("b"), "b".to_owned())
            ]
        );
        assert_eq!(
            choices(&json!({"oneOf": [{"const": "h1", "title": "Superman"}, {"const": 2}]})),
            vec![
                (json!("h1"), "Superman".to_owned()),
                (json!(2), "2".to_owned())
            ]
        );
        assert!(choices(&json!({"type": "string"})).is_empty());
    }

    #[test]
    fn fields_are_escaped_and_show_their_values() {
        let mut values = defaults(&everything());
        values.insert("name".into(), json!("\"><script>"));
        values.insert("fish".into(), json!(["f2"]));
        values.insert("agree".into(), json!(true));
        let html = fields_html(&everything(), &values);
        assert!(
            !html.contains("<script>") && !html.contains("<full>"),
            "{html}"
        );
        assert!(
            html.contains("value=\"&quot;&gt;&lt;script&gt;\""),
            "{html}"
        );
        assert!(html.contains("value=\"42\""), "{html}");
        assert!(
            html.contains("<option value=\"pet-1\">Cats</option>"),
            "{html}"
        );
        assert!(html.contains("value=\"f2\" checked> Trout"), "{html}");
        assert!(html.contains("type=\"date\""), "{html}");
        assert!(
            html.contains("name=\"agree\" data-testid=\"edit-field-agree\" checked"),
            "{html}"
        );
        assert!(
            html.contains("<option value=\"\" disabled selected>"),
            "{html}"
        );
    }

    #[test]
    fn required_fields_come_first_and_say_so() {
        let schema = json!({"properties": {"a": {"type": "string"}, "z": {"type": "string", "title": "Zed"}}, "required": ["z"]});
        let html = fields_html(&schema, &Map::new());
        let (z, a) = (html.find("Zed").unwrap(), html.find("name=\"a\"").unwrap());
        assert!(z < a, "{html}");
        assert!(html.contains("Zed <abbr class=\"required\""), "{html}");
    }

    #[test]
    fn answers_read_by_label_and_choice_title() {
        let answer = json!({"hero": "h1", "fish": ["f2", "f1"], "agree": false, "born": "<2026>"});
        let html = answer_html(&everything(), answer.as_object().unwrap());
        assert!(html.contains("<dt>hero</dt><dd>Superman</dd>"), "{html}");
        assert!(html.contains("<dt>fish</dt><dd>Trout, Tuna</dd>"), "{html}");
        assert!(html.contains("<dt>agree</dt><dd>no</dd>"), "{html}");
        assert!(html.contains("<dd>&lt;2026&gt;</dd>"), "{html}");
    }

    #[test]
    fn submitted_entries_become_typed_values() {
        let values = values_from(
            &everything(),
            &entries(&[
                ("name", "Ada"),
                ("count", "7"),
                ("pet", "pet-2"),
                ("level", "2"),
                ("fish", "f1"),
                ("fish", "f2"),
                ("born", ""),
            ]),
        );
        assert_eq!(
            Value::Object(values),
            json!({"name": "Ada", "agree": false, "count": 7, "pet": "pet-2", "level": 2, "fish": ["f1", "f2"]})
        );
        let odd = values_from(
            &everything(),
            &entries(&[("count", "many"), ("agree", "on")]),
        );
        assert_eq!(odd["count"], json!("many"));
        assert_eq!(odd["agree"], json!(true));
        assert_eq!(number("2.5"), Some(json!(2.5)));
    }
}
