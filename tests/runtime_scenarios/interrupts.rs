//! A turn interrupted while it streams or waits, superseded by a new message, and a second
//! message refused while one is generating.

use super::*;

#[tokio::test(start_paused = true)]
async fn interrupt_while_streaming_ends_the_turn_cleanly() {
    let rt = runtime_with(TextTiming::Progressive, Duration::from_millis(30));
    let started = rt
        .start_turn(
            "c",
            UserTurn {
                text: "/lorem 200".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap();
    let mut reader = started.log.subscribe(0);
    let mut seen = 0;
    while let Some(entry) = reader.next().await {
        if matches!(entry, TurnEntry::Chunk(Chunk::TextDelta(_))) {
            seen += 1;
            if seen == 5 {
                break;
            }
        }
    }
    assert!(rt.interrupt("c", "user pressed Stop").await);
    let rest = read_segment(&started.log, reader.position()).await;
    let described = describe(&rest);
    let tail: Vec<&str> = described.iter().map(String::as_str).rev().take(5).collect();
    assert_eq!(
        tail,
        [
            "END",
            "finish other",
            "abort: user pressed Stop",
            "finish-step",
            "text-end txt-1"
        ]
    );
    let words = text_of(&started.log.entries_from(0))
        .split_whitespace()
        .count();
    assert!(words < 200, "stopped early ({words} words)");
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.turn_status(), Some(TurnStatus::Interrupted));
    assert!(is_well_formed(&history(&rt, "c").await));
    // The session stays usable.
    let (_, next) = start(&rt, "c", "What's the weather in Tokyo?").await;
    assert_eq!(describe(&next).last().map(String::as_str), Some("END"));
}

#[tokio::test(start_paused = true)]
async fn interrupt_while_waiting_for_approval_closes_the_call() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Send $50 to Hanako").await;
    parked(&rt, "c").await;
    assert!(rt.interrupt("c", "user pressed Stop").await);
    let rest = read_segment(&log, first.len()).await;
    assert_eq!(
        describe(&rest),
        lines(&[
            "tool-output-error call-1: Interrupted (user pressed Stop) before it ran.",
            "abort: user pressed Stop",
            "finish other",
            "END",
        ])
    );
    assert!(is_well_formed(&history(&rt, "c").await));
    assert_eq!(
        rt.submit("c", &[approve("apv-1")]).await.unwrap_err(),
        InputError::NoActiveTurn
    );
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.with_wallet(|w| w.balance_cents), 100_000);
}

#[tokio::test(start_paused = true)]
async fn a_new_message_supersedes_a_waiting_turn() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Send $50 to Hanako").await;
    parked(&rt, "c").await;
    let (_, next) = start(&rt, "c", "What's the weather in Paris?").await;
    let old = describe(&read_segment(&log, first.len()).await);
    assert_eq!(old.last().map(String::as_str), Some("END"));
    assert!(
        old.iter()
            .any(|l| l.contains("superseded by a new message")),
        "{old:?}"
    );
    assert_eq!(describe(&next).last().map(String::as_str), Some("END"));
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn a_second_message_while_generating_is_refused() {
    let rt = runtime_with(TextTiming::Progressive, Duration::from_millis(30));
    rt.start_turn(
        "c",
        UserTurn {
            text: "/lorem 100".into(),
            ..UserTurn::default()
        },
        None,
    )
    .await
    .unwrap();
    let err = rt
        .start_turn(
            "c",
            UserTurn {
                text: "hello".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err, TurnError::Busy);
    let empty = rt
        .start_turn(
            "d",
            UserTurn {
                text: "  ".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(empty, TurnError::EmptyMessage);
}
