//! An MCP server's tool as a tool of the registry: its declaration (namespaced name, the
//! server's description and schema), the policy that decides whether it asks, how the person
//! sees it, and its results in the shape the model and the card read.

use std::{borrow::Cow, sync::Arc, time::Duration};

use async_trait::async_trait;
use rmcp::model::{CallToolResult, Tool as McpTool};
use serde_json::{Map, Value, json};

use super::{
    config::{ApprovalOverride, McpServerConfig},
    server::McpServer,
    tool_name,
};
use crate::{
    agent::tools::{
        ApprovalPolicy, ServerTool, ToolContext, ToolEffects, ToolError, ToolLocation, ToolSpec,
    },
    protocol::{ToolPresentation, schema},
};

/// Why a server's tool is not offered to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skipped {
    /// `"disabled": true` in the configuration.
    Disabled,
    /// Its schema uses keywords Countersign does not check: the person could be asked to
    /// countersign arguments nobody validated.
    Schema(Vec<String>),
}

/// Whether a call of `tool` asks the person, from the configuration and the tool's
/// annotations (the server's claims: trusted only with `trustAnnotations`).
pub fn approval_for(config: &McpServerConfig, tool: &McpTool) -> ApprovalPolicy {
    match config
        .tools
        .get(tool.name.as_ref())
        .and_then(|o| o.approval)
    {
        Some(ApprovalOverride::Always) => return ApprovalPolicy::Always,
        Some(ApprovalOverride::Never) => return ApprovalPolicy::Never,
        None => {}
    }
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint) == Some(true);
    let destructive = hints.and_then(|a| a.destructive_hint) == Some(true);
    if config.trust_annotations && read_only && !destructive {
        ApprovalPolicy::Never
    } else {
        ApprovalPolicy::Always
    }
}

/// The annotations, in words for the card.
pub fn annotation_words(tool: &McpTool) -> Vec<String> {
    let Some(a) = tool.annotations.as_ref() else {
        return Vec::new();
    };
    let mut words = Vec::new();
    if a.read_only_hint == Some(true) {
        words.push("says it is read-only".to_owned());
    } else {
        match a.destructive_hint {
            Some(true) => words.push("can delete or overwrite data".to_owned()),
            Some(false) => words.push("adds, never deletes or overwrites".to_owned()),
            None => {}
        }
        if a.idempotent_hint == Some(true) {
            words.push("repeating it changes nothing more".to_owned());
        }
    }
    if a.open_world_hint == Some(true) {
        words.push("reaches outside systems".to_owned());
    }
    words
}

/// The tool as the registry holds it, or why it is left out.
pub fn spec_for(
    config: &McpServerConfig,
    tool: &McpTool,
    approval_timeout: Duration,
) -> Result<ToolSpec, Skipped> {
    if config
        .tools
        .get(tool.name.as_ref())
        .is_some_and(|o| o.disabled)
    {
        return Err(Skipped::Disabled);
    }
    let parameters = Value::Object(Map::clone(&tool.input_schema));
    let unsupported = schema::unsupported(&parameters);
    if !unsupported.is_empty() {
        return Err(Skipped::Schema(unsupported));
    }
    let title = tool
        .title
        .clone()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
        .unwrap_or_else(|| tool.name.to_string());
    let description = tool
        .description
        .as_deref()
        .map(str::to_owned)
        .unwrap_or_else(|| title.clone());
    let mut presentation =
        ToolPresentation::new(title.clone(), format!("Let {} run {title}", config.name));
    presentation.source = Some(format!("MCP server {}", config.name));
    presentation.notes = annotation_words(tool);
    Ok(ToolSpec {
        name: Cow::Owned(tool_name(&config.name, &tool.name)),
        description: Cow::Owned(description),
        purpose: Cow::Owned(format!(
            "use {} from the {} server",
            first_line(&title),
            config.name
        )),
        presentation,
        parameters,
        location: ToolLocation::Server,
        approval: approval_for(config, tool),
        approval_timeout,
        result_timeout: approval_timeout,
        // Repeated after a restart only if the server says repeating changes nothing more and
        // its annotations are trusted.
        effects: if config.trust_annotations
            && tool
                .annotations
                .as_ref()
                .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true))
        {
            ToolEffects::External
        } else {
            ToolEffects::ExternalOnce
        },
        acknowledgment: None,
        server: Some(Cow::Owned(config.name.clone())),
        pays: None,
        names: config
            .tools
            .get(tool.name.as_ref())
            .map(|o| o.names.iter().cloned().map(Cow::Owned).collect())
            .unwrap_or_default(),
    })
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// The largest output kept (it goes into the chat's record, the page and the model's context):
/// a bigger one is replaced by its start and a note saying how much was left out.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// The tool's output as the model and the card see it: the server's `structuredContent` when it
/// has one, else its content (one text as `{"text"}`, several blocks as `{"content": [...]}` in
/// MCP's own shape), at most [`MAX_OUTPUT_BYTES`]. An `isError` result is a tool error with the
/// server's text.
pub fn output_of(result: CallToolResult) -> Result<Value, ToolError> {
    let output = full_output(result)?;
    let size = output.to_string().len();
    if size <= MAX_OUTPUT_BYTES {
        return Ok(output);
    }
    let text = match &output {
        Value::Object(o) if o.len() == 1 && o.get("text").is_some_and(Value::is_string) => {
            o["text"].as_str().unwrap_or_default().to_owned()
        }
        other => other.to_string(),
    };
    let mut cut = MAX_OUTPUT_BYTES / 2;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(json!({
        "text": &text[..cut],
        "truncated": format!(
            "the server returned {size} bytes; only the first {cut} are kept here"
        ),
    }))
}

fn full_output(result: CallToolResult) -> Result<Value, ToolError> {
    let text = || -> String {
        result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if result.is_error == Some(true) {
        let message = text();
        return Err(ToolError(if message.is_empty() {
            "the MCP server reported an error without saying what".to_owned()
        } else {
            message
        }));
    }
    if let Some(structured) = result.structured_content.clone() {
        return Ok(structured);
    }
    match result.content.as_slice() {
        [] => Ok(json!({})),
        // Text only (one block or several): one text, as the person and the model read it.
        blocks if blocks.iter().all(|b| b.as_text().is_some()) => Ok(json!({ "text": text() })),
        blocks => Ok(json!({
            "content": serde_json::to_value(blocks).unwrap_or(Value::Null)
        })),
    }
}

/// A call of a server's tool, through the server's connection.
pub struct RemoteTool {
    pub server: Arc<McpServer>,
    /// The tool's name on its server.
    pub remote_name: String,
}

#[async_trait]
impl ServerTool for RemoteTool {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError(format!(
                    "the arguments must be an object, not {other}"
                )));
            }
        };
        let result = self
            .server
            .call(&self.remote_name, arguments, ctx.asker)
            .await?;
        output_of(result)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rmcp::model::{ContentBlock, ToolAnnotations, object};

    use super::*;
    use crate::agent::mcp::config::{McpTransport, ToolOverride};

    fn server(trust: bool, tools: &[(&str, ToolOverride)]) -> McpServerConfig {
        McpServerConfig {
            name: "files".into(),
            transport: McpTransport::Stdio {
                command: "x".into(),
                args: vec![],
                env: BTreeMap::new(),
                cwd: None,
            },
            trust_annotations: trust,
            tools: tools
                .iter()
                .map(|(n, o)| (n.to_string(), o.clone()))
                .collect(),
            disabled: false,
        }
    }

    fn tool(name: &str, read_only: Option<bool>, destructive: Option<bool>) -> McpTool {
        let mut annotations = ToolAnnotations::default();
        annotations.read_only_hint = read_only;
        annotations.destructive_hint = destructive;
        McpTool::new(
            name.to_owned(),
            "does a thing",
            Arc::new(object(
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            )),
        )
        .annotate(annotations)
    }

    fn asks(policy: ApprovalPolicy) -> bool {
        policy.requires_approval(&json!({}))
    }

    #[test]
    fn every_tool_asks_unless_trusted_annotations_or_the_file_say_otherwise() {
        let read = tool("read_file", Some(true), None);
        let write = tool("write_file", Some(false), Some(true));
        let plain = tool("other", None, None);
        let untrusted = server(false, &[]);
        for t in [&read, &write, &plain] {
            assert!(asks(approval_for(&untrusted, t)), "{}", t.name);
        }
        let trusted = server(true, &[]);
        assert!(!asks(approval_for(&trusted, &read)));
        assert!(asks(approval_for(&trusted, &write)));
        assert!(asks(approval_for(&trusted, &plain)));
        // A read-only claim that also says destructive is not believed.
        assert!(asks(approval_for(
            &trusted,
            &tool("odd", Some(true), Some(true))
        )));
        let overridden = server(
            true,
            &[
                (
                    "read_file",
                    ToolOverride {
                        approval: Some(ApprovalOverride::Always),
                        disabled: false,
                        ..Default::default()
                    },
                ),
                (
                    "write_file",
                    ToolOverride {
                        approval: Some(ApprovalOverride::Never),
                        disabled: false,
                        ..Default::default()
                    },
                ),
            ],
        );
        assert!(asks(approval_for(&overridden, &read)));
        assert!(!asks(approval_for(&overridden, &write)));
    }

    #[test]
    fn specs_are_namespaced_presented_and_refused_for_unknown_schema_keywords() {
        let config = server(
            false,
            &[(
                "gone",
                ToolOverride {
                    approval: None,
                    disabled: true,
                    ..Default::default()
                },
            )],
        );
        let spec = spec_for(
            &config,
            &tool("write_file", Some(false), Some(true)),
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(spec.name, "files__write_file");
        assert_eq!(
            spec.presentation.source.as_deref(),
            Some("MCP server files")
        );
        assert_eq!(spec.presentation.notes, ["can delete or overwrite data"]);
        assert_eq!(
            spec.presentation.sentence(&json!({})),
            "Let files run write_file"
        );
        assert_eq!(
            spec_for(&config, &tool("gone", None, None), Duration::ZERO).unwrap_err(),
            Skipped::Disabled
        );
        let odd = McpTool::new(
            "odd",
            "x",
            Arc::new(object(json!({"type": "object", "if": {}}))),
        );
        assert!(matches!(
            spec_for(&config, &odd, Duration::ZERO),
            Err(Skipped::Schema(_))
        ));
    }

    #[test]
    fn results_map_to_outputs_and_errors() {
        let text = CallToolResult::success(vec![ContentBlock::text("Successfully wrote")]);
        assert_eq!(
            output_of(text).unwrap(),
            json!({"text": "Successfully wrote"})
        );
        let mut structured = CallToolResult::success(vec![ContentBlock::text("x")]);
        structured.structured_content = Some(json!({"content": "hello"}));
        assert_eq!(output_of(structured).unwrap(), json!({"content": "hello"}));
        let failed = CallToolResult::error(vec![ContentBlock::text(
            "Access denied - path outside allowed directories",
        )]);
        assert_eq!(
            output_of(failed).unwrap_err().0,
            "Access denied - path outside allowed directories"
        );
        let two = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(output_of(two).unwrap(), json!({"text": "a\nb"}));
        let mixed = CallToolResult::success(vec![
            ContentBlock::text("a"),
            ContentBlock::image("iVBORw0KGgo=", "image/png"),
        ]);
        let out = output_of(mixed).unwrap();
        assert_eq!(out["content"][1]["mimeType"], "image/png", "{out}");
        let huge = CallToolResult::success(vec![ContentBlock::text("é".repeat(MAX_OUTPUT_BYTES))]);
        let out = output_of(huge).unwrap();
        assert!(out["text"].as_str().unwrap().len() <= MAX_OUTPUT_BYTES / 2);
        assert!(
            out["truncated"]
                .as_str()
                .unwrap()
                .contains("only the first"),
            "{out}"
        );
    }
}
