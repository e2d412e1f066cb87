//! The edge over real sockets (ADR 0016): no web page, key guesser or slow client can
//! countersign, starve or stall the server. Each test sends what an attacker or a broken client
//! would and checks what the server does and that nothing changed.
#![cfg(all(feature = "ssr", unix))]

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};
use tokio_tungstenite::tungstenite::{
    Message,
    protocol::{CloseFrame, frame::coding::CloseCode},
};

use crate::common;

const KEY: &str = "edge-test-key-0123456789";

async fn server(env: &[(&str, &str)]) -> common::Server {
    server_with_delay(Duration::from_millis(2), env).await
}

async fn server_with_delay(delay: Duration, env: &[(&str, &str)]) -> common::Server {
    common::start(common::Opts {
        delay,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..common::Opts::default()
    })
    .await
}

/// A TCP connection to `addr` from the loopback address `from` (127.0.0.x).
async fn connect_from(from: &str, addr: &str) -> TcpStream {
    try_connect_from(from, addr, None).await.unwrap()
}

async fn try_connect_from(
    from: &str,
    addr: &str,
    receive_buffer: Option<u32>,
) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    if let Some(size) = receive_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    socket.bind(format!("{from}:0").parse::<SocketAddr>().unwrap())?;
    socket.connect(addr.parse().unwrap()).await
}

/// Sends a raw HTTP/1.1 request (closing the connection) and returns the whole answer, or the
/// head of a `101 Switching Protocols` (whose connection stays open).
async fn raw(addr: &str, from: &str, request: String) -> String {
    let mut tcp = connect_from(from, addr).await;
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = async {
        let mut buffer = [0u8; 4096];
        loop {
            match tcp.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
            if complete(&answer) {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether `answer` holds a whole response: a 101's head, or a head and as much body as its
/// `Content-Length` says (a kept-alive connection stays open after it).
fn complete(answer: &[u8]) -> bool {
    let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
    if head.starts_with("http/1.1 101") {
        return true;
    }
    head.lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .is_some_and(|length| answer.len() >= end + 4 + length)
}

fn get(path: &str, host: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

fn post_json(path: &str, host: &str, extra: &str, body: &Value) -> String {
    let body = body.to_string();
    format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn upgrade(path: &str, host: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{extra}\r\n"
    )
}

fn user(text: &str) -> Value {
    json!({"id": format!("u-{text}"), "role": "user", "parts": [{"type": "text", "text": text}]})
}

#[tokio::test]
async fn a_foreign_host_is_refused_everywhere_with_or_without_the_key() {
    let server = server(&[("COUNTERSIGN_API_KEY", KEY)]).await;
    let addr = server.addr.clone();
    let port = addr.rsplit(':').next().unwrap().to_string();
    // The DNS-rebinding page: its own name in Host, and the matching Origin.
    let evil = format!("attacker.example:{port}");
    let origin = format!("Origin: http://{evil}\r\n");
    let bearer = format!("Authorization: Bearer {KEY}\r\n");
    let chat = json!({"id": "rebind", "messages": [user("Send $50 to Hanako")]});
    for (what, request) in [
        ("the page", get("/", &evil, &origin)),
        (
            "the audit log",
            get("/api/audit", &evil, &format!("{origin}{bearer}")),
        ),
        ("a chat", get("/api/chats/victim", &evil, &bearer)),
        (
            "a turn",
            post_json("/api/chat", &evil, &format!("{origin}{bearer}"), &chat),
        ),
        (
            "the WebSocket",
            upgrade("/api/live", &evil, &format!("{origin}{bearer}")),
        ),
        ("the seed's WebSocket", upgrade("/live", &evil, &origin)),
        (
            "a preflight",
            format!(
                "OPTIONS /api/chat HTTP/1.1\r\nHost: {evil}\r\n{origin}Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"
            ),
        ),
        ("a site file", get("/favicon.svg", &evil, "")),
        ("health", get("/healthz", &evil, "")),
    ] {
        let answer = raw(&addr, "127.0.0.1", request).await;
        assert_eq!(status(&answer), 421, "{what}: {answer}");
        assert!(answer.contains("host_not_allowed"), "{what}: {answer}");
    }
    assert!(
        server
            .state
            .runtime
            .existing_session("rebind")
            .await
            .unwrap()
            .is_none(),
        "no turn started"
    );
    // The server's own names still work.
    for host in [addr.clone(), format!("localhost:{port}")] {
        let answer = raw(&addr, "127.0.0.1", get("/healthz", &host, "")).await;
        assert_eq!(status(&answer), 200, "{host}: {answer}");
    }
}

#[tokio::test]
async fn extra_hosts_are_allowed_by_name() {
    let server = server(&[(
        "COUNTERSIGN_ALLOWED_HOSTS",
        "chat.example.com, proxy.test:8443",
    )])
    .await;
    for (host, expected) in [
        ("chat.example.com", 200),
        ("chat.example.com:443", 200),
        ("proxy.test:8443", 200),
        ("proxy.test:8444", 421),
        ("other.example.com", 421),
    ] {
        let answer = raw(&server.addr, "127.0.0.1", get("/healthz", host, "")).await;
        assert_eq!(status(&answer), expected, "{host}: {answer}");
    }
}

#[tokio::test]
async fn a_token_list_upgrade_is_an_upgrade_to_the_origin_check_and_the_rate_limit() {
    let server = server(&[("COUNTERSIGN_IP_RATE", "3")]).await;
    let addr = server.addr.clone();
    let h2c = |extra: &str| {
        format!(
            "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade, HTTP2-Settings\r\n\
             Upgrade: h2c, websocket\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{extra}\r\n"
        )
    };
    let foreign = raw(&addr, "127.0.0.1", h2c("Origin: https://evil.example\r\n")).await;
    assert_eq!(status(&foreign), 403, "{foreign}");
    assert!(foreign.contains("origin_not_allowed"), "{foreign}");
    // From the server's own origin it is a WebSocket, and counts against the address's limit.
    let mut sockets = Vec::new();
    for _ in 0..3 {
        let mut tcp = connect_from("127.0.0.1", &addr).await;
        tcp.write_all(h2c(&format!("Origin: http://{addr}\r\n")).as_bytes())
            .await
            .unwrap();
        let mut head = vec![0u8; 256];
        let n = tcp.read(&mut head).await.unwrap();
        assert!(
            head[..n].starts_with(b"HTTP/1.1 101"),
            "{}",
            String::from_utf8_lossy(&head[..n])
        );
        sockets.push(tcp);
    }
    let limited = raw(
        &addr,
        "127.0.0.1",
        h2c(&format!("Origin: http://{addr}\r\n")),
    )
    .await;
    assert_eq!(status(&limited), 429, "{limited}");
    // A malformed key or an HTTP/1.0 request is no WebSocket.
    let bad_key = raw(
        &addr,
        "127.0.0.2",
        format!(
            "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: c2hvcnQ=\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(status(&bad_key), 400, "{bad_key}");
    let old = raw(
        &addr,
        "127.0.0.2",
        upgrade("/api/live", &addr, "").replace("HTTP/1.1", "HTTP/1.0"),
    )
    .await;
    assert_eq!(status(&old), 400, "{old}");
}

#[tokio::test]
async fn key_guessing_is_throttled_per_address_and_the_right_key_waits_too() {
    let server = server(&[("COUNTERSIGN_API_KEY", KEY)]).await;
    let addr = server.addr.clone();
    let mut limited = 0;
    for i in 0..200 {
        let answer = raw(
            &addr,
            "127.0.0.1",
            get(
                "/api/audit",
                &addr,
                &format!("X-API-Key: wrong-key-number-{i:04}\r\n"),
            ),
        )
        .await;
        match status(&answer) {
            401 => {}
            429 => limited += 1,
            other => panic!("guess {i}: {other} {answer}"),
        }
    }
    assert!(
        limited >= 150,
        "most guesses were not even checked: {limited}"
    );
    // The right key from the guessing address: refused until the address may try again.
    let refused = raw(
        &addr,
        "127.0.0.1",
        get("/api/audit", &addr, &format!("X-API-Key: {KEY}\r\n")),
    )
    .await;
    assert_eq!(status(&refused), 429, "{refused}");
    let wait: u64 = refused
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("Retry-After");
    assert!(wait >= 1);
    // A wrong key in the sign-in form waits the same way.
    let form = "key=guess&next=%2F";
    let signin = raw(
        &addr,
        "127.0.0.1",
        format!(
            "POST /signin HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    )
    .await;
    assert_eq!(status(&signin), 429, "{signin}");
    // Another address is not affected.
    for credential in [
        format!("X-API-Key: {KEY}\r\n"),
        format!("Authorization: Bearer {KEY}\r\n"),
    ] {
        let answer = raw(&addr, "127.0.0.2", get("/api/audit", &addr, &credential)).await;
        assert_eq!(status(&answer), 200, "{answer}");
    }
    // A cookie that signs nobody in is refused as signed out, from the waiting address too: it
    // cannot be guessed, so it is not throttled, and it counts for nothing.
    for from in ["127.0.0.3", "127.0.0.1"] {
        let forged = raw(
            &addr,
            from,
            get(
                "/api/audit",
                &addr,
                "Cookie: countersign_session=v1.abc.99999999999999.AAAA\r\n",
            ),
        )
        .await;
        assert_eq!(status(&forged), 401, "{forged}");
        assert!(forged.contains("\"signed_out\""), "{forged}");
    }
}

#[tokio::test]
async fn a_signed_in_session_works_until_signed_out_and_the_cookie_never_holds_the_key() {
    let server = server(&[("COUNTERSIGN_API_KEY", KEY)]).await;
    let addr = server.addr.clone();
    let form = format!("key={KEY}&next=%2Faudit");
    let signin = raw(
        &addr,
        "127.0.0.1",
        format!(
            "POST /signin HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{form}",
            form.len()
        ),
    )
    .await;
    assert_eq!(status(&signin), 303, "{signin}");
    let cookie_line = signin
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .expect("a cookie")
        .to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(cookie_line.contains(attribute), "{cookie_line}");
    }
    assert!(!cookie_line.contains(KEY));
    let pair = cookie_line["set-cookie:".len()..]
        .trim()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let cookie = format!("Cookie: {pair}\r\n");
    assert_eq!(
        status(&raw(&addr, "127.0.0.1", get("/api/audit", &addr, &cookie)).await),
        200
    );
    // A ticket for a WebSocket from another origin, once.
    let ticket = raw(
        &addr,
        "127.0.0.1",
        post_json("/api/live/ticket", &addr, &cookie, &json!({})),
    )
    .await;
    assert_eq!(status(&ticket), 200, "{ticket}");
    let body: Value = serde_json::from_str(ticket.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let ticket = body["ticket"].as_str().unwrap().to_string();
    let first = raw(
        &addr,
        "127.0.0.1",
        upgrade(&format!("/api/live?ticket={ticket}"), &addr, ""),
    )
    .await;
    assert!(first.starts_with("HTTP/1.1 101"), "{first}");
    let again = raw(
        &addr,
        "127.0.0.1",
        upgrade(&format!("/api/live?ticket={ticket}"), &addr, ""),
    )
    .await;
    assert_eq!(status(&again), 401, "single use: {again}");
    // Sign out: the same cookie is refused from then on.
    let signout = raw(
        &addr,
        "127.0.0.1",
        format!(
            "POST /signout HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\n{cookie}\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(status(&signout), 303, "{signout}");
    assert!(signout.contains("Max-Age=0"), "{signout}");
    assert_eq!(
        status(&raw(&addr, "127.0.0.1", get("/api/audit", &addr, &cookie)).await),
        401
    );
}

#[tokio::test]
async fn a_trickled_body_is_cut_off() {
    let server = server(&[
        ("COUNTERSIGN_BODY_GRACE_SECS", "1"),
        ("COUNTERSIGN_BODY_MIN_RATE", "1000"),
    ])
    .await;
    let addr = server.addr.clone();
    let mut tcp = connect_from("127.0.0.1", &addr).await;
    // A 20 MiB body, announced, then sent one byte a second.
    tcp.write_all(
        format!(
            "POST /api/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            20 * 1024 * 1024
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let trickle = async {
        loop {
            if tcp.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut peek = [0u8; 1];
            if let Ok(Ok(n)) =
                tokio::time::timeout(Duration::from_millis(1), tcp.peek(&mut peek)).await
                && n > 0
            {
                break;
            }
        }
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).into_owned()
    };
    let answer = tokio::time::timeout(Duration::from_secs(20), trickle)
        .await
        .expect("the server cut the body off");
    assert_eq!(status(&answer), 408, "{answer}");
    assert!(answer.contains("body_too_slow"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn an_idle_connection_is_closed() {
    let server = server(&[("COUNTERSIGN_IDLE_TIMEOUT_SECS", "1")]).await;
    let mut tcp = connect_from("127.0.0.1", &server.addr).await;
    let mut buffer = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buffer))
        .await
        .expect("closed by the server");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn a_websocket_reader_that_stops_reading_loses_its_socket_not_the_turn() {
    let server =
        server_with_delay(Duration::ZERO, &[("COUNTERSIGN_WRITE_TIMEOUT_SECS", "1")]).await;
    let addr = server.addr.clone();
    // A raw upgrade whose reader never reads: the kernel buffers fill, then the server's writes
    // wait.
    // A small receive window, so the server's side fills up soon.
    let mut tcp = try_connect_from("127.0.0.1", &addr, Some(4096))
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    tcp.write_all(upgrade("/api/live?text=hold", &addr, "").as_bytes())
        .await
        .unwrap();
    let mut head = vec![0u8; 256];
    let n = tcp.read(&mut head).await.unwrap();
    assert!(head[..n].starts_with(b"HTTP/1.1 101"));
    // Turn after turn of 100,000 words (~600 KB each, held: one frame) into a socket nobody reads: once the
    // kernel's buffers are full, the server's next frame waits, and after the write timeout the
    // socket is let go — while every turn it started finishes anyway.
    let mut turns = 0;
    while turns == 0 || server.state.runtime.followers.is_followed("stalled") {
        assert!(
            turns < 40,
            "40 turns (24 MB) and the socket still follows the chat"
        );
        let frame = json!({"type": "message", "id": "stalled",
                           "messages": [user(&format!("/lorem 100000 {turns}"))]})
        .to_string();
        if tcp.write_all(&masked_text(frame.as_bytes())).await.is_err() {
            break;
        }
        turns += 1;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let session = server
                .state
                .runtime
                .existing_session("stalled")
                .await
                .unwrap();
            let over = session
                .as_ref()
                .and_then(|s| s.turn_status())
                .is_some_and(|status| status.is_over());
            if over || !server.state.runtime.followers.is_followed("stalled") {
                break;
            }
            assert!(Instant::now() < deadline, "turn {turns} did not finish");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Time for a blocked write to reach its timeout.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(turns >= 2, "the buffers held only {turns} turn(s)?");
    let session = server
        .state
        .runtime
        .existing_session("stalled")
        .await
        .unwrap();
    assert!(
        session
            .and_then(|s| s.turn_status())
            .is_some_and(|status| status.is_over()),
        "the last turn finished without the socket"
    );
    // The person reconnects and gets the answer.
    let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/live"))
        .await
        .unwrap();
    socket
        .send(Message::Text(
            json!({"type": "resume", "id": "stalled", "received": 0})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    let mut done = false;
    while let Ok(Some(Ok(message))) =
        tokio::time::timeout(Duration::from_secs(10), socket.next()).await
    {
        if message.to_text().is_ok_and(|t| t.contains("[DONE]")) {
            done = true;
            break;
        }
    }
    assert!(done, "the resumed socket got the whole turn");
    drop(tcp);
}

/// A masked client text frame (RFC 6455 §5.3).
fn masked_text(payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut out = vec![0x81];
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= u16::MAX as usize => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, k)| b ^ k));
    out
}

#[tokio::test]
async fn a_ping_flood_gets_the_socket_closed() {
    let server = server(&[]).await;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/api/live", server.addr))
            .await
            .unwrap();
    for _ in 0..5000 {
        if socket
            .feed(Message::Ping(vec![1, 2, 3].into()))
            .await
            .is_err()
        {
            break;
        }
    }
    let _ = socket.flush().await;
    let mut closed = None;
    while let Ok(Some(message)) = tokio::time::timeout(Duration::from_secs(10), socket.next()).await
    {
        match message {
            Ok(Message::Close(frame)) => {
                closed = frame;
                break;
            }
            Ok(_) => continue,
            Err(_) => break,
        }
    }
    let frame: CloseFrame = closed.expect("a close frame");
    assert_eq!(frame.code, CloseCode::Policy);
    assert_eq!(frame.reason.as_str(), "too many frames");
}

#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    let server = server(&[
        ("COUNTERSIGN_MAX_CONNECTIONS_PER_ADDRESS", "20"),
        ("COUNTERSIGN_MAX_CONNECTIONS", "100"),
    ])
    .await;
    let addr = server.addr.clone();
    let mut held = Vec::new();
    for _ in 0..60 {
        held.push(connect_from("127.0.0.1", &addr).await);
    }
    // The ones over the cap were closed at once; the first twenty are still open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut closed = 0;
    for tcp in &held {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(5), tcp.peek(&mut byte)).await
        {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 40,
        "every connection over the address's cap was closed"
    );
    let started = Instant::now();
    let answer = raw(&addr, "127.0.0.2", get("/healthz", &addr, "")).await;
    assert_eq!(status(&answer), 200, "{answer}");
    assert!(started.elapsed() < Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(2);
    while server.state.edge.connections.open() != 20 {
        assert!(
            Instant::now() < deadline,
            "{} open",
            server.state.edge.connections.open()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The real server binary on a free loopback port, with its database at `db` and, when given,
/// an open-file limit of `nofile`. Returns the process and its address.
fn spawn_binary(db: &str, nofile: Option<u64>) -> (std::process::Child, String) {
    use std::os::unix::process::CommandExt;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_countersign"));
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LEPTOS_SITE_ADDR", &addr)
        .env("LEPTOS_SITE_ROOT", std::env::temp_dir())
        .env("COUNTERSIGN_DB", db)
        .env("COUNTERSIGN_WEATHER", "offline")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(nofile) = nofile {
        // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: nofile,
                    rlim_max: nofile,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    (
        command.spawn().expect("the countersign binary starts"),
        addr,
    )
}

/// The real binary at a 1024-descriptor limit: 2,000 idle connections from one address, and
/// another address is still served at once.
#[tokio::test]
async fn at_a_1024_descriptor_limit_a_flood_from_one_address_leaves_room_for_others() {
    let db = std::env::temp_dir().join(format!("countersign-edge-{}.db", std::process::id()));
    let (mut child, addr) = spawn_binary(&db.display().to_string(), Some(1024));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if try_connect_from("127.0.0.1", &addr, None).await.is_ok()
            && status(&raw(&addr, "127.0.0.1", get("/healthz", &addr, "")).await) == 200
        {
            break;
        }
        assert!(Instant::now() < deadline, "the server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut flood = Vec::with_capacity(2000);
    for _ in 0..2000 {
        match tokio::time::timeout(Duration::from_secs(2), connect_from("127.0.0.1", &addr)).await {
            Ok(tcp) => flood.push(tcp),
            Err(_) => break,
        }
    }
    assert_eq!(
        flood.len(),
        2000,
        "every connection was accepted (and the excess closed)"
    );
    let started = Instant::now();
    let answer = raw(&addr, "127.0.0.2", get("/healthz", &addr, "")).await;
    let took = started.elapsed();
    assert_eq!(status(&answer), 200, "{answer}");
    assert!(took < Duration::from_secs(1), "served in {took:?}");
    drop(flood);
    let _ = child.kill();
    let _ = child.wait();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}

/// SIGTERM: the open WebSockets hear 1001 before the server exits.
#[tokio::test]
async fn shutdown_closes_websockets_with_going_away() {
    let (mut child, addr) = spawn_binary(":memory:", None);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut socket = loop {
        if let Ok((socket, _)) =
            tokio_tungstenite::connect_async(format!("ws://{addr}/api/live")).await
        {
            break socket;
        }
        assert!(Instant::now() < deadline, "the server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // SAFETY: kill with a valid pid of our own child and a valid signal.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let mut code = None;
    while let Ok(Some(message)) = tokio::time::timeout(Duration::from_secs(10), socket.next()).await
    {
        if let Ok(Message::Close(frame)) = message {
            code = frame.map(|f| f.code);
            break;
        }
    }
    assert_eq!(code, Some(CloseCode::Away));
    let exited = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exited.success(), "{exited:?}");
}
