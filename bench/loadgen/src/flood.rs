//! Large bodies against the rest (issue #33): while `--senders` clients, each from its own
//! loopback address (127.0.0.2, .3, …), post large chat bodies (`--messages` small messages,
//! about `--body-mb` MB each) one after another for `--seconds`, another client on 127.0.0.1
//! asks `GET /healthz` every `--probe-ms`. `/healthz` is timed first on the idle server, then
//! during the flood; the answer reports both, the bodies sent and the statuses they got, and the
//! server's peak resident memory (`--pid`) over its memory before.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, header};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpSocket, TcpStream};

use crate::{
    Opts, Result,
    stats::{ms, summary},
};

/// A chat body of `count` messages of about `bytes` in all, the last one the person's.
fn body(chat: &str, count: usize, bytes: usize) -> Bytes {
    let text = "x".repeat((bytes / count.max(1)).saturating_sub(70).max(1));
    let mut out = format!(r#"{{"id":"{chat}","trigger":"submit-message","messages":["#);
    for i in 0..count.saturating_sub(1) {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        out.push_str(&format!(
            r#"{{"id":"m{i}","role":"{role}","parts":[{{"type":"text","text":"{text}"}}]}},"#
        ));
    }
    out.push_str(r#"{"id":"new","role":"user","parts":[{"type":"text","text":"hello"}]}]}"#);
    Bytes::from(out)
}

/// A connection to `addr` from `from`.
async fn connect(from: IpAddr, addr: SocketAddr) -> Result<TcpStream> {
    let socket = TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket
        .bind(SocketAddr::new(from, 0))
        .map_err(|e| format!("bind {from}: {e}"))?;
    let tcp = socket
        .connect(addr)
        .await
        .map_err(|e| format!("connect {addr} from {from}: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(tcp)
}

/// Posts `body` from `from` until `until`, a new connection each time: the statuses seen.
async fn sender(
    from: IpAddr,
    addr: SocketAddr,
    body: Bytes,
    until: Instant,
) -> Result<BTreeMap<u16, u64>> {
    let mut statuses = BTreeMap::new();
    while Instant::now() < until {
        let tcp = connect(from, addr).await?;
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let request = Request::post("/api/chat")
            .header(header::HOST, addr.to_string())
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))
            .map_err(|e| e.to_string())?;
        let response = send
            .send_request(request)
            .await
            .map_err(|e| format!("request: {e}"))?;
        *statuses.entry(response.status().as_u16()).or_default() += 1;
        // Read the answer to its end (a turn's stream, or a refusal).
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?;
    }
    Ok(statuses)
}

/// `GET /healthz` every `every` until `until` on one keep-alive connection: the latencies (ms).
async fn probe(addr: SocketAddr, every: Duration, until: Instant) -> Result<Vec<f64>> {
    let tcp = connect(IpAddr::V4(Ipv4Addr::LOCALHOST), addr).await?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < until {
        tick.tick().await;
        let request = Request::get("/healthz")
            .header(header::HOST, addr.to_string())
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        send.ready().await.map_err(|e| format!("not ready: {e}"))?;
        let sent = Instant::now();
        let response = send
            .send_request(request)
            .await
            .map_err(|e| format!("healthz: {e}"))?;
        response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("healthz body: {e}"))?;
        samples.push(ms(sent.elapsed()));
    }
    Ok(samples)
}

/// A field of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`).
fn memory(pid: u64, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub async fn flood(opts: &Opts) -> Result<Value> {
    let addr = opts.addr()?;
    let senders = opts.num("senders", 2)? as u8;
    let messages = opts.num("messages", 200_000)? as usize;
    let bytes = (opts.num("body-mb", 19)? * 1_000_000) as usize;
    let seconds = Duration::from_secs(opts.num("seconds", 10)?);
    let every = Duration::from_millis(opts.num("probe-ms", 50)?);
    let pid = opts.opt("pid").and_then(|p| p.parse::<u64>().ok());

    let idle = probe(addr, every, Instant::now() + seconds / 2).await?;
    let before = pid.and_then(|p| memory(p, "VmRSS"));
    if let Some(pid) = pid {
        // Reset the peak to what the server holds now, so the peak is the flood's.
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    }
    let until = Instant::now() + seconds;
    let payload = body("flood", messages, bytes);
    let body_bytes = payload.len();
    let tasks: Vec<_> = (0..senders)
        .map(|i| {
            let from = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + i));
            tokio::spawn(sender(from, addr, payload.clone(), until))
        })
        .collect();
    let during = probe(addr, every, until).await?;
    let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
    for task in tasks {
        for (status, n) in task.await.map_err(|e| e.to_string())?? {
            *statuses.entry(status).or_default() += n;
        }
    }
    let peak = pid.and_then(|p| memory(p, "VmHWM"));
    Ok(json!({
        "senders": senders,
        "messages_per_body": messages,
        "body_bytes": body_bytes,
        "statuses": statuses,
        "healthz_idle_ms": summary(&idle),
        "healthz_during_ms": summary(&during),
        "rss_before_bytes": before,
        "rss_peak_rise_bytes": before.zip(peak).map(|(b, p)| p.saturating_sub(b)),
    }))
}
