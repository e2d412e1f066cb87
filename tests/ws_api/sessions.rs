//! The chat outlives its sockets: interrupts mid-text and mid-approval, reconnects that lose and
//! duplicate nothing, a second socket taking the chat over, and what an answer or a turn from
//! elsewhere makes the socket hear.

use super::*;

#[tokio::test]
async fn interrupt_mid_text_and_mid_approval() {
    let server = server_with(Opts {
        delay: Duration::from_millis(20),
        ..Opts::default()
    })
    .await;
    let mut socket = connect_async(format!("{}/api/live?text=progressive", server.base))
        .await
        .unwrap()
        .0;
    send(&mut socket, message("c", "/lorem 300")).await;
    read_until(&mut socket, "text-delta").await;
    send(
        &mut socket,
        json!({"type": "interrupt", "reason": "user_abort"}),
    )
    .await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert!(
        types(&rest).contains(&"abort".to_string()),
        "{:?}",
        types(&rest)
    );
    let words: usize = text(&rest).split_whitespace().count();
    assert!(words < 300);

    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    read_until(&mut socket, "finish-step").await;
    send(&mut socket, json!({"type": "interrupt"})).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        types(&rest),
        ["tool-output-error", "abort", "finish", "[DONE]"]
    );

    // Still usable.
    send(&mut socket, message("c", "hello")).await;
    assert_eq!(
        read_until(&mut socket, "[DONE]").await.last().unwrap()["type"],
        "[DONE]"
    );
}

#[tokio::test]
async fn reconnect_mid_text_loses_and_duplicates_nothing() {
    let server = server_with(Opts {
        delay: Duration::from_millis(3),
        ..Opts::default()
    })
    .await;
    let mut socket = connect_async(format!("{}/api/live?text=progressive", server.base))
        .await
        .unwrap()
        .0;
    send(&mut socket, message("r", "/lorem 200")).await;
    let mut received = Vec::new();
    while received.len() < 20 {
        if let Frame::Chunk(c) = next(&mut socket).await {
            received.push(c);
        }
    }
    drop(socket);
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        json!({"type": "resume", "id": "r", "received": received.len()}),
    )
    .await;
    let Frame::Chunk(announce) = next(&mut socket).await else {
        panic!("announce")
    };
    assert_eq!(announce["type"], "data-countersign-pending");
    let rest = read_until(&mut socket, "[DONE]").await;
    received.extend(rest);
    assert_eq!(
        text(&received).split_whitespace().count(),
        200,
        "every word exactly once"
    );
    assert_eq!(received.iter().filter(|c| c["type"] == "start").count(), 1);
}

#[tokio::test]
async fn reconnect_while_waiting_for_approval() {
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("r", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, call) = approval_requests(&first).remove(0);
    drop(socket);

    let mut socket = connect(&server).await;
    send(
        &mut socket,
        json!({"type": "resume", "id": "r", "received": first.len()}),
    )
    .await;
    let Frame::Chunk(announce) = next(&mut socket).await else {
        panic!("announce")
    };
    assert_eq!(
        announce["data"]["pending"][0]["approvalId"],
        approval.as_str()
    );
    assert_eq!(announce["data"]["pending"][0]["toolCallId"], call.as_str());
    send(&mut socket, confirm(&approval, true)).await;
    let rest = read_until(&mut socket, "[DONE]").await;
    assert_eq!(
        rest[0]["type"],
        "tool-output-available",
        "nothing replayed twice: {:?}",
        types(&rest)
    );
}

#[tokio::test]
async fn a_second_socket_takes_over_the_chat() {
    let server = server().await;
    let mut first = connect(&server).await;
    send(&mut first, message("t", "hello")).await;
    read_until(&mut first, "[DONE]").await;
    let mut second = connect(&server).await;
    send(&mut second, message("t", "What's the weather in Tokyo?")).await;
    match next(&mut first).await {
        Frame::Closed(code, reason) => {
            assert_eq!(code, Some(4001));
            assert!(reason.contains("took over"));
        }
        other => panic!("the first socket should close, got {other:?}"),
    }
    assert_eq!(
        read_until(&mut second, "[DONE]").await.last().unwrap()["type"],
        "[DONE]"
    );
}

#[tokio::test]
async fn the_socket_hears_what_an_answer_from_elsewhere_and_a_turn_from_elsewhere_cause() {
    use countersign::agent::{ApprovalDecision, PersonInput, UserTurn};
    let server = server().await;
    let mut socket = connect(&server).await;
    send(&mut socket, message("c", "Send $50 to Hanako")).await;
    let first = read_until(&mut socket, "finish-step").await;
    let (approval, _) = approval_requests(&first).remove(0);
    // The turn waits with nothing of it in memory (ADR 0011) while the socket stays open.
    let runtime = &server.state.runtime;
    for _ in 0..200 {
        if runtime.live_sessions() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(runtime.live_sessions(), 0);

    // Another client (another tab, the API) answers: this socket gets the rest of the turn.
    runtime
        .submit(
            "c",
            &[PersonInput::Approval {
                approval_id: approval,
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .unwrap();
    let rest = read_until(&mut socket, "[DONE]").await;
    assert!(
        types(&rest).contains(&"tool-output-available".to_string()),
        "{rest:?}"
    );
    assert!(
        !types(&rest).contains(&"start".to_string()),
        "the same stream goes on"
    );

    // A turn started elsewhere on this chat reaches the socket too, from its start.
    runtime
        .start_turn(
            "c",
            UserTurn {
                text: "hello".into(),
                transport: countersign::agent::Transport::Api,
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap();
    let next = read_until(&mut socket, "[DONE]").await;
    assert_eq!(next[0]["type"], "start");
    assert_eq!(next.last().unwrap()["type"], "[DONE]");
}
