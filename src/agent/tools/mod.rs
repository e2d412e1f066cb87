//! The tool registry and the four tools of Countersign.
//!
//! Each tool describes itself in one [`ToolSpec`]: its name, description and JSON Schema (what
//! the model is told), the phrase the system prompt lists it with, how the person sees it (card
//! title, the sentence they countersign, field labels: [`ToolPresentation`]), where it runs (on
//! the server, or delegated to the browser), its approval policy and its timeouts. A server tool
//! that keeps state between calls keeps it through [`ToolContext::with_state`], in the session
//! record under its name, with no schema of its own. Nothing else names a tool: the turn loop,
//! the gate, the system prompt ([`ToolRegistry::system_prompt`]) and the browser's tool cards
//! all read the registry, so adding a tool is its file plus one `register` line.

mod browser;
mod payment;
mod weather;

use std::{
    borrow::Cow,
    fmt,
    sync::{Arc, RwLock},
    time::Duration,
};

use async_trait::async_trait;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use super::{
    clock::{Clock, IdGen},
    model::ToolDeclaration,
    questions::Asker,
    session::Session,
};
use crate::protocol::{ToolPresentation, money::Payment};

pub use browser::{change_bgm_spec, get_location_spec};
pub use payment::{Paid, PaymentError, PaymentTool, Transaction, Wallet, payment_of};
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
    /// The name the model calls it by (for an MCP server's tool, `<server>__<tool>`).
    pub name: Cow<'static, str>,
    /// What the model is told the tool does (its declaration).
    pub description: Cow<'static, str>,
    /// What the assistant can do with it, as the system prompt lists it ("check the weather").
    pub purpose: Cow<'static, str>,
    /// How the person sees it: card title, the sentence they countersign, field labels.
    pub presentation: ToolPresentation,
    /// JSON Schema of the arguments (the subset `agent::schema` checks).
    pub parameters: Value,
    pub location: ToolLocation,
    pub approval: ApprovalPolicy,
    /// How long an approval request waits for the person before it expires.
    pub approval_timeout: Duration,
    /// How long a browser tool waits for the browser's result.
    pub result_timeout: Duration,
    /// For a browser tool that needs no approval: the result the server gives at once, for a
    /// client that runs such calls itself and never reports back (the seed's `POST /stream`
    /// client plays the music and sends nothing). `None`: the call always waits for the browser.
    pub acknowledgment: Option<fn(&Value) -> Value>,
    /// Where a server tool's effects land; decides when an approval of it must be on disk.
    pub effects: ToolEffects,
    /// The MCP server the tool comes from; `None`: Countersign's own (policy rules name it as
    /// `Server::"<name>"`, or `Server::"builtin"`).
    pub server: Option<Cow<'static, str>>,
    /// For a tool that pays: what a call pays and to whom, read from its (validated)
    /// arguments, or `None` when they do not read as money. Policy rules compare it (`context.amount_cents`, in the
    /// wallet's currency), running totals add it up, budget grants spend it.
    pub pays: Option<fn(&Value) -> Option<Payment>>,
    /// The top-level arguments that are names (a recipient, a currency, a city): their
    /// canonical form is trimmed with one space for each run of whitespace
    /// ([`crate::agent::canonical`]). Every other string keeps its whitespace.
    pub names: Vec<Cow<'static, str>>,
}

/// Where a tool's effects land. The person's approval is always on disk before anything it
/// causes is acknowledged; this decides whether it needs a commit of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolEffects {
    /// Outside the session record (a remote service, the browser), or slow: the approval is
    /// committed before the tool runs. Safe to run again for the same call (our tools are
    /// idempotent by tool call id): a call cut short by a restart runs again.
    External,
    /// Like [`ToolEffects::External`], but nobody vouches that running it twice is harmless (an
    /// MCP server's tool): a call cut short by a restart is not run again; it ends with an
    /// error saying it may or may not have taken effect.
    ExternalOnce,
    /// Only in the session record (the wallet's ledger), done at once and committed in the same
    /// transaction as the result: the approval is committed with that result, all or nothing,
    /// before the output is emitted. One disk flush instead of two, and a crash in between
    /// leaves the approval waiting (nothing was acknowledged) rather than approved-but-unrun.
    InRecord,
}

impl ToolSpec {
    /// `args` in their canonical form (ADR 0027): what the rules see, the card shows, a
    /// step-up is bound to and the tool runs. Applied before the schema is checked.
    pub fn canonical_args(
        &self,
        args: &Value,
    ) -> Result<Value, crate::protocol::schema::SchemaError> {
        crate::agent::canonical::canonical(args, &self.names)
    }

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
    /// The tool being called (its state is kept under this name).
    pub tool: Arc<str>,
    pub tool_call_id: String,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdGen>,
    /// How the tool asks the person something while it runs (`None` outside a turn).
    pub asker: Option<Asker>,
}

impl ToolContext {
    /// Runs `f` on this tool's durable state in the session: a `T` kept as JSON in the session
    /// record under the tool's name (`T::default()` the first time). What `f` leaves there is
    /// committed with the call's result, and comes back after a restart. State that no longer
    /// reads as a `T` (a tool changed its type) is an error, never silently reset.
    pub fn with_state<T, R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, ToolError>
    where
        T: Serialize + DeserializeOwned + Default,
    {
        self.session.with_tool_state(&self.tool, |slot| {
            let mut state = match slot.take() {
                None => T::default(),
                Some(value) => match serde_json::from_value::<T>(value.clone()) {
                    Ok(state) => state,
                    Err(e) => {
                        *slot = Some(value);
                        tracing::error!(tool = %self.tool, error = %e, "a tool's stored state does not decode");
                        return Err(ToolError(format!(
                            "{}'s saved state cannot be read; nothing was done",
                            self.tool
                        )));
                    }
                },
            };
            let result = f(&mut state);
            match serde_json::to_value(&state) {
                Ok(value) => {
                    *slot = Some(value);
                    Ok(result)
                }
                Err(e) => {
                    tracing::error!(tool = %self.tool, error = %e, "a tool's state does not encode");
                    Err(ToolError(format!("{}'s state cannot be saved", self.tool)))
                }
            }
        })
    }
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
pub struct ToolRegistry {
    /// Swapped whole when a group of tools changes (an MCP server's list): a reader holds the
    /// list it read, unchanged, for as long as it needs.
    tools: RwLock<Arc<Vec<Arc<Tool>>>>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        ToolRegistry {
            tools: RwLock::new(Arc::new(Vec::new())),
        }
    }
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

    /// Adds (or replaces) a tool. A presentation that does not fit the tool's parameters is
    /// logged (its cards then show the raw sentence), not fatal: the tool still works.
    pub fn register(&mut self, spec: ToolSpec, executor: Executor) {
        self.add(spec, executor);
    }

    /// [`register`](Self::register) on a registry already in use.
    pub fn add(&self, spec: ToolSpec, executor: Executor) {
        if let Err(e) = spec.presentation.check(&spec.parameters) {
            tracing::warn!(tool = %spec.name, error = %e, "the tool's presentation does not fit its parameters");
        }
        let tool = Arc::new(Tool { spec, executor });
        self.update(|tools| {
            tools.retain(|t| t.spec.name != tool.spec.name);
            tools.push(tool);
        });
    }

    /// Replaces every tool whose name starts with `prefix` (an MCP server's `<server>__`) with
    /// `tools`, at once: a turn sees the old list or the new one, never half of each.
    pub fn replace_prefixed(&self, prefix: &str, tools: Vec<Tool>) {
        for tool in &tools {
            if let Err(e) = tool.spec.presentation.check(&tool.spec.parameters) {
                tracing::warn!(tool = %tool.spec.name, error = %e, "the tool's presentation does not fit its parameters");
            }
        }
        self.update(|list| {
            list.retain(|t| !t.spec.name.starts_with(prefix));
            list.extend(tools.into_iter().map(Arc::new));
        });
    }

    fn update(&self, f: impl FnOnce(&mut Vec<Arc<Tool>>)) {
        let mut guard = self.tools.write().unwrap_or_else(|p| p.into_inner());
        let mut list = Vec::clone(&guard);
        f(&mut list);
        *guard = Arc::new(list);
    }

    /// The tools as they are now.
    pub fn snapshot(&self) -> Arc<Vec<Arc<Tool>>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<Tool>> {
        self.snapshot()
            .iter()
            .find(|t| t.spec.name == name)
            .cloned()
    }

    pub fn declarations(&self) -> Vec<ToolDeclaration> {
        self.snapshot()
            .iter()
            .map(|t| t.spec.declaration())
            .collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.snapshot()
            .iter()
            .map(|t| t.spec.name.to_string())
            .collect()
    }

    /// The instruction every model gets, written from the tools it may call: what each is for,
    /// which need the person's approval and what to do when they say no.
    pub fn system_prompt(&self) -> String {
        let tools = self.snapshot();
        let mut prompt = String::from("You are Countersign's assistant.");
        let can: Vec<String> = tools
            .iter()
            .map(|t| format!("{} ({})", t.spec.purpose, t.spec.name))
            .collect();
        if !can.is_empty() {
            prompt.push_str(&format!(
                " You can {}. Use the tools to do what is asked instead of describing what you \
                 would do.",
                join(&can)
            ));
        }
        let gated = |sometimes: bool| -> Vec<String> {
            tools
                .iter()
                .filter(|t| match t.spec.approval {
                    ApprovalPolicy::Never => false,
                    ApprovalPolicy::Always => !sometimes,
                    ApprovalPolicy::When(_) => sometimes,
                })
                .map(|t| t.spec.name.to_string())
                .collect()
        };
        let (always, sometimes) = (gated(false), gated(true));
        let mut needs = Vec::new();
        if !always.is_empty() {
            needs.push(format!("{} always", join(&always)));
        }
        if !sometimes.is_empty() {
            needs.push(format!("{} sometimes", join(&sometimes)));
        }
        if !needs.is_empty() {
            prompt.push_str(&format!(
                " Calls to {} need the person's approval, unless a policy rule or their grant \
                 lets them run: if they deny a call or set it aside, do not retry it unless they \
                 ask; if a policy rule refuses a call, tell them its reason; if an approval \
                 expires, say nothing was done.",
                needs.join(" and ")
            ));
        }
        prompt.push_str(" Answer in the language the person writes in, briefly.");
        prompt
    }
}

/// "a", "a and b", "a, b and c".
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
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
        for decl in ToolRegistry::standard(&ToolSettings::default()).declarations() {
            assert_eq!(
                crate::protocol::schema::unsupported(&decl.parameters),
                Vec::<String>::new(),
                "{}",
                decl.name
            );
        }
    }

    #[test]
    fn every_standard_tool_presents_itself_with_its_own_parameters() {
        for tool in ToolRegistry::standard(&ToolSettings::default())
            .snapshot()
            .iter()
        {
            let spec = &tool.spec;
            assert_eq!(
                spec.presentation.check(&spec.parameters),
                Ok(()),
                "{}",
                spec.name
            );
            assert!(!spec.purpose.is_empty(), "{}", spec.name);
        }
    }

    #[test]
    fn the_system_prompt_is_written_from_the_registry() {
        let registry = ToolRegistry::standard(&ToolSettings::default());
        assert_eq!(
            registry.system_prompt(),
            "You are Countersign's assistant. You can check the weather (get_weather), send \
             payments from the person's wallet (process_payment), find where the person is \
             (get_location) and switch the background music (change_bgm). Use the tools to do \
             what is asked instead of describing what you would do. Calls to process_payment \
             and get_location always need the person's approval, unless a policy rule or their \
             grant lets them run: if they deny a call or set it aside, do not retry it unless \
             they ask; if a policy rule refuses a call, tell them its reason; if an approval \
             expires, say nothing was done. Answer in the language the person writes in, \
             briefly."
        );
        let mut one = ToolRegistry::default();
        let mut spec = get_location_spec(&ToolSettings::default());
        spec.approval = ApprovalPolicy::When(Arc::new(|_: &Value| true));
        one.register(spec, Executor::Browser);
        let prompt = one.system_prompt();
        assert!(
            prompt.contains("You can find where the person is (get_location)."),
            "{prompt}"
        );
        assert!(
            prompt.contains("Calls to get_location sometimes need"),
            "{prompt}"
        );
        let none = ToolRegistry::default().system_prompt();
        assert_eq!(
            none,
            "You are Countersign's assistant. Answer in the language the person writes in, briefly."
        );
    }

    #[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Tally {
        calls: u32,
    }

    fn context(session: Arc<Session>) -> ToolContext {
        use crate::agent::clock::{SequentialIds, SystemClock};
        ToolContext {
            session,
            tool: "tally".into(),
            tool_call_id: "c".into(),
            clock: Arc::new(SystemClock),
            ids: Arc::new(SequentialIds::default()),
            asker: None,
        }
    }

    #[test]
    fn a_tool_keeps_its_state_in_the_session_record_under_its_name() {
        use crate::agent::session::SessionRecord;
        let session = Arc::new(Session::new(SessionRecord::new("s", 0)));
        let ctx = context(session.clone());
        let bump = || {
            ctx.with_state(|t: &mut Tally| {
                t.calls += 1;
                t.calls
            })
        };
        assert_eq!(bump(), Ok(1));
        assert_eq!(bump(), Ok(2));
        let record = session.snapshot();
        assert_eq!(record.tool_state["tally"], json!({"calls": 2}));
        // A record read back (after a restart) carries the state on.
        let revived = Arc::new(Session::new(record));
        assert_eq!(context(revived).with_state(|t: &mut Tally| t.calls), Ok(2));
    }

    #[test]
    fn state_that_no_longer_decodes_is_an_error_and_is_kept() {
        use crate::agent::session::SessionRecord;
        let mut record = SessionRecord::new("s", 0);
        record
            .tool_state
            .insert("tally".into(), json!({"calls": "many"}));
        let session = Arc::new(Session::new(record));
        let e = context(session.clone())
            .with_state(|t: &mut Tally| t.calls)
            .unwrap_err();
        assert_eq!(e.0, "tally's saved state cannot be read; nothing was done");
        assert_eq!(
            session.snapshot().tool_state["tally"],
            json!({"calls": "many"})
        );
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
