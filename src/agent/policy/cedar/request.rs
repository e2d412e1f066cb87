//! One call as a Cedar request: the person, the tool, where it comes from, and the context
//! its arguments and the wallet give.

use std::{
    collections::{HashMap, HashSet},
    str::FromStr,
};

use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request, RestrictedExpression,
};
use serde_json::Value;

use super::schema::json_type;
use crate::agent::policy::CallFacts;

fn uid(kind: &str, id: &str) -> Result<EntityUid, String> {
    let kind = EntityTypeName::from_str(kind).map_err(|e| e.to_string())?;
    Ok(EntityUid::from_type_name_and_id(kind, EntityId::new(id)))
}

pub(super) fn request(facts: &CallFacts<'_>) -> Result<Request, String> {
    let mut context: Vec<(String, RestrictedExpression)> = Vec::new();
    if let Some(input) = value_as(&facts.tool.parameters, facts.args) {
        context.push(("input".into(), input));
    }
    context.push((
        "chat".into(),
        RestrictedExpression::new_string(facts.chat.to_owned()),
    ));
    context.push((
        "asks_by_default".into(),
        RestrictedExpression::new_bool(facts.asks_by_default),
    ));
    context.push((
        "spent_today_cents".into(),
        RestrictedExpression::new_long(facts.spent_today_cents),
    ));
    context.push((
        "spent_in_chat_cents".into(),
        RestrictedExpression::new_long(facts.spent_in_chat_cents),
    ));
    context.push((
        "now".into(),
        RestrictedExpression::new_datetime(crate::agent::clock::rfc3339(facts.now_ms)),
    ));
    if facts.tool.pays {
        // A paying tool's rules read these; arguments that do not read as money leave them out,
        // and a rule that reads them then fails to evaluate (the call asks).
        if let Some(payment) = &facts.pays {
            context.push((
                "amount_cents".into(),
                RestrictedExpression::new_long(payment.money.wallet_cents()),
            ));
            context.push((
                "currency".into(),
                RestrictedExpression::new_string(payment.money.currency.code.to_owned()),
            ));
            context.push((
                "new_payee".into(),
                RestrictedExpression::new_bool(facts.new_payee),
            ));
        }
    }
    let context = Context::from_pairs(context).map_err(|e| e.to_string())?;
    Request::new(
        uid("Person", &facts.requester.id)?,
        uid("Action", &facts.tool.name)?,
        uid("Server", facts.tool.server())?,
        context,
        None,
    )
    .map_err(|e| e.to_string())
}

pub(super) fn entities(facts: &CallFacts<'_>) -> Result<Entities, String> {
    let call = uid("Action", "call")?;
    let action = Entity::new_no_attrs(
        uid("Action", &facts.tool.name)?,
        HashSet::from([call.clone()]),
    );
    let roles: Vec<EntityUid> = facts
        .requester
        .roles
        .iter()
        .map(|r| uid("Role", r))
        .collect::<Result<_, _>>()?;
    let person = Entity::new(
        uid("Person", &facts.requester.id)?,
        HashMap::from([(
            "name".to_owned(),
            RestrictedExpression::new_string(facts.requester.name.clone()),
        )]),
        roles.iter().cloned().collect(),
    )
    .map_err(|e| e.to_string())?;
    let mut all = vec![
        Entity::new_no_attrs(call, HashSet::new()),
        action,
        person,
        Entity::new_no_attrs(uid("Server", facts.tool.server())?, HashSet::new()),
    ];
    all.extend(
        roles
            .into_iter()
            .map(|r| Entity::new_no_attrs(r, HashSet::new())),
    );
    Entities::from_entities(all, None).map_err(|e| e.to_string())
}

/// `value` as the Cedar value its JSON Schema `schema` describes; `None` where it does not fit
/// (a rule that reads it then fails to evaluate, and the call asks). Built directly, never
/// through Cedar's JSON entity format: an argument `{"__entity": …}` stays a record of strings.
fn value_as(schema: &Value, value: &Value) -> Option<RestrictedExpression> {
    match json_type(schema)? {
        "string" => Some(RestrictedExpression::new_string(value.as_str()?.to_owned())),
        "integer" => Some(RestrictedExpression::new_long(value.as_i64()?)),
        "number" => {
            let Value::Number(number) = value else {
                return None;
            };
            Some(RestrictedExpression::new_decimal(decimal_text(
                &number.to_string(),
            )?))
        }
        "boolean" => Some(RestrictedExpression::new_bool(value.as_bool()?)),
        "array" => {
            let items = schema.get("items")?;
            let values: Option<Vec<_>> = value
                .as_array()?
                .iter()
                .map(|v| value_as(items, v))
                .collect();
            Some(RestrictedExpression::new_set(values?))
        }
        "object" => {
            let properties = schema.get("properties")?.as_object()?;
            let object = value.as_object()?;
            let mut fields: HashMap<String, RestrictedExpression> = HashMap::new();
            for (name, property) in properties {
                if let Some(v) = object.get(name).filter(|v| !v.is_null())
                    && let Some(expr) = value_as(property, v)
                {
                    fields.insert(name.clone(), expr);
                }
            }
            RestrictedExpression::new_record(fields).ok()
        }
        _ => None,
    }
}

/// A JSON number's text as Cedar `decimal` text ("12.5" → "12.5", "50" → "50.0", "1e3" →
/// "1000.0"): at most four decimals and within `decimal`'s range, else `None`.
pub fn decimal_text(number: &str) -> Option<String> {
    let negative = number.starts_with('-');
    let unsigned = number.trim_start_matches('-');
    let digits = ten_thousandths(unsigned)?;
    let whole = digits / 10_000;
    let fraction = digits % 10_000;
    if whole > 922_337_203_685_477 {
        return None;
    }
    let mut text = format!("{}{whole}.{fraction:04}", if negative { "-" } else { "" });
    while text.ends_with('0') && !text.ends_with(".0") {
        text.pop();
    }
    Some(text)
}

/// `text` (a non-negative decimal, optionally with an exponent) in ten-thousandths, exactly.
fn ten_thousandths(text: &str) -> Option<i64> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = int.chars().chain(frac.chars()).collect();
    let digits = digits.trim_start_matches('0');
    let shift = i64::from(exponent) - frac.len() as i64 + 4;
    if digits.is_empty() {
        return Some(0);
    }
    if shift < 0 {
        let cut = usize::try_from(-shift).ok()?;
        if cut >= digits.len() {
            return digits.bytes().all(|b| b == b'0').then_some(0);
        }
        let (keep, dropped) = digits.split_at(digits.len() - cut);
        if dropped.bytes().any(|b| b != b'0') {
            return None;
        }
        return keep.parse().ok();
    }
    let shift = usize::try_from(shift).ok()?;
    if digits.len() + shift > 18 {
        return None;
    }
    let mut value: i64 = digits.parse().ok()?;
    for _ in 0..shift {
        value = value.checked_mul(10)?;
    }
    Some(value)
}
