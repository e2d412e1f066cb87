//! Policy files in Cedar (ADR 0023, ADR 0024): loading, validation against a schema written from
//! the tool registry, and the decision for one call.
//!
//! The model, as a rule sees it:
//!
//! - `principal` is the person whose chat it is, `Person::"<id>"` (`Person::"local"` for the one
//!   local person of a server without passkeys), a member of each of their roles
//!   (`principal in Role::"finance"`), with `principal.name`;
//! - `action` is the tool, `Action::"process_payment"` or `Action::"files__write_file"`, and
//!   every tool is `in Action::"call"`;
//! - `resource` is where the tool comes from: `Server::"builtin"`, or `Server::"<mcp server>"`;
//! - `context.input` holds the call's arguments, typed from the tool's JSON Schema (strings,
//!   `Long` integers, `decimal` numbers, booleans, sets, records); `context.chat` is the chat's
//!   id; `context.asks_by_default` says whether the tool's own setting would ask;
//!   `context.spent_today_cents` and `context.spent_in_chat_cents` are what the wallet has paid
//!   (UTC day, every chat; this chat) in the wallet's cents; `context.now` is a `datetime`. A
//!   tool that pays (`process_payment`) also has `context.amount_cents` (the amount converted
//!   into the wallet's currency), `context.currency` (the code the call names) and
//!   `context.new_payee` (this chat's wallet never paid the payee before).
//!
//! Every rule names itself with `@id("…")`. A `permit` runs the call without asking; a `forbid`
//! denies it (`@reason("…")` is what the model and the person are told); a `forbid` marked
//! `@ask` makes the call ask even where a `permit` or a grant would let it run. When nothing
//! matches, the call asks. Cedar skips a rule whose condition fails to evaluate; since a skipped
//! `forbid` could let a `permit` through, any evaluation error makes the call ask (and no grant
//! can run it).
//!
//! An `@ask` rule may ask for more than the chat's person's click (a countersignature,
//! [`Requirement`]): `@approvers("2")` different people, `@role("approver")` each,
//! `@not_requester` (separation of duties: the person whose chat it is may not be one of them),
//! `@step_up` (each confirms with a passkey assertion bound to the exact arguments). When
//! several such rules match, the call needs all of it at once.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    str::FromStr,
};

use cedar_policy::{
    Authorizer, Context, Decision, Effect, Entities, Entity, EntityId, EntityTypeName, EntityUid,
    Policy, PolicyId, PolicySet, Request, RestrictedExpression, Schema, ValidationMode, Validator,
};
use miette::Diagnostic;
use serde_json::{Map, Value, json};

use super::{CallFacts, PolicyProblem, RuleVerdict, ToolFacts};
use crate::protocol::countersign::Requirement;

/// The annotations a rule may carry.
const KNOWN_ANNOTATIONS: [&str; 9] = [
    "id",
    "reason",
    "ask",
    "doc",
    "description",
    "approvers",
    "role",
    "not_requester",
    "step_up",
];

/// The most approvers a rule may ask for.
const MAX_APPROVERS: u32 = 20;

/// A loaded, validated policy file.
#[derive(Debug)]
pub struct CedarRules {
    set: PolicySet,
    rules: BTreeMap<String, RuleInfo>,
    /// The file's text, and its SHA-256 (hex): what a receipt names and its verifier
    /// evaluates again (ADR 0029).
    text: String,
    digest: String,
}

/// What we keep about one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    pub id: String,
    pub effect: RuleEffect,
    /// What the model and the person are told when this rule denies a call.
    pub reason: Option<String>,
    /// What an `@ask` rule needs beyond the chat's person's click.
    pub needs: Option<Requirement>,
    /// Line of the rule in its file (1-based).
    pub line: usize,
}

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleEffect {
    Run,
    Ask,
    Deny,
}

impl RuleEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleEffect::Run => "run",
            RuleEffect::Ask => "ask",
            RuleEffect::Deny => "deny",
        }
    }
}

impl CedarRules {
    /// Parses and validates `text` against the schema of `tools`. `mcp_servers`: the names of
    /// the MCP servers configured, whose tools a rule may name before the server has listed
    /// them (a warning, not an error). Errors name the rule and its line; warnings are returned
    /// with the rules.
    pub fn load(
        text: &str,
        tools: &[ToolFacts],
        mcp_servers: &[String],
    ) -> Result<(CedarRules, Vec<PolicyProblem>), Vec<PolicyProblem>> {
        let (rules, mut warnings) = Self::parse(text)?;
        let lines = LineIndex::new(text);
        let (errors, mut more) =
            validate(&rules.set, &rules.rules, tools, mcp_servers, &lines, text);
        warnings.append(&mut more);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((rules, warnings))
    }

    /// Parses `text` and reads its rules' annotations, without checking it against a tool
    /// registry: what `countersign audit verify` evaluates a recorded policy with (the tools
    /// it was checked against then are not at hand; evaluation does not need them).
    pub fn parse(text: &str) -> Result<(CedarRules, Vec<PolicyProblem>), Vec<PolicyProblem>> {
        let lines = LineIndex::new(text);
        let parsed = PolicySet::from_str(text).map_err(|errors| {
            errors
                .iter()
                .map(|e| lines.problem(text, e, None))
                .collect::<Vec<_>>()
        })?;
        if parsed.templates().next().is_some() {
            return Err(vec![PolicyProblem::general(
                "templates (rules with ?principal or ?resource) are not supported; write the \
                 entity out",
            )]);
        }
        let mut problems = Vec::new();
        let mut warnings = Vec::new();
        let mut set = PolicySet::new();
        let mut rules = BTreeMap::new();
        let mut search_from = 0;
        // In file order (ids policy0, policy1, …).
        let mut policies: Vec<&Policy> = parsed.policies().collect();
        policies.sort_by_key(|p| {
            p.id()
                .to_string()
                .trim_start_matches("policy")
                .parse::<usize>()
                .unwrap_or(usize::MAX)
        });
        for policy in policies {
            let offset = policy
                .to_cedar()
                .and_then(|t| {
                    text[search_from..]
                        .find(t.trim())
                        .map(|at| at + search_from)
                })
                .unwrap_or(search_from);
            search_from = offset;
            let (line, column) = lines.position(offset);
            let Some(id) = policy.annotation("id").map(str::trim).map(str::to_owned) else {
                problems.push(PolicyProblem::at(
                    None,
                    line,
                    column,
                    "this rule has no @id(\"…\"): every rule needs a name, which the audit log and \
                     the person see",
                ));
                continue;
            };
            if id.is_empty() {
                problems.push(PolicyProblem::at(None, line, column, "@id(\"\") is empty"));
                continue;
            }
            if let Some(other) = rules.get(&id) {
                let other: &RuleInfo = other;
                problems.push(PolicyProblem::at(
                    Some(&id),
                    line,
                    column,
                    format!(
                        "two rules are named {id:?} (the other is on line {})",
                        other.line
                    ),
                ));
                continue;
            }
            let ask = policy.annotation("ask").is_some();
            let effect = match (policy.effect(), ask) {
                (Effect::Permit, false) => RuleEffect::Run,
                (Effect::Forbid, true) => RuleEffect::Ask,
                (Effect::Forbid, false) => RuleEffect::Deny,
                (Effect::Permit, true) => {
                    problems.push(PolicyProblem::at(
                        Some(&id),
                        line,
                        column,
                        "@ask belongs on a forbid rule (\"ask even if a permit matches\"); a \
                         permit runs the call",
                    ));
                    continue;
                }
            };
            for (key, _) in policy.annotations() {
                if !KNOWN_ANNOTATIONS.contains(&key) {
                    warnings.push(PolicyProblem::at(
                        Some(&id),
                        line,
                        column,
                        format!(
                            "unknown annotation @{key} is ignored (known: @id, @reason, @ask, \
                             @approvers, @role, @not_requester, @step_up, @doc)"
                        ),
                    ));
                }
            }
            let reason = policy
                .annotation("reason")
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned);
            if reason.is_some() && effect != RuleEffect::Deny {
                warnings.push(PolicyProblem::at(
                    Some(&id),
                    line,
                    column,
                    "@reason is told only when a rule denies a call; this rule does not deny",
                ));
            }
            let needs = match countersign(policy, effect) {
                Ok(needs) => needs,
                Err(message) => {
                    problems.push(PolicyProblem::at(Some(&id), line, column, message));
                    continue;
                }
            };
            if let Err(e) = set.add(policy.new_id(PolicyId::new(&id))) {
                problems.push(PolicyProblem::at(Some(&id), line, column, e.to_string()));
                continue;
            }
            rules.insert(
                id.clone(),
                RuleInfo {
                    id,
                    effect,
                    reason,
                    needs,
                    line,
                },
            );
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok((
            CedarRules {
                set,
                rules,
                text: text.to_owned(),
                digest: crate::agent::store::audit::sha256_hex(text.as_bytes()),
            },
            warnings,
        ))
    }

    /// The policy file's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// SHA-256 (hex) of [`CedarRules::text`].
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The rules, by id.
    pub fn rules(&self) -> impl Iterator<Item = &RuleInfo> {
        self.rules.values()
    }

    pub fn rule(&self, id: &str) -> Option<&RuleInfo> {
        self.rules.get(id)
    }

    /// What the rules say about one call.
    pub fn decide(&self, facts: &CallFacts<'_>) -> RuleVerdict {
        let request = match request(facts) {
            Ok(request) => request,
            Err(message) => {
                tracing::error!(tool = %facts.tool.name, %message, "cannot build the policy request");
                return RuleVerdict::Error { message };
            }
        };
        let entities = match entities(facts) {
            Ok(entities) => entities,
            Err(message) => return RuleVerdict::Error { message },
        };
        let response = Authorizer::new().is_authorized(&request, &self.set, &entities);
        let errors: Vec<String> = response
            .diagnostics()
            .errors()
            .map(|e| e.to_string())
            .collect();
        let mut matched: Vec<&RuleInfo> = response
            .diagnostics()
            .reason()
            .filter_map(|id| self.rules.get(id.to_string().as_str()))
            .collect();
        matched.sort_by_key(|r| r.line);
        if !errors.is_empty() {
            // A skipped forbid could have let a permit through: a person decides.
            return RuleVerdict::Error {
                message: errors.join("; "),
            };
        }
        match response.decision() {
            Decision::Allow => match matched.first() {
                Some(rule) => RuleVerdict::Run {
                    rule: rule.id.clone(),
                },
                None => RuleVerdict::NoMatch,
            },
            Decision::Deny => {
                if let Some(rule) = matched.iter().find(|r| r.effect == RuleEffect::Deny) {
                    RuleVerdict::Deny {
                        rule: rule.id.clone(),
                        reason: rule.reason.clone().unwrap_or_else(|| {
                            format!("the policy rule {:?} forbids this call", rule.id)
                        }),
                    }
                } else if let Some(rule) = matched.iter().find(|r| r.effect == RuleEffect::Ask) {
                    // Every matching @ask rule's requirement, at once.
                    let needs = matched
                        .iter()
                        .filter(|r| r.effect == RuleEffect::Ask)
                        .filter_map(|r| r.needs.as_ref())
                        .fold(None, |all: Option<Requirement>, one| {
                            Some(match all {
                                Some(all) => all.merge(one),
                                None => one.clone(),
                            })
                        });
                    RuleVerdict::Ask {
                        rule: rule.id.clone(),
                        needs,
                    }
                } else {
                    RuleVerdict::NoMatch
                }
            }
        }
    }
}

/// What an `@ask` rule's countersignature annotations ask for (`None`: nothing beyond the chat's
/// person's click); an error names what is wrong.
fn countersign(policy: &Policy, effect: RuleEffect) -> Result<Option<Requirement>, String> {
    let approvers = policy.annotation("approvers");
    let role = policy.annotation("role");
    let not_requester = policy.annotation("not_requester").is_some();
    let step_up = policy.annotation("step_up").is_some();
    if approvers.is_none() && role.is_none() && !not_requester && !step_up {
        return Ok(None);
    }
    if effect != RuleEffect::Ask {
        return Err(
            "@approvers, @role, @not_requester and @step_up say who must approve; they belong on \
             an @ask forbid rule"
                .into(),
        );
    }
    let approvers = match approvers {
        None => 1,
        Some(text) => text
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_APPROVERS).contains(n))
            .ok_or_else(|| {
                format!("@approvers({text:?}) must be a whole number from 1 to {MAX_APPROVERS}")
            })?,
    };
    let role = role
        .map(|r| crate::agent::people::role_name(r).map_err(|e| format!("@role: {e}")))
        .transpose()?;
    Ok(Some(Requirement {
        approvers,
        role,
        not_requester,
        step_up,
    }))
}

/// Validates the rules against the schema of the tools; (errors, warnings).
fn validate(
    set: &PolicySet,
    rules: &BTreeMap<String, RuleInfo>,
    tools: &[ToolFacts],
    mcp_servers: &[String],
    lines: &LineIndex,
    text: &str,
) -> (Vec<PolicyProblem>, Vec<PolicyProblem>) {
    let schema = match Schema::from_json_value(schema_json(tools)) {
        Ok(schema) => schema,
        Err(e) => {
            // Our own schema is broken: say so, but let the rules load (they are evaluated
            // without a schema anyway).
            tracing::error!(error = %e, "the policy schema written from the tools does not load");
            return (
                Vec::new(),
                vec![PolicyProblem::general(format!(
                    "the rules could not be type-checked against the tools: {e}"
                ))],
            );
        }
    };
    let known: HashSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let result = Validator::new(schema).validate(set, ValidationMode::Strict);
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    // Rules that name a configured MCP server's tool it has not listed (yet): checked again
    // when it lists its tools.
    let mut waiting: BTreeSet<String> = BTreeSet::new();
    for error in result.validation_errors() {
        let id = error.policy_id().to_string();
        if let cedar_policy::ValidationError::UnrecognizedActionId(_) = error
            && let Some(tool) = unknown_mcp_action(&error.to_string(), &known, mcp_servers)
        {
            waiting.insert(id.clone());
            let (line, column) = rule_position(rules, &id, error, lines, text);
            warnings.push(PolicyProblem::at(
                Some(&id),
                line,
                column,
                format!(
                    "names {tool}, which its MCP server has not listed yet; checked again when it \
                     lists its tools"
                ),
            ));
        }
    }
    for error in result.validation_errors() {
        let id = error.policy_id().to_string();
        if waiting.contains(&id) {
            continue;
        }
        let (line, column) = rule_position(rules, &id, error, lines, text);
        let mut problem = PolicyProblem::at(Some(&id), line, column, error.to_string());
        problem.help = error.help().map(|h| h.to_string());
        errors.push(problem);
    }
    for warning in result.validation_warnings() {
        let id = warning.policy_id().to_string();
        let (line, column) = rules.get(&id).map_or((0, 0), |r| (r.line, 1));
        warnings.push(PolicyProblem::at(
            Some(&id),
            line,
            column,
            warning.to_string(),
        ));
    }
    (errors, warnings)
}

/// The tool an "unrecognized action" error names, when it is the tool of a configured MCP server
/// (`<server>__<tool>`) that is not in the registry now.
fn unknown_mcp_action(
    message: &str,
    known: &HashSet<&str>,
    mcp_servers: &[String],
) -> Option<String> {
    let start = message.find("Action::\"")? + "Action::\"".len();
    let end = message[start..].find('"')? + start;
    let tool = &message[start..end];
    let server = tool.split_once("__").map(|(s, _)| s)?;
    (!known.contains(tool) && mcp_servers.iter().any(|s| s == server)).then(|| tool.to_owned())
}

/// Where a diagnostic about rule `id` points: its first label, else the rule's line.
fn rule_position(
    rules: &BTreeMap<String, RuleInfo>,
    id: &str,
    diagnostic: &dyn Diagnostic,
    lines: &LineIndex,
    text: &str,
) -> (usize, usize) {
    diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset())
        .filter(|offset| *offset < text.len())
        .map(|offset| lines.position(offset))
        .unwrap_or_else(|| rules.get(id).map_or((0, 0), |r| (r.line, 1)))
}

/// Byte offsets to 1-based lines and columns.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    fn position(&self, offset: usize) -> (usize, usize) {
        let line = self.starts.partition_point(|start| *start <= offset);
        let start = self
            .starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        (line, offset - start + 1)
    }

    /// A parse error as a problem, naming the nearest `@id` before it.
    fn problem(&self, text: &str, error: &dyn Diagnostic, rule: Option<&str>) -> PolicyProblem {
        let offset = error
            .labels()
            .and_then(|mut labels| labels.next())
            .map(|l| l.offset())
            .unwrap_or(0)
            .min(text.len());
        let (line, column) = self.position(offset);
        let nearest = rule
            .map(str::to_owned)
            .or_else(|| nearest_id(&text[..offset]));
        let mut problem = PolicyProblem::at(nearest.as_deref(), line, column, error.to_string());
        problem.help = error.help().map(|h| h.to_string());
        problem
    }
}

/// The last `@id("…")` in `before`: the rule a syntax error is in (or right after).
fn nearest_id(before: &str) -> Option<String> {
    let at = before.rfind("@id(")?;
    let rest = &before[at + 4..];
    let open = rest.find('"')?;
    let close = rest[open + 1..].find('"')?;
    Some(rest[open + 1..open + 1 + close].to_owned())
}

// ----- the schema -----

/// The Cedar schema (JSON form) of these tools: one action per tool, in `Action::"call"`, with
/// the context its arguments give.
pub fn schema_json(tools: &[ToolFacts]) -> Value {
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
fn json_type(schema: &Value) -> Option<&str> {
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

// ----- a request -----

fn uid(kind: &str, id: &str) -> Result<EntityUid, String> {
    let kind = EntityTypeName::from_str(kind).map_err(|e| e.to_string())?;
    Ok(EntityUid::from_type_name_and_id(kind, EntityId::new(id)))
}

fn request(facts: &CallFacts<'_>) -> Result<Request, String> {
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

fn entities(facts: &CallFacts<'_>) -> Result<Entities, String> {
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
