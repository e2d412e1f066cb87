//! Opening the store: the connection budget (ADR 0033), the pool, the listening connection and
//! the instance's registration; and how a database is named in messages (never its password).

use std::{str::FromStr, sync::Arc, time::Duration};

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod};
use tokio_postgres::{NoTls, config::Host};

use super::{PostgresStore, instances, migrate::migrate};
use crate::agent::store::StoreError;

/// Connections one instance's pool keeps at most by default (`COUNTERSIGN_DB_POOL`). A commit
/// holds one for its transaction; a burst of commits beyond this waits for a connection rather
/// than opening more (Postgres' own limit is shared by every instance).
pub const POOL_SIZE: usize = 16;

/// The connections one instance opens to the database: its budget (ADR 0033) is `pool` + 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connections {
    /// The pool's size at most (`COUNTERSIGN_DB_POOL`, default [`POOL_SIZE`]): every read and
    /// commit takes one of these for one statement or one transaction, so the pool may go
    /// through PgBouncer in transaction mode.
    pub pool: usize,
    /// Where the one connection that `LISTEN`s for the other instances' news goes
    /// (`COUNTERSIGN_DB_LISTEN`; `None`: the database's own URL). `LISTEN` needs a session
    /// of its own: behind PgBouncer in transaction mode, point this at Postgres directly or at
    /// a session-mode pool.
    pub listen: Option<String>,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            pool: POOL_SIZE,
            listen: None,
        }
    }
}

/// The `application_name` each of an instance's connections gets (unless the URL names one), so
/// `pg_stat_activity` shows whose they are: `countersign <instance>`, and `… listen` for the
/// listening one.
fn name_connections(config: &mut tokio_postgres::Config, instance: &str, role: &str) {
    if config.get_application_name().is_none() {
        let short = &instance[..instance.len().min(12)];
        config.application_name(format!("countersign {short}{role}"));
    }
}

/// News kept for a runtime that is slow to read it; beyond, it is told it missed some.
const NEWS_BACKLOG: usize = 4_096;

/// How long connecting may take when the URL does not say (`connect_timeout`): a database that
/// drops packets fails start-up, and a commit, instead of hanging.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where `config` points, as `host:port/dbname` (several hosts comma-separated): what messages
/// name. The user and password are left out.
pub(super) fn target_of(config: &tokio_postgres::Config) -> String {
    let ports = config.get_ports();
    let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| match host {
            Host::Tcp(name) => format!("{name}:{}", port(i)),
            #[cfg(unix)]
            Host::Unix(dir) => format!("{}:{}", dir.display(), port(i)),
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "(no host)".to_owned()
    } else {
        hosts.join(",")
    };
    // Postgres' default database is the user's name.
    let dbname = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or_default();
    format!("{hosts}/{dbname}")
}

/// A connection to `target` could not be had: the database's error, not the pool's wrapping.
pub(super) fn cannot_reach(target: &str, e: PoolError) -> StoreError {
    let context = format!("cannot reach Postgres at {target}");
    match e {
        PoolError::Backend(e) => StoreError::caused_by(context, e),
        other => StoreError::caused_by(context, other),
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/dbname`, or
    /// libpq's `key=value` form), proves it answers, and migrates it.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        Self::open(url, &Connections::default()).await
    }

    /// [`PostgresStore::connect`] within the budget `connections`.
    pub async fn open(url: &str, connections: &Connections) -> Result<PostgresStore, StoreError> {
        let config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::caused_by("the Postgres URL is not valid", e))?;
        let listen = match &connections.listen {
            Some(url) => tokio_postgres::Config::from_str(url).map_err(|e| {
                StoreError::caused_by("the Postgres URL to listen on is not valid", e)
            })?,
            None => config.clone(),
        };
        Self::open_with(config, listen, connections.pool).await
    }

    /// [`PostgresStore::connect`] with the URL already parsed.
    #[cfg(test)]
    pub(super) async fn connect_with(
        config: tokio_postgres::Config,
    ) -> Result<PostgresStore, StoreError> {
        Self::open_with(config.clone(), config, POOL_SIZE).await
    }

    /// A pool of at most `pool_size` connections on `config`, and the listening one on
    /// `listen_config`.
    async fn open_with(
        mut config: tokio_postgres::Config,
        mut listen_config: tokio_postgres::Config,
        pool_size: usize,
    ) -> Result<PostgresStore, StoreError> {
        let target = target_of(&config);
        for config in [&mut config, &mut listen_config] {
            if config.get_connect_timeout().is_none() {
                config.connect_timeout(CONNECT_TIMEOUT);
            }
        }
        let instance: Arc<str> = Arc::from(uuid::Uuid::new_v4().simple().to_string());
        name_connections(&mut config, &instance, "");
        name_connections(&mut listen_config, &instance, " listen");
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .build()
            .map_err(|e| StoreError::caused_by("cannot set up the Postgres connection pool", e))?;
        let mut client = pool.get().await.map_err(|e| cannot_reach(&target, e))?;
        migrate(&mut client).await?;
        drop(client);
        instances::register(&pool, &instance).await?;
        let stop = tokio_util::sync::CancellationToken::new();
        let (news, _) = tokio::sync::broadcast::channel(NEWS_BACKLOG);
        instances::spawn_heartbeat(pool.clone(), instance.clone(), stop.clone());
        let (ready, listening) = tokio::sync::oneshot::channel();
        let (texts, text_changes) = instances::TextGroups::new();
        instances::spawn_listener(
            listen_config,
            instances::Listening {
                me: instance.clone(),
                news: news.clone(),
                texts: texts.clone(),
                text_changes,
            },
            stop.clone(),
            ready,
        );
        // News sent from now on reaches this instance (a listener that cannot start keeps
        // trying: the store works without news, only later).
        if tokio::time::timeout(CONNECT_TIMEOUT, listening)
            .await
            .is_err()
        {
            tracing::warn!(database = %target, "not listening to the other instances yet");
        }
        tracing::info!(database = %target, %instance, "Postgres store ready");
        Ok(PostgresStore {
            pool,
            target: target.into(),
            versions: Arc::default(),
            instance,
            news,
            texts,
            reserving: Arc::default(),
            _background: Arc::new(stop.drop_guard()),
        })
    }
}
