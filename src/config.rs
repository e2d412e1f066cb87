//! Start-up configuration.
//!
//! The site settings come in three layers, each setting in one of them (docs/adr/0032, see
//! [`site`]): how the site was built, in `[package.metadata.leptos]` of Cargo.toml, where
//! cargo-leptos reads it and which the server embeds; where this server runs it (`site-addr`,
//! `site-root`, `env`), in the `Leptos.toml` of the working directory (or the file
//! `COUNTERSIGN_LEPTOS_TOML` names), the file a deployment copies beside the binary; and the
//! `LEPTOS_*` variables cargo-leptos passes to the server it starts (and a deployment may set:
//! `LEPTOS_SITE_ADDR`, `LEPTOS_SITE_ROOT`, `LEPTOS_SITE_PKG_DIR`, `LEPTOS_OUTPUT_NAME`,
//! `LEPTOS_RELOAD_PORT`, `LEPTOS_HASH_FILES`, `LEPTOS_HASH_FILE_NAME`, `LEPTOS_ENV`), which win.
//!
//! The agent and the HTTP edge are configured by `COUNTERSIGN_*` variables (see [`AgentSettings`]
//! and [`EdgeSettings`]); a `.env` file in the working directory is read first (variables already
//! set win).
//!
//! Resolution is a pure function of (embedded text, Leptos.toml text, environment lookup) so that
//! every rule is unit-tested without touching the process environment.

use std::{collections::HashMap, path::PathBuf, time::Duration};

use leptos::config::LeptosOptions;

mod edge;
pub mod site;
pub use edge::EdgeSettings;
use edge::edge_settings;
pub use site::{EMBEDDED_CARGO_TOML, LeptosToml};

/// Why the configuration could not be loaded. Each variant names what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{origin} has no valid [package.metadata.leptos] table: {message}")]
    Parse { origin: String, message: String },
    #[error("{path}: {message}")]
    LeptosToml { path: PathBuf, message: String },
    #[error("COUNTERSIGN_MCP_CONFIG: {0}")]
    Mcp(#[from] crate::agent::mcp::config::McpConfigError),
    #[error("{origin}: `{key}` = {value:?} is not valid: {reason}")]
    Invalid {
        origin: String,
        key: &'static str,
        value: String,
        reason: String,
    },
}

/// When the model's text reaches an SSE/WS client (ADR 0004).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextTimingSetting {
    /// Default: a response that ends waiting for the person carries no text.
    Hold,
    /// Text streams as it is generated.
    Progressive,
}

/// Where `get_weather` looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeatherSetting {
    /// Open-Meteo, falling back to the offline table.
    Live,
    /// The offline table only.
    Offline,
}

/// Where sessions and the audit log are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSetting {
    /// `COUNTERSIGN_DB=:memory:`: nothing survives a restart.
    Memory,
    /// `COUNTERSIGN_DB=<file>` (default [`DEFAULT_DB_PATH`]): SQLite, with
    /// `COUNTERSIGN_DB_SYNC=full` (default) or `normal`.
    Sqlite {
        path: PathBuf,
        durability: crate::agent::store::sqlite::Durability,
    },
    /// `COUNTERSIGN_DB=postgres://user:password@host:port/db` (or `postgresql://`): one
    /// Postgres database, which several instances may share.
    Postgres {
        url: PostgresUrl,
        /// `COUNTERSIGN_DB_POOL` (default 16): the pool's size per instance.
        pool: usize,
        /// `COUNTERSIGN_DB_LISTEN`: where the `LISTEN` connection goes (default: `url`).
        listen: Option<PostgresUrl>,
    },
}

/// A Postgres URL, which may hold a password: its `Debug` shows where it points, not who with.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(pub String);

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = match self.0.split_once("://") {
            Some((scheme, rest)) => {
                let at = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                format!("{scheme}://…@{at}")
            }
            None => "postgres://…".to_owned(),
        };
        f.write_str(&shown)
    }
}

/// The database file when `COUNTERSIGN_DB` is not set (relative to the working directory).
pub const DEFAULT_DB_PATH: &str = "data/countersign.db";

/// Settings of the agent runtime (`COUNTERSIGN_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    /// `COUNTERSIGN_DEMO_DELAY_MS`: pause between the demo model's words (default 30).
    pub demo_delay: Duration,
    /// `COUNTERSIGN_APPROVAL_TIMEOUT_SECS`: how long an approval waits (default 300).
    pub approval_timeout: Duration,
    /// `COUNTERSIGN_BROWSER_TIMEOUT_SECS`: how long a browser tool waits (default 30).
    pub browser_timeout: Duration,
    /// `COUNTERSIGN_TEXT_TIMING`: `hold` (default) or `progressive`, for the seed system's routes
    /// (`/stream`, `/live`); Countersign's own routes stream text unless a request asks to hold it.
    pub text_timing: TextTimingSetting,
    /// `COUNTERSIGN_WEATHER`: `live` (default) or `offline`.
    pub weather: WeatherSetting,
    /// The real model provider (Gemini, OpenAI-compatible) chosen from `GEMINI_API_KEY`,
    /// `OPENAI_BASE_URL`, `COUNTERSIGN_MODEL` …; `None` means the offline demo model.
    pub provider: Option<crate::models::providers::ProviderConfig>,
    /// `COUNTERSIGN_MODEL=replay:<file.jsonl>`: play a chunk log back as the model.
    pub replay: Option<PathBuf>,
    /// `COUNTERSIGN_CHUNK_LOG=<dir>`: record every session's chunks as JSONL there.
    pub chunk_log: Option<PathBuf>,
    /// `COUNTERSIGN_DB`: the SQLite file (default [`DEFAULT_DB_PATH`]), `:memory:`, or a
    /// `postgres://` URL.
    pub store: StoreSetting,
    /// The live model BIDI turns use: Gemini Live (`GEMINI_API_KEY` + `COUNTERSIGN_LIVE_MODEL`
    /// …) or OpenAI Realtime (`COUNTERSIGN_LIVE_MODEL=openai:NAME` + `OPENAI_API_KEY`);
    /// `None`: BIDI turns use the same model as SSE turns.
    pub live: Option<crate::models::providers::LiveConfig>,
    /// `COUNTERSIGN_MCP_CONFIG=<file>`: the MCP servers whose tools the agent may call, under
    /// the same gate (`mcpServers` shape, see `agent::mcp::config`).
    pub mcp: Option<crate::agent::mcp::config::McpConfig>,
    /// `COUNTERSIGN_MCP_CALL_TIMEOUT_SECS`: how long one MCP tool call may take (default 60);
    /// after it the call is cancelled.
    pub mcp_call_timeout: Duration,
    /// `COUNTERSIGN_POLICY=<file>`: the Cedar rules that decide which calls run, ask or are
    /// refused (ADR 0023); `None`: each tool's own setting.
    pub policy: Option<PathBuf>,
    /// `COUNTERSIGN_MAX_ATTACHMENT_BYTES`: the largest attachment a message may carry, decoded
    /// (default 10 MiB; the request's own limit applies first).
    pub max_attachment_bytes: usize,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            demo_delay: Duration::from_millis(30),
            approval_timeout: Duration::from_secs(300),
            browser_timeout: Duration::from_secs(30),
            text_timing: TextTimingSetting::Hold,
            weather: WeatherSetting::Live,
            provider: None,
            replay: None,
            chunk_log: None,
            store: StoreSetting::Sqlite {
                path: PathBuf::from(DEFAULT_DB_PATH),
                durability: Default::default(),
            },
            live: None,
            mcp: None,
            mcp_call_timeout: Duration::from_secs(60),
            policy: None,
            max_attachment_bytes: crate::agent::attachments::DEFAULT_MAX_ATTACHMENT_BYTES,
        }
    }
}

/// Everything the server needs to start.
#[derive(Debug, Clone)]
pub struct Config {
    /// The options leptos_axum serves the site with.
    pub site: LeptosOptions,
    /// Where the site settings came from, for the banner and logs.
    pub source: String,
    pub agent: AgentSettings,
    pub edge: EdgeSettings,
}

impl Config {
    /// Loads the configuration from the embedded defaults, the working directory's `Leptos.toml`
    /// (or the file `COUNTERSIGN_LEPTOS_TOML` names), `./.env` and the process environment.
    pub fn load() -> Result<Self, ConfigError> {
        let dotenv = read_dotenv(std::path::Path::new(".env"))?;
        let env = |key: &str| std::env::var(key).ok().or_else(|| dotenv.get(key).cloned());
        let leptos_toml = LeptosToml::find(&env)?;
        Self::resolve_with(EMBEDDED_CARGO_TOML, leptos_toml.as_ref(), env)
    }

    /// The configuration the embedded site settings and `env` describe. `env` looks a variable
    /// up (None when unset).
    pub fn resolve(env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::resolve_with(EMBEDDED_CARGO_TOML, None, env)
    }

    /// Resolves `cargo_toml`'s site settings, placed by `leptos_toml` when there is one, under
    /// `env`'s overrides.
    pub fn resolve_with(
        cargo_toml: &str,
        leptos_toml: Option<&LeptosToml>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let (site, source) = site::site_options(cargo_toml, leptos_toml, &env)?;
        let agent = agent_settings(&env)?;
        let edge = edge_settings(&env)?;
        Ok(Config {
            site,
            source,
            agent,
            edge,
        })
    }
}

/// The variables of a `.env` file (none when there is no file). A line that cannot be read is
/// an error naming the file and the line, never a silently wrong value.
fn read_dotenv(path: &std::path::Path) -> Result<HashMap<String, String>, ConfigError> {
    let read_error = |message: String| ConfigError::Read {
        path: path.to_path_buf(),
        message,
    };
    let entries = match dotenvy::from_path_iter(path) {
        Ok(entries) => entries,
        Err(dotenvy::Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(HashMap::new());
        }
        Err(e) => return Err(read_error(e.to_string())),
    };
    entries
        .map(|entry| entry.map_err(|e| read_error(dotenv_error(&e))))
        .collect()
}

/// A `.env` error in words (dotenvy's line errors say the line and where in it).
fn dotenv_error(error: &dotenvy::Error) -> String {
    match error {
        dotenvy::Error::LineParse(line, at) => {
            format!("cannot parse the line {line:?} (at character {at})")
        }
        other => other.to_string(),
    }
}

fn invalid(var: &'static str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        origin: var.to_string(),
        key: var,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

fn number<T: std::str::FromStr>(
    env: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: T,
) -> Result<T, ConfigError> {
    match env(var) {
        None => Ok(default),
        Some(value) => value
            .trim()
            .parse()
            .map_err(|_| invalid(var, &value, "expected a whole number")),
    }
}

fn agent_settings(env: &impl Fn(&str) -> Option<String>) -> Result<AgentSettings, ConfigError> {
    let defaults = AgentSettings::default();
    let approval_secs = at_least(
        env,
        "COUNTERSIGN_APPROVAL_TIMEOUT_SECS",
        300u64,
        1,
        "must be at least 1",
    )?;
    let browser_secs = at_least(
        env,
        "COUNTERSIGN_BROWSER_TIMEOUT_SECS",
        30u64,
        1,
        "must be at least 1",
    )?;
    let text_timing = match env("COUNTERSIGN_TEXT_TIMING").as_deref().map(str::trim) {
        None | Some("hold") => TextTimingSetting::Hold,
        Some("progressive") => TextTimingSetting::Progressive,
        Some(other) => {
            return Err(invalid(
                "COUNTERSIGN_TEXT_TIMING",
                other,
                "use hold or progressive",
            ));
        }
    };
    let weather = match env("COUNTERSIGN_WEATHER").as_deref().map(str::trim) {
        None | Some("live") => WeatherSetting::Live,
        Some("offline") => WeatherSetting::Offline,
        Some(other) => return Err(invalid("COUNTERSIGN_WEATHER", other, "use live or offline")),
    };
    let replay = replay(env)?;
    let provider = match replay {
        Some(_) => None,
        None => provider(env)?,
    };
    let chunk_log = env("COUNTERSIGN_CHUNK_LOG")
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let store = store_setting(env)?;
    let live = match replay {
        Some(_) => None,
        None => live(env)?,
    };
    Ok(AgentSettings {
        provider,
        replay,
        chunk_log,
        store,
        live,
        demo_delay: Duration::from_millis(number(
            env,
            "COUNTERSIGN_DEMO_DELAY_MS",
            defaults.demo_delay.as_millis() as u64,
        )?),
        approval_timeout: Duration::from_secs(approval_secs),
        browser_timeout: Duration::from_secs(browser_secs),
        text_timing,
        weather,
        mcp: mcp_config(env)?,
        mcp_call_timeout: Duration::from_secs(
            number(env, "COUNTERSIGN_MCP_CALL_TIMEOUT_SECS", 60u64)?.max(1),
        ),
        policy: env("COUNTERSIGN_POLICY")
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .map(PathBuf::from),
        max_attachment_bytes: number(
            env,
            "COUNTERSIGN_MAX_ATTACHMENT_BYTES",
            defaults.max_attachment_bytes,
        )?
        .max(1),
    })
}

/// The chunk log `COUNTERSIGN_MODEL=replay:<file>` names, if it names one.
fn replay(env: &impl Fn(&str) -> Option<String>) -> Result<Option<PathBuf>, ConfigError> {
    let replay = env("COUNTERSIGN_MODEL").and_then(|m| {
        m.trim()
            .strip_prefix("replay:")
            .map(|p| PathBuf::from(p.trim()))
    });
    if replay.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
        return Err(invalid(
            "COUNTERSIGN_MODEL",
            "replay:",
            "name the chunk log to replay: replay:<file.jsonl>",
        ));
    }
    Ok(replay)
}

/// The model provider the environment selects (`None`: the demo model).
fn provider(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<crate::models::providers::ProviderConfig>, ConfigError> {
    crate::models::providers::select(|k| env(k)).map_err(|e| ConfigError::Invalid {
        origin: "the model settings".to_string(),
        key: "COUNTERSIGN_MODEL",
        value: env("COUNTERSIGN_MODEL").unwrap_or_default(),
        reason: e.to_string(),
    })
}

/// The live model BIDI turns use, as the environment selects it (`None`: the SSE turns' model).
fn live(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<crate::models::providers::LiveConfig>, ConfigError> {
    crate::models::providers::select_live(|k| env(k)).map_err(|e| ConfigError::Invalid {
        origin: "the live model settings".to_string(),
        key: "COUNTERSIGN_LIVE_MODEL",
        value: env("COUNTERSIGN_LIVE_MODEL").unwrap_or_default(),
        reason: e.to_string(),
    })
}

/// Where chats are kept: `COUNTERSIGN_DB` (memory, a SQLite file with `COUNTERSIGN_DB_SYNC`'s
/// durability, or Postgres with `COUNTERSIGN_DB_POOL` and `COUNTERSIGN_DB_LISTEN`).
fn store_setting(env: &impl Fn(&str) -> Option<String>) -> Result<StoreSetting, ConfigError> {
    use crate::agent::store::sqlite::Durability;
    let durability = match env("COUNTERSIGN_DB_SYNC").as_deref().map(str::trim) {
        None | Some("") | Some("full") => Durability::Full,
        Some("normal") => Durability::Normal,
        Some(other) => return Err(invalid("COUNTERSIGN_DB_SYNC", other, "use full or normal")),
    };
    Ok(match env("COUNTERSIGN_DB").map(|d| d.trim().to_string()) {
        Some(d) if d == ":memory:" => StoreSetting::Memory,
        Some(d) if d.starts_with("postgres://") || d.starts_with("postgresql://") => {
            postgres_setting(env, d)?
        }
        Some(d) if !d.is_empty() => StoreSetting::Sqlite {
            path: PathBuf::from(d),
            durability,
        },
        _ => StoreSetting::Sqlite {
            path: PathBuf::from(DEFAULT_DB_PATH),
            durability,
        },
    })
}

/// A Postgres store at `url`: its pool (`COUNTERSIGN_DB_POOL`, at least one connection) and the
/// URL its notifications are listened on (`COUNTERSIGN_DB_LISTEN`, never shown in an error).
fn postgres_setting(
    env: &impl Fn(&str) -> Option<String>,
    url: String,
) -> Result<StoreSetting, ConfigError> {
    let pool = at_least(
        env,
        "COUNTERSIGN_DB_POOL",
        crate::agent::store::postgres::POOL_SIZE,
        1,
        "an instance needs at least one connection",
    )?;
    let listen = env("COUNTERSIGN_DB_LISTEN")
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty());
    if let Some(listen) = &listen
        && !(listen.starts_with("postgres://") || listen.starts_with("postgresql://"))
    {
        return Err(invalid(
            "COUNTERSIGN_DB_LISTEN",
            "(not shown)",
            "expected a postgres:// URL",
        ));
    }
    Ok(StoreSetting::Postgres {
        url: PostgresUrl(url),
        pool,
        listen: listen.map(PostgresUrl),
    })
}

/// The MCP servers' file, when `COUNTERSIGN_MCP_CONFIG` names one; unknown keys in it are
/// logged, a file that cannot be used stops the start with its line.
fn mcp_config(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<crate::agent::mcp::config::McpConfig>, ConfigError> {
    use crate::agent::mcp::config::{McpConfig, McpConfigError};
    let Some(path) = env("COUNTERSIGN_MCP_CONFIG")
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
    else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path).map_err(|e| McpConfigError {
        path: path.clone(),
        line: None,
        message: format!("cannot read the file: {e}"),
    })?;
    let config = McpConfig::parse(&text, &path, &|name| env(name))?;
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    Ok(Some(config))
}

/// `var`, a whole number (`default` when unset), refused with `reason` below `min`.
fn at_least<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    env: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: T,
    min: T,
    reason: &str,
) -> Result<T, ConfigError> {
    let value = number(env, var, default)?;
    if value < min {
        return Err(invalid(var, &value.to_string(), reason));
    }
    Ok(value)
}

/// A comma-separated list variable, its items trimmed, empty ones dropped.
fn list(env: &impl Fn(&str) -> Option<String>, var: &str) -> Vec<String> {
    env(var)
        .map(|list| {
            list.split(',')
                .map(|item| item.trim().to_string())
                .filter(|item| !item.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use leptos::config::Env;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_embedded_cargo_metadata_gives_the_documented_defaults() {
        let config = Config::resolve(env_of(&[])).unwrap();
        assert_eq!(&*config.site.output_name, "countersign");
        assert_eq!(&*config.site.site_root, "target/site");
        assert_eq!(&*config.site.site_pkg_dir, "pkg");
        assert_eq!(config.site.site_addr.to_string(), "127.0.0.1:3000");
        assert_eq!(config.site.reload_port, 3001);
        assert!(config.site.hash_files);
        assert_eq!(&*config.site.hash_file, "hash.txt");
        assert_eq!(
            config.source,
            "built-in Cargo.toml [package.metadata.leptos]"
        );
    }

    #[test]
    fn leptos_environment_variables_win_over_the_metadata() {
        let config = Config::resolve(env_of(&[
            ("LEPTOS_SITE_ADDR", "127.0.0.1:4555"),
            ("LEPTOS_SITE_ROOT", "/tmp/site"),
            ("LEPTOS_OUTPUT_NAME", "other"),
            ("LEPTOS_RELOAD_PORT", "4556"),
            ("LEPTOS_HASH_FILES", "false"),
            ("LEPTOS_ENV", "production"),
        ]))
        .unwrap();
        assert_eq!(config.site.site_addr.to_string(), "127.0.0.1:4555");
        assert_eq!(&*config.site.site_root, "/tmp/site");
        assert_eq!(&*config.site.output_name, "other");
        assert_eq!(config.site.reload_port, 4556);
        assert!(!config.site.hash_files);
        assert_eq!(config.site.env, Env::PROD);
        assert!(
            config.source.contains("LEPTOS_SITE_ADDR"),
            "{}",
            config.source
        );
    }

    #[test]
    fn the_metadata_table_is_read_from_any_cargo_toml() {
        let cargo = "[package]\nname = \"x\"\n[package.metadata.leptos]\n\
                     output-name = \"site\"\nsite-addr = \"0.0.0.0:8080\"\n\
                     style-file = \"style/x.css\"\nbin-features = [\"ssr\"]\n";
        let config = Config::resolve_with(cargo, None, env_of(&[])).unwrap();
        assert_eq!(&*config.site.output_name, "site");
        assert_eq!(config.site.site_addr.to_string(), "0.0.0.0:8080");
        assert!(
            !config.site.hash_files,
            "hash-files defaults to off, as in cargo-leptos"
        );
        let err = Config::resolve_with("[package]\nname = \"x\"\n", None, env_of(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
    }

    #[test]
    fn bad_values_are_reported_with_their_origin() {
        let err = Config::resolve(env_of(&[("LEPTOS_SITE_ADDR", "localhost")])).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("LEPTOS_SITE_ADDR"), "{text}");
        assert!(text.contains("site-addr"), "{text}");

        let err = Config::resolve(env_of(&[("LEPTOS_ENV", "staging")])).unwrap_err();
        assert!(err.to_string().contains("LEPTOS_ENV"));

        let err = Config::resolve(env_of(&[("LEPTOS_OUTPUT_NAME", " ")])).unwrap_err();
        assert!(err.to_string().contains("output-name"));

        let err = Config::resolve(env_of(&[("LEPTOS_HASH_FILES", "yes")])).unwrap_err();
        assert!(err.to_string().contains("hash-files"), "{err}");
        let err = Config::resolve(env_of(&[("LEPTOS_RELOAD_PORT", "x")])).unwrap_err();
        assert!(err.to_string().contains("LEPTOS_RELOAD_PORT"), "{err}");
    }

    #[test]
    fn agent_and_http_settings_come_from_countersign_variables() {
        let config = Config::resolve(env_of(&[])).unwrap();
        assert_eq!(config.agent, AgentSettings::default());
        assert_eq!(config.edge, EdgeSettings::default());

        let config = Config::resolve(env_of(&[
            ("COUNTERSIGN_DEMO_DELAY_MS", "0"),
            ("COUNTERSIGN_APPROVAL_TIMEOUT_SECS", "5"),
            ("COUNTERSIGN_BROWSER_TIMEOUT_SECS", "7"),
            ("COUNTERSIGN_TEXT_TIMING", "progressive"),
            ("COUNTERSIGN_WEATHER", "offline"),
            ("COUNTERSIGN_MAX_BODY_BYTES", "4096"),
            ("COUNTERSIGN_API_KEY", "a-key-of-sixteen-or-more"),
        ]))
        .unwrap();
        assert_eq!(config.agent.demo_delay, Duration::ZERO);
        assert_eq!(config.agent.approval_timeout, Duration::from_secs(5));
        assert_eq!(config.agent.browser_timeout, Duration::from_secs(7));
        assert_eq!(config.agent.text_timing, TextTimingSetting::Progressive);
        assert_eq!(config.agent.weather, WeatherSetting::Offline);
        assert_eq!(config.edge.max_body_bytes, 4096);
        assert_eq!(
            config.edge.body_bytes_per_address, 8192,
            "twice the largest body, unless set"
        );
        assert_eq!(
            config.edge.api_key.as_deref(),
            Some("a-key-of-sixteen-or-more")
        );
    }

    #[test]
    fn bad_countersign_variables_name_themselves() {
        for (var, value) in [
            ("COUNTERSIGN_DEMO_DELAY_MS", "fast"),
            ("COUNTERSIGN_APPROVAL_TIMEOUT_SECS", "0"),
            ("COUNTERSIGN_BROWSER_TIMEOUT_SECS", "-1"),
            ("COUNTERSIGN_TEXT_TIMING", "sometimes"),
            ("COUNTERSIGN_WEATHER", "cloudy"),
            ("COUNTERSIGN_MAX_BODY_BYTES", "12"),
            ("COUNTERSIGN_API_KEY", "short-key-15chr"),
            ("COUNTERSIGN_ALLOWED_HOSTS", "https://chat.example"),
            ("COUNTERSIGN_ALLOWED_ORIGINS", "chat.example"),
            ("COUNTERSIGN_IDLE_TIMEOUT_SECS", "0"),
            ("COUNTERSIGN_MAX_CONNECTIONS", "many"),
            ("COUNTERSIGN_CORS_CREDENTIALS", "yes"),
            ("COUNTERSIGN_SESSION_HOURS", "0"),
            ("COUNTERSIGN_MAX_MESSAGES", "0"),
            ("COUNTERSIGN_BODY_BYTES_PER_ADDRESS", "1048576"),
        ] {
            let err = Config::resolve(env_of(&[(var, value)])).unwrap_err();
            assert!(err.to_string().contains(var), "{var}: {err}");
        }
    }

    #[test]
    fn dotenv_files_are_read_with_comments_quotes_and_clear_errors() {
        let dir = std::env::temp_dir().join(format!("countersign-dotenv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(".env");
        std::fs::write(
            &file,
            "# c\nA=1\nexport B=\"two words\"\nC='x'\nD=value # a comment\nE=\"#not a comment\"\n",
        )
        .unwrap();
        let vars = read_dotenv(&file).unwrap();
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two words");
        assert_eq!(vars["C"], "x");
        assert_eq!(
            vars["D"], "value",
            "a comment after a value is not part of it"
        );
        assert_eq!(vars["E"], "#not a comment");

        std::fs::write(&file, "A=1\nthis is not a setting\n").unwrap();
        let err = read_dotenv(&file).unwrap_err().to_string();
        assert!(
            err.contains(".env") && err.contains("this is not a setting"),
            "{err}"
        );

        assert!(read_dotenv(&dir.join("missing.env")).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
