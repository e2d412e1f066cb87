//! The axum application: the router, and serving with graceful shutdown (the state the
//! handlers share is `crate::state`).
//!
//! `router` is separate from `serve` so tests drive the whole app with `tower::ServiceExt::oneshot`
//! without opening a socket, and `serve` takes the listener and the shutdown future so scenario
//! tests can run it on port 0 and stop it deterministically.

use std::{future::Future, sync::Arc};

use axum::{
    Router,
    extract::DefaultBodyLimit,
    routing::{get, post},
};
use leptos::prelude::provide_context;

pub use crate::transport::state::{AppState, StartupError};
pub use telemetry::{Telemetry, TelemetryError, init_tracing};

mod telemetry;
use crate::{
    agent::{Runtime, store::StoreNews},
    transport, ui,
};

/// Builds the whole application: the pages, the APIs, `/healthz`, `/readyz` and `/metrics`, and
/// the static site files.
///
/// The pages are plain routes (no client-side router: every link between them is a full page
/// load, see `ui::Page`); any other path is a site file (`transport::site`) or renders the app's
/// not-found page with a 404. Pages are never cached without asking (`no-cache`); HTML and JSON
/// are compressed on the way out (streams are not: an SSE chunk or a WebSocket frame leaves
/// when it is produced).
pub fn router(state: AppState) -> Router {
    use transport::site;

    // Server-rendered pages spawn their data loading on the tokio runtime.
    let _ = any_spawner::Executor::init_tokio();
    let api =
        transport::sse::routes().layer(DefaultBodyLimit::max(state.edge_settings.max_body_bytes));
    let with_state = {
        let state = state.clone();
        move || provide_context(state.clone())
    };
    let page = leptos_axum::render_app_to_stream_with_context(with_state, {
        let options = state.leptos_options.clone();
        let stylesheet: Arc<str> = state.site.css_href().into();
        move || ui::shell(options.clone(), stylesheet.clone())
    });
    let not_found = {
        let page = page.clone();
        site::Fallback::new(tower::service_fn(move |request| {
            let page = page.clone();
            async move { Ok(no_cache(page(request).await)) }
        }))
    };
    let mut router = Router::new()
        .merge(transport::ops::routes())
        .merge(api)
        .merge(transport::ws::routes())
        .merge(transport::app::routes());
    for path in ui::Page::PATHS {
        router = router.route(
            path,
            get(page.clone()).layer(axum::middleware::map_response(no_cache_async)),
        );
    }
    use transport::edge::{self, signin};
    router
        .route("/signin", get(signin::page).post(signin::submit))
        .route("/signout", post(signin::signout))
        .route("/welcome/{token}", get(transport::people::welcome))
        .route("/api/live/ticket", post(signin::ticket))
        .route(
            "/tools",
            get(transport::tools_page::page).layer(axum::middleware::map_response(no_cache_async)),
        )
        .merge(transport::audit::routes())
        // The page's verbs as Leptos server functions (transport::functions).
        .route("/api/fn/{*name}", post(transport::functions::handle))
        .fallback_service(site::service(state.site.clone(), not_found))
        // Outermost last: the host is checked first, then CORS answers preflights, then the
        // guard authenticates (transport::edge).
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            edge::guard,
        ))
        .layer(edge::cors::layer(
            &state.edge_settings.allowed_origins,
            state.edge_settings.cors_credentials,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            edge::check_host,
        ))
        .layer(compression())
        .layer(request_spans())
        .with_state(state)
}

type MakeSpan = fn(&axum::http::Request<axum::body::Body>) -> tracing::Span;
type OnResponse = fn(&axum::http::Response<axum::body::Body>, std::time::Duration, &tracing::Span);
type RequestSpans = tower_http::trace::TraceLayer<
    tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>,
    MakeSpan,
    (),
    OnResponse,
    (),
    (),
    (),
>;

/// A span per request (`http`), named by its route pattern (never the raw path, which may
/// carry a chat id), ended with the status; exported when tracing is (`telemetry`). Nothing
/// is logged per request.
fn request_spans() -> RequestSpans {
    fn span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
        let route = request
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map_or("(site file)", |path| path.as_str());
        tracing::info_span!(
            "http",
            method = %request.method(),
            route = %route,
            status = tracing::field::Empty,
        )
    }
    fn ended(
        response: &axum::http::Response<axum::body::Body>,
        _latency: std::time::Duration,
        span: &tracing::Span,
    ) {
        span.record("status", response.status().as_u16());
    }
    tower_http::trace::TraceLayer::new_for_http()
        .make_span_with(span as MakeSpan)
        .on_request(())
        .on_response(ended as OnResponse)
        .on_body_chunk(())
        .on_eos(())
        .on_failure(())
}

/// Marks a page as one the browser must check with the server before showing it again.
fn no_cache(mut response: axum::response::Response) -> axum::response::Response {
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static(transport::site::REVALIDATE),
    );
    response
}

async fn no_cache_async(response: axum::response::Response) -> axum::response::Response {
    no_cache(response)
}

/// Brotli or gzip for HTML and JSON bodies over 1 KiB, at a level that costs little CPU per
/// response (brotli's best would take milliseconds per page). Never for event streams or
/// upgrades, and never for the site's files: those are compressed once, at build time.
fn compression() -> tower_http::compression::CompressionLayer<
    tower_http::compression::predicate::And<
        tower_http::compression::predicate::SizeAbove,
        Documents,
    >,
> {
    use tower_http::compression::{
        CompressionLayer, CompressionLevel,
        predicate::{Predicate, SizeAbove},
    };
    CompressionLayer::new()
        .no_deflate()
        .no_zstd()
        .quality(CompressionLevel::Precise(4))
        .compress_when(SizeAbove::new(1024).and(Documents))
}

/// Responses worth compressing per request: pages and JSON (the audit export's JSON lines too).
#[derive(Debug, Clone, Copy)]
pub struct Documents;

impl tower_http::compression::predicate::Predicate for Documents {
    fn should_compress<B>(&self, response: &axum::http::Response<B>) -> bool
    where
        B: axum::body::HttpBody,
    {
        let content_type = response
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        ["text/html", "application/json", "application/x-ndjson"]
            .iter()
            .any(|t| content_type.starts_with(t))
    }
}

/// How often idle sessions are let go from memory (a session stays at least this long after its
/// turn ends, so a reconnecting client can still replay it).
const SESSION_SWEEP: std::time::Duration = std::time::Duration::from_secs(60);

/// How often an instance on a shared database looks for turns whose deadline passed and that no
/// instance took up (their instance died).
const OVERDUE_SWEEP: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves `state` on `listener` until `shutdown` completes, then lets in-flight requests finish.
/// `state` must have been built for the address `listener` is bound to (its host names and its
/// people's relying party follow it).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    if state.edge.hosts.addr() != addr {
        return Err(std::io::Error::other(format!(
            "the state was built for {} but the listener is bound to {addr}",
            state.edge.hosts.addr()
        )));
    }
    let setup_link = restore(&state).await?;
    // The audit chain is checked, then signed as it grows and once more at shutdown.
    let notary = state.start_notary(state.edge.shutdown.clone()).await;
    let runtime = state.runtime.clone();
    let facts = crate::agent::policy::ToolFacts::all(&runtime.tools);
    runtime.policy().recheck(&facts);
    crate::agent::policy::watch(
        runtime.policy().clone(),
        runtime.tools.clone(),
        runtime.clock.clone(),
    );
    println!("{}", banner(&state, addr));
    if let Some(link) = &setup_link {
        println!(
            "  First person (the admin): open {link}\n  (one-time; a new link is printed at each \
             start until someone has used one)"
        );
        tracing::info!("a set-up link was printed: nobody can manage people yet");
    }
    tracing::info!(%addr, hosts = %state.edge.hosts.describe(), "listening");
    start_background(&state).await;
    let edge = state.edge.clone();
    let timeouts = Timeouts {
        idle: state.edge_settings.idle_timeout,
        write: state.edge_settings.write_timeout,
    };
    accept(listener, router(state), shutdown, edge.clone(), timeouts).await;
    close(&edge, &runtime, notary).await;
    tracing::info!("stopped");
    Ok(())
}

/// What must be back before the first request: the set-up link of a passkeys server nobody can
/// manage yet (returned, printed with the banner), the sign-in sessions, the MCP servers' tools,
/// the grants and today's spending. Any of them failing stops the start.
async fn restore(state: &AppState) -> std::io::Result<Option<String>> {
    let setup_link = state
        .setup_link()
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    // Sign-in sessions need the store's secret: a store that cannot give it stops the start.
    if let Err(e) = state.edge.signins(state).await {
        return Err(std::io::Error::other(format!(
            "cannot load the sign-in sessions: {}",
            e.message
        )));
    }
    // MCP servers' tools join the registry before the first turn (and before the open turns
    // resume: an approval of an MCP tool must find it).
    state
        .mcp
        .start(
            state.runtime.tools.clone(),
            state.edge.shutdown.clone(),
            crate::transport::state::MCP_CONNECT_TIMEOUT,
        )
        .await;
    // Grants and today's spending come back before the first call is decided; the policy file
    // is followed from then on (and checked against the MCP servers' tools, now listed).
    let runtime = &state.runtime;
    if let Err(e) = runtime
        .policy()
        .restore(state.policy_store.clone(), runtime.clock.now_ms())
        .await
    {
        return Err(std::io::Error::other(format!(
            "cannot load the grants: {}",
            e.report()
        )));
    }
    Ok(setup_link)
}

/// The turns that were open when the server stopped resume, and the server's own tasks start:
/// the sweepers, following other instances and ended sign-ins, returning memory.
async fn start_background(state: &AppState) {
    let runtime = &state.runtime;
    match runtime.resume_unfinished().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            turns = n,
            "resumed the turns that were open when the server stopped"
        ),
        Err(e) => tracing::error!(
            error = &e as &dyn std::error::Error,
            "cannot resume the open turns"
        ),
    }
    runtime.spawn_sweeper(SESSION_SWEEP);
    runtime.spawn_overdue_sweeper(OVERDUE_SWEEP);
    runtime.follow_other_instances();
    follow_ended_signins(state);
    spawn_memory_return(runtime.clone());
}

/// After the last connection was accepted: a 1001 close for each open WebSocket and a moment
/// for the clients to answer it, the chunk log flushed, and the audit head signed as it stands
/// (the notary saw `shutdown`).
async fn close(
    edge: &crate::transport::edge::Edge,
    runtime: &crate::agent::Runtime,
    notary: Option<tokio::task::JoinHandle<()>>,
) {
    edge.shutdown.cancel();
    edge.sockets.close();
    if tokio::time::timeout(SOCKETS_CLOSE, edge.sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            open = edge.sockets.len(),
            "WebSockets still closing at shutdown"
        );
    }
    if let Some(log) = runtime.chunk_log() {
        log.flush_all();
    }
    if let Some(notary) = notary
        && let Err(e) = notary.await
    {
        tracing::error!(error = %e, "the audit notary stopped abnormally");
    }
}

/// How long shutdown waits for the WebSockets to close.
const SOCKETS_CLOSE: std::time::Duration = std::time::Duration::from_secs(5);

/// A connection's deadlines.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    /// Without a request (or its headers) this long, the connection is closed.
    idle: std::time::Duration,
    /// A write the client does not take this long fails the connection.
    write: std::time::Duration,
}

/// Gives memory that sessions leaving it freed back to the operating system, at most once a
/// second and only after sessions left. Rust's allocations go to jemalloc (`main.rs`), which
/// purges freed pages on its own; what the C side (SQLite's statements and page caches) freed
/// stays with glibc's allocator, which keeps freed pages for reuse: after a wave of sessions
/// that parked and left (ADR 0011) `malloc_trim` returns them (with glibc for everything, bench/:
/// at 1k idle sessions 7.2–10.7 → 6.1 KiB per session; a call takes 0.02–1 ms).
fn spawn_memory_return(runtime: Arc<Runtime>) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        let runtime = Arc::downgrade(&runtime);
        tokio::spawn(async move {
            let mut returned = 0;
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                let released = runtime.released_sessions();
                if released != returned {
                    returned = released;
                    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no
                    // preconditions and may be called from any thread at any time.
                    unsafe {
                        malloc_trim(0);
                    }
                }
            }
        });
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = runtime;
}

/// The accept loop: every connection is served by hyper's HTTP/1 directly (no protocol sniffing
/// in front), so an upgraded WebSocket gets its `TcpStream` back and an idle socket holds no
/// buffer (`transport::ws::socket`). A connection over the caps of `edge.connections` is closed
/// as soon as it is accepted; the others get the idle and write deadlines (`transport::edge`).
/// On `shutdown` it stops accepting, asks every connection to finish its request in flight and
/// waits for them.
async fn accept(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    edge: Arc<transport::edge::Edge>,
    timeouts: Timeouts,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tokio::sync::watch;
    use tower::ServiceExt;
    use transport::edge::connections::WriteDeadline;

    // `closing` tells the connections to finish; each holds a `done` receiver until it ended.
    let (closing, _) = watch::channel(false);
    let (done, _) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    let mut refused = RefusalLog::default();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let admission = match edge.connections.admit(peer) {
            Ok(admission) => admission,
            Err(refusal) => {
                refused.note(refusal, peer);
                // Closed at once: the descriptor is back before the next accept.
                drop(tcp);
                continue;
            }
        };
        // Chunks are small and latency-bound: without TCP_NODELAY, Nagle's algorithm and
        // delayed ACKs hold a lone chunk back ~40 ms (bench/: first chunk 43.7 → 0.82 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let app = app.clone();
        let held = admission.clone();
        let service = hyper::service::service_fn(move |mut request: axum::extract::Request<_>| {
            let extensions = request.extensions_mut();
            extensions.insert(axum::extract::ConnectInfo(peer));
            // A WebSocket made of this connection keeps its place (`ws::socket`).
            extensions.insert(held.clone());
            app.clone().oneshot(request)
        });
        let mut closing = closing.subscribe();
        let done = done.subscribe();
        tokio::spawn(async move {
            let io = TokioIo::new(WriteDeadline::new(tcp, timeouts.write));
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(timeouts.idle)
                .serve_connection(io, service)
                .with_upgrades();
            let mut connection = std::pin::pin!(connection);
            let result = tokio::select! {
                result = connection.as_mut() => result,
                // The only change ever sent is the one to `true`.
                Ok(()) = closing.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(admission);
            drop(done);
        });
    }
    // Not ready from now on (`/readyz`): a load balancer drains this instance while the
    // requests in flight finish.
    edge.draining.cancel();
    drop(listener);
    closing.send_replace(true);
    done.closed().await;
}

/// Connections refused for the caps, logged at most once a second (a flood is one line).
#[derive(Debug, Default)]
struct RefusalLog {
    last: Option<std::time::Instant>,
    since: u64,
}

impl RefusalLog {
    fn note(
        &mut self,
        refusal: transport::edge::connections::NotAdmitted,
        peer: std::net::SocketAddr,
    ) {
        use transport::edge::connections::NotAdmitted;
        self.since += 1;
        let now = std::time::Instant::now();
        if self
            .last
            .is_some_and(|l| now.duration_since(l) < std::time::Duration::from_secs(1))
        {
            return;
        }
        let why = match refusal {
            NotAdmitted::Full => "the server holds as many connections as it may",
            NotAdmitted::AddressFull => "this address holds as many connections as one may",
        };
        tracing::warn!(%peer, refused = self.since, "connections refused: {why}");
        self.last = Some(now);
        self.since = 0;
    }
}

/// An `accept` failure: a connection that went away before it was accepted is nobody's
/// problem; anything else (out of file descriptors) is logged and waited out for a second
/// instead of spinning.
async fn accept_error(error: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "cannot accept a connection");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
}

/// On a database several instances share: a sign-in session ended on another instance is
/// refused here too from its news on, and what it held open here ends (ADR 0025).
fn follow_ended_signins(state: &AppState) {
    use tokio::sync::broadcast::error::RecvError;
    let Some(mut news) = state.runtime.store.news() else {
        return;
    };
    let state = state.clone();
    tokio::spawn(async move {
        loop {
            match news.recv().await {
                Ok(StoreNews::SignIns | StoreNews::Missed) | Err(RecvError::Lagged(_)) => {}
                Ok(_) => continue,
                Err(RecvError::Closed) => return,
            }
            let now = state.runtime.clock.now_ms();
            if let Ok(Some(signins)) = state.edge.signins(&state).await {
                match signins.reload_ended(now).await {
                    // What they held open here ends too.
                    Ok(ended) => {
                        for id in ended {
                            state.runtime.people().holds().end_signin(&id);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e.report(), "cannot read the ended sign-ins again");
                    }
                }
            }
        }
    });
}

/// The one-screen start-up banner: where to open, which model answers, which transports exist.
pub fn banner(state: &AppState, addr: std::net::SocketAddr) -> String {
    format!(
        "\n  Countersign {version}\n\n  open       http://{addr}/\n  model      {model}\n  \
         transports SSE  POST /api/chat   (AI SDK v6 UI message stream)\n             \
         BIDI GET  /api/live   (WebSocket, many turns)\n  health     http://{addr}/healthz\n  \
         settings   {source}\n\n  Ctrl-C stops the server.\n",
        version = env!("CARGO_PKG_VERSION"),
        model = state.runtime.models().label(),
        source = state.config_source,
    )
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C received, shutting down"),
        () = terminate => tracing::info!("SIGTERM received, shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use axum::{body::Body, http::Request, http::StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn state() -> AppState {
        let env = |k: &str| (k == "COUNTERSIGN_DB").then(|| ":memory:".to_string());
        let config = Config::resolve(env).unwrap();
        let addr = config.site.site_addr;
        AppState::new(config, addr).await.unwrap()
    }

    async fn get(path: &str) -> (StatusCode, String, String) {
        let response = router(state().await)
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            content_type,
            String::from_utf8_lossy(&body).into_owned(),
        )
    }

    #[tokio::test]
    async fn healthz_reports_ok_and_the_model() {
        let (status, content_type, body) = get("/healthz").await;
        assert_eq!(status, StatusCode::OK);
        assert!(content_type.starts_with("application/json"));
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
        assert!(json["model"].as_str().unwrap().contains("demo model"));
        // Liveness: the database is not asked.
        assert_eq!(json["database"], serde_json::json!({"kind": "memory"}));
    }

    #[tokio::test]
    async fn readyz_asks_the_database_and_is_503_once_shutdown_begins() {
        let state = state().await;
        let ask = |path: &'static str| {
            router(state.clone()).oneshot(Request::get(path).body(Body::empty()).unwrap())
        };
        let response = ask("/readyz").await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["status"], "ok");
        assert_eq!(
            json["database"],
            serde_json::json!({"kind": "memory", "ok": true})
        );

        state.edge.draining.cancel();
        let response = ask("/readyz").await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["status"], "draining");
        // Still alive: a draining instance is not one to restart.
        assert_eq!(ask("/healthz").await.unwrap().status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn the_chat_page_is_server_rendered_with_its_hydration_scripts() {
        let (status, content_type, body) = get("/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(content_type.starts_with("text/html"));
        assert!(body.contains("<title>Countersign</title>"), "{body}");
        assert!(body.contains("data-testid=\"composer-input\""), "{body}");
        assert!(body.contains("/pkg/countersign.js"), "{body}");
        assert!(body.contains("/pkg/countersign.css"), "{body}");
    }

    async fn get_with(path: &str, headers: &[(&str, &str)]) -> axum::response::Response {
        let mut request = Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        router(state().await)
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn pages_are_compressed_and_never_cached_without_asking() {
        use std::io::Read;
        let response = get_with("/", &[("accept-encoding", "br, gzip")]).await;
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert_eq!(headers["content-encoding"], "br");
        assert_eq!(headers["cache-control"], "no-cache");
        assert!(
            headers
                .get_all("vary")
                .iter()
                .any(|v| v.to_str().unwrap().contains("accept-encoding")),
            "{headers:?}"
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let mut html = String::new();
        brotli::Decompressor::new(&body[..], 4096)
            .read_to_string(&mut html)
            .unwrap();
        assert!(html.contains("data-testid=\"composer-input\""), "{html}");
        assert!(
            body.len() * 2 < html.len(),
            "{} -> {}",
            html.len(),
            body.len()
        );

        let response = get_with("/api/app", &[("accept-encoding", "gzip")]).await;
        assert_eq!(response.headers()["content-encoding"], "gzip");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let mut json = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut json)
            .unwrap();
        let info: crate::ui::api::AppInfo = serde_json::from_str(&json).unwrap();
        assert!(!info.tools.is_empty());

        let response = get_with("/", &[]).await;
        assert!(response.headers().get("content-encoding").is_none());
        let response = get_with("/healthz", &[("accept-encoding", "gzip")]).await;
        assert!(
            response.headers().get("content-encoding").is_none(),
            "a body this small is not worth compressing"
        );
        let response = get_with("/no-such-page", &[("accept-encoding", "gzip")]).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()["cache-control"], "no-cache");
    }

    #[tokio::test]
    async fn unknown_pages_are_404() {
        let (status, _, _) = get("/no-such-page").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn the_audit_page_renders_the_filters_of_its_query() {
        let (status, _, body) = get("/audit?kind=denied&session=chat%2D7+b").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("data-testid=\"audit-filters\""), "{body}");
        assert!(body.contains("value=\"chat-7 b\""), "{body}");
        assert!(body.contains("value=\"denied\" selected"), "{body}");
        assert!(body.contains("data-testid=\"audit-empty\""), "{body}");
        assert!(
            body.contains("/api/audit/export?session=chat-7%20b&amp;kind=denied"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn the_page_data_endpoints_answer_json() {
        let (status, content_type, body) = get("/api/app").await;
        assert_eq!(status, StatusCode::OK);
        assert!(content_type.starts_with("application/json"));
        let info: crate::ui::api::AppInfo = serde_json::from_str(&body).unwrap();
        assert!(info.model.contains("demo model"), "{body}");
        assert!(
            info.tools
                .iter()
                .any(|t| t.name == "process_payment" && t.needs_approval)
        );
        // A chat nobody started is not found (the page shows it as a new chat).
        let (status, content_type, body) = get("/api/chats/chat%20never-seen").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(content_type.starts_with("application/json"));
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["code"], "chat_not_found", "{body}");
    }

    #[tokio::test]
    async fn banner_names_url_model_and_transports() {
        let text = banner(&state().await, "127.0.0.1:3000".parse().unwrap());
        assert!(text.contains("http://127.0.0.1:3000/"));
        assert!(text.contains("model"));
        assert!(text.contains("/api/chat"));
        assert!(text.contains("/api/live"));
    }
}
