//! What every handler shares ([`AppState`]), and how it is built from the configuration.

use std::{net::SocketAddr, sync::Arc};

use axum::extract::FromRef;
use leptos::config::LeptosOptions;

use crate::models::demo::DemoModel;
use crate::{
    agent::{
        Runtime, RuntimeBuilder, RuntimeSettings, TextTiming,
        clock::{RandomIds, SystemClock},
        mcp::{McpHub, McpTimeouts},
        people::{Passkeys, People, SignInMode},
        policy::{Policy, ToolFacts},
        store::{
            MemoryStore, PeopleStore, PolicyStore, SessionStore, SignInStore, ToolListStore,
            postgres::PostgresStore, sqlite::SqliteStore,
        },
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    },
    config::{
        AgentSettings, Config, EdgeSettings, StoreSetting, TextTimingSetting, WeatherSetting,
    },
    transport::{edge::Edge, site::Site},
};

/// State shared by every handler.
#[derive(Clone)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    /// Where the site settings came from (shown in the banner).
    pub config_source: Arc<str>,
    /// The agent runtime: model, tools, sessions.
    pub runtime: Arc<Runtime>,
    pub edge_settings: EdgeSettings,
    /// The edge: host names, credentials, rate limits, connection caps, shutdown.
    pub edge: Arc<Edge>,
    /// The built site: where its files are and what the page's bundle is called.
    pub site: Arc<Site>,
    /// Where sign-in sessions are kept (the sessions' database).
    pub signin_store: Arc<dyn SignInStore>,
    /// The MCP servers whose tools are in the runtime's registry.
    pub mcp: Arc<McpHub>,
    /// Where the policy keeps grants, and reads what the wallets paid (the sessions' database).
    pub policy_store: Arc<dyn PolicyStore>,
    /// Where people, their passkeys and one-time links are kept (the sessions' database).
    pub people_store: Arc<dyn PeopleStore>,
    /// Checks and signs the audit chain (ADR 0029); set when the server starts serving.
    pub notary: Arc<std::sync::OnceLock<Arc<crate::agent::audit::Notary>>>,
}

impl AppState {
    /// The production state of a server listening on `addr`: the configured model, the real
    /// clock, unguessable ids, the stores `COUNTERSIGN_DB` names.
    pub async fn new(config: Config, addr: SocketAddr) -> Result<Self, StartupError> {
        let stores = open_stores(&config.agent.store).await?;
        let runtime = build_runtime(&config.agent, stores.sessions.clone())?;
        Self::assemble(config, addr, runtime, stores).await
    }

    /// A state around a runtime the caller builds (tests inject models, clocks and ids), with
    /// its sign-ins, MCP tool lists, grants and people in memory.
    pub async fn with_runtime(
        config: Config,
        runtime: RuntimeBuilder,
        addr: SocketAddr,
    ) -> Result<Self, StartupError> {
        let stores = Stores::all(Arc::new(MemoryStore::default()));
        Self::assemble(config, addr, runtime, stores).await
    }

    /// Everything but the runtime's own store comes from `stores`; the runtime is built here,
    /// whole, once its people are known (a passkeys server's relying party is the address it
    /// listens on).
    async fn assemble(
        config: Config,
        addr: SocketAddr,
        runtime: RuntimeBuilder,
        stores: Stores,
    ) -> Result<Self, StartupError> {
        let edge = Edge::new(addr, &config.edge);
        let people = people(&edge, &stores).await?;
        let runtime = runtime.people(Arc::new(people)).build();
        let mcp = Arc::new(McpHub::new(
            config.agent.mcp.as_ref(),
            McpTimeouts {
                connect: MCP_CONNECT_TIMEOUT,
                call: config.agent.mcp_call_timeout,
                approval: config.agent.approval_timeout,
            },
            stores.tool_lists,
        ));
        let mut leptos_options = config.site;
        let site = Arc::new(Site::discover(&mut leptos_options));
        Ok(AppState {
            mcp,
            policy_store: stores.policy,
            people_store: stores.people,
            leptos_options,
            site,
            config_source: config.source.into(),
            runtime,
            edge_settings: config.edge,
            edge,
            signin_store: stores.signins,
            notary: Arc::default(),
        })
    }

    /// Starts the notary of the sessions' audit chain (its key from the store, made on first
    /// start): the chain is checked, then signed every so many records, on demand, and when
    /// `stop` is cancelled. A store that keeps no chain leaves the server without one.
    pub async fn start_notary(
        &self,
        stop: tokio_util::sync::CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        use crate::agent::audit::{Notary, notary::EVERY};
        let store = self.runtime.store.clone();
        match Notary::new(store, self.runtime.clock.clone(), EVERY).await {
            Ok(notary) => {
                let task = notary.spawn(stop);
                let _ = self.notary.set(notary);
                Some(task)
            }
            Err(e) => {
                tracing::warn!(error = %e.report(), "the audit log will not be signed");
                None
            }
        }
    }

    /// Where receipts and the verifiable export come from, once the notary runs.
    pub fn audit_source(&self) -> Option<crate::agent::audit::export::Source> {
        Some(crate::agent::audit::export::Source {
            sessions: self.runtime.store.clone(),
            policies: self.policy_store.clone(),
            notary: self.notary.get()?.clone(),
            origin: Some(self.edge.public_url.clone()),
        })
    }

    /// The one-time set-up link of a passkeys server while nobody can manage people (printed
    /// with the banner); `None` otherwise.
    pub async fn setup_link(&self) -> Result<Option<String>, StartupError> {
        let token = self
            .runtime
            .people()
            .setup_link(self.runtime.clock.now_ms())
            .await
            .map_err(|e| StartupError::People(e.to_string()))?;
        Ok(token.map(|token| format!("{}/welcome/{token}", self.edge.public_url)))
    }
}

/// The people of a server at `edge`: with passkeys, loaded from the store with the edge's
/// public origin as their relying party; otherwise the one local person.
async fn people(edge: &Edge, stores: &Stores) -> Result<People, StartupError> {
    if edge.mode != SignInMode::Passkeys {
        return Ok(People::local(edge.mode));
    }
    let public = &edge.public_url;
    let url =
        url::Url::parse(public).map_err(|e| StartupError::People(format!("{public}: {e}")))?;
    // Sign-in challenges are signed with (a key derived from) the server's secret, which every
    // instance on the database shares.
    let secret = stores.signins.signing_secret().await?;
    let passkeys = Passkeys::new(&url, &secret).map_err(StartupError::People)?;
    Ok(People::load(stores.people.clone(), passkeys).await?)
}

/// How long an MCP server may take to start and list its tools (the server waits this long at
/// start for its tools, then serves without a server that has not answered).
pub const MCP_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// Why the server cannot start with these settings.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("model provider: {0}")]
    Model(#[from] crate::models::providers::ProviderConfigError),
    #[error("replay model: {0}")]
    Replay(#[from] crate::models::replay::ReplayError),
    #[error("chunk log: {0}")]
    ChunkLog(#[from] crate::agent::chunk_log::ChunkLogError),
    /// Says what underlies the store's failure too (it is printed, not logged, at start).
    #[error("COUNTERSIGN_DB: {}", .0.report())]
    Store(#[from] crate::agent::store::StoreError),
    #[error("COUNTERSIGN_POLICY: {0}")]
    Policy(#[from] crate::agent::policy::PolicyError),
    #[error("COUNTERSIGN_SIGN_IN=passkeys: {0}")]
    People(String),
}

/// The stores of one database: sessions (with the audit log), sign-ins, MCP servers' tool lists,
/// the policy's grants, people.
pub struct Stores {
    pub sessions: Arc<dyn SessionStore>,
    pub signins: Arc<dyn SignInStore>,
    pub tool_lists: Arc<dyn ToolListStore>,
    pub policy: Arc<dyn PolicyStore>,
    pub people: Arc<dyn PeopleStore>,
}

impl Stores {
    /// Every store in `database`.
    fn all<D>(database: Arc<D>) -> Stores
    where
        D: SessionStore + SignInStore + ToolListStore + PolicyStore + PeopleStore,
    {
        Stores {
            sessions: database.clone(),
            signins: database.clone(),
            tool_lists: database.clone(),
            policy: database.clone(),
            people: database,
        }
    }
}

/// The stores `setting` names (Postgres: connected and migrated, or a clear error).
pub async fn open_stores(setting: &StoreSetting) -> Result<Stores, StartupError> {
    Ok(match setting {
        StoreSetting::Memory => Stores::all(Arc::new(MemoryStore::default())),
        StoreSetting::Sqlite { path, durability } => {
            Stores::all(Arc::new(SqliteStore::open_with(path, *durability)?))
        }
        StoreSetting::Postgres { url, pool, listen } => {
            let connections = crate::agent::store::postgres::Connections {
                pool: *pool,
                listen: listen.as_ref().map(|u| u.0.clone()),
            };
            Stores::all(Arc::new(PostgresStore::open(&url.0, &connections).await?))
        }
    })
}

/// The runtime the settings describe on `store`, all but its people: a replayed log, the
/// configured provider, or the demo model; with the chunk log when one is configured.
pub fn build_runtime(
    agent: &AgentSettings,
    store: Arc<dyn SessionStore>,
) -> Result<RuntimeBuilder, StartupError> {
    let tools = ToolRegistry::standard(&tool_settings(agent));
    let model: Arc<dyn crate::agent::model::Model> = match (&agent.replay, &agent.provider) {
        (Some(path), _) => Arc::new(crate::models::replay::ReplayModel::from_file(path)?),
        (None, Some(provider)) => provider.clone().build()?,
        (None, None) => Arc::new(DemoModel::new(agent.demo_delay)),
    };
    let mut builder = Runtime::builder(
        model,
        tools,
        Arc::new(SystemClock),
        Arc::new(RandomIds),
        store,
        runtime_settings(agent),
    );
    if let Some(live) = &agent.live {
        builder = builder.live_model(live.clone().build()?);
    }
    if let Some(dir) = &agent.chunk_log {
        let log = crate::agent::chunk_log::ChunkLog::new(dir.clone())?;
        builder = builder.chunk_log(Arc::new(log));
    }
    if let Some(path) = &agent.policy {
        // Checked against Countersign's own tools now; MCP servers' tools are checked when
        // they list them (a rule naming one is a warning until then).
        let servers = agent
            .mcp
            .as_ref()
            .map(|c| c.servers.iter().map(|s| s.name.clone()).collect())
            .unwrap_or_default();
        let policy = Policy::from_file(
            path,
            &ToolFacts::all(builder.tools()),
            servers,
            builder.clock().now_ms(),
        )?;
        let status = policy.status();
        tracing::info!(file = %path.display(), rules = status.rules.len(), version = ?status.version, "policy loaded");
        builder = builder.policy(Arc::new(policy));
    }
    Ok(builder)
}

/// The tool settings the agent settings describe.
pub fn tool_settings(agent: &AgentSettings) -> ToolSettings {
    ToolSettings {
        approval_timeout: agent.approval_timeout,
        browser_timeout: agent.browser_timeout,
        weather: match agent.weather {
            WeatherSetting::Live => WeatherSource::open_meteo(),
            WeatherSetting::Offline => WeatherSource::Offline,
        },
    }
}

/// The runtime settings the agent settings describe.
pub fn runtime_settings(agent: &AgentSettings) -> RuntimeSettings {
    RuntimeSettings {
        max_attachment_bytes: agent.max_attachment_bytes,
        text_timing: match agent.text_timing {
            TextTimingSetting::Hold => TextTiming::Hold,
            TextTimingSetting::Progressive => TextTiming::Progressive,
        },
        ..RuntimeSettings::default()
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}
