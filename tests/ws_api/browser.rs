//! Browser tools over the socket: a location approved then sent by the page or denied, and a
//! background-music change answered or left to time out.

use super::*;

#[tokio::test]
async fn get_location_approved_then_the_browser_result_and_denied() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Where am I?")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, call) = approval_requests(&first).remove(0);
    send(&mut socket, confirm(&approval, true)).await;
    send(
        &mut socket,
        json!({"type": "tool_result", "toolCallId": call,
        "result": {"latitude": 35.68, "longitude": 139.76, "accuracy": 20, "city": "Tokyo"}}),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available");
    assert!(text(&rest).contains("Tokyo"));

    send(&mut socket, message("c", "Where am I?")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, call) = approval_requests(&first).remove(0);
    send(&mut socket, confirm(&approval, false)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        rest[0],
        json!({"type": "tool-output-denied", "toolCallId": call})
    );
}

#[tokio::test]
async fn change_bgm_result_and_timeout() {
    let server = server_with(Opts {
        browser: Duration::from_secs(1),
        ..Opts::default()
    })
    .await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "play track 1")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let call = first
        .iter()
        .find(|c| c["type"] == "tool-input-available")
        .unwrap()["toolCallId"]
        .clone();
    send(
        &mut socket,
        json!({"type": "tool_result", "toolCallId": call, "result": {"track": 1, "playing": true}}),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-available");

    send(&mut socket, message("c", "change bgm to 2")).await;
    read_until(&mut socket, "finish-step").await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(rest[0]["type"], "tool-output-error");
    assert!(
        rest[0]["errorText"]
            .as_str()
            .unwrap()
            .contains("did not return a result")
    );
}
