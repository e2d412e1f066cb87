//! What the other instances on one database see: a running turn followed until its owner stops
//! answering, people, grants and ended sign-ins as news, live text only of the chats they follow.

use super::*;

/// The chat `"chat"` with a turn running.
fn running_record() -> SessionRecord {
    let mut record = SessionRecord::new("chat", 5);
    record.turn = Some(crate::agent::store::tests::turn(TurnStatus::Running));
    record
}

#[tokio::test]
async fn a_running_turn_is_followed_by_other_instances_until_its_owner_stops_answering() {
    let Some(config) = fresh_database("owners").await else {
        return;
    };
    let a = PostgresStore::connect_with(config.clone()).await.unwrap();
    let b = PostgresStore::connect_with(config.clone()).await.unwrap();
    let c = PostgresStore::connect_with(config).await.unwrap();
    let mut news = b.news().expect("a shared store has news");
    let record = running_record();
    let turn_id = record.turn.as_ref().unwrap().id.clone();
    let log = vec![TurnEntry::Chunk(crate::protocol::Chunk::start(
        "m".to_owned(),
    ))];
    a.commit_paused(&record, &[], &log).await.unwrap();

    // B hears of the commit, and follows the turn A runs: its log so far, not to resume.
    let heard = tokio::time::timeout(Duration::from_secs(5), news.recv())
        .await
        .expect("news within seconds")
        .unwrap();
    assert_eq!(
        heard,
        StoreNews::Chat {
            chat: "chat".into(),
            waits: false
        }
    );
    let at_b = b.load("chat").await.unwrap().unwrap();
    assert!(at_b.elsewhere);
    assert_eq!(at_b.followed_log, Some(log.clone()));
    assert_eq!(at_b.paused_log, None);
    assert_eq!(b.unfinished().await.unwrap(), Vec::<String>::new());
    assert_eq!(b.orphaned().await.unwrap(), Vec::<String>::new());
    // A's own load is not "elsewhere".
    assert!(!a.load("chat").await.unwrap().unwrap().elsewhere);

    // A stops answering (its heartbeat is older than the lease): the turn is an orphan, and
    // the first instance to load it owns it; the next one follows the new owner.
    drop(a);
    b.execute(
        "UPDATE countersign_instances SET seen_ms = 0 WHERE id <> $1 AND id <> $2",
        &[&&*b.instance, &&*c.instance],
        "test",
    )
    .await
    .unwrap();
    assert_eq!(b.orphaned().await.unwrap(), vec!["chat".to_owned()]);
    assert_eq!(b.unfinished().await.unwrap(), vec!["chat".to_owned()]);
    let taken = b.load("chat").await.unwrap().unwrap();
    assert!(!taken.elsewhere, "B took the turn over");
    assert!(
        c.load("chat").await.unwrap().unwrap().elsewhere,
        "C follows B"
    );
    assert_eq!(b.orphaned().await.unwrap(), Vec::<String>::new());

    // Over, the turn's last log is there for followers; the owner is gone.
    let mut done = taken.record.clone();
    done.turn.as_mut().unwrap().status = TurnStatus::Finished;
    let mut ended = log.clone();
    ended.push(TurnEntry::Chunk(crate::protocol::Chunk::finish_step()));
    b.commit_paused(&done, &[], &ended).await.unwrap();
    let at_c = c.load("chat").await.unwrap().unwrap();
    assert!(!at_c.elsewhere);
    assert_eq!(at_c.followed_log, Some(ended));
    assert_eq!(
        at_c.record.turn.as_ref().map(|t| t.id.clone()),
        Some(turn_id)
    );
    assert_eq!(
        number(
            &c,
            "SELECT count(*) FROM sessions WHERE running_on IS NOT NULL"
        )
        .await,
        0
    );
}

#[tokio::test]
async fn people_grants_and_ended_sign_ins_are_news_to_the_other_instances() {
    let Some(config) = fresh_database("news").await else {
        return;
    };
    let a = PostgresStore::connect_with(config.clone()).await.unwrap();
    let b = PostgresStore::connect_with(config).await.unwrap();
    let mut news = b.news().unwrap();
    let mut own = a.news().unwrap();
    crate::agent::store::SignInStore::end_signin(&a, "nobody", 1)
        .await
        .unwrap();
    SessionStore::announce(&a, StoreNews::Stop { chat: "c".into() })
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), news.recv())
        .await
        .unwrap()
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), news.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        [first, second],
        [StoreNews::SignIns, StoreNews::Stop { chat: "c".into() }]
    );
    // An instance does not hear itself.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), own.recv())
            .await
            .is_err()
    );
}

/// What `b` hears (`news`) of `said`, told by `a`: the news up to a wake-up `a` sends right after
/// on the channel every instance hears (notifications arrive in the order they were sent).
async fn heard_of(
    a: &PostgresStore,
    news: &mut tokio::sync::broadcast::Receiver<StoreNews>,
    said: StoreNews,
) -> Vec<StoreNews> {
    SessionStore::announce(a, said).await.unwrap();
    SessionStore::announce(a, StoreNews::SignIns).await.unwrap();
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), news.recv()).await {
            Ok(Ok(StoreNews::SignIns)) => return got,
            Ok(Ok(other)) => got.push(other),
            other => panic!("the wake-up should come: {other:?}"),
        }
    }
}

/// Live text goes on its chat's text channel (ADR 0043): an instance hears a turn's text only
/// while it holds an interest in the chat (a reader here follows it), not the text of every turn
/// of the deployment; interests are counted, and the rest of the news reaches every instance.
#[tokio::test]
async fn an_instance_hears_live_text_only_of_the_chats_it_follows() {
    let Some(config) = fresh_database("texts").await else {
        return;
    };
    let a = PostgresStore::connect_with(config.clone()).await.unwrap();
    let b = PostgresStore::connect_with(config).await.unwrap();
    let mut news = b.news().unwrap();
    let text = |chat: &str| StoreNews::Text {
        chat: chat.into(),
        turn: "t".into(),
        at: 0,
        entries: Vec::new(),
    };
    // Until `wanted` is what B hears of the text of `chat` (listening changes a moment after the
    // interest does: what is said meanwhile comes from the stored log).
    async fn until_heard(
        a: &PostgresStore,
        news: &mut tokio::sync::broadcast::Receiver<StoreNews>,
        said: &StoreNews,
        wanted: &[StoreNews],
    ) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let mut got = heard_of(a, news, said.clone()).await;
            // A listening connection lost and made again says news may have been missed.
            got.retain(|n| *n != StoreNews::Missed);
            if got == wanted {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still hearing {got:?}"
            );
        }
    }
    let other = (0..)
        .map(|n| format!("other-{n}"))
        .find(|c| instances::channel_of(&text(c)) != instances::channel_of(&text("c")))
        .expect("a chat in another group");

    assert_eq!(heard_of(&a, &mut news, text("c")).await, []);
    let first = SessionStore::hear_text(&b, "c");
    until_heard(&a, &mut news, &text("c"), &[text("c")]).await;
    // Another group's text is still not heard; the rest of the news is.
    assert_eq!(heard_of(&a, &mut news, text(&other)).await, []);
    assert_eq!(
        heard_of(
            &a,
            &mut news,
            StoreNews::Stop {
                chat: other.clone()
            }
        )
        .await,
        [StoreNews::Stop { chat: other }]
    );
    // Two interests in the chat: the first one dropped, the chat is still heard.
    let second = SessionStore::hear_text(&b, "c");
    drop(first);
    for _ in 0..3 {
        assert_eq!(heard_of(&a, &mut news, text("c")).await, [text("c")]);
    }
    // The last one dropped: B stops hearing it.
    drop(second);
    until_heard(&a, &mut news, &text("c"), &[]).await;
    // B's listening connection is lost while it follows the chat: the new one listens to the
    // chat's text again.
    let third = SessionStore::hear_text(&b, "c");
    until_heard(&a, &mut news, &text("c"), &[text("c")]).await;
    let short = &b.instance()[..12];
    let cut = number(
        &a,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = 'countersign {short} listen'"
        ),
    )
    .await;
    assert_eq!(cut, 1);
    // B says it may have missed news twice: when the connection is lost, and once it listens
    // again (news sent in between is lost).
    for _ in 0..2 {
        let said = tokio::time::timeout(Duration::from_secs(10), news.recv()).await;
        assert_eq!(said, Ok(Ok(StoreNews::Missed)));
    }
    until_heard(&a, &mut news, &text("c"), &[text("c")]).await;
    drop(third);
}
