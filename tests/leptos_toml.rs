//! The deployed server's site settings (ADR 0032): the real binary, started in a directory that
//! holds a `Leptos.toml`, listens where the file says and serves the site root it names; the
//! `LEPTOS_*` variables cargo-leptos passes still win over it; a file the server cannot use
//! stops the start with a message naming the file and what to fix.
#![cfg(all(feature = "ssr", unix))]

use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc::{self, RecvTimeoutError},
    time::Duration,
};

/// A fresh directory laid out as a deployment: `Leptos.toml` with `leptos_toml`, and a site
/// folder `site/` whose `robots.txt` says which one it is.
fn deployment(name: &str, leptos_toml: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "countersign-leptos-toml-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    site(&dir.join("site"), &format!("the site of {name}"));
    std::fs::write(dir.join("Leptos.toml"), leptos_toml).expect("Leptos.toml written");
    dir
}

/// A site folder at `root` whose `robots.txt` holds `marker`.
fn site(root: &Path, marker: &str) {
    std::fs::create_dir_all(root).expect("site dir");
    std::fs::write(root.join("robots.txt"), marker).expect("robots.txt written");
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

/// The binary in `dir` with no `LEPTOS_*` variable (`cargo leptos test` would pass its own).
fn countersign_in(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_countersign"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("COUNTERSIGN_DB", ":memory:")
        .env("COUNTERSIGN_WEATHER", "offline")
        .env("RUST_LOG", "warn")
        .current_dir(dir);
    command
}

/// A server that came up; killed when dropped.
struct Server {
    child: Child,
    /// The address its banner says to open (`http://host:port/`).
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Start {
    Listening(Server),
    Exited { code: Option<i32>, stderr: String },
}

/// Runs `command` until it prints its banner (it listens) or exits.
fn start(mut command: Command) -> Start {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the countersign binary starts");
    let stdout = child.stdout.take().expect("stdout piped");
    let mut stderr = child.stderr.take().expect("stderr piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (opened, open) = mpsc::channel();
    std::thread::spawn(move || {
        // Read to the end, so that the server never writes to a closed pipe.
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.trim().strip_prefix("open ") {
                let _ = opened.send(url.trim().to_owned());
            }
        }
    });
    match open.recv_timeout(Duration::from_secs(60)) {
        Ok(url) => Start::Listening(Server { child, url }),
        Err(RecvTimeoutError::Disconnected) => {
            let status = child.wait().expect("reaped");
            Start::Exited {
                code: status.code(),
                stderr: errors.join().unwrap_or_default(),
            }
        }
        Err(RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            panic!("the server neither listened nor exited within a minute");
        }
    }
}

fn listening(command: Command) -> Server {
    match start(command) {
        Start::Listening(server) => server,
        Start::Exited { code, stderr } => panic!("the server exited ({code:?}): {stderr}"),
    }
}

async fn robots(server: &Server) -> String {
    let response = reqwest::get(format!("{}robots.txt", server.url))
        .await
        .expect("the server answers");
    assert_eq!(response.status(), 200, "{}", server.url);
    response.text().await.expect("a body")
}

#[tokio::test]
async fn a_server_started_beside_a_leptos_toml_listens_and_serves_where_it_says() {
    let port = free_port();
    let dir = deployment(
        "placed",
        &format!("site-addr = \"127.0.0.1:{port}\"\nsite-root = \"site\"\n"),
    );
    let server = listening(countersign_in(&dir));
    assert_eq!(server.url, format!("http://127.0.0.1:{port}/"));
    assert_eq!(robots(&server).await, "the site of placed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_leptos_toml_named_by_countersign_leptos_toml_is_read_from_another_directory() {
    let port = free_port();
    let dir = deployment(
        "named",
        &format!("site-addr = \"127.0.0.1:{port}\"\nsite-root = \"site\"\n"),
    );
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("dir");
    // Relative paths in the file are taken from the working directory, as LEPTOS_SITE_ROOT's.
    site(
        &elsewhere.join("site"),
        "the site beside the working directory",
    );
    let mut command = countersign_in(&elsewhere);
    command.env("COUNTERSIGN_LEPTOS_TOML", dir.join("Leptos.toml"));
    let server = listening(command);
    assert_eq!(server.url, format!("http://127.0.0.1:{port}/"));
    assert_eq!(
        robots(&server).await,
        "the site beside the working directory"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_variables_cargo_leptos_passes_still_win_over_the_leptos_toml() {
    let (file_port, variable_port) = (free_port(), free_port());
    let dir = deployment(
        "overridden",
        &format!("site-addr = \"127.0.0.1:{file_port}\"\nsite-root = \"site\"\n"),
    );
    let built = dir.join("target-site");
    site(&built, "the site cargo-leptos built");
    let mut command = countersign_in(&dir);
    command
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{variable_port}"))
        .env("LEPTOS_SITE_ROOT", &built);
    let server = listening(command);
    assert_eq!(server.url, format!("http://127.0.0.1:{variable_port}/"));
    assert_eq!(robots(&server).await, "the site cargo-leptos built");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_leptos_toml_the_server_cannot_use_stops_the_start_saying_what_to_fix() {
    let dir = deployment("bad", "");
    let file = dir.join("Leptos.toml");
    for (text, named) in [
        ("site-addr = \"localhost\"\n", "`site-addr` = \"localhost\""),
        ("site-root = \"site\"\nsite-addr = 3000\n", "line 2"),
        ("site-addr = \"127.0.0.1:3000\n", "line 1"),
        (
            "output-name = \"other\"\n",
            "`output-name` cannot be set here",
        ),
        ("env = \"staging\"\n", "use dev or prod"),
    ] {
        std::fs::write(&file, text).expect("Leptos.toml written");
        let Start::Exited { code, stderr } = start(countersign_in(&dir)) else {
            panic!("the server started with a Leptos.toml of {text:?}");
        };
        assert_eq!(code, Some(2), "{text:?}: {stderr}");
        assert!(stderr.contains("Leptos.toml"), "{text:?}: {stderr}");
        assert!(stderr.contains(named), "{text:?}: {stderr}");
    }

    let missing = dir.join("no-such.toml");
    let mut command = countersign_in(&dir);
    command.env("COUNTERSIGN_LEPTOS_TOML", &missing);
    let Start::Exited { code, stderr } = start(command) else {
        panic!("the server started without the Leptos.toml it was told to read");
    };
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&*missing.to_string_lossy()) && stderr.contains("COUNTERSIGN_LEPTOS_TOML"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
