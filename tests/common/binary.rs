//! The real `countersign` binary on a free loopback port, with a clean environment: for the
//! tests that kill it (SIGKILL) and start it again on the same database. Killed when dropped.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

pub struct Binary {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

impl Binary {
    /// Starts the binary with only `PATH`, `HOME`, the site settings and `env`
    /// (`RUST_LOG` from `TEST_SERVER_LOG`, default `warn`), and waits for `/healthz`.
    pub async fn start(env: &[(&str, String)]) -> Binary {
        Self::start_with(env, None).await
    }

    /// [`Binary::start`], with what the binary prints to stdout sent, line by line, to `lines`.
    #[allow(dead_code)]
    pub async fn start_printing(
        env: &[(&str, String)],
        lines: std::sync::mpsc::Sender<String>,
    ) -> Binary {
        Self::start_with(env, Some(lines)).await
    }

    async fn start_with(
        env: &[(&str, String)],
        lines: Option<std::sync::mpsc::Sender<String>>,
    ) -> Binary {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("bound").port()
        };
        let site = std::env::temp_dir().join("countersign-binary-site");
        std::fs::create_dir_all(&site).expect("site dir");
        // The binary cargo built for this test, unless `COUNTERSIGN_TEST_BINARY` names a copy (a
        // target directory several checkouts share may have rebuilt it from other sources).
        let program = std::env::var_os("COUNTERSIGN_TEST_BINARY")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_countersign").into());
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
            .env("LEPTOS_SITE_ROOT", &site)
            .env(
                "RUST_LOG",
                std::env::var("TEST_SERVER_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(if lines.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the countersign binary starts");
        if let (Some(lines), Some(stdout)) = (lines, child.stdout.take()) {
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                {
                    if lines.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let binary = Binary {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = reqwest::get(format!("{}/healthz", binary.base)).await
                && r.status().is_success()
            {
                return binary;
            }
            assert!(Instant::now() < deadline, "the server did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The server's process id (its `/proc/<pid>/status` tells its memory).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill9(mut self) {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("reaped");
    }

    /// `POST /api/chat`: the status, the chunks, and the raw body.
    pub async fn chat(&self, body: Value) -> (u16, Vec<Value>, String) {
        self.chat_in(body, None).await
    }

    /// [`Binary::chat`] in `dialect` (`x-countersign-dialect`; `None`: the default).
    pub async fn chat_in(&self, body: Value, dialect: Option<&str>) -> (u16, Vec<Value>, String) {
        let mut request = reqwest::Client::new()
            .post(format!("{}/api/chat", self.base))
            .json(&body);
        if let Some(dialect) = dialect {
            request = request.header("x-countersign-dialect", dialect);
        }
        let response = request.send().await.expect("request sent");
        let status = response.status().as_u16();
        let text = tokio::time::timeout(Duration::from_secs(30), response.text())
            .await
            .expect("the response ends")
            .expect("a body");
        let chunks = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        (status, chunks, text)
    }

    /// The audit log of `chat`, oldest first.
    pub async fn audit(&self, chat: &str) -> Vec<Value> {
        let text = reqwest::get(format!("{}/api/audit/export?session={chat}", self.base))
            .await
            .expect("export")
            .text()
            .await
            .expect("body");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("JSONL"))
            .collect()
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
