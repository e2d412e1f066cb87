//! How a tool shows itself to the person: the title of its card, the sentence they countersign
//! and how its arguments and result read. A tool declares this next to what the model is told
//! (`agent::tools::ToolSpec`); the server sends it with the tool list (`GET /api/app`) and the
//! browser renders every tool card from it, so the UI knows no tool by name.
//!
//! The approval sentence is a small template over the call's (validated) arguments:
//!
//! - `{field}` — the argument as text (`—` when it is missing);
//! - `{field:.2}` — a number with two decimals (any count from 0 to 9);
//! - `{amount:money(currency)}` — an amount with the decimals of the currency the argument
//!   `currency` names (the wallet's when it names none) and thousands separated: "3,000" yen,
//!   "12.50" dollars;
//! - `{amount:wallet(currency)}` — that amount converted into the wallet's currency at the rate
//!   table of [`super::money`] ("20.10"), and *empty* when it is the wallet's own currency, so an
//!   optional part around it (`[ (≈ {amount:wallet(currency)} USD)]`) shows only for other
//!   currencies;
//! - `{field|text}` — `text` when the argument is missing or empty;
//! - `[ for {description}]` — an optional part, left out when an argument inside it is missing
//!   or empty.
//!
//! `{`, `}`, `[` and `]` have no escapes: a sentence that needs them literally is not supported.
//! [`parse`] reports a malformed template with its position; [`ToolPresentation::check`] also
//! checks that every field it names is one of the tool's parameters.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What the person sees of a tool.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolPresentation {
    /// The title of the tool's card ("Payment").
    pub title: String,
    /// The sentence the person countersigns, a template over the arguments
    /// (`Pay {amount:.2} {currency|USD} to {recipient}[ for {description}]`).
    pub approval: String,
    /// Labels of argument and result fields by field name (`wallet_balance` → `balance`; a
    /// JSON object of strings); a field without one reads as its name with spaces for
    /// underscores. (A JSON map rather than a typed one: the browser already decodes those,
    /// and a typed map's decoder costs the bundle ~1 KB.)
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub labels: Map<String, Value>,
    /// Result fields the card leaves out (the raw JSON still shows them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
    /// Where the tool comes from, when it is not Countersign's own ("MCP server files").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// What the person should know before countersigning, in words ("can delete or overwrite
    /// data"; for an MCP tool, its annotations, which are the server's claims).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ToolPresentation {
    pub fn new(title: impl Into<String>, approval: impl Into<String>) -> Self {
        ToolPresentation {
            title: title.into(),
            approval: approval.into(),
            labels: Map::new(),
            hidden: Vec::new(),
            source: None,
            notes: Vec::new(),
        }
    }

    /// Adds a label for a field.
    pub fn label(mut self, field: &str, label: &str) -> Self {
        self.labels
            .insert(field.to_owned(), Value::String(label.to_owned()));
        self
    }

    /// Leaves a result field off the card.
    pub fn hide(mut self, field: &str) -> Self {
        self.hidden.push(field.to_owned());
        self
    }

    /// The sentence the person countersigns for these arguments. A malformed template (which
    /// [`check`](Self::check) catches when the tool is registered) reads as itself.
    pub fn sentence(&self, args: &Value) -> String {
        match parse(&self.approval) {
            Ok(template) => render(&template, args),
            Err(_) => self.approval.clone(),
        }
    }

    /// The readable fields of an argument object or a result: empty ones, hidden ones and those
    /// that repeat `except` (a result echoing its arguments) are left out.
    /// Fields come in the order of their names (on every side: [`super::json_util::sorted`]).
    pub fn fields(&self, value: &Value, except: Option<&Value>) -> Vec<(String, String)> {
        match &super::json_util::sorted(value) {
            Value::Object(map) => map
                .iter()
                .filter(|(_, v)| !(v.is_null() || v.as_str() == Some("")))
                .filter(|(k, _)| !self.hidden.iter().any(|h| h == *k))
                .filter(|(k, v)| except.and_then(|e| e.get(k.as_str())) != Some(*v))
                .map(|(k, v)| (self.label_of(k), show(v)))
                .collect(),
            Value::Null => Vec::new(),
            other => vec![("result".into(), show(other))],
        }
    }

    fn label_of(&self, field: &str) -> String {
        self.labels
            .get(field)
            .and_then(Value::as_str)
            .map_or_else(|| field.replace('_', " "), str::to_owned)
    }

    /// Checks that the title is there, the template parses and every field it names is one of
    /// the tool's parameters (`parameters` is the tool's JSON Schema). Labels and hidden fields
    /// may also name result fields, which no schema declares, so they are not checked.
    pub fn check(&self, parameters: &Value) -> Result<(), TemplateError> {
        let properties = parameters.get("properties").and_then(Value::as_object);
        if self.title.trim().is_empty() {
            return Err(TemplateError::new(0, "the title is empty"));
        }
        for name in parse(&self.approval)?.fields() {
            if !properties.is_some_and(|p| p.contains_key(name)) {
                return Err(TemplateError::new(
                    0,
                    format!("{{{name}}} is not one of the tool's parameters"),
                ));
            }
        }
        Ok(())
    }
}

/// The fallback for a tool the page knows nothing about (it left the registry since the call).
pub fn unknown_tool_sentence(name: &str) -> String {
    format!("Run {name}")
}

/// `amount` of the currency `currency` names (the wallet's when it names none), if both read.
fn money(amount: &Value, currency: Option<&Value>) -> Option<super::money::Money> {
    let code = match currency {
        None | Some(Value::Null) => super::money::WALLET_CURRENCY,
        Some(Value::String(code)) if code.is_empty() => super::money::WALLET_CURRENCY,
        Some(Value::String(code)) => code,
        Some(_) => return None,
    };
    let Value::Number(number) = amount else {
        return None;
    };
    super::money::Money::parse(&number.to_string(), code).ok()
}

/// A short human rendering of a JSON value.
pub fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "—".into(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        other => super::json_util::sorted(other).to_string(),
    }
}

/// A malformed sentence template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sentence template, at byte {at}: {message}")]
pub struct TemplateError {
    pub at: usize,
    pub message: String,
}

impl TemplateError {
    fn new(at: usize, message: impl Into<String>) -> Self {
        TemplateError {
            at,
            message: message.into(),
        }
    }
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(Vec<Piece>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Field(Field),
    Optional(Vec<Piece>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    name: String,
    format: Format,
    default: Option<String>,
}

/// How a field's value is written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Format {
    Plain,
    Decimals(usize),
    /// An amount of the currency named by this other argument.
    Money(String),
    /// That amount in the wallet's currency (empty when it is the wallet's currency).
    Wallet(String),
}

impl Template {
    /// The argument names the template uses, in order.
    pub fn fields(&self) -> Vec<&str> {
        fn walk<'a>(pieces: &'a [Piece], out: &mut Vec<&'a str>) {
            for piece in pieces {
                match piece {
                    Piece::Text(_) => {}
                    Piece::Field(f) => {
                        out.push(&f.name);
                        if let Format::Money(currency) | Format::Wallet(currency) = &f.format {
                            out.push(currency);
                        }
                    }
                    Piece::Optional(inner) => walk(inner, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0, &mut out);
        out
    }
}

/// Parses a sentence template (see the module's documentation for its syntax).
pub fn parse(template: &str) -> Result<Template, TemplateError> {
    let mut top = Vec::new();
    let mut optional: Option<(usize, Vec<Piece>)> = None;
    let mut text = String::new();
    let mut rest = template.char_indices();
    while let Some((at, c)) = rest.next() {
        let pieces = match &mut optional {
            Some((_, inner)) => inner,
            None => &mut top,
        };
        match c {
            '{' => {
                flush(&mut text, pieces);
                let mut body = String::new();
                let closed = loop {
                    match rest.next() {
                        Some((_, '}')) => break true,
                        Some((at, '{' | '[' | ']')) => {
                            return Err(TemplateError::new(at, "a field cannot contain { [ or ]"));
                        }
                        Some((_, c)) => body.push(c),
                        None => break false,
                    }
                };
                if !closed {
                    return Err(TemplateError::new(at, "{ is never closed"));
                }
                pieces.push(Piece::Field(field(&body, at)?));
            }
            '}' => return Err(TemplateError::new(at, "} without {")),
            '[' => {
                flush(&mut text, pieces);
                if optional.is_some() {
                    return Err(TemplateError::new(at, "optional parts cannot nest"));
                }
                optional = Some((at, Vec::new()));
            }
            ']' => {
                let Some((_, mut inner)) = optional.take() else {
                    return Err(TemplateError::new(at, "] without ["));
                };
                flush(&mut text, &mut inner);
                top.push(Piece::Optional(inner));
            }
            c => text.push(c),
        }
    }
    if let Some((at, _)) = optional {
        return Err(TemplateError::new(at, "[ is never closed"));
    }
    flush(&mut text, &mut top);
    Ok(Template(top))
}

fn flush(text: &mut String, pieces: &mut Vec<Piece>) {
    if !text.is_empty() {
        pieces.push(Piece::Text(std::mem::take(text)));
    }
}

/// `name`, `name:.2` or `name|default`.
fn field(body: &str, at: usize) -> Result<Field, TemplateError> {
    let (spec, default) = match body.split_once('|') {
        Some((spec, default)) => (spec, Some(default.to_owned())),
        None => (body, None),
    };
    let (name, format) = match spec.split_once(':') {
        Some((name, format)) => {
            let argument = |prefix: &str| {
                format
                    .strip_prefix(prefix)
                    .and_then(|rest| rest.strip_suffix(')'))
                    .map(str::trim)
                    .filter(|field| !field.is_empty())
                    .map(str::to_owned)
            };
            let format = if let Some(currency) = argument("money(") {
                Format::Money(currency)
            } else if let Some(currency) = argument("wallet(") {
                Format::Wallet(currency)
            } else {
                format
                    .strip_prefix('.')
                    .and_then(|d| d.parse::<usize>().ok())
                    .filter(|d| *d <= 9)
                    .map(Format::Decimals)
                    .ok_or_else(|| {
                        TemplateError::new(
                            at,
                            format!(
                                "unknown format :{format} (use :.0 to :.9, :money(<currency \
                                 field>) or :wallet(<currency field>))"
                            ),
                        )
                    })?
            };
            (name, format)
        }
        None => (spec, Format::Plain),
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(TemplateError::new(at, "a field needs a name"));
    }
    Ok(Field {
        name: name.to_owned(),
        format,
        default,
    })
}

/// Renders a parsed template for these arguments.
pub fn render(template: &Template, args: &Value) -> String {
    let mut out = String::new();
    for piece in &template.0 {
        match piece {
            Piece::Optional(inner) => {
                let mut part = String::new();
                if inner.iter().all(|p| write_piece(p, args, &mut part)) {
                    out.push_str(&part);
                }
            }
            piece => {
                write_piece(piece, args, &mut out);
            }
        }
    }
    out
}

/// Writes one piece; false when it is a field with no value (and no default).
fn write_piece(piece: &Piece, args: &Value, out: &mut String) -> bool {
    match piece {
        Piece::Text(text) => {
            out.push_str(text);
            true
        }
        Piece::Field(field) => {
            let value = args
                .get(&field.name)
                .filter(|v| !(v.is_null() || v.as_str() == Some("")));
            match (value, &field.default) {
                (Some(value), _) => match &field.format {
                    Format::Decimals(decimals) => {
                        match value.as_f64() {
                            Some(number) => {
                                let _ = write!(out, "{number:.decimals$}");
                            }
                            None => out.push_str(&show(value)),
                        }
                        true
                    }
                    Format::Money(currency) => {
                        match money(value, args.get(currency)) {
                            Some(money) => out.push_str(&money.amount_text()),
                            None => out.push_str(&show(value)),
                        }
                        true
                    }
                    Format::Wallet(currency) => match money(value, args.get(currency)) {
                        Some(money) if !money.is_wallet_currency() => {
                            out.push_str(&super::money::format_minor(money.wallet_cents(), 2));
                            true
                        }
                        _ => false,
                    },
                    Format::Plain => {
                        out.push_str(&show(value));
                        true
                    }
                },
                (None, Some(default)) => {
                    out.push_str(default);
                    true
                }
                (None, None) => {
                    out.push('—');
                    false
                }
            }
        }
        Piece::Optional(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sentence(template: &str, args: Value) -> String {
        ToolPresentation::new("T", template).sentence(&args)
    }

    #[test]
    fn templates_fill_in_the_arguments() {
        let pay = "Pay {amount:.2} {currency|USD} to {recipient}[ for {description}]";
        let cases = [
            (
                pay,
                json!({"amount": 50, "recipient": "Hanako", "currency": "USD"}),
                "Pay 50.00 USD to Hanako",
            ),
            (
                pay,
                json!({"amount": 12.5, "recipient": "Bob", "description": "lunch"}),
                "Pay 12.50 USD to Bob for lunch",
            ),
            (
                pay,
                json!({"amount": 1, "recipient": "Bob", "description": ""}),
                "Pay 1.00 USD to Bob",
            ),
            (
                pay,
                json!({"amount": "x", "recipient": "B"}),
                "Pay x USD to B",
            ),
            (pay, json!({}), "Pay — USD to —"),
            ("Share your location", json!({}), "Share your location"),
            (
                "Switch the music to track {track}",
                json!({"track": 2}),
                "Switch the music to track 2",
            ),
            (
                "{flag} and {list}",
                json!({"flag": true, "list": [1]}),
                "yes and [1]",
            ),
            ("{n:.0}", json!({"n": 2.6}), "3"),
            ("[{a}][, {b}]", json!({"b": "x"}), ", x"),
            ("[{a|none}]", json!({}), "none"),
            ("café {name}", json!({"name": "東京"}), "café 東京"),
        ];
        for (template, args, want) in cases {
            assert_eq!(sentence(template, args.clone()), want, "{template} {args}");
        }
    }

    #[test]
    fn amounts_read_in_their_currency_and_the_wallets() {
        let pay = "Pay {amount:money(currency)} {currency|USD}[ (≈ {amount:wallet(currency)} USD)] \
                   to {recipient}";
        let cases = [
            (
                json!({"amount": 3000, "currency": "JPY", "recipient": "Kenji"}),
                "Pay 3,000 JPY (≈ 20.10 USD) to Kenji",
            ),
            (
                json!({"amount": 50, "currency": "USD", "recipient": "Hanako"}),
                "Pay 50.00 USD to Hanako",
            ),
            (
                json!({"amount": 12.5, "recipient": "Bob"}),
                "Pay 12.50 USD to Bob",
            ),
            (
                json!({"amount": 10, "currency": "eur", "recipient": "Ana"}),
                "Pay 10.00 eur (≈ 10.84 USD) to Ana",
            ),
            // What does not read as money is shown as it is, and converts to nothing.
            (
                json!({"amount": 3000.5, "currency": "JPY", "recipient": "K"}),
                "Pay 3000.5 JPY to K",
            ),
            (
                json!({"amount": 5, "currency": "XAU", "recipient": "K"}),
                "Pay 5 XAU to K",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(sentence(pay, args.clone()), want, "{args}");
        }
        let template = parse(pay).unwrap();
        assert_eq!(
            template.fields(),
            [
                "amount",
                "currency",
                "currency",
                "amount",
                "currency",
                "recipient"
            ]
        );
        for malformed in ["{a:money(}", "{a:wallet()}", "{a:money(c}"] {
            let e = parse(malformed).unwrap_err();
            assert!(e.message.contains("unknown format"), "{malformed}: {e}");
        }
    }

    #[test]
    fn malformed_templates_are_reported_and_read_as_themselves() {
        let cases = [
            ("Pay {amount", 4, "never closed"),
            ("Pay }", 4, "without {"),
            ("a [b [c]]", 5, "cannot nest"),
            ("a ]", 2, "without ["),
            ("a [b", 2, "never closed"),
            ("{}", 0, "needs a name"),
            ("{a:x}", 0, "unknown format"),
            ("{a:.10}", 0, "unknown format"),
            ("{a[b}", 2, "cannot contain"),
        ];
        for (template, at, message) in cases {
            let e = parse(template).unwrap_err();
            assert_eq!(e.at, at, "{template}: {e}");
            assert!(e.message.contains(message), "{template}: {e}");
            assert_eq!(sentence(template, json!({"a": 1})), template);
        }
    }

    #[test]
    fn check_wants_known_fields_and_a_title() {
        let schema = json!({"type": "object", "properties": {"amount": {}, "to": {}}});
        let ok = ToolPresentation::new("Pay", "Pay {amount} to {to}[ ({note|no note})]");
        assert!(ok.check(&schema).unwrap_err().message.contains("{note}"));
        let ok = ToolPresentation::new("Pay", "Pay {amount} to {to}").label("to", "recipient");
        assert_eq!(ok.check(&schema), Ok(()));
        let unknown = ToolPresentation::new("Pay", "Pay {amount} to {who}");
        assert!(
            unknown
                .check(&schema)
                .unwrap_err()
                .message
                .contains("{who}")
        );
        assert!(ToolPresentation::new(" ", "Pay").check(&schema).is_err());
        assert!(
            ToolPresentation::new("Pay", "Pay {")
                .check(&schema)
                .is_err()
        );
        assert!(
            ToolPresentation::new("Pay", "Pay {amount}")
                .check(&json!({}))
                .is_err()
        );
    }

    #[test]
    fn fields_use_labels_and_leave_out_hidden_empty_and_echoed_ones() {
        let view = ToolPresentation::new("Payment", "Pay")
            .label("wallet_balance", "balance")
            .hide("transaction_id");
        let args = json!({"amount": 5, "recipient": "Ken"});
        let result = json!({
            "amount": 5, "recipient": "Ken", "wallet_balance": 995, "transaction_id": "t-1",
            "description": "", "note": null, "success": true, "currency_code": "USD"
        });
        assert_eq!(
            view.fields(&result, Some(&args)),
            [
                ("currency code".to_owned(), "USD".to_owned()),
                ("success".to_owned(), "yes".to_owned()),
                ("balance".to_owned(), "995".to_owned()),
            ]
        );
        assert_eq!(
            view.fields(&json!("done"), None),
            [("result".to_owned(), "done".to_owned())]
        );
        assert!(view.fields(&Value::Null, None).is_empty());
    }

    #[test]
    fn a_presentation_round_trips_and_omits_empty_parts() {
        let plain = ToolPresentation::new("Location", "Share your location");
        let json = serde_json::to_value(&plain).unwrap();
        assert_eq!(
            json,
            json!({"title": "Location", "approval": "Share your location"})
        );
        let full = plain.label("latitude", "lat").hide("accuracy");
        let back: ToolPresentation =
            serde_json::from_value(serde_json::to_value(&full).unwrap()).unwrap();
        assert_eq!(back, full);
    }
}
