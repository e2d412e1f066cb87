//! The load generator of `bench/run`: drives Countersign and the Node baseline through the same
//! two endpoints (`POST /api/chat` SSE, `GET /api/live` WebSocket) and prints one JSON object
//! with what it measured. Every time is taken at the client, with `Instant`, on loopback.
//!
//! ```text
//! loadgen stream       --base http://127.0.0.1:P [--prompt T] [--repeat 5] [--warmup 1]
//! loadgen ttfc         --base … [--n 300] [--warmup 20]
//! loadgen concurrency  --base … [--n 1000] [--connect-parallel 100]
//! loadgen sse-approval --base … [--n 300] [--warmup 10] [--image-bytes N] [--approve-base …]
//! loadgen bidi         --base … --pid PID [--n 1000] [--approve 300] [--parallel 128]
//!                      [--warmup 128] [--gc-url http://…/__bench/gc] [--settle-ms 2000]
//!                      [--socket-only 1] [--gap-ms 0] [--first TEXT] [--pad-bytes N]
//! loadgen ws-concurrency --base … [--n 1000] [--connect-parallel 100] [--prompt T]
//! loadgen growth     --base … --pid PID [--at 0,100,1000] [--samples 20] [--db PATH]
//! loadgen flood        --base … [--senders 2] [--messages 200000] [--body-mb 19]
//!                      [--seconds 10] [--probe-ms 50] [--pid PID]
//! loadgen voice        --base … --pid PID [--n 200] [--sessions 200] [--utterances 3]
//!                      [--speech-ms 1000]
//! loadgen fake-realtime --port P   (the zero-delay OpenAI Realtime the voice scenario uses)
//! ```
//!
//! Common: `--threads N` (tokio workers, default 1: the client takes at most one of the
//! machine's cores), `--timeout-s S` (per turn, default 60).

mod flood;
mod growth;
mod sse;
mod stats;
mod voice;
mod ws;

use std::{collections::HashMap, net::SocketAddr, process::ExitCode, time::Duration};

use serde_json::Value;

/// Errors are plain text: every one ends the run with a message naming what failed.
pub type Result<T> = std::result::Result<T, String>;

/// `--key value` options.
#[derive(Debug, Clone, Default)]
pub struct Opts(HashMap<String, String>);

impl Opts {
    fn parse(args: &[String]) -> Result<Opts> {
        let mut map = HashMap::new();
        let mut it = args.iter();
        while let Some(key) = it.next() {
            let Some(name) = key.strip_prefix("--") else {
                return Err(format!(
                    "unexpected argument {key:?} (options are --name value)"
                ));
            };
            let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            map.insert(name.to_string(), value.clone());
        }
        Ok(Opts(map))
    }

    pub fn str(&self, name: &str, default: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    pub fn opt(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    pub fn num(&self, name: &str, default: u64) -> Result<u64> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name} {v:?}: expected a whole number")),
        }
    }

    pub fn required(&self, name: &str) -> Result<String> {
        self.opt(name)
            .ok_or_else(|| format!("--{name} is required"))
    }

    /// `--base http://host:port` as a socket address.
    pub fn addr(&self) -> Result<SocketAddr> {
        parse_base(&self.required("base")?)
    }

    pub fn timeout(&self) -> Result<Duration> {
        Ok(Duration::from_secs(self.num("timeout-s", 60)?))
    }
}

/// `http://host:port` (or `ws://`) as a socket address.
pub fn parse_base(base: &str) -> Result<SocketAddr> {
    let hostport = base
        .trim_start_matches("http://")
        .trim_start_matches("ws://")
        .trim_end_matches('/');
    hostport
        .parse()
        .map_err(|e| format!("{base:?}: expected http://IP:PORT ({e})"))
}

/// A unique prefix for the chat ids of this invocation.
pub fn run_tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("bench-{}-{:x}", std::process::id(), nanos)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first().cloned() else {
        eprintln!(
            "usage: loadgen <stream|ttfc|concurrency|sse-approval|bidi|ws-concurrency|growth|flood|voice> --base http://IP:PORT [options] | loadgen fake-realtime --port P"
        );
        return ExitCode::from(2);
    };
    let opts = match Opts::parse(&args[1..]) {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("loadgen {command}: {e}");
            return ExitCode::from(2);
        }
    };
    let threads = opts.num("threads", 1).unwrap_or(1).max(1) as usize;
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("loadgen: cannot start tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: Result<Value> = runtime.block_on(async {
        match command.as_str() {
            "stream" => sse::stream(&opts).await,
            "ttfc" => sse::ttfc(&opts).await,
            "concurrency" => sse::concurrency(&opts).await,
            "sse-approval" => sse::approval(&opts).await,
            "bidi" => ws::bidi(&opts).await,
            "ws-concurrency" => ws::concurrency(&opts).await,
            "flood" => flood::flood(&opts).await,
            "growth" => growth::growth(&opts).await,
            "voice" => voice::voice(&opts).await,
            "fake-realtime" => voice::fake_realtime(&opts).await,
            other => Err(format!("unknown command {other:?}")),
        }
    });
    match result {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loadgen {command}: {e}");
            ExitCode::FAILURE
        }
    }
}
