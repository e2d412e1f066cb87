//! Live text across instances (issue #35 item 3, ADR 0043): a browser attached to instance B
//! sees the text of a turn running on instance A word by word as A writes it — not in the
//! batches A's stored log is written in (every 250 ms) — in order, each word once, also when
//! the news that carries the words is lost on the way.
//!
//! Needs `COUNTERSIGN_TEST_POSTGRES` (see tests/postgres.rs).
#![cfg(all(feature = "ssr", unix))]

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use crate::common;
use common::{binary::Binary, fresh_postgres, stream::user};

/// Starts an instance on `url` with the demo model writing a word every `delay_ms`.
async fn start(url: &str, delay_ms: u64) -> Binary {
    Binary::start(&[
        ("COUNTERSIGN_DB", url.to_owned()),
        ("COUNTERSIGN_DEMO_DELAY_MS", delay_ms.to_string()),
        ("COUNTERSIGN_WEATHER", "offline".to_owned()),
    ])
    .await
}

/// The chunks of `request`'s SSE response as they come, each with when it came.
fn timed_chunks(request: reqwest::RequestBuilder) -> UnboundedReceiver<(Instant, Value)> {
    let (tx, rx) = unbounded_channel();
    tokio::spawn(async move {
        use futures::StreamExt;
        let response = request.send().await.expect("the server answers");
        let mut body = response.bytes_stream();
        let mut pending = Vec::new();
        while let Some(Ok(bytes)) = body.next().await {
            let at = Instant::now();
            pending.extend_from_slice(&bytes);
            while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = pending.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
                    if let Ok(chunk) = serde_json::from_str(data)
                        && tx.send((at, chunk)).is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// The next chunk of `chunks`, or `None` once the stream ended.
async fn next(chunks: &mut UnboundedReceiver<(Instant, Value)>) -> Option<(Instant, Value)> {
    tokio::time::timeout(Duration::from_secs(30), chunks.recv())
        .await
        .expect("a chunk or the end within 30 s")
}

/// The `text-delta` chunks among `chunks`: when each came, and its text.
fn deltas(chunks: &[(Instant, Value)]) -> Vec<(Instant, String)> {
    chunks
        .iter()
        .filter(|(_, c)| c["type"] == "text-delta")
        .map(|(at, c)| (*at, c["delta"].as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// Cuts every instance's listening connection on `database` (as a network fault would): news
/// sent until it is back is lost. How many were cut.
async fn cut_listeners(admin: &str, database: &str) -> u64 {
    let config = <tokio_postgres::Config as std::str::FromStr>::from_str(admin).expect("a URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("the test cluster answers");
    let connection = tokio::spawn(connection);
    let cut = client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name LIKE 'countersign % listen'",
            &[&database],
        )
        .await
        .expect("pg_terminate_backend")
        .len() as u64;
    drop(client);
    let _ = connection.await;
    cut
}

#[tokio::test]
async fn a_reader_on_another_instance_sees_each_word_as_it_is_written_in_order_once_after_lost_news()
 {
    let Some(url) = fresh_postgres("livetext").await else {
        return;
    };
    let admin = std::env::var("COUNTERSIGN_TEST_POSTGRES").expect("set when a database was made");
    let database = url.rsplit('/').next().expect("a database name").to_owned();
    const WORDS: usize = 150;
    let (a, b) = tokio::join!(start(&url, 30), start(&url, 30));
    let chat = "live-text";
    let mut on_a = timed_chunks(
        reqwest::Client::new()
            .post(format!("{}/api/chat", a.base))
            .json(&user(chat, &format!("/lorem {WORDS}"))),
    );
    let mut seen_a = Vec::new();
    while let Some(chunk) = next(&mut on_a).await {
        let first_text = chunk.1["type"] == "text-delta";
        seen_a.push(chunk);
        if first_text {
            break;
        }
    }
    // The person's other tab attaches through B while A writes.
    let attached = Instant::now();
    let mut on_b =
        timed_chunks(reqwest::Client::new().get(format!("{}/api/chat/{chat}/stream", b.base)));
    let (mut seen_b, mut cut_at) = (Vec::new(), None);
    loop {
        tokio::select! {
            chunk = next(&mut on_b) => {
                let Some(chunk) = chunk else { break };
                seen_b.push(chunk);
                // A third of the way, the news in flight is lost.
                if cut_at.is_none() && deltas(&seen_b).len() == WORDS / 3 {
                    assert_eq!(cut_listeners(&admin, &database).await, 2);
                    cut_at = Some(Instant::now());
                }
            }
            chunk = next(&mut on_a), if seen_a.last().is_none_or(|(_, c)| c["type"] != "finish") => {
                seen_a.extend(chunk);
            }
        }
    }
    while let Some(chunk) = next(&mut on_a).await {
        seen_a.push(chunk);
    }
    let cut_at = cut_at.expect("the listeners were cut");
    let (text_a, text_b) = (deltas(&seen_a), deltas(&seen_b));
    assert!(text_a.len() >= WORDS, "{} deltas", text_a.len());
    // Every word once, in order: B's deltas are A's.
    let words = |d: &[(Instant, String)]| d.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>();
    assert_eq!(words(&text_b), words(&text_a));
    assert!(seen_b.iter().any(|(_, c)| c["type"] == "finish"));
    assert!(
        !seen_b.iter().any(|(_, c)| c["type"] == "error"),
        "{seen_b:?}"
    );

    // How far B is behind A per word is measured by `bench/run --only livetext` (ADR 0043: p99
    // 4.83 ms against 261 ms when B read the stored log every 250 ms), never asserted here: a
    // timed test fails on a busy machine. It is printed, for whoever reads this run.
    let lags: Vec<Duration> = text_a
        .iter()
        .zip(&text_b)
        .filter(|((at_a, _), _)| *at_a > attached + Duration::from_millis(300) && *at_a < cut_at)
        .map(|((at_a, _), (at_b, _))| at_b.saturating_duration_since(*at_a))
        .collect();
    if let (Some(first), Some(last)) = (lags.iter().min(), lags.iter().max()) {
        eprintln!(
            "lag of B behind A over {} words: from {first:?} to {last:?}",
            lags.len()
        );
    }
    // After the loss, B caught up from the stored log and went on before A's turn ended: the
    // words A wrote well after the cut reached B while A was still writing.
    let finish_a = seen_a
        .iter()
        .find(|(_, c)| c["type"] == "finish")
        .map(|(at, _)| *at)
        .expect("A's turn finished");
    let later = text_a
        .iter()
        .position(|(at, _)| *at > cut_at + Duration::from_millis(2_000))
        .expect("A wrote for 2 s after the cut");
    assert!(
        text_b[later].0 < finish_a,
        "B got word {later} only at the end of A's turn"
    );
}
