//! `COUNTERSIGN_MCP_CONFIG`: the MCP servers to gate, in the `mcpServers` file shape the desktop
//! and editor clients use, plus Countersign's own keys:
//!
//! ```json
//! {"mcpServers": {
//!   "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
//!             "env": {"TOKEN": "${FILES_TOKEN}"}, "trustAnnotations": true,
//!             "tools": {"write_file": {"approval": "always"}, "move_file": {"disabled": true},
//!                       "send_payment": {"names": ["recipient"]}}},
//!   "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${KEY}"}}
//! }}
//! ```
//!
//! `${VAR}` (and `${VAR:-default}`) in `command`, `args`, `env`, `url` and `headers` are read from
//! the environment, so secrets stay out of the file. Unknown keys are ignored with a warning; a
//! file that cannot be used is an error naming its line.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The MCP servers of the configuration file, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct McpConfig {
    pub servers: Vec<McpServerConfig>,
    /// What was ignored (unknown keys), for the start-up log.
    pub warnings: Vec<String>,
}

/// One server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The key in `mcpServers`: shown to the person, and the prefix of its tools' names.
    pub name: String,
    pub transport: McpTransport,
    /// Tools whose annotations say `readOnlyHint` run without asking (annotations are the
    /// server's claims: untrusted unless this is set).
    pub trust_annotations: bool,
    /// Per-tool overrides, by the tool's name on its server.
    pub tools: BTreeMap<String, ToolOverride>,
    /// The whole server is off.
    pub disabled: bool,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A child process speaking MCP over its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// The child's working directory (`cwd`).
        cwd: Option<String>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// What the file says about one tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOverride {
    pub approval: Option<ApprovalOverride>,
    pub disabled: bool,
    /// Its top-level arguments that are names (`"names": ["recipient"]`): trimmed, one space
    /// for each run of whitespace, before rules see them (ADR 0027).
    pub names: Vec<String>,
}

/// `"approval": "always" | "never"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalOverride {
    Always,
    Never,
}

/// Why the file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
pub struct McpConfigError {
    pub path: String,
    pub line: Option<usize>,
    pub message: String,
}

#[derive(Deserialize)]
struct FileShape {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<serde_json::Map<String, Value>>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolShape {
    #[serde(default)]
    approval: Option<ApprovalOverride>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    names: Vec<String>,
}

/// The keys a server entry may have (ours and the common ones of other clients).
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "type",
    "trustAnnotations",
    "tools",
    "disabled",
];

impl McpConfig {
    /// Reads the file's `text` (`path` names it in errors); `env` resolves `${VAR}`.
    pub fn parse(
        text: &str,
        path: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, McpConfigError> {
        let error = |line: Option<usize>, message: String| McpConfigError {
            path: path.to_owned(),
            line,
            message,
        };
        let file: FileShape =
            serde_json::from_str(text).map_err(|e| error(Some(e.line()), clean(&e)))?;
        let mut warnings = Vec::new();
        for key in file.extra.keys() {
            warnings.push(format!("{path}: unknown key {key:?} ignored"));
        }
        let Some(entries) = file.mcp_servers else {
            return Err(error(None, "no \"mcpServers\" object".into()));
        };
        let mut servers = Vec::new();
        for (name, entry) in entries {
            let line = line_of_key(text, &name);
            let Value::Object(fields) = entry else {
                return Err(error(line, format!("server {name:?}: must be an object")));
            };
            for key in fields.keys() {
                if !SERVER_KEYS.contains(&key.as_str()) {
                    warnings.push(format!(
                        "{path}: server {name:?}: unknown key {key:?} ignored"
                    ));
                }
            }
            let entry = Entry {
                name: &name,
                fields: &fields,
                path,
                line,
                env,
            };
            servers.push(entry.server()?);
        }
        Ok(McpConfig { servers, warnings })
    }
}

/// One server entry of the file being read; its errors name the server and its line.
struct Entry<'a> {
    name: &'a str,
    fields: &'a Map<String, Value>,
    path: &'a str,
    line: Option<usize>,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Entry<'_> {
    fn server(&self) -> Result<McpServerConfig, McpConfigError> {
        if !valid_server_name(self.name) {
            return Err(self.error(
                "the name must be 1 to 32 letters, digits, '-' or '_' (it prefixes the names the model sees)".into(),
            ));
        }
        let transport = self.transport()?;
        let tools = self.tools()?;
        Ok(McpServerConfig {
            trust_annotations: self.flag("trustAnnotations")?,
            disabled: self.flag("disabled")?,
            name: self.name.to_owned(),
            transport,
            tools,
        })
    }

    /// How to reach the server: `command` (stdio) or `url` (streamable HTTP), and a `type`
    /// that fits it.
    fn transport(&self) -> Result<McpTransport, McpConfigError> {
        let kind = self.string("type")?;
        let command = self.string("command")?;
        let url = self.string("url")?;
        match (command, url) {
            (Some(_), Some(_)) => {
                Err(self
                    .error("has both \"command\" (stdio) and \"url\" (HTTP); choose one".into()))
            }
            (None, None) => Err(self.error(
                "needs \"command\" (a stdio server) or \"url\" (a streamable HTTP server)".into(),
            )),
            (Some(command), None) => {
                if let Some(kind) = kind.as_deref()
                    && kind != "stdio"
                {
                    return Err(self.error(format!(
                        "\"type\": {kind:?} does not fit \"command\" (a stdio server)"
                    )));
                }
                Ok(McpTransport::Stdio {
                    command,
                    args: self.args()?,
                    env: self.strings("env")?,
                    cwd: self.string("cwd")?,
                })
            }
            (None, Some(url)) => {
                match kind.as_deref() {
                    None | Some("http") | Some("streamable-http") | Some("streamableHttp") => {}
                    Some("sse") => {
                        return Err(self.error(
                            "the legacy HTTP+SSE transport is not supported; use the server's streamable HTTP endpoint"
                                .into(),
                        ));
                    }
                    Some(other) => {
                        return Err(self.error(format!("\"type\": {other:?} does not fit \"url\"")));
                    }
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(
                        self.error(format!("\"url\" must be http:// or https://, not {url:?}"))
                    );
                }
                Ok(McpTransport::Http {
                    url,
                    headers: self.strings("headers")?,
                })
            }
        }
    }

    /// The per-tool overrides (`"tools": {"name": {"approval": …}}`).
    fn tools(&self) -> Result<BTreeMap<String, ToolOverride>, McpConfigError> {
        let mut tools = BTreeMap::new();
        match self.fields.get("tools") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (tool, value) in map {
                    let shape: ToolShape = serde_json::from_value(value.clone()).map_err(|e| {
                        self.error(format!(
                            "tool {tool:?}: {} (use {{\"approval\": \"always\" | \"never\", \"disabled\": true, \"names\": [\"recipient\"]}})",
                            clean(&e)
                        ))
                    })?;
                    tools.insert(
                        tool.clone(),
                        ToolOverride {
                            approval: shape.approval,
                            disabled: shape.disabled,
                            names: shape.names,
                        },
                    );
                }
            }
            Some(_) => return Err(self.error("\"tools\" must be an object".into())),
        }
        Ok(tools)
    }

    fn error(&self, message: String) -> McpConfigError {
        McpConfigError {
            path: self.path.to_owned(),
            line: self.line,
            message: format!("server {:?}: {message}", self.name),
        }
    }

    /// `value` with `${VAR}` expanded; `what` names the key in the error.
    fn expand(&self, value: &str, what: &str) -> Result<String, McpConfigError> {
        expand_vars(value, self.env).map_err(|var| {
            self.error(format!(
                "{what} uses ${{{var}}}, which is not set in the environment"
            ))
        })
    }

    fn string(&self, key: &str) -> Result<Option<String>, McpConfigError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => self.expand(s, key).map(Some),
            Some(_) => Err(self.error(format!("\"{key}\" must be a string"))),
        }
    }

    fn strings(&self, key: &str) -> Result<BTreeMap<String, String>, McpConfigError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), self.expand(s, &format!("{key}.{k}"))?)),
                    _ => Err(self.error(format!("\"{key}\".{k:?} must be a string"))),
                })
                .collect(),
            Some(_) => Err(self.error(format!("\"{key}\" must be an object of strings"))),
        }
    }

    fn flag(&self, key: &str) -> Result<bool, McpConfigError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.error(format!("\"{key}\" must be true or false"))),
        }
    }

    fn args(&self) -> Result<Vec<String>, McpConfigError> {
        match self.fields.get("args") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => self.expand(s, "args"),
                    _ => Err(self.error("\"args\" must be an array of strings".into())),
                })
                .collect(),
            Some(_) => Err(self.error("\"args\" must be an array of strings".into())),
        }
    }
}

/// A serde error's message without its " at line L column C" tail (the line is said apart).
fn clean(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Server names prefix tool names the models see: they keep to what every provider accepts.
fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The line of the first `"key":` in `text` (1-based), for errors about that entry.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let quoted = serde_json::to_string(key).ok()?;
    let mut from = 0;
    while let Some(found) = text[from..].find(&quoted) {
        let at = from + found;
        let rest = text[at + quoted.len()..].trim_start();
        if rest.starts_with(':') {
            return Some(text[..at].matches('\n').count() + 1);
        }
        from = at + quoted.len();
    }
    None
}

/// Replaces `${VAR}` and `${VAR:-default}` with the environment's values; `Err(VAR)` when one
/// is not set and has no default. `$` alone, or `${` without a closing `}`, stays as written.
fn expand_vars(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match env(name).filter(|v| !v.is_empty()) {
            Some(v) => out.push_str(&v),
            None => match default {
                Some(d) => out.push_str(d),
                None => return Err(name.to_owned()),
            },
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Result<McpConfig, McpConfigError> {
        McpConfig::parse(text, "mcp.json", &env)
    }

    #[test]
    fn the_common_file_shape_with_our_keys() {
        let config = parse(
            r#"{"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/x"],
                          "env": {"T": "${TOKEN}"}, "trustAnnotations": true,
                          "tools": {"write_file": {"approval": "always"}, "move_file": {"disabled": true}}},
                "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                           "type": "http", "alwaysAllow": []}
            }, "globalShortcut": "x"}"#,
        )
        .unwrap();
        assert_eq!(config.servers.len(), 2);
        let files = &config.servers[0];
        assert_eq!(files.name, "files");
        assert!(files.trust_annotations);
        assert_eq!(
            files.transport,
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec![
                    "-y".into(),
                    "@modelcontextprotocol/server-filesystem".into(),
                    "/tmp/x".into()
                ],
                env: BTreeMap::from([("T".into(), "s3cret".into())]),
                cwd: None,
            }
        );
        assert_eq!(
            files.tools["write_file"].approval,
            Some(ApprovalOverride::Always)
        );
        assert!(files.tools["move_file"].disabled);
        let remote = &config.servers[1];
        assert_eq!(
            remote.transport,
            McpTransport::Http {
                url: "https://mcp.example.com/mcp".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret".into())]),
            }
        );
        assert!(!remote.trust_annotations);
        assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
        assert!(config.warnings.iter().any(|w| w.contains("alwaysAllow")));
        assert!(config.warnings.iter().any(|w| w.contains("globalShortcut")));
    }

    #[test]
    fn broken_files_are_errors_that_name_the_line() {
        for (text, line, says) in [
            (
                "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\",}\n}}",
                Some(2),
                "trailing comma",
            ),
            (
                "{\"mcpServers\": {\n  \"a\": {}\n}}",
                Some(2),
                "needs \"command\"",
            ),
            (
                "{\"mcpServers\": {\n\n  \"a\": {\"command\": \"x\", \"url\": \"http://h\"}}}",
                Some(3),
                "both",
            ),
            (
                "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\",\n \"tools\": {\"t\": {\"approval\": \"sometimes\"}}}}}",
                Some(2),
                "unknown variant `sometimes`",
            ),
            (
                "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"args\": [1]}}}",
                Some(1),
                "array of strings",
            ),
            (
                "{\"mcpServers\": {\"a\": {\"url\": \"http://h\", \"type\": \"sse\"}}}",
                Some(1),
                "legacy",
            ),
            (
                "{\"mcpServers\": {\"a\": {\"url\": \"ftp://h\"}}}",
                Some(1),
                "http:// or https://",
            ),
            (
                "{\"mcpServers\": {\"a b\": {\"command\": \"x\"}}}",
                Some(1),
                "the name must be",
            ),
            (
                "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"env\": {\"K\": \"${MISSING}\"}}}}",
                Some(1),
                "${MISSING}",
            ),
            ("{\"servers\": {}}", None, "no \"mcpServers\""),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.to_string().contains(says), "{text}: {e}");
            assert!(e.to_string().starts_with("mcp.json"), "{e}");
        }
    }

    #[test]
    fn the_example_file_reads() {
        let config = McpConfig::parse(
            include_str!("../../../examples/mcp.json"),
            "examples/mcp.json",
            &|_| None,
        )
        .unwrap();
        assert_eq!(config.warnings, Vec::<String>::new());
        let McpTransport::Stdio { args, .. } = &config.servers[0].transport else {
            panic!("a stdio server");
        };
        assert_eq!(
            args[1], "/tmp/countersign-files",
            "the default of ${{COUNTERSIGN_FILES_ROOT}}"
        );
    }

    #[test]
    fn variables_expand_with_defaults() {
        assert_eq!(expand_vars("a${TOKEN}b", &env).unwrap(), "as3cretb");
        assert_eq!(expand_vars("${NOPE:-dflt}", &env).unwrap(), "dflt");
        assert_eq!(expand_vars("$HOME ${open", &env).unwrap(), "$HOME ${open");
        assert_eq!(expand_vars("${NOPE}", &env).unwrap_err(), "NOPE");
    }
}
