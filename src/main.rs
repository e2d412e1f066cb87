//! The `countersign` server binary: configuration → state → router → serve, until Ctrl-C/SIGTERM.

#[cfg(feature = "ssr")]
#[tokio::main]
async fn main() -> std::process::ExitCode {
    use countersign::{config::Config, server};

    server::init_tracing();
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
    let state = match server::AppState::new(config) {
        Ok(state) => state,
        Err(e) => {
            eprintln!("countersign: cannot start: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match server::serve(listener, state, server::shutdown_signal()).await {
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
