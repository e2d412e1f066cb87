//! The `countersign` server binary: configuration → state → router → serve, until Ctrl-C/SIGTERM.

/// jemalloc instead of glibc's allocator. A server holding thousands of idle sessions keeps a
/// few small long-lived objects per session that were allocated among the much larger, short
/// lived ones of the turns that parked them; glibc's heaps then keep a partly used page per
/// session. jemalloc keeps objects of one size class together in their own pages and, with the
/// settings below, gives freed pages back to the system one second after they were last used,
/// from a background thread. ADR 0013; bench/, idle paused sessions, median of 5 runs: at 1k
/// 5.2 → 4.5 KiB each, at 10k 2.4 → 2.0 KiB.
#[cfg(all(feature = "ssr", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at start (`malloc_conf`; `_RJEM_MALLOC_CONF` in the
/// environment still overrides them): purge freed pages after 1 s, at once when only "muzzy"
/// (already advised away), on a background thread rather than inside a request; and keep only
/// objects up to 1 KiB in the per-thread caches, whose bigger slots an idle thread never gives
/// back (ADR 0013).
#[cfg(all(feature = "ssr", not(target_env = "msvc")))]
#[unsafe(export_name = "_rjem_malloc_conf")]
#[allow(non_upper_case_globals)]
static malloc_conf: JemallocConf = JemallocConf(
    c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,tcache_max:1024".as_ptr(),
);

/// A C string pointer jemalloc reads at start.
#[cfg(all(feature = "ssr", not(target_env = "msvc")))]
#[repr(transparent)]
struct JemallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, immutable for the life of the process.
#[cfg(all(feature = "ssr", not(target_env = "msvc")))]
unsafe impl Sync for JemallocConf {}

#[cfg(feature = "ssr")]
#[tokio::main]
async fn main() -> std::process::ExitCode {
    use countersign::{config::Config, server};

    // `countersign policy check|test …`: the policy file, loaded and decided as the server
    // would, without starting it.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("policy") {
        let report = countersign::agent::policy::cli::run(&args[1..]);
        print!("{}", report.output);
        return std::process::ExitCode::from(report.code);
    }
    // `countersign audit verify <export|receipt>`: an audit export or a receipt checked
    // offline (ADR 0029).
    if args.first().map(String::as_str) == Some("audit") {
        let report = countersign::agent::audit::cli::run(&args[1..]);
        print!("{}", report.output);
        return std::process::ExitCode::from(report.code);
    }

    let telemetry = match server::init_tracing() {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("countersign: configuration error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let config = match Config::load() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("countersign: configuration error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let addr = config.site.site_addr;
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("countersign: cannot listen on {addr}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let bound = match listener.local_addr() {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("countersign: cannot tell where it listens ({addr}): {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let state = match server::AppState::new(config, bound).await {
        Ok(state) => state,
        Err(e) => {
            eprintln!("countersign: cannot start: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let served = server::serve(listener, state, server::shutdown_signal()).await;
    if telemetry.exporting() {
        // The batch exporter's last spans leave before the process does.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("countersign: server error: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// The binary only exists for the server build; the wasm client starts in `lib.rs`'s `hydrate`.
#[cfg(not(feature = "ssr"))]
fn main() {}
