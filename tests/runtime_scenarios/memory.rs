//! Sessions leaving memory and coming back from the store: idle ones after two sweeps, parked
//! turns with their log exactly, and the deadlines that bring them back.

use super::*;

#[tokio::test(start_paused = true)]
async fn idle_sessions_leave_memory_after_two_sweeps_and_come_back_from_the_store() {
    let rt = runtime();
    start(&rt, "done", "What's the weather in Tokyo?").await;
    start(&rt, "waiting", "Send $50 to Hanako").await;
    // Let the finished turn's task end (and the waiting one's park).
    tokio::time::sleep(Duration::from_millis(10)).await;
    let held = rt.session("held").await.unwrap();
    // The parked payment left memory as soon as its task was gone (ADR 0011).
    assert_eq!(rt.live_sessions(), 2);

    let mut marked = std::collections::HashMap::new();
    assert_eq!(rt.evict_idle(&mut marked), 0, "the first sweep only marks");
    assert_eq!(rt.evict_idle(&mut marked), 1, "the finished chat leaves");
    assert_eq!(rt.live_sessions(), 1, "a held session stays");
    drop(held);
    assert_eq!(
        rt.evict_idle(&mut marked),
        0,
        "released just now: marked first"
    );
    assert_eq!(rt.evict_idle(&mut marked), 1);
    assert_eq!(rt.live_sessions(), 0);

    // The evicted chat comes back whole from the store and takes a new turn.
    let before = history(&rt, "done").await;
    assert!(before.len() >= 3, "{before:?}");
    assert!(is_well_formed(&before));
    let (_, next) = start(&rt, "done", "What's the weather in Paris?").await;
    assert!(matches!(next.last(), Some(TurnEntry::End)));
    assert!(history(&rt, "done").await.len() > before.len());

    // The waiting turn comes back from the store and can still be answered.
    for _ in 0..3 {
        rt.evict_idle(&mut marked);
    }
    let answered = answer(&rt, "waiting", &[approve("apv-1")]).await;
    assert!(has_output(&answered));
}

#[tokio::test(start_paused = true)]
async fn a_parked_turn_leaves_memory_and_comes_back_with_its_log_exactly() {
    let rt = runtime();
    let first = {
        let (_, first) = start(&rt, "c", "Pay Alice 30 dollars and Bob 40 dollars").await;
        first
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        rt.live_sessions(),
        0,
        "nothing of the waiting chat stays in memory"
    );

    // Back from the store: parked, the same log entry for entry, answers pick up there.
    let session = rt.session("c").await.unwrap();
    assert!(session.is_parked());
    let log = session.current_log().unwrap();
    assert_eq!(log.entries_from(0), first);
    drop((session, log));
    let receipt = rt.submit("c", &[approve("apv-2")]).await.unwrap();
    assert_eq!(receipt.from, first.len());
    let after_one = read_segment(&receipt.log, receipt.from).await;
    assert_eq!(
        describe(&after_one),
        lines(&["tool-output-available call-2", "PAUSE"])
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0, "parked again, gone again");

    let receipt = rt.submit("c", &[approve("apv-1")]).await.unwrap();
    assert_eq!(receipt.from, first.len() + after_one.len());
    let rest = read_segment(&receipt.log, receipt.from).await;
    assert!(matches!(rest.last(), Some(TurnEntry::End)));
    assert!(has_output(&rest));
    assert!(is_well_formed(&history(&rt, "c").await));
}

#[tokio::test(start_paused = true)]
async fn whose_a_parked_chat_is_is_known_without_bringing_it_back() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0);
    // A route's ownership check reads the chat's owner, not the chat (ADR 0038): the waiting
    // chat stays in the store, however long it is.
    assert_eq!(rt.chat_owner("c").await.unwrap(), Some(None));
    assert_eq!(rt.live_sessions(), 0, "the check loaded the chat");
    assert_eq!(rt.chat_owner("never").await.unwrap(), None);
    // The answer still finds it.
    let receipt = rt.submit("c", &[approve("apv-1")]).await.unwrap();
    assert!(has_output(&read_segment(&receipt.log, receipt.from).await));
}

#[tokio::test(start_paused = true)]
async fn the_deadline_of_a_turn_that_left_memory_brings_it_back_to_expire() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0);
    tokio::time::advance(APPROVAL_TIMEOUT + Duration::from_secs(1)).await;
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    let history = history(&rt, "c").await;
    assert!(
        history.iter().any(|h| matches!(h, HistoryItem::ToolResults { results } if results[0].outcome == Outcome::Expired)),
        "{history:?}"
    );
    let log = rt.session("c").await.unwrap().current_log().unwrap();
    assert!(log.is_ended());
    assert_eq!(
        rt.submit("c", &[approve("apv-1")]).await.unwrap_err(),
        InputError::ApprovalExpired {
            approval_id: "apv-1".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_reader_that_keeps_a_parked_turns_log_sees_what_follows_after_it_came_back() {
    let rt = runtime();
    let (log, first) = start(&rt, "c", "Send $50 to Hanako").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.live_sessions(), 0);
    // The answer brings the session back; the turn continues the log this reader holds.
    rt.submit("c", &[approve("apv-1")]).await.unwrap();
    let rest = read_segment(&log, first.len()).await;
    assert!(has_output(&rest));
}

#[tokio::test(start_paused = true)]
async fn a_session_that_ran_a_turn_since_it_was_marked_stays_another_sweep() {
    let rt = runtime();
    start(&rt, "c", "What's the weather in Tokyo?").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut marked = std::collections::HashMap::new();
    rt.evict_idle(&mut marked);
    start(&rt, "c", "What's the weather in Paris?").await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(rt.evict_idle(&mut marked), 0, "a new turn since the mark");
    assert_eq!(rt.evict_idle(&mut marked), 1);
}
