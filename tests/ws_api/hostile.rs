//! Bad input on the socket: error chunks that leave the session working, oversized frames,
//! invalid UTF-8, a silent client, requests that are not upgrades, and a fragmented frame with a
//! ping between its pieces.

use super::*;

#[tokio::test]
async fn bad_input_gets_an_error_chunk_and_the_session_survives() {
    let server = server().await;
    let mut socket = connect(&server).await;
    for (frame, expect) in [
        ("{not json".to_string(), "not valid JSON"),
        (
            json!({"type": "teleport"}).to_string(),
            "Unknown frame type",
        ),
        (json!({"no_type": 1}).to_string(), "cannot be read"),
        (
            json!({"type": "audio_chunk", "chunk": "AAAAAA=="}).to_string(),
            "audio arrived outside an utterance",
        ),
        (
            json!({"type": "tool_result", "toolCallId": "x", "result": {}}).to_string(),
            "no chat yet",
        ),
        // The seed's looser `message` frame (no chat id, `content` text) is its profile's
        // (`/live`), not this route's (ADR 0031, amended 2026-11-29).
        (
            json!({"type": "message", "messages": [{"role": "user", "content": "hello"}]})
                .to_string(),
            "missing field `id`",
        ),
        // More messages than a request may carry (the default cap, 10,000): refused unread.
        (
            json!({"type": "message", "id": "c", "messages":
                vec![json!({"id": "u", "role": "user", "parts": []}); 10_001]})
            .to_string(),
            "too_many_messages",
        ),
    ] {
        socket.send(Message::Text(frame.into())).await.unwrap();
        match next(&mut socket).await {
            Frame::Chunk(c) => {
                assert_eq!(c["type"], "error");
                assert!(c["errorText"].as_str().unwrap().contains(expect), "{c}");
            }
            other => panic!("{other:?}"),
        }
    }
    send(
        &mut socket,
        json!({"type": "ping", "timestamp": 1712345678901u64}),
    )
    .await;
    assert_eq!(
        next(&mut socket).await,
        Frame::Control(json!({"type": "pong", "timestamp": 1712345678901u64}))
    );
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    read_until(&mut socket, "finish-step").await;
    send(&mut socket, confirm("apv-forged", true)).await;
    let Frame::Chunk(error) = next(&mut socket).await else {
        panic!()
    };
    assert!(
        error["errorText"].as_str().unwrap().contains("apv-forged"),
        "{error}"
    );
    send(
        &mut socket,
        json!({"type": "message", "id": "other-chat", "messages": []}),
    )
    .await;
    let Frame::Chunk(error) = next(&mut socket).await else {
        panic!()
    };
    assert!(
        error["errorText"]
            .as_str()
            .unwrap()
            .contains("belongs to chat c")
    );
    // The real approval still works.
    send(&mut socket, confirm("apv-1", true)).await;
    assert_eq!(
        read_until(&mut socket, "[DONE]").await[0]["type"],
        "tool-output-available"
    );
}

#[tokio::test]
async fn oversized_frames_close_with_1009_and_foreign_origins_get_403() {
    let server = server_with(Opts {
        env: vec![("COUNTERSIGN_WS_MAX_FRAME_BYTES".into(), "2048".into())],
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    socket
        .send(Message::Text("x".repeat(5000).into()))
        .await
        .unwrap();
    match next(&mut socket).await {
        Frame::Closed(code, _) => assert_eq!(code, Some(u16::from(CloseCode::Size))),
        other => panic!("{other:?}"),
    }

    let mut request = format!("{}/api/live", server.base)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    let err = connect_async(request).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test]
async fn invalid_utf8_closes_with_1007() {
    let server = server().await;
    let (mut socket, _) = connect_async(format!("{}/live", server.base))
        .await
        .unwrap();
    // A text frame whose payload is not UTF-8 (sent raw, bypassing the client's own check).
    socket
        .send(Message::Frame(
            tokio_tungstenite::tungstenite::protocol::frame::Frame::message(
                vec![0xff, 0xfe, 0xfd],
                tokio_tungstenite::tungstenite::protocol::frame::coding::OpCode::Data(
                    tokio_tungstenite::tungstenite::protocol::frame::coding::Data::Text,
                ),
                true,
            ),
        ))
        .await
        .unwrap();
    match next(&mut socket).await {
        Frame::Closed(code, _) => assert_eq!(code, Some(1007)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_silent_client_is_closed_after_the_idle_timeout() {
    let server = server_with(Opts {
        env: vec![("COUNTERSIGN_WS_IDLE_SECS".into(), "3".into())],
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("idle", "hello")).await;
    read_until(&mut socket, "[DONE]").await;
    assert!(server.state.runtime.followers.is_followed("idle"));
    // Stop reading, so no pong answers the server's pings, for longer than the idle timeout plus
    // one ping interval (the server checks at each ping, every third of the timeout).
    tokio::time::sleep(Duration::from_millis(5500)).await;
    assert!(
        !server.state.runtime.followers.is_followed("idle"),
        "the server let the silent socket go"
    );
    // What the client then sees: the server's close (1001 "idle timeout"), or — when its
    // automatic pong hits the already closed connection first — a broken pipe.
    loop {
        match next(&mut socket).await {
            Frame::Closed(Some(code), reason) => {
                assert_eq!((code, reason.as_str()), (1001, "idle timeout"));
                break;
            }
            Frame::Closed(None, error) => {
                assert!(
                    error.contains("Broken pipe") || error.contains("reset") || error.is_empty(),
                    "{error}"
                );
                break;
            }
            Frame::Control(_) | Frame::Chunk(_) | Frame::Done | Frame::Binary(_) => continue,
        }
    }
}

#[tokio::test]
async fn requests_that_are_not_websocket_upgrades_are_refused_with_a_reason() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = server().await;
    let addr = server.base.trim_start_matches("ws://").to_string();
    let ask = |request: String| {
        let addr = addr.clone();
        async move {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(request.as_bytes()).await.unwrap();
            let mut answer = Vec::new();
            tcp.read_to_end(&mut answer).await.unwrap();
            String::from_utf8_lossy(&answer).into_owned()
        }
    };
    let plain = ask(format!(
        "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    ))
    .await;
    assert!(plain.starts_with("HTTP/1.1 400"), "{plain}");
    assert!(plain.contains("not_a_websocket_upgrade"), "{plain}");
    let old = ask(format!(
        "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    ))
    .await;
    assert!(old.starts_with("HTTP/1.1 426"), "{old}");
    // RFC 6455 §1.3's example key and the accept value it must produce.
    let good = {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(
            format!(
                "GET /api/live HTTP/1.1\r\nHost: {addr}\r\nConnection: keep-alive, Upgrade\r\n\
                 Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        let mut head = vec![0u8; 512];
        let n = tcp.read(&mut head).await.unwrap();
        String::from_utf8_lossy(&head[..n]).into_owned()
    };
    assert!(good.starts_with("HTTP/1.1 101"), "{good}");
    assert!(
        good.to_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{good}"
    );
}

#[tokio::test]
async fn a_fragmented_frame_with_a_ping_between_its_pieces_is_understood() {
    use tokio_tungstenite::tungstenite::protocol::frame::{
        Frame as RawFrame,
        coding::{Data, OpCode},
    };
    let server = server().await;
    let mut socket = connect(&server).await;
    let text = json!({"type": "ping", "timestamp": 42}).to_string();
    let (head, tail) = text.split_at(7);
    socket
        .send(Message::Frame(RawFrame::message(
            head.as_bytes().to_vec(),
            OpCode::Data(Data::Text),
            false,
        )))
        .await
        .unwrap();
    socket
        .send(Message::Ping(b"still there?".to_vec().into()))
        .await
        .unwrap();
    socket
        .send(Message::Frame(RawFrame::message(
            tail.as_bytes().to_vec(),
            OpCode::Data(Data::Continue),
            true,
        )))
        .await
        .unwrap();
    let mut pong = None;
    let control = loop {
        let message = tokio::time::timeout(Duration::from_secs(10), socket.next())
            .await
            .expect("an answer")
            .expect("open")
            .expect("readable");
        match message {
            Message::Pong(payload) => pong = Some(payload.to_vec()),
            Message::Text(text) => break serde_json::from_str::<Value>(text.as_str()).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(pong.as_deref(), Some(&b"still there?"[..]));
    assert_eq!(control, json!({"type": "pong", "timestamp": 42}));
}
