//! Voice over `/api/live` with OpenAI Realtime as the model (ADR 0041), against an in-process
//! fake that speaks the Realtime wire: a spoken payment asks for approval on the page's socket,
//! nothing reaches the model while the card waits, and the function output goes to the model
//! only after the person approved; the agent's speech comes back as binary frames.

use std::sync::Arc;
use std::time::Duration;

use countersign::models::providers::{OpenAiRealtimeConfig, OpenAiRealtimeModel, ProviderKey};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, accept_async, connect_async};

use base64::Engine as _;

use super::{b64, tone};
use crate::common;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;
type FakeSocket = WebSocketStream<TcpStream>;

const WAIT: Duration = Duration::from_secs(10);

/// The next client event the fake receives.
async fn recv(fake: &mut FakeSocket) -> Value {
    loop {
        match tokio::time::timeout(WAIT, fake.next())
            .await
            .expect("an event")
        {
            Some(Ok(Message::Text(text))) => return serde_json::from_str(text.as_str()).unwrap(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("expected a client event, got {other:?}"),
        }
    }
}

async fn expect(fake: &mut FakeSocket, kind: &str) -> Value {
    let event = recv(fake).await;
    assert_eq!(event["type"], kind, "{event}");
    event
}

async fn emit(fake: &mut FakeSocket, event: Value) {
    fake.send(Message::text(event.to_string())).await.unwrap();
}

/// Reads the page's socket until a chunk of type `stop` (or `[DONE]`); returns the chunks and
/// the binary frames' bytes.
async fn read_until(socket: &mut Socket, stop: &str) -> (Vec<Value>, Vec<u8>) {
    let (mut chunks, mut speech) = (Vec::new(), Vec::new());
    loop {
        let frame = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("a frame")
            .expect("the socket is open")
            .expect("a frame");
        match frame {
            Message::Text(text) => {
                let data = text
                    .as_str()
                    .strip_prefix("data: ")
                    .unwrap_or(text.as_str());
                let data = data.trim_end();
                if data == "[DONE]" {
                    return (chunks, speech);
                }
                let chunk: Value = serde_json::from_str(data).unwrap();
                let hit = chunk["type"] == stop;
                chunks.push(chunk);
                if hit {
                    return (chunks, speech);
                }
            }
            Message::Binary(bytes) => speech.extend_from_slice(&bytes),
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_spoken_payment_on_realtime_waits_for_the_click_before_the_model_hears_a_result() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_url = format!("ws://{}/v1/realtime", listener.local_addr().unwrap());
    let model = OpenAiRealtimeModel::new(OpenAiRealtimeConfig {
        url: fake_url,
        ..OpenAiRealtimeConfig::new(ProviderKey::new("test-key"))
    })
    .expect("the model");
    let server = common::start(common::Opts {
        model: Some(Arc::new(model)),
        ..common::Opts::default()
    })
    .await;
    let mut socket = connect_async(format!("ws://{}/api/live?audio=binary", server.addr))
        .await
        .expect("the socket opens")
        .0;

    let start =
        json!({"type": "audio_control", "action": "start", "id": "pay", "mode": "push_to_talk"});
    socket.send(Message::text(start.to_string())).await.unwrap();
    let (tcp, _) = tokio::time::timeout(WAIT, listener.accept())
        .await
        .expect("the model connects")
        .unwrap();
    let mut fake = accept_async(tcp).await.unwrap();
    emit(
        &mut fake,
        json!({"type": "session.created", "session": {"type": "realtime"}}),
    )
    .await;
    let update = expect(&mut fake, "session.update").await;
    assert_eq!(
        update["session"]["audio"]["input"]["turn_detection"],
        Value::Null
    );
    expect(&mut fake, "input_audio_buffer.clear").await;

    // 0.2 s of speech in binary frames, then stop: 0.2 s at 24 kHz reaches the model.
    for frame in tone(16_000, 200).chunks(3_200) {
        socket.send(Message::binary(frame.to_vec())).await.unwrap();
    }
    let stop = json!({"type": "audio_control", "action": "stop"});
    socket.send(Message::text(stop.to_string())).await.unwrap();
    let mut sent = 0;
    loop {
        let event = recv(&mut fake).await;
        match event["type"].as_str() {
            Some("input_audio_buffer.append") => {
                sent += base64::engine::general_purpose::STANDARD
                    .decode(event["audio"].as_str().unwrap())
                    .unwrap()
                    .len()
            }
            Some("input_audio_buffer.commit") => break,
            _ => panic!("{event}"),
        }
    }
    assert_eq!(sent, 24_000 / 5 * 2, "0.2 s of PCM16 at 24 kHz");
    expect(&mut fake, "response.create").await;

    let speech = tone(24_000, 100);
    for event in [
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        json!({"type": "conversation.item.input_audio_transcription.completed", "item_id": "in", "content_index": 0, "transcript": "Pay Hanako 50 dollars"}),
        json!({"type": "response.output_audio.delta", "response_id": "resp_1", "item_id": "a", "output_index": 0, "content_index": 0, "delta": b64(&speech)}),
        json!({"type": "response.output_audio_transcript.delta", "response_id": "resp_1", "item_id": "a", "output_index": 0, "content_index": 0, "delta": "It needs your countersignature."}),
        json!({"type": "response.function_call_arguments.done", "response_id": "resp_1", "item_id": "fc", "output_index": 1, "call_id": "call_pay", "name": "process_payment", "arguments": "{\"amount\":50,\"recipient\":\"Hanako\",\"currency\":\"USD\"}"}),
        json!({"type": "response.done", "response": {"id": "resp_1", "status": "completed", "usage": {"total_tokens": 9, "input_tokens": 5, "output_tokens": 4}}}),
    ] {
        emit(&mut fake, event).await;
    }
    let (chunks, heard) = read_until(&mut socket, "finish-step").await;
    assert_eq!(heard, speech, "the agent's speech, as binary frames");
    let request = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .expect("the card");
    let approval = request["approvalId"].as_str().unwrap().to_owned();

    // The card waits: the model hears nothing of the call.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), fake.next())
            .await
            .is_err(),
        "nothing goes to the model before the decision"
    );
    let confirm =
        json!({"type": "tool_result", "toolCallId": approval, "result": {"confirmed": true}});
    socket
        .send(Message::text(confirm.to_string()))
        .await
        .unwrap();
    let output = expect(&mut fake, "conversation.item.create").await;
    assert_eq!(output["item"]["type"], "function_call_output");
    assert_eq!(output["item"]["call_id"], "call_pay");
    let result: Value = serde_json::from_str(output["item"]["output"].as_str().unwrap()).unwrap();
    assert_eq!(result["wallet_balance"], 950);
    expect(&mut fake, "response.create").await;
    for event in [
        json!({"type": "response.created", "response": {"id": "resp_2", "status": "in_progress"}}),
        json!({"type": "response.output_audio_transcript.delta", "response_id": "resp_2", "item_id": "b", "output_index": 0, "content_index": 0, "delta": "Paid."}),
        json!({"type": "response.done", "response": {"id": "resp_2", "status": "completed"}}),
    ] {
        emit(&mut fake, event).await;
    }
    let (rest, _) = read_until(&mut socket, "[DONE]").await;
    assert!(
        rest.iter()
            .any(|c| c["type"] == "tool-output-available" && c["output"]["wallet_balance"] == 950),
        "{rest:?}"
    );
    // The words of both answers, as the transcripts said them (held text is released whole).
    let said: String = chunks
        .iter()
        .chain(&rest)
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert_eq!(said, "It needs your countersignature.Paid.");
}
