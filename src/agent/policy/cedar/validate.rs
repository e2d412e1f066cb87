//! The rules type-checked against the schema written from the tool registry.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use cedar_policy::{PolicySet, Schema, ValidationMode, Validator};
use miette::Diagnostic;

use super::RuleInfo;
use super::positions::{LineIndex, rule_position};
use super::schema::schema_json;
use crate::agent::policy::{PolicyProblem, ToolFacts};

/// Validates the rules against the schema of the tools; (errors, warnings).
pub(super) fn validate(
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
