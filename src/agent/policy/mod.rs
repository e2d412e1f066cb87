//! Who may decide what: policy rules, the person's grants and running totals — the one place
//! the gate asks what a call needs (ADR 0023).
//!
//! For each tool call the gate asks a [`Decide`] for a [`Verdict`]:
//!
//! 1. the **rules** — with no policy file, each tool's own setting (today's behaviour: a
//!    sensitive tool asks); with `COUNTERSIGN_POLICY=<file>`, its Cedar rules ([`cedar`]):
//!    a `forbid` denies (with its `@reason`), an `@ask` forbid asks whatever else matches, a
//!    `permit` runs the call without asking, nothing matched asks;
//! 2. the person's **grants** ([`grants`]), only where the rules left it to the person
//!    (nothing matched): a grant never runs what a rule denies or insists on asking for;
//! 3. running **totals** ([`spending`]): what the wallet paid today and in this chat, plus what
//!    calls already cleared will pay. A call a rule or a grant lets run claims what it pays and
//!    the grant it uses in the same step of the store as the decision ([`Policy::decide`],
//!    [`crate::agent::store::reservations`]), so no two calls — of one step, two chats or two
//!    instances on one database — both fit under a limit or a budget only one fits under.
//!
//! The person's approval of a call is checked again against the rules as they are then, with
//! the arguments that will run: an edit cannot slip a call into a rule that denies it, and a
//! rule added by a reload while the call waited still applies. A payment is checked once more,
//! with the day's total as it is, when it is about to start ([`Decider::clear_to_run`]).

pub mod cedar;
pub mod cli;
mod decider;
pub mod grants;
mod reserve;
pub mod spending;
mod watch;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, RwLock},
};

use serde::Serialize;
use serde_json::Value;

pub use cedar::{CedarRules, RuleEffect, RuleInfo};
pub use decider::{ChatWallet, Decide, Decider, Refusal, ToolDefaults};
pub use grants::{Book, GrantError};
pub use spending::Spending;
pub use watch::watch;

use super::{
    clock::Millis,
    lock,
    store::{PolicyStore, StoreError},
    tools::{ToolRegistry, ToolSpec},
};
use crate::protocol::{
    grant::{Grant, Ruling},
    money::Payment,
};

/// A policy's state besides its rules: the book, where it is kept, and one decision that
/// reserves at a time on this instance.
fn book_and_store() -> (
    Mutex<Book>,
    std::sync::OnceLock<Arc<dyn PolicyStore>>,
    tokio::sync::Mutex<()>,
) {
    Default::default()
}

/// What the policy knows of a tool: enough to type its rules.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFacts {
    pub name: String,
    /// The MCP server it comes from; `None`: Countersign's own.
    pub server: Option<String>,
    /// Its arguments' JSON Schema.
    pub parameters: Value,
    /// Whether its calls pay (`context.amount_cents`).
    pub pays: bool,
}

impl ToolFacts {
    pub fn of(spec: &ToolSpec) -> Self {
        ToolFacts {
            name: spec.name.to_string(),
            server: spec.server.as_ref().map(|s| s.to_string()),
            parameters: spec.parameters.clone(),
            pays: spec.pays.is_some(),
        }
    }

    /// The `Server` entity it belongs to: `builtin` or its MCP server.
    pub fn server(&self) -> &str {
        self.server.as_deref().unwrap_or("builtin")
    }

    /// The facts of every tool in `tools`.
    pub fn all(tools: &ToolRegistry) -> Vec<ToolFacts> {
        tools
            .snapshot()
            .iter()
            .map(|t| ToolFacts::of(&t.spec))
            .collect()
    }
}

/// The person whose chat a call is in (the one who asked for it): the policy's principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    /// `local`, or a person's id.
    pub id: String,
    pub name: String,
    /// Their roles now (none for the local person).
    pub roles: std::collections::BTreeSet<String>,
}

impl Requester {
    /// The one local person of a server without passkeys.
    pub fn local() -> Requester {
        Requester {
            id: crate::agent::people::LOCAL.to_owned(),
            name: "Local person".to_owned(),
            roles: Default::default(),
        }
    }
}

/// Everything a decision about one call is made from.
#[derive(Debug, Clone)]
pub struct CallFacts<'a> {
    pub chat: &'a str,
    pub requester: &'a Requester,
    pub tool: &'a ToolFacts,
    /// The (validated) arguments.
    pub args: &'a Value,
    /// What the call pays and to whom, when the tool pays and the arguments read as money.
    pub pays: Option<Payment>,
    /// Whether this chat's wallet never paid the payee before.
    pub new_payee: bool,
    /// Whether the tool's own setting would ask for these arguments.
    pub asks_by_default: bool,
    pub spent_today_cents: i64,
    pub spent_in_chat_cents: i64,
    pub now_ms: Millis,
}

impl CallFacts<'_> {
    /// What the audit log keeps of these facts (`facts` of an event, ADR 0029): the policy
    /// text's SHA-256, and everything the rules read but the arguments (the event has them).
    pub fn recorded(&self, policy: &str) -> Value {
        serde_json::json!({
            "policy": policy,
            "requester": {
                "id": self.requester.id,
                "name": self.requester.name,
                "roles": self.requester.roles,
            },
            "server": self.tool.server,
            "parameters": self.tool.parameters,
            "pays": self.tool.pays,
            "payment": self.pays.as_ref().map(|p| serde_json::json!({
                "amount_cents": p.money.wallet_cents(),
                "currency": p.money.currency.code,
                "payee": p.payee,
            })),
            "new_payee": self.new_payee,
            "asks_by_default": self.asks_by_default,
            "spent_today_cents": self.spent_today_cents,
            "spent_in_chat_cents": self.spent_in_chat_cents,
            "now_ms": self.now_ms,
        })
    }
}

/// What the rules alone say about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleVerdict {
    Run {
        rule: String,
    },
    Ask {
        rule: String,
        /// What the matching `@ask` rules need beyond the chat's person's click.
        needs: Option<crate::protocol::countersign::Requirement>,
    },
    Deny {
        rule: String,
        reason: String,
    },
    /// No rule matched: the person decides (and a grant may decide for them).
    NoMatch,
    /// A rule failed to evaluate: the person decides, and no grant may.
    Error {
        message: String,
    },
}

/// What the gate does with a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It runs as the tool itself says (no policy file, a tool that never asks): nothing to show.
    Run,
    /// The rules or a grant decided, or it asks: shown to the person and the model.
    Ruled(Ruling),
}

/// What the rules in force say of running a call with some arguments now, with nothing
/// reserved: how an approval is judged when it comes in (an edit is a new proposal, ADR 0028).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// A rule refuses it.
    Forbidden { rule: String, reason: String },
    /// A rule insists on asking, perhaps for more than the chat's person's click.
    Asks {
        rule: Option<String>,
        needs: crate::protocol::countersign::Requirement,
    },
    /// No rule asks for more than the person's click (a rule or a grant may even let it run).
    Free,
}

/// A rule's problem, where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyProblem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// 1-based; 0 when the problem is not at one place.
    pub line: usize,
    pub column: usize,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl PolicyProblem {
    pub fn at(rule: Option<&str>, line: usize, column: usize, message: impl Into<String>) -> Self {
        PolicyProblem {
            rule: rule.map(str::to_owned),
            line,
            column,
            message: message.into(),
            help: None,
        }
    }

    pub fn general(message: impl Into<String>) -> Self {
        PolicyProblem::at(None, 0, 0, message)
    }
}

impl std::fmt::Display for PolicyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "line {}, column {}", self.line, self.column)?;
            if let Some(rule) = &self.rule {
                write!(f, " (rule {rule:?})")?;
            }
            f.write_str(": ")?;
        } else if let Some(rule) = &self.rule {
            write!(f, "rule {rule:?}: ")?;
        }
        f.write_str(self.message.trim_end())?;
        if let Some(help) = &self.help {
            write!(f, " ({})", help.trim_end())?;
        }
        Ok(())
    }
}

/// A policy file that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct PolicyError {
    pub path: String,
    pub problems: Vec<PolicyProblem>,
}

/// The rules in force.
#[derive(Debug)]
pub enum Rules {
    /// No policy file: each tool's own setting.
    ToolDefaults,
    Cedar(Box<CedarRules>),
}

impl Rules {
    /// Reads and validates a policy file against `tools`.
    pub fn load(
        path: &Path,
        tools: &[ToolFacts],
        mcp_servers: &[String],
    ) -> Result<(Rules, String, Vec<PolicyProblem>), PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError {
            path: path.display().to_string(),
            problems: vec![PolicyProblem::general(format!("cannot read it: {e}"))],
        })?;
        let (rules, warnings) =
            CedarRules::load(&text, tools, mcp_servers).map_err(|problems| PolicyError {
                path: path.display().to_string(),
                problems,
            })?;
        Ok((Rules::Cedar(Box::new(rules)), version(&text), warnings))
    }

    pub fn verdict(&self, facts: &CallFacts<'_>) -> RuleVerdict {
        match self {
            Rules::ToolDefaults => {
                if facts.asks_by_default {
                    RuleVerdict::NoMatch
                } else {
                    RuleVerdict::Run {
                        rule: String::new(),
                    }
                }
            }
            Rules::Cedar(rules) => rules.decide(facts),
        }
    }
}

/// A short digest of a policy file's text: which version decided (in the audit log).
fn version(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// Where the policy stands, for `/api/policy` and the tools page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PolicyStatus {
    /// The policy file; `None`: each tool's own setting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The digest of the rules in force.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub loaded_at_ms: Millis,
    /// The rules in force: id, effect, line.
    pub rules: Vec<RuleSummary>,
    pub warnings: Vec<PolicyProblem>,
    /// The last reload that failed (the rules before it stay in force), if the file has not
    /// loaded cleanly since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleSummary {
    pub id: String,
    pub effect: &'static str,
    pub line: usize,
    /// What an `ask` rule needs beyond the chat's person's click, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<String>,
}

/// The policy of a runtime: the rules in force (swapped whole on reload), the grants and the
/// running totals.
pub struct Policy {
    rules: RwLock<Arc<Rules>>,
    file: Option<PathBuf>,
    mcp_servers: Vec<String>,
    status: Mutex<PolicyStatus>,
    book: Mutex<Book>,
    /// Where grants, their use and the day's reservations are kept; unset: in memory only (the
    /// book is then the truth).
    store: std::sync::OnceLock<Arc<dyn PolicyStore>>,
    /// This instance's decisions that reserve go one at a time ([`Policy::decide`]), so the
    /// book, its copy of the store, stays in step with it.
    reserving: tokio::sync::Mutex<()>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::tool_defaults()
    }
}

impl Policy {
    /// No policy file: each tool's own setting decides, and the person's grants.
    pub fn tool_defaults() -> Self {
        let (book, store, reserving) = book_and_store();
        Policy {
            rules: RwLock::new(Arc::new(Rules::ToolDefaults)),
            file: None,
            mcp_servers: Vec::new(),
            status: Mutex::new(PolicyStatus::default()),
            book,
            store,
            reserving,
        }
    }

    /// The rules of `path`, validated against `tools`; an unusable file is an error (the server
    /// does not start on it).
    pub fn from_file(
        path: &Path,
        tools: &[ToolFacts],
        mcp_servers: Vec<String>,
        now_ms: Millis,
    ) -> Result<Self, PolicyError> {
        let (rules, version, warnings) = Rules::load(path, tools, &mcp_servers)?;
        for warning in &warnings {
            tracing::warn!(file = %path.display(), %warning, "policy");
        }
        let status = status_of(Some(path), &rules, version, warnings, now_ms);
        let (book, store, reserving) = book_and_store();
        Ok(Policy {
            rules: RwLock::new(Arc::new(rules)),
            file: Some(path.to_owned()),
            mcp_servers,
            status: Mutex::new(status),
            book,
            store,
            reserving,
        })
    }

    /// Rules given as text (tests and `countersign policy test`).
    pub fn from_text(text: &str, tools: &[ToolFacts]) -> Result<Self, PolicyError> {
        let (rules, warnings) =
            CedarRules::load(text, tools, &[]).map_err(|problems| PolicyError {
                path: "<policy>".into(),
                problems,
            })?;
        let rules = Rules::Cedar(Box::new(rules));
        let status = status_of(None, &rules, version(text), warnings, 0);
        let (book, store, reserving) = book_and_store();
        Ok(Policy {
            rules: RwLock::new(Arc::new(rules)),
            file: None,
            mcp_servers: Vec::new(),
            status: Mutex::new(status),
            book,
            store,
            reserving,
        })
    }

    /// Starts from the grants and today's spending the store kept.
    pub fn with_book(self, grants: Vec<Grant>, spending: Spending) -> Self {
        *lock(&self.book) = Book::new(grants, spending);
        self
    }

    /// Keeps grants and reservations in `store` from now on, starting from the grants it kept
    /// and the day's total it has (once, at start-up, before the first turn).
    pub async fn restore(
        &self,
        store: Arc<dyn PolicyStore>,
        now_ms: Millis,
    ) -> Result<(), StoreError> {
        let grants = store.grants().await?;
        let spent = store.spent(now_ms).await?;
        *lock(&self.book) = Book::new(grants, Spending::starting(now_ms, spent.today_cents));
        if self.store.set(store).is_err() {
            tracing::error!("the policy's store was set twice; the first stays");
        }
        self.keep_text(now_ms).await
    }

    /// Keeps the text of the rules in force in the store (once per text), so that receipts of
    /// the calls they decide can be checked against them (ADR 0029).
    pub async fn keep_text(&self, now_ms: Millis) -> Result<(), StoreError> {
        let (Some(store), Rules::Cedar(rules)) = (self.store.get(), &*self.rules()) else {
            return Ok(());
        };
        store
            .keep_policy_text(rules.digest(), rules.text(), now_ms)
            .await
    }

    /// Appends audit events that belong to no session commit (a grant revoked).
    pub async fn audit(
        &self,
        events: &[crate::agent::store::AuditEvent],
    ) -> Result<(), StoreError> {
        match self.store.get() {
            Some(store) => store.append_audit(events).await,
            None => Ok(()),
        }
    }

    /// Writes a grant to the store (a new one, or its revocation).
    pub async fn save_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        match self.store.get() {
            Some(store) => store.save_grant(grant).await,
            None => Ok(()),
        }
    }

    /// Starts today's spending over from `paid_today_cents` (the policy test command's cases).
    pub fn set_spent_today(&self, paid_today_cents: i64, now_ms: Millis) {
        lock(&self.book).spending = Spending::starting(now_ms, paid_today_cents);
    }

    /// The rules in force now.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn status(&self) -> PolicyStatus {
        lock(&self.status).clone()
    }

    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Loads the file again: the new rules replace the old only when they load cleanly; a
    /// broken file keeps the last good rules and says so (returned, logged, in the status).
    pub fn reload(&self, tools: &[ToolFacts], now_ms: Millis) -> Result<(), PolicyError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        match Rules::load(path, tools, &self.mcp_servers) {
            Ok((rules, version, warnings)) => {
                for warning in &warnings {
                    tracing::warn!(file = %path.display(), %warning, "policy");
                }
                let status = status_of(Some(path), &rules, version, warnings, now_ms);
                tracing::info!(file = %path.display(), rules = status.rules.len(), version = ?status.version, "policy reloaded");
                *self.rules.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rules);
                *lock(&self.status) = status;
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "the policy file does not load; the rules loaded before stay in force");
                lock(&self.status).reload_error = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Checks the rules in force against a changed tool list (an MCP server listed its tools):
    /// what no longer checks is reported as a warning (the rules stay in force; a rule that
    /// fails to evaluate makes its calls ask).
    pub fn recheck(&self, tools: &[ToolFacts]) {
        let Some(path) = &self.file else {
            return;
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            return;
        };
        let warnings = match CedarRules::load(&text, tools, &self.mcp_servers) {
            Ok((_, warnings)) => warnings,
            Err(problems) => problems,
        };
        let mut status = lock(&self.status);
        if status.warnings != warnings {
            for warning in &warnings {
                tracing::warn!(file = %path.display(), %warning, "policy, against the tools listed now");
            }
            status.warnings = warnings;
        }
    }

    /// A decider for calls of chat `chat`, whose wallet is `wallet`, on this instance's copy
    /// of the totals. It holds the book's lock: decide a step's calls with one, then drop it.
    /// What the calls it lets run claim is kept only by [`Policy::decide`].
    pub fn decider<'a>(
        &'a self,
        tools: &'a ToolRegistry,
        chat: &'a str,
        requester: &'a Requester,
        wallet: ChatWallet,
    ) -> Decider<'a> {
        Decider {
            rules: self.rules(),
            tools,
            book: lock(&self.book),
            chat,
            requester,
            wallet,
            claims: Vec::new(),
            unreserved: false,
            spends: false,
            recorded: Vec::new(),
        }
    }

    /// The grants, for the list the person sees (newest first).
    pub fn grants(&self) -> Vec<Grant> {
        lock(&self.book).grants()
    }

    /// Takes in the grants the store has (another instance sharing the database made, used or
    /// revoked some): new grants are added, a revocation holds, and a grant's use is the
    /// store's. A store that cannot be read changes nothing.
    pub async fn reload_grants(&self) {
        let Some(store) = self.store.get() else {
            return;
        };
        // Not while a decision of this instance is being kept (its use would be counted twice).
        let _in_step = self.reserving.lock().await;
        match store.grants().await {
            Ok(stored) => lock(&self.book).merge(stored),
            Err(e) => {
                tracing::warn!(error = %e.report(), "cannot read the grants again");
            }
        }
    }

    /// Adds a grant (the person approved and asked to remember).
    pub fn add_grant(&self, grant: Grant) {
        lock(&self.book).add(grant);
    }

    /// Revokes a grant: it lets nothing run from `now` on.
    pub fn revoke_grant(&self, id: &str, now_ms: Millis) -> Result<Grant, GrantError> {
        lock(&self.book).revoke(id, now_ms)
    }

    /// Marks grant `id` to be written with the next [`Policy::flush`].
    pub fn mark_grant_changed(&self, id: &str) {
        lock(&self.book).mark_changed(id);
    }
}

fn status_of(
    path: Option<&Path>,
    rules: &Rules,
    version: String,
    warnings: Vec<PolicyProblem>,
    now_ms: Millis,
) -> PolicyStatus {
    let mut summaries = match rules {
        Rules::ToolDefaults => Vec::new(),
        Rules::Cedar(rules) => rules
            .rules()
            .map(|r| RuleSummary {
                id: r.id.clone(),
                effect: r.effect.as_str(),
                line: r.line,
                needs: r.needs.as_ref().map(|n| n.words()),
            })
            .collect(),
    };
    summaries.sort_by_key(|r| r.line);
    PolicyStatus {
        file: path.map(|p| p.display().to_string()),
        version: Some(version),
        loaded_at_ms: now_ms,
        rules: summaries,
        warnings,
        reload_error: None,
    }
}

#[cfg(test)]
mod tests;
