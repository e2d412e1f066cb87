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

/// A database written before ADR 0038 (each chat's history, messages, payments and answered
/// approvals as JSON columns of its row) reads back the same once migrated, and the chat goes on
/// from there.
#[tokio::test]
async fn a_chat_written_whole_reads_back_the_same_after_the_append_only_migration() {
    let Some(config) = fresh_database("append_only_migrate").await else {
        return;
    };
    let old = crate::agent::store::tests::long_record("old", 50);
    let empty = SessionRecord::new("empty", 3);
    {
        let (mut client, connection) = config.connect(NoTls).await.unwrap();
        let connection = tokio::spawn(connection);
        let tx = client.transaction().await.unwrap();
        migrate_below(&tx, 10).await;
        for r in [&old, &empty] {
            let c = crate::agent::store::tests::columns_before_0038(r);
            tx.execute(
                "INSERT INTO sessions (id, created_at_ms, updated_at_ms, turn_status, history,
                     messages, wallet, turn, resolved_approvals, tool_state, owner, version)
                 VALUES ($1, $2, $3, 'awaiting_person', $4, $5, $6, $7, $8, $9, NULL, 1)",
                &[
                    &r.id,
                    &r.created_at_ms,
                    &r.updated_at_ms,
                    &c.history,
                    &c.messages,
                    &c.wallet,
                    &c.turn,
                    &c.resolved,
                    &c.tool_state,
                ],
            )
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
        drop(client);
        let _ = connection.await;
    }
    let store = PostgresStore::connect_with(config.clone()).await.unwrap();
    let mut chat = store.load("old").await.unwrap().unwrap().record;
    assert_eq!(chat, old);
    assert_eq!(store.load("empty").await.unwrap().unwrap().record, empty);
    chat.history.push(crate::agent::history::HistoryItem::user(
        "after the upgrade",
    ));
    chat.resolved_approvals.remove(&"approval-001".to_owned());
    store.save(&chat).await.unwrap();
    drop(store);
    let store = PostgresStore::connect_with(config).await.unwrap();
    assert_eq!(store.load("old").await.unwrap().unwrap().record, chat);
}

/// Makes `tx`'s database as the migrations before `version` left it, recorded as applied.
async fn migrate_below(tx: &tokio_postgres::Transaction<'_>, version: i64) {
    tx.batch_execute("CREATE TABLE countersign_schema (version BIGINT NOT NULL)")
        .await
        .unwrap();
    for &(applied, sql) in MIGRATIONS.iter().filter(|(v, _)| *v < version) {
        tx.batch_execute(sql).await.unwrap();
        tx.execute(
            "INSERT INTO countersign_schema (version) VALUES ($1)",
            &[&applied],
        )
        .await
        .unwrap();
    }
}

/// A database from before the chain: its records are chained when it is migrated, the chain
/// says where they end, and the records after them follow on.
#[tokio::test]
async fn an_existing_log_is_chained_when_the_database_is_migrated() {
    let Some(config) = fresh_database("chain_migrate").await else {
        return;
    };
    {
        let (mut client, connection) = config.connect(NoTls).await.unwrap();
        let connection = tokio::spawn(connection);
        let tx = client.transaction().await.unwrap();
        migrate_below(&tx, CHAIN_MIGRATION).await;
        for i in 0..3 {
            let event = audit::sample("old", AuditKind::Requested, json!({"i": i}));
            let json = crate::agent::store::encode::to_json(&event).unwrap();
            tx.execute(
                "INSERT INTO audit (at_ms, kind, session_id, turn_id, tool_call_id, tool,
                     args_digest, event)
                 VALUES (1, 'requested', 'old', 't', 'c', 'process_payment', 'd', $1)",
                &[&json],
            )
            .await
            .unwrap();
        }
        // A rolled-back insert leaves a gap in the identity's numbers.
        tx.batch_execute("SELECT setval(pg_get_serial_sequence('audit', 'seq'), 10)")
            .await
            .unwrap();
        let event = audit::sample("old", AuditKind::Approved, json!({"i": 9}));
        let json = crate::agent::store::encode::to_json(&event).unwrap();
        tx.execute(
            "INSERT INTO audit (at_ms, kind, session_id, turn_id, tool_call_id, tool,
                 args_digest, event)
             VALUES (1, 'approved', 'old', 't', 'c', 'process_payment', 'd', $1)",
            &[&json],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        drop(client);
        let _ = connection.await;
    }
    let store = PostgresStore::connect_with(config).await.unwrap();
    let head = store.chain_head().await.unwrap();
    assert_eq!((head.since, head.head.seq), (11, 11));
    store
        .append_audit(&[audit::sample("new", AuditKind::Requested, json!({}))])
        .await
        .unwrap();
    let chain = store.chain(0, 10).await.unwrap();
    let seqs: Vec<i64> = chain.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 11, 12]);
    let mut walk = crate::agent::audit::chain::Walk::from_start(head.since);
    for r in &chain {
        walk.record(r).unwrap();
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

#[tokio::test]
async fn the_reservations_migration_moves_each_grants_use_into_its_columns() {
    let Some(config) = fresh_database("grant_use").await else {
        return;
    };
    let mut grant = crate::protocol::grant::Grant::sample("g-old", "process_payment");
    grant.used_cents = 1_200;
    grant.uses = 2;
    {
        // A database as the build before migration 7 left it, with a grant used twice.
        let (mut client, connection) = config.connect(NoTls).await.unwrap();
        let connection = tokio::spawn(connection);
        let tx = client.transaction().await.unwrap();
        tx.batch_execute("CREATE TABLE countersign_schema (version BIGINT NOT NULL)")
            .await
            .unwrap();
        for (version, sql) in &MIGRATIONS[..6] {
            tx.batch_execute(sql).await.unwrap();
            tx.execute(
                "INSERT INTO countersign_schema (version) VALUES ($1)",
                &[version],
            )
            .await
            .unwrap();
        }
        tx.execute(
            "INSERT INTO grants (id, tool, chat, created_at_ms, expires_at_ms, revoked_at_ms, body)
             VALUES ('g-old', 'process_payment', NULL, 0, 100000, NULL, $1)",
            &[&crate::agent::store::encode::to_json(&grant).unwrap()],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        drop(client);
        let _ = connection.await;
    }
    let store = PostgresStore::connect_with(config).await.unwrap();
    let grants = store.grants().await.unwrap();
    assert_eq!((grants[0].used_cents, grants[0].uses), (1_200, 2));
    // Its budget (50 USD) holds: 38 USD fit, a cent more does not.
    let reserve = |cents: i64| {
        let claim = Claim {
            chat: "chat".into(),
            call: "c1".into(),
            cents,
            grant: Some("g-old".into()),
        };
        let store = store.clone();
        async move {
            store
                .reserve(10, &mut |_| vec![claim.clone()])
                .await
                .unwrap()
        }
    };
    assert_eq!(reserve(3_801).await, Reserved::Refused);
    assert_eq!(reserve(3_800).await, Reserved::Kept);
    let grants = store.grants().await.unwrap();
    assert_eq!((grants[0].used_cents, grants[0].uses), (5_000, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_starting_together_migrate_once_and_again_is_a_no_op() {
    let Some(config) = fresh_database("migrate").await else {
        return;
    };
    let (a, b) = tokio::join!(
        PostgresStore::connect_with(config.clone()),
        PostgresStore::connect_with(config.clone())
    );
    let (a, _b) = (a.unwrap(), b.unwrap());
    a.save(&waiting_record()).await.unwrap();
    let again = PostgresStore::connect_with(config).await.unwrap();
    assert_eq!(
        again.load("chat").await.unwrap().map(|s| s.record),
        Some(waiting_record())
    );
    let versions: Vec<i64> = again
        .rows(
            "SELECT version FROM countersign_schema ORDER BY version",
            &[],
            "test",
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let known: Vec<i64> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
    assert_eq!(versions, known, "each migration applied once");
}

#[tokio::test]
async fn a_database_from_a_newer_build_is_refused() {
    let Some(config) = fresh_database("newer").await else {
        return;
    };
    let store = PostgresStore::connect_with(config.clone()).await.unwrap();
    store
        .execute(
            "INSERT INTO countersign_schema (version) VALUES (99)",
            &[],
            "test",
        )
        .await
        .unwrap();
    let e = PostgresStore::connect_with(config).await.unwrap_err();
    let newest = MIGRATIONS.last().map_or(0, |(v, _)| *v);
    assert!(
        e.to_string().contains(&format!(
            "the database was migrated by a newer Countersign (schema 99; this build knows up \
             to {newest})"
        )),
        "{e}"
    );
}

#[tokio::test]
async fn an_unreachable_database_is_named_without_its_password() {
    // Port 1 on the loopback: nothing listens there.
    let e = PostgresStore::connect("postgres://countersign:hunter2@127.0.0.1:1/chats")
        .await
        .unwrap_err();
    let report = e.report();
    assert!(
        report.contains("cannot reach Postgres at 127.0.0.1:1/chats: "),
        "{report}"
    );
    assert!(!report.contains("hunter2"), "{report}");
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
    let paid = record.wallet.transactions[0].amount_cents;
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

/// The million-approval bench generates its chats in SQL (`bench/sql/million.sql`, issue #35):
/// the rows it makes are exactly those the store writes for the same chats.
#[tokio::test]
async fn generated_rows_equal_what_the_store_writes() {
    use crate::agent::inbox::fixtures::{Ask, waiting_record as asking};
    let Some(generated) = fresh_store("generated").await else {
        return;
    };
    let stored = fresh_store("stored").await.unwrap();
    // A chat of the local person waiting for one approval; its log names the approval too.
    let chat = |n: &str| -> (SessionRecord, Vec<TurnEntry>) {
        let approval = format!("tmpl-apv{n}");
        let mut ask = Ask::new(&approval, 1_000);
        ask.needs = crate::protocol::countersign::Requirement::default();
        let record = asking(&format!("tmpl-chat{n}"), None, &[ask]);
        let log = vec![
            TurnEntry::Chunk(crate::protocol::Chunk::start(format!("m-{approval}"))),
            TurnEntry::Pause,
        ];
        (record, log)
    };
    let (record, log) = chat("");
    generated.commit_paused(&record, &[], &log).await.unwrap();
    let client = generated.client().await.unwrap();
    client
        .batch_execute(include_str!("../../../../bench/sql/million.sql"))
        .await
        .unwrap();
    client
        .execute(
            "SELECT countersign_bench_copies('tmpl-chat', 'tmpl-apv', 1, 3)",
            &[],
        )
        .await
        .unwrap();
    for n in ["", "-1", "-2", "-3"] {
        let (record, log) = chat(n);
        stored.commit_paused(&record, &[], &log).await.unwrap();
    }
    for table in [
        "sessions",
        "session_entries",
        "session_resolutions",
        "paused_turn_logs",
        "pending_approvals",
        "approval_keys",
    ] {
        let sql = format!("SELECT row_to_json(t)::TEXT FROM {table} t ORDER BY 1");
        let rows = |store: &PostgresStore| {
            let sql = sql.clone();
            let store = store.clone();
            async move { store.strings(&sql, &[], "test").await.unwrap() }
        };
        let (made, written) = (rows(&generated).await, rows(&stored).await);
        if table.starts_with("session_") {
            // A chat's entries (ADR 0038): as many for each of the four.
            assert_eq!(made.len() % 4, 0, "{table}");
        } else {
            assert_eq!(made.len(), 4, "{table}");
        }
        assert_eq!(made, written, "{table}");
    }
}

/// The overdue sweep runs every second on every instance sharing the database: with 1,000,000
/// waiting approvals, a scan of the whole table per sweep was the approvals' p99 (bench §9:
/// 29–33 ms, 17.9 ms with the index). Its queries are ranges of an index.
#[tokio::test]
async fn the_overdue_sweep_reads_a_range_of_an_index_not_every_waiting_approval() {
    let Some(store) = fresh_store("overdue_sweep_index").await else {
        return;
    };
    let client = store.client().await.unwrap();
    // With scans priced out, a plan still scanning has no index to use.
    client
        .batch_execute("SET enable_seqscan = off")
        .await
        .unwrap();
    for table in ["pending_approvals", "pending_browser_calls"] {
        let plan: Vec<String> = client
            .query(
                &format!("EXPLAIN SELECT session_id FROM {table} WHERE deadline_ms <= 5"),
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(
            !plan.iter().any(|line| line.contains("Seq Scan")),
            "{table}: {plan:#?}"
        );
    }
}
