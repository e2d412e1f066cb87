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
//!
//! Here: the rules as loaded and the decision. Beside it: [`annotations`] (what a rule's `@…`
//! annotations say), [`schema`] (the Cedar schema written from the tools), [`validate`] (the
//! rules checked against it), [`request`] (one call as a Cedar request) and [`positions`]
//! (where in the file a problem is).

mod annotations;
mod positions;
mod request;
mod schema;
mod validate;

use std::{collections::BTreeMap, str::FromStr};

use cedar_policy::{Authorizer, Decision, Policy, PolicyId, PolicySet};

use super::{CallFacts, PolicyProblem, RuleVerdict, ToolFacts};
use crate::protocol::countersign::Requirement;

use positions::LineIndex;
use request::{entities, request};
use validate::validate;

pub use request::decimal_text;

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
            let rule = match annotations::read_rule(policy, line, column, &rules, &mut warnings) {
                Ok(rule) => rule,
                Err(problem) => {
                    problems.push(problem);
                    continue;
                }
            };
            if let Err(e) = set.add(policy.new_id(PolicyId::new(&rule.id))) {
                problems.push(PolicyProblem::at(
                    Some(&rule.id),
                    line,
                    column,
                    e.to_string(),
                ));
                continue;
            }
            rules.insert(rule.id.clone(), rule);
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
