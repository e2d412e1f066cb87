//! Databases written by earlier builds: migrated once, whoever starts first, and read back the
//! same; a newer build's database refused; an unreachable one named without its password.

use super::*;

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
