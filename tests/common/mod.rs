//! A Countersign server on a free loopback port with a deterministic runtime (demo model,
//! sequential ids, offline weather), for the scenario tests over real sockets.
#![allow(dead_code)]

#[cfg(unix)]
pub mod binary;
#[cfg(unix)]
pub mod people;
pub mod socket;
pub mod stream;

use std::{sync::Arc, time::Duration};

use countersign::models::demo::DemoModel;
use countersign::{
    agent::{
        Runtime, RuntimeSettings, TextTiming,
        clock::{SequentialIds, SystemClock},
        model::Model,
        store::MemoryStore,
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    },
    config::Config,
    server::{self, AppState},
};

/// How the test server is set up.
pub struct Opts {
    /// Pause between the demo model's words.
    pub delay: Duration,
    pub approval: Duration,
    pub browser: Duration,
    /// Extra `COUNTERSIGN_*` settings.
    pub env: Vec<(String, String)>,
    /// The model (default: the demo model with `delay`).
    pub model: Option<Arc<dyn Model>>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            delay: Duration::ZERO,
            approval: Duration::from_secs(60),
            browser: Duration::from_secs(10),
            env: Vec::new(),
            model: None,
        }
    }
}

/// A running server; it stops when dropped.
pub struct Server {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    pub state: AppState,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

pub async fn start(opts: Opts) -> Server {
    let env = opts.env.clone();
    let config =
        Config::resolve(move |k| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()))
            .expect("valid test configuration");
    let model = opts
        .model
        .unwrap_or_else(|| Arc::new(DemoModel::new(opts.delay)));
    let runtime = Runtime::builder(
        model,
        ToolRegistry::standard(&ToolSettings {
            approval_timeout: opts.approval,
            browser_timeout: opts.browser,
            weather: WeatherSource::Offline,
        }),
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        Arc::new(MemoryStore::default()),
        RuntimeSettings {
            text_timing: TextTiming::Hold,
            ..RuntimeSettings::default()
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    let bound = listener.local_addr().expect("bound");
    let state = AppState::with_runtime(config, runtime, bound)
        .await
        .expect("the state builds");
    let addr = bound.to_string();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let served = state.clone();
    tokio::spawn(async move {
        server::serve(listener, served, async {
            let _ = rx.await;
        })
        .await
        .ok();
    });
    Server {
        addr,
        state,
        _shutdown: tx,
    }
}

/// A new, empty database on the test cluster, as a URL; `None` when there is no cluster.
pub async fn fresh_postgres(name: &str) -> Option<String> {
    let Some(admin) = std::env::var("COUNTERSIGN_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        assert_ne!(
            std::env::var("COUNTERSIGN_REQUIRE_POSTGRES").as_deref(),
            Ok("1"),
            "COUNTERSIGN_REQUIRE_POSTGRES=1 but COUNTERSIGN_TEST_POSTGRES is not set"
        );
        eprintln!("skipped: COUNTERSIGN_TEST_POSTGRES is not set (scripts/pg.sh start)");
        return None;
    };
    let config =
        <tokio_postgres::Config as std::str::FromStr>::from_str(&admin).expect("a Postgres URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("the test cluster answers");
    let connection = tokio::spawn(connection);
    let database = format!("countersign_bin_{name}_{}", uuid::Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .await
        .expect("a database is created");
    drop(client);
    let _ = connection.await;
    let (base, _) = admin.rsplit_once('/').expect("the URL names a database");
    Some(format!("{base}/{database}"))
}
