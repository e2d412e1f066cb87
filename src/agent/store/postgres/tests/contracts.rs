//! The store contracts on Postgres, and what instances doing the same thing at once do to one
//! chain and one limit.

use super::*;

#[tokio::test]
async fn the_postgres_store_keeps_the_session_contract() {
    if let Some(store) = fresh_store("sessions").await {
        store_contract(&store).await;
    }
}

/// Two instances on one database: what one commits, the other's inbox finds (ADR 0039), and
/// the other hears which approvals changed.
#[tokio::test]
async fn the_postgres_store_keeps_the_inbox_contract_across_instances() {
    let Some(config) = fresh_database("inbox").await else {
        return;
    };
    let a = PostgresStore::connect_with(config.clone()).await.unwrap();
    let b = PostgresStore::connect_with(config).await.unwrap();
    let mut news = b.news().unwrap();
    crate::agent::store::tests::inbox_contract(&[&a, &b]).await;
    // The last commits: a signature on apv-1 (chat-a), then chat-b decided (apv-3, apv-4 go).
    let mut heard = Vec::new();
    while let Ok(Ok(item)) = tokio::time::timeout(Duration::from_secs(5), news.recv()).await {
        if let StoreNews::Waiting { chat, approvals } = item {
            heard.push((chat, approvals));
            // chat-b's second commit (its decision) is the last.
            if heard.iter().filter(|(chat, _)| chat == "chat-b").count() == 2 {
                break;
            }
        }
    }
    let tail = &heard[heard.len().saturating_sub(2)..];
    assert_eq!(
        tail,
        [
            ("chat-a".to_owned(), vec!["apv-1".to_owned()]),
            (
                "chat-b".to_owned(),
                vec!["apv-3".to_owned(), "apv-4".to_owned()]
            )
        ],
        "{heard:?}"
    );
}

#[tokio::test]
async fn the_postgres_store_keeps_the_chain_contract() {
    if let Some(store) = fresh_store("chain").await {
        crate::agent::store::tests::chain_contract(&store, &store).await;
    }
}

/// Issue #38: instances committing at once append to one chain, numbered in commit order with
/// no gap and no fork (the head's row is locked by each appending transaction).
#[tokio::test]
async fn instances_committing_at_once_extend_one_chain_without_gaps_or_forks() {
    let Some(config) = fresh_database("chain_race").await else {
        return;
    };
    let one = PostgresStore::connect_with(config.clone()).await.unwrap();
    let two = PostgresStore::connect_with(config).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..24 {
        let store = if i % 2 == 0 { one.clone() } else { two.clone() };
        tasks.push(tokio::spawn(async move {
            let id = format!("race-{i}");
            let record = SessionRecord::new(&id, i);
            let events = [
                audit::sample(&id, AuditKind::Requested, json!({"i": i})),
                audit::sample(&id, AuditKind::Approved, json!({"i": i})),
            ];
            if i % 3 == 0 {
                store.append_audit(&events).await.unwrap();
            } else {
                store.commit(&record, &events).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let chain = one.chain(0, 100).await.unwrap();
    let seqs: Vec<i64> = chain.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=48).collect::<Vec<_>>(), "no gaps");
    let mut walk = crate::agent::audit::chain::Walk::from_start(0);
    for r in &chain {
        walk.record(r)
            .expect("one chain: every record links to the one before");
    }
    assert_eq!(two.chain_head().await.unwrap().head, walk.head());
    // A commit's two records are next to each other (one transaction, one lock).
    for pair in chain.chunks(2) {
        assert_eq!(pair[0].event.session_id, pair[1].event.session_id);
    }
}

#[tokio::test]
async fn the_postgres_store_keeps_the_journal_contract() {
    if let Some(store) = fresh_store("journal").await {
        crate::agent::store::tests::journal_contract(&store).await;
    }
}

/// ADR 0045 on Postgres: a chat opens and goes on without its entries being decoded.
#[tokio::test]
async fn a_chat_opens_without_decoding_its_entries() {
    use crate::agent::store::tests::{BREAK_ALL_BUT_THE_LAST_MESSAGE, a_long_chat};
    if let Some(store) = fresh_store("undecoded").await {
        a_long_chat(&store).await;
        let broken = store
            .rows(
                &format!("{BREAK_ALL_BUT_THE_LAST_MESSAGE} RETURNING 1"),
                &[],
                "break",
            )
            .await
            .unwrap();
        assert_eq!(broken.len(), 1_999);
        crate::agent::store::tests::undecoded_entries_contract(&store).await;
    }
}

/// ADR 0045's fourth amendment on Postgres: a wallet written before running totals is read
/// whole once, and kept with them.
#[tokio::test]
async fn a_wallet_from_before_running_totals_is_summed_once() {
    use crate::agent::store::tests::{FORGET_THE_TOTALS, a_paying_chat, old_wallet_contract};
    if let Some(store) = fresh_store("old_wallet").await {
        let chat = a_paying_chat(&store).await;
        let changed = store
            .rows(FORGET_THE_TOTALS[1], &[], "forget")
            .await
            .unwrap();
        assert_eq!(changed.len(), 1);
        old_wallet_contract(&store, &chat).await;
    }
}

#[tokio::test]
async fn the_postgres_store_keeps_the_signin_contract() {
    if let Some(store) = fresh_store("signins").await {
        signin_contract(&store).await;
    }
}

#[tokio::test]
async fn the_postgres_store_keeps_the_tool_list_contract() {
    if let Some(store) = fresh_store("tool_lists").await {
        tool_list_contract(&store).await;
    }
}

#[tokio::test]
async fn the_postgres_store_keeps_the_people_contract() {
    if let Some(store) = fresh_store("people").await {
        people_contract(&store).await;
    }
}

#[tokio::test]
async fn the_postgres_store_keeps_the_policy_contract() {
    if let Some(store) = fresh_store("policy").await {
        policy_contract(&store).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_of_three_instances_never_pass_a_limit_together() {
    let Some(config) = fresh_database("race").await else {
        return;
    };
    let (a, b, c) = tokio::join!(
        PostgresStore::connect_with(config.clone()),
        PostgresStore::connect_with(config.clone()),
        PostgresStore::connect_with(config)
    );
    let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
    reservation_race_contract(&[&a, &b, &c]).await;
}
