//! The tool registry and the four tools of Countersign.
//!
//! Each tool declares its name, description and JSON Schema (what the model is told), where it
//! runs (on the server, or delegated to the browser), its approval policy and its timeouts. The
//! runner consults the registry; it never special-cases a tool by name.

mod browser;
mod payment;
mod weather;

use std::{fmt, sync::Arc, time::Duration};

use async_trait::async_trait;
use serde_json::Value;

use super::{
    clock::{Clock, IdGen},
    model::ToolDeclaration,
    session::Session,
};

pub use browser::{change_bgm_spec, get_location_spec};
pub use payment::{PaymentError, PaymentTool, Transaction, Wallet};
pub use weather::{WeatherSource, WeatherTool, offline_weather};

/// Where a tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolLocation {
    /// The server runs it.
    Server,
    /// The browser runs it (Geolocation, Web Audio) and sends the result back.
    Browser,
}

/// Whether a call needs the person's countersignature before it runs.
#[derive(Clone)]
pub enum ApprovalPolicy {
    Never,
    Always,
    /// Ask only when the predicate holds for the (validated) arguments.
    When(Arc<dyn Fn(&Value) -> bool + Send + Sync>),
}

impl ApprovalPolicy {
    pub fn requires_approval(&self, args: &Value) -> bool {
        match self {
            ApprovalPolicy::Never => false,
            ApprovalPolicy::Always => true,
            ApprovalPolicy::When(predicate) => predicate(args),
        }
    }
}

impl fmt::Debug for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApprovalPolicy::Never => f.write_str("Never"),
            ApprovalPolicy::Always => f.write_str("Always"),
            ApprovalPolicy::When(_) => f.write_str("When(<predicate>)"),
        }
    }
}

/// What a tool declares about itself.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the arguments (the subset `agent::schema` checks).
    pub parameters: Value,
    pub location: ToolLocation,
    pub approval: ApprovalPolicy,
    /// How long an approval request waits for the person before it expires.
    pub approval_timeout: Duration,
    /// How long a browser tool waits for the browser's result.
    pub result_timeout: Duration,
    /// Where a server tool's effects land; decides when an approval of it must be on disk.
    pub effects: ToolEffects,
}

/// Where a tool's effects land. The person's approval is always on disk before anything it
/// causes is acknowledged; this decides whether it needs a commit of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolEffects {
    /// Outside the session record (a remote service, the browser), or slow: the approval is
    /// committed before the tool runs.
    External,
    /// Only in the session record (the wallet's ledger), done at once and committed in the same
    /// transaction as the result: the approval is committed with that result, all or nothing,
    /// before the output is emitted. One disk flush instead of two, and a crash in between
    /// leaves the approval waiting (nothing was acknowledged) rather than approved-but-unrun.
    InRecord,
}

impl ToolSpec {
    pub fn declaration(&self) -> ToolDeclaration {
        ToolDeclaration {
            name: self.name.to_string(),
            description: self.description.to_string(),
            parameters: self.parameters.clone(),
        }
    }
}

/// A tool failure, in words the model (and the person) can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

/// What a server tool may use while it runs.
#[derive(Clone)]
pub struct ToolContext {
    /// The session the call belongs to (its wallet, its id).
    pub session: Arc<Session>,
    pub tool_call_id: String,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGen>,
}

/// A tool the server runs.
#[async_trait]
pub trait ServerTool: Send + Sync + 'static {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError>;
}

/// How a registered tool is executed.
#[derive(Clone)]
pub enum Executor {
    Server(Arc<dyn ServerTool>),
    Browser,
}

/// A tool: its declaration plus its executor.
#[derive(Clone)]
pub struct Tool {
    pub spec: ToolSpec,
    pub executor: Executor,
}

/// Settings that shape the standard tools.
#[derive(Debug, Clone)]
pub struct ToolSettings {
    pub approval_timeout: Duration,
    pub browser_timeout: Duration,
    pub weather: WeatherSource,
}

impl Default for ToolSettings {
    fn default() -> Self {
        ToolSettings {
            approval_timeout: Duration::from_secs(300),
            browser_timeout: Duration::from_secs(30),
            weather: WeatherSource::Offline,
        }
    }
}

/// The tools a session may use, in declaration order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Tool>,
}

impl ToolRegistry {
    /// The four tools of Countersign.
    pub fn standard(settings: &ToolSettings) -> Self {
        let mut registry = ToolRegistry::default();
        registry.register(
            WeatherTool::spec(settings),
            Executor::Server(Arc::new(WeatherTool::new(settings.weather.clone()))),
        );
        registry.register(
            PaymentTool::spec(settings),
            Executor::Server(Arc::new(PaymentTool)),
        );
        registry.register(get_location_spec(settings), Executor::Browser);
        registry.register(change_bgm_spec(settings), Executor::Browser);
        registry
    }

    /// Adds (or replaces) a tool.
    pub fn register(&mut self, spec: ToolSpec, executor: Executor) {
        self.tools.retain(|t| t.spec.name != spec.name);
        self.tools.push(Tool { spec, executor });
    }

    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }

    pub fn declarations(&self) -> Vec<ToolDeclaration> {
        self.tools.iter().map(|t| t.spec.declaration()).collect()
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.spec.name).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_standard_registry_declares_four_tools_with_their_policies() {
        let registry = ToolRegistry::standard(&ToolSettings::default());
        assert_eq!(
            registry.names(),
            [
                "get_weather",
                "process_payment",
                "get_location",
                "change_bgm"
            ]
        );
        let needs = |name: &str, args: Value| {
            registry
                .get(name)
                .unwrap()
                .spec
                .approval
                .requires_approval(&args)
        };
        assert!(!needs("get_weather", json!({"location": "Tokyo"})));
        assert!(needs(
            "process_payment",
            json!({"amount": 1, "recipient": "B"})
        ));
        assert!(needs("get_location", json!({})));
        assert!(!needs("change_bgm", json!({"track": 1})));
        assert_eq!(
            registry.get("get_location").unwrap().spec.location,
            ToolLocation::Browser
        );
        assert_eq!(
            registry.get("process_payment").unwrap().spec.location,
            ToolLocation::Server
        );
    }

    #[test]
    fn every_schema_uses_only_the_validated_subset() {
        const KNOWN: &[&str] = &[
            "type",
            "properties",
            "required",
            "additionalProperties",
            "enum",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "minLength",
            "maxLength",
            "items",
            "description",
            "default",
        ];
        fn walk(schema: &Value) {
            let Some(map) = schema.as_object() else {
                return;
            };
            for (key, value) in map {
                assert!(
                    KNOWN.contains(&key.as_str()),
                    "unsupported schema keyword {key}"
                );
                if key == "properties" {
                    for sub in value.as_object().unwrap().values() {
                        walk(sub);
                    }
                } else if key == "items" {
                    walk(value);
                }
            }
        }
        for decl in ToolRegistry::standard(&ToolSettings::default()).declarations() {
            walk(&decl.parameters);
        }
    }

    #[test]
    fn a_predicate_policy_asks_only_when_it_holds() {
        let policy = ApprovalPolicy::When(Arc::new(|args: &Value| {
            args["amount"].as_f64().unwrap_or(0.0) > 100.0
        }));
        assert!(!policy.requires_approval(&json!({"amount": 5})));
        assert!(policy.requires_approval(&json!({"amount": 500})));
    }
}
