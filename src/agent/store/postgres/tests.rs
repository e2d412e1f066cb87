//! The Postgres store against a real Postgres. `COUNTERSIGN_TEST_POSTGRES` names a server the
//! tests may create databases on (an admin URL such as
//! `postgres://postgres@127.0.0.1:5433/postgres`); each test makes a database of its own there
//! and leaves it (the server is meant to be thrown away). Without the variable the tests pass
//! with a note on stderr, unless `COUNTERSIGN_REQUIRE_POSTGRES=1` makes that a failure (CI with
//! a Postgres, so that a missing server cannot pass for a green run).

use std::{str::FromStr, time::Duration};

use serde_json::json;
use tokio_postgres::NoTls;

// The store's types come with the parent's imports.
use super::migrate::{CHAIN_MIGRATION, MIGRATIONS};
use super::*;
use crate::agent::{
    gate::CallPhase,
    store::{
        Actor, AuditKind, Claim, PolicyStore, Reserved, audit,
        tests::{
            a_bad_commit_among_many_fails_alone, pay_ken, people_contract, policy_contract,
            reservation_race_contract, signin_contract, store_contract, tool_list_contract,
            waiting_record,
        },
    },
};

mod contracts;
mod elsewhere;
mod migrations;
mod scale;

/// A new, empty database on the test server (named after `name`): how to connect to it.
/// `None` when no server is configured.
async fn fresh_database(name: &str) -> Option<tokio_postgres::Config> {
    let admin = std::env::var("COUNTERSIGN_TEST_POSTGRES")
        .ok()
        .filter(|url| !url.is_empty());
    let Some(admin) = admin else {
        if std::env::var("COUNTERSIGN_REQUIRE_POSTGRES").as_deref() == Ok("1") {
            panic!(
                "COUNTERSIGN_REQUIRE_POSTGRES=1 but COUNTERSIGN_TEST_POSTGRES is not set: set it \
                 to a Postgres admin URL, e.g. postgres://postgres@127.0.0.1:5433/postgres"
            );
        }
        eprintln!("skipped: COUNTERSIGN_TEST_POSTGRES is not set");
        return None;
    };
    let mut config = tokio_postgres::Config::from_str(&admin)
        .expect("COUNTERSIGN_TEST_POSTGRES should be a Postgres URL");
    let (client, connection) = config
        .connect(NoTls)
        .await
        .expect("the Postgres of COUNTERSIGN_TEST_POSTGRES should answer");
    let connection = tokio::spawn(connection);
    // Postgres names are at most 63 bytes: 17 + 13 + 1 + 32.
    let name: String = name.chars().take(13).collect();
    let database = format!("countersign_test_{name}_{}", uuid::Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .await
        .expect("the test server should let us create a database");
    drop(client);
    let _ = connection.await;
    config.dbname(&database);
    Some(config)
}

/// A store on a new, empty database, or `None` when no server is configured.
async fn fresh_store(name: &str) -> Option<PostgresStore> {
    let config = fresh_database(name).await?;
    Some(
        PostgresStore::connect_with(config)
            .await
            .expect("the store should connect to a fresh database"),
    )
}

/// The one number `sql` selects.
async fn number(store: &PostgresStore, sql: &str) -> i64 {
    store.rows(sql, &[], "test").await.unwrap()[0].get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_of_many_sessions_all_land_and_a_bad_one_fails_alone() {
    let Some(store) = fresh_store("concurrent").await else {
        return;
    };
    a_bad_commit_among_many_fails_alone(&store).await;
    assert_eq!(
        number(&store, "SELECT count(*) FROM pending_approvals").await,
        63
    );
    assert_eq!(number(&store, "SELECT count(*) FROM ledger").await, 63);
}

#[tokio::test]
async fn a_payment_committed_twice_is_one_ledger_row() {
    let Some(config) = fresh_database("ledger").await else {
        return;
    };
    let store = PostgresStore::connect_with(config.clone()).await.unwrap();
    let mut record = waiting_record();
    store.save(&record).await.unwrap();
    record.updated_at_ms += 1;
    store.save(&record).await.unwrap();
    // Another instance (a store of its own on the same database) that read the record commits
    // it again: the payment stays one row.
    let other = PostgresStore::connect_with(config).await.unwrap();
    assert!(other.load("chat").await.unwrap().is_some());
    other.save(&record).await.unwrap();
    assert_eq!(number(&store, "SELECT count(*) FROM ledger").await, 1);
    let paid = record.wallet.transactions.read()[0].amount_cents;
    assert_eq!(store.spent(4).await.unwrap().today_cents, paid);
    assert_eq!(
        store.spent(86_400_000 + 4).await.unwrap().today_cents,
        0,
        "paid on day 0"
    );
    // The first instance's copy is out of date now: it reads it again before it writes.
    assert!(store.stale("chat").await.unwrap());
    let record = store.load("chat").await.unwrap().unwrap().record;
    assert!(!store.stale("chat").await.unwrap());
    let mut record = record;
    pay_ken(&mut record);
    store.save(&record).await.unwrap();
    assert_eq!(number(&store, "SELECT count(*) FROM ledger").await, 2);
    let loaded = store.load("chat").await.unwrap().unwrap().record;
    assert_eq!(loaded, record);
}

#[tokio::test]
async fn a_commit_of_a_record_another_instance_changed_is_refused_and_writes_nothing() {
    let Some(config) = fresh_database("conflict").await else {
        return;
    };
    let a = PostgresStore::connect_with(config.clone()).await.unwrap();
    let b = PostgresStore::connect_with(config).await.unwrap();
    // Both start the same new chat: the second to commit is refused.
    let record = waiting_record();
    assert_eq!(a.load("chat").await.unwrap(), None);
    assert_eq!(b.load("chat").await.unwrap(), None);
    a.save(&record).await.unwrap();
    let refused = b.save(&record).await.unwrap_err();
    assert!(refused.is_conflict(), "{refused}");
    assert!(b.stale("chat").await.unwrap());
    // Both read it; A pays, then B's copy (without the payment) is refused, whole: its
    // audit rows and ledger rows are not written either.
    let mut at_a = a.load("chat").await.unwrap().unwrap().record;
    let mut at_b = b.load("chat").await.unwrap().unwrap().record;
    pay_ken(&mut at_a);
    a.save(&at_a).await.unwrap();
    at_b.updated_at_ms += 7;
    let event = crate::agent::store::audit::event(
        crate::agent::store::AuditKind::Approved,
        7,
        "chat",
        "turn-1",
        "call-1",
        "process_payment",
        &json!({}),
    );
    let refused = b.commit(&at_b, &[event]).await.unwrap_err();
    assert!(refused.is_conflict(), "{refused}");
    assert_eq!(number(&a, "SELECT count(*) FROM ledger").await, 2);
    assert_eq!(number(&a, "SELECT count(*) FROM audit").await, 0);
    assert_eq!(a.load("chat").await.unwrap().unwrap().record, at_a);
    // A commit that is not a conflict says so.
    assert!(!refused.to_string().is_empty());
    assert!(!a.stale("chat").await.unwrap());
}

/// ADR 0045's amendment: the entries a copy loaded with its head only reads later are taken only
/// if no other instance committed the chat since (its version is the one this instance knows);
/// else they may not be the ones the head went with, and the read is a conflict.
#[tokio::test]
async fn entries_read_after_the_head_are_refused_once_another_instance_committed() {
    let Some(config) = fresh_database("head").await else {
        return;
    };
    let a = PostgresStore::connect_with(config.clone()).await.unwrap();
    let b = PostgresStore::connect_with(config).await.unwrap();
    let chat = crate::agent::store::tests::long_record("chat", 20);
    a.save(&chat).await.unwrap();
    let mut at_a = a.load_head("chat").await.unwrap().unwrap().record;
    let lens = [at_a.history.unread(), at_a.messages.unread()];
    assert_eq!(lens, [19, 19]);
    // A's own commit changes nothing for it.
    at_a.updated_at_ms += 1;
    at_a.history
        .push(crate::agent::history::HistoryItem::user("at a"));
    a.save(&at_a).await.unwrap();
    let [history, _] = a.read_entries("chat", lens).await.unwrap();
    assert_eq!(history.len(), 19);
    // B rewrites the messages from the start.
    let mut at_b = b.load("chat").await.unwrap().unwrap().record;
    at_b.messages.truncate(0);
    b.save(&at_b).await.unwrap();
    let refused = a.read_entries("chat", lens).await.unwrap_err();
    assert!(refused.is_conflict(), "{refused}");
}

#[tokio::test]
async fn an_approval_is_found_by_its_session_until_it_is_answered() {
    let Some(store) = fresh_store("owner").await else {
        return;
    };
    let mut record = waiting_record();
    store.save(&record).await.unwrap();
    assert_eq!(
        store
            .approval_owner("approval-chat")
            .await
            .unwrap()
            .as_deref(),
        Some("chat")
    );
    assert_eq!(store.approval_owner("approval-other").await.unwrap(), None);
    record.turn.as_mut().unwrap().calls[0].phase = CallPhase::Ready {
        args: json!({}),
        edited: false,
    };
    store.save(&record).await.unwrap();
    assert_eq!(store.approval_owner("approval-chat").await.unwrap(), None);
    assert_eq!(
        number(&store, "SELECT count(*) FROM pending_approvals").await,
        0
    );
}

#[tokio::test]
async fn a_person_reads_the_audit_of_their_chats_and_their_own_answers() {
    let Some(store) = fresh_store("visible").await else {
        return;
    };
    let mut ana = SessionRecord::new("ana-chat", 1);
    ana.owner = Some("p-ana".into());
    let asked = audit::sample("ana-chat", AuditKind::Requested, json!({"amount": 1}));
    let mut answered = audit::sample("ana-chat", AuditKind::Approved, json!({"amount": 1}));
    answered.actor = Some(Actor {
        transport: "inbox".into(),
        person: Some("p-ben".into()),
        ..Actor::default()
    });
    store
        .commit(&ana, &[asked.clone(), answered.clone()])
        .await
        .unwrap();
    let local = audit::sample("local-chat", AuditKind::Requested, json!({"amount": 2}));
    store
        .commit(
            &SessionRecord::new("local-chat", 2),
            std::slice::from_ref(&local),
        )
        .await
        .unwrap();
    // The owner is written once: a later commit naming someone else does not take the chat.
    ana.owner = Some("p-eve".into());
    store.save(&ana).await.unwrap();

    let visible_to = |person: &str| AuditQuery {
        visible_to: Some(person.into()),
        ..AuditQuery::default()
    };
    let events = |records: Vec<AuditRecord>| -> Vec<AuditEvent> {
        records.into_iter().map(|r| r.event).collect()
    };
    assert_eq!(
        events(store.audit(&visible_to("p-ana")).await.unwrap()),
        [answered.clone(), asked]
    );
    assert_eq!(
        events(store.audit(&visible_to("p-ben")).await.unwrap()),
        [answered]
    );
    assert_eq!(
        events(
            store
                .audit(&visible_to(crate::agent::people::LOCAL))
                .await
                .unwrap()
        ),
        [local]
    );
    assert!(store.audit(&visible_to("p-eve")).await.unwrap().is_empty());
}
