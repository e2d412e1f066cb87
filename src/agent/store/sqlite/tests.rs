use std::time::Duration;

use serde_json::json;

use super::migrate::MIGRATIONS;
use super::*;
use crate::agent::{
    gate::CallPhase,
    session::SessionRecord,
    store::tests::{
        a_bad_commit_among_many_fails_alone, pay_ken, people_contract, policy_contract,
        reservation_race_contract, signin_contract, store_contract, tool_list_contract,
        waiting_record, waiting_record_named,
    },
    store::{
        AuditQuery, Claim, PolicyStore, Reserved, SessionStore, SignIn, SignInStore, audit,
        audit::AuditKind,
    },
};

#[tokio::test]
async fn the_sqlite_store_keeps_the_contract() {
    store_contract(&SqliteStore::in_memory().unwrap()).await;
    crate::agent::store::tests::inbox_contract(&[&SqliteStore::in_memory().unwrap()]).await;
    policy_contract(&SqliteStore::in_memory().unwrap()).await;
    let chained = SqliteStore::in_memory().unwrap();
    crate::agent::store::tests::chain_contract(&chained, &chained).await;
    signin_contract(&SqliteStore::in_memory().unwrap()).await;
    tool_list_contract(&SqliteStore::in_memory().unwrap()).await;
    people_contract(&SqliteStore::in_memory().unwrap()).await;
    crate::agent::store::tests::journal_contract(&SqliteStore::in_memory().unwrap()).await;
}

/// A database written before ADR 0038 (each chat's history, messages, payments and answered
/// approvals as JSON columns of its row) reads back the same once migrated, and the chat goes on
/// from there, across a restart.
#[tokio::test]
async fn a_chat_written_whole_reads_back_the_same_after_the_append_only_migration() {
    let path = temp_path("migrate-append-only");
    let old = crate::agent::store::tests::long_record("old", 50);
    let empty = SessionRecord::new("empty", 3);
    {
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for (_, sql) in &MIGRATIONS[..15] {
            tx.execute_batch(sql).unwrap();
        }
        tx.pragma_update(None, "user_version", 15).unwrap();
        for r in [&old, &empty] {
            let c = crate::agent::store::tests::columns_before_0038(r);
            tx.execute(
                "INSERT INTO sessions (id, created_at_ms, updated_at_ms, turn_status, history,
                     messages, wallet, turn, resolved_approvals, tool_state, owner)
                 VALUES (?1, ?2, ?3, 'awaiting_person', ?4, ?5, ?6, ?7, ?8, ?9, NULL)",
                params![
                    r.id,
                    r.created_at_ms,
                    r.updated_at_ms,
                    c.history,
                    c.messages,
                    c.wallet,
                    c.turn,
                    c.resolved,
                    c.tool_state,
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let mut chat = store.load("old").await.unwrap().unwrap().record;
    assert_eq!(chat, old);
    assert_eq!(store.load("empty").await.unwrap().unwrap().record, empty);
    chat.history.push(crate::agent::history::HistoryItem::user(
        "after the upgrade",
    ));
    chat.resolved_approvals.remove(&"approval-001".to_owned());
    store.save(&chat).await.unwrap();
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.load("old").await.unwrap().unwrap().record, chat);
    drop(store);
    remove_db(&path);
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "countersign-{name}-{}-{}.db",
        std::process::id(),
        uuid::Uuid::new_v4()
    ))
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// ADR 0045 on SQLite: a chat opens and goes on without its entries being decoded.
#[tokio::test]
async fn a_chat_opens_without_decoding_its_entries() {
    use crate::agent::store::tests::{BREAK_ALL_BUT_THE_LAST_MESSAGE, a_long_chat};
    let store = SqliteStore::in_memory().unwrap();
    a_long_chat(&store).await;
    store
        .with(|conn| {
            conn.execute(BREAK_ALL_BUT_THE_LAST_MESSAGE, [])
                .map_err(err("break"))
        })
        .await
        .unwrap();
    crate::agent::store::tests::undecoded_entries_contract(&store).await;
}

/// ADR 0045's fourth amendment on SQLite: a wallet written before running totals is read whole
/// once, and kept with them.
#[tokio::test]
async fn a_wallet_from_before_running_totals_is_summed_once() {
    use crate::agent::store::tests::{FORGET_THE_TOTALS, a_paying_chat, old_wallet_contract};
    let store = SqliteStore::in_memory().unwrap();
    let chat = a_paying_chat(&store).await;
    let changed = store
        .with(|conn| {
            conn.execute(FORGET_THE_TOTALS[0], [])
                .map_err(err("forget"))
        })
        .await
        .unwrap();
    assert_eq!(changed, 1);
    old_wallet_contract(&store, &chat).await;
}

/// Issue #35: the day's spending is a running total the ledger's triggers keep (migration 17).
/// A database with payments from before it reads the same totals after it, by day, and the
/// payments committed after it move them.
#[tokio::test]
async fn the_days_spending_reads_the_same_after_the_running_totals_migration() {
    use crate::agent::policy::spending::start_of_day;
    const DAY: i64 = 86_400_000;
    let path = temp_path("migrate-daily-spending");
    let today = start_of_day(20_000 * DAY + 5);
    {
        let mut conn = Connection::open(&path).unwrap();
        // Ledger rows alone, without their chats' rows.
        conn.pragma_update(None, "foreign_keys", false).unwrap();
        let tx = conn.transaction().unwrap();
        for (_, sql) in &MIGRATIONS[..16] {
            tx.execute_batch(sql).unwrap();
        }
        tx.pragma_update(None, "user_version", 16).unwrap();
        for (n, (chat, cents, at)) in [
            ("a", 100, today - 1),
            ("a", 200, today),
            ("b", 300, today + DAY - 1),
            ("a", 400, today + DAY),
        ]
        .into_iter()
        .enumerate()
        {
            tx.execute(
                "INSERT INTO ledger (transaction_id, session_id, tool_call_id, amount_cents,
                     currency, recipient, description, balance_after_cents, at_ms)
                 VALUES (?1, ?2, ?1, ?3, 'USD', 'r', '', 0, ?4)",
                params![format!("t{n}"), chat, cents, at],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let spent = |at| {
        let store = &store;
        async move { store.spent(at).await.unwrap().today_cents }
    };
    // As before: the day's payments and any dated after it.
    assert_eq!(spent(today).await, 900);
    assert_eq!(spent(today + DAY).await, 400);
    assert_eq!(spent(today - 1).await, 1_000);
    let mut chat = crate::agent::store::tests::waiting_record_named("c");
    crate::agent::store::tests::pay_ken(&mut chat);
    store.save(&chat).await.unwrap();
    let paid: i64 = chat
        .wallet
        .transactions
        .read()
        .iter()
        .map(|t| t.amount_cents)
        .sum();
    assert_eq!(
        spent(0).await,
        1_000 + paid,
        "payments of day 0 count from it on"
    );
    drop(store);
    remove_db(&path);
}

#[tokio::test]
async fn the_signing_secret_and_ended_signins_survive_a_restart() {
    let path = temp_path("signins");
    let (secret, ended) = {
        let store = SqliteStore::open(&path).unwrap();
        store
            .record_signin(&SignIn {
                id: "s".into(),
                created_ms: 1,
                expires_ms: 10_000,
                address: None,
                person: None,
            })
            .await
            .unwrap();
        store.end_signin("s", 2).await.unwrap();
        (
            store.signing_secret().await.unwrap(),
            store.ended_signins(3).await.unwrap(),
        )
    };
    let reopened = SqliteStore::open(&path).unwrap();
    assert_eq!(reopened.signing_secret().await.unwrap(), secret);
    assert_eq!(reopened.ended_signins(3).await.unwrap(), ended);
    assert_eq!(ended, [("s".to_string(), 10_000)]);
    drop(reopened);
    remove_db(&path);
}

/// The record `store` loads for the chat `"chat"`.
async fn loaded_chat(store: &SqliteStore) -> Option<SessionRecord> {
    store.load("chat").await.unwrap().map(|s| s.record)
}

#[tokio::test]
async fn a_record_survives_reopening_the_file_with_its_views() {
    let path = temp_path("reopen");
    let record = waiting_record();
    {
        let store = SqliteStore::open(&path).unwrap();
        store.save(&record).await.unwrap();
        store.save(&record).await.unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(loaded_chat(&store).await, Some(record));
    assert_eq!(store.unfinished().await.unwrap(), ["chat"]);
    assert_eq!(
        store
            .approval_owner("approval-chat")
            .await
            .unwrap()
            .as_deref(),
        Some("chat")
    );
    let (pending, ledger): (i64, i64) = store
        .with(|conn| {
            let count = |sql: &str| conn.query_row(sql, [], |r| r.get(0));
            Ok((
                count("SELECT count(*) FROM pending_approvals WHERE deadline_ms = 300005")
                    .map_err(err("count"))?,
                count("SELECT count(*) FROM ledger WHERE tool_call_id = 'call-0'")
                    .map_err(err("count"))?,
            ))
        })
        .await
        .unwrap();
    assert_eq!((pending, ledger), (1, 1));
    drop(store);
    remove_db(&path);
}

#[tokio::test]
async fn answered_approvals_leave_the_pending_view() {
    let store = SqliteStore::in_memory().unwrap();
    let mut record = waiting_record();
    store.save(&record).await.unwrap();
    record.turn.as_mut().unwrap().calls[0].phase = CallPhase::Ready {
        args: json!({}),
        edited: false,
    };
    store.save(&record).await.unwrap();
    let pending: i64 = store
        .with(|conn| {
            conn.query_row("SELECT count(*) FROM pending_approvals", [], |r| r.get(0))
                .map_err(err("count"))
        })
        .await
        .unwrap();
    assert_eq!(pending, 0);
}

#[tokio::test]
async fn a_database_from_a_newer_build_is_refused() {
    let path = temp_path("newer");
    {
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let e = SqliteStore::open(&path).unwrap_err();
    assert!(e.to_string().contains("schema version 99"), "{e}");
    let _ = std::fs::remove_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commits_queued_together_share_a_transaction_and_fail_alone() {
    let path = temp_path("group");
    let store = SqliteStore::open(&path).unwrap();
    a_bad_commit_among_many_fails_alone(&store).await;
    let (pending, ledger): (i64, i64) = store
        .with(|conn| {
            let count = |sql: &str| conn.query_row(sql, [], |r| r.get(0));
            Ok((
                count("SELECT count(*) FROM pending_approvals").map_err(err("count"))?,
                count("SELECT count(*) FROM ledger").map_err(err("count"))?,
            ))
        })
        .await
        .unwrap();
    assert_eq!((pending, ledger), (63, 63));
    drop(store);
    remove_db(&path);
}

/// The pending approval ids and the number of ledger rows.
async fn views(store: &SqliteStore) -> (Vec<String>, i64) {
    store
        .with(|conn| {
            let mut stmt = conn
                .prepare("SELECT approval_id FROM pending_approvals ORDER BY approval_id")
                .map_err(err("views"))?;
            let ids: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect())
                .map_err(err("views"))?;
            let ledger: i64 = conn
                .query_row("SELECT count(*) FROM ledger", [], |r| r.get(0))
                .map_err(err("views"))?;
            Ok((ids, ledger))
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn unchanged_views_are_kept_and_changed_ones_rewritten() {
    let store = SqliteStore::in_memory().unwrap();
    let mut record = waiting_record();
    store.save(&record).await.unwrap();
    record.updated_at_ms += 1;
    store.save(&record).await.unwrap();
    assert_eq!(views(&store).await, (vec!["approval-chat".into()], 1));
    // A second pending approval and a second payment appear.
    let mut second = record.turn.as_ref().unwrap().calls[0].clone();
    second.call.id = "call-2".into();
    second.phase = CallPhase::AwaitingApproval {
        approval_id: "approval-2".into(),
        requested_at_ms: 6,
        deadline_ms: 300_006,
    };
    record.turn.as_mut().unwrap().calls.push(second);
    pay_ken(&mut record);
    store.save(&record).await.unwrap();
    assert_eq!(
        views(&store).await,
        (vec!["approval-2".into(), "approval-chat".into()], 2)
    );
    // The first one is answered.
    record.turn.as_mut().unwrap().calls.remove(0);
    store.save(&record).await.unwrap();
    assert_eq!(views(&store).await, (vec!["approval-2".into()], 2));
}

#[tokio::test]
async fn the_audit_migration_keeps_every_sequence_number() {
    let path = temp_path("migrate-audit");
    {
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        tx.execute_batch(MIGRATIONS[0].1).unwrap();
        tx.pragma_update(None, "user_version", 1).unwrap();
        for seq in [3, 7] {
            tx.execute(
                "INSERT INTO audit (seq, at_ms, kind, session_id, turn_id, tool_call_id,
                     approval_id, tool, args_digest, event)
                 VALUES (?1, 1, 'requested', 's', 't', 'c', NULL, 'process_payment', 'd', ?2)",
                params![
                    seq,
                    crate::agent::store::encode::to_json(&audit::sample(
                        "s",
                        AuditKind::Requested,
                        json!({"seq": seq})
                    ))
                    .unwrap()
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let mut record = SessionRecord::new("s", 1);
    record.updated_at_ms = 2;
    let event = audit::sample("s", AuditKind::Approved, json!({"seq": 8}));
    store
        .commit(&record, std::slice::from_ref(&event))
        .await
        .unwrap();
    let seqs: Vec<i64> = store
        .audit(&AuditQuery::default())
        .await
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(seqs, [8, 7, 3]);
    // The records that were there are chained, and the chain says where they end (ADR 0029).
    let chain = store.chain_head().await.unwrap();
    assert_eq!((chain.since, chain.head.seq), (7, 8));
    let mut walk = crate::agent::audit::chain::Walk::from_start(chain.since);
    for r in store.chain(0, 10).await.unwrap() {
        walk.record(&r).unwrap();
    }
    assert_eq!(walk.head(), chain.head);
    let version: i64 = store
        .with(|conn| {
            conn.pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(err("version"))
        })
        .await
        .unwrap();
    assert_eq!(version, MIGRATIONS.len() as i64);
    drop(store);
    remove_db(&path);
}

#[tokio::test]
async fn the_views_migration_keeps_pending_calls_and_payments() {
    let path = temp_path("migrate-views");
    {
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for (_, sql) in &MIGRATIONS[..3] {
            tx.execute_batch(sql).unwrap();
        }
        tx.pragma_update(None, "user_version", 3).unwrap();
        tx.execute_batch(
            "INSERT INTO sessions VALUES
                 ('s', 1, 2, 'awaiting_person', '[]', '[]', '{}', NULL, '{}'),
                 ('t', 1, 3, 'finished', '[]', '[]', '{}', NULL, '{}');
             INSERT INTO pending_approvals VALUES ('apv-1', 's', 'c-1', 'process_payment',
                 '{}', 1, 9);
             INSERT INTO pending_browser_calls VALUES ('c-2', 's', 'get_location', '{}', 9);
             INSERT INTO ledger VALUES ('txn-1', 't', 'c-0', 5000, 'USD', 'Hanako', '',
                 95000, 2);",
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.approval_owner("apv-1").await.unwrap().as_deref(),
        Some("s")
    );
    assert_eq!(store.unfinished().await.unwrap(), ["s"]);
    // Its waiting approval predates the inbox's columns (ADR 0039): the inbox does not find it
    // until the runtime commits its chat again, which `unindexed` names.
    assert_eq!(store.unindexed().await.unwrap(), ["s"]);
    assert_eq!(store.waiting("apv-1").await.unwrap(), None);
    let (browser, ledger, duplicate, keyed) = store
        .with(|conn| {
            let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
            let duplicate = conn.execute(
                "INSERT INTO ledger VALUES ('txn-2', 't', 'c-0', 1, 'USD', 'x', '', 1, 3)",
                [],
            );
            Ok((
                count("SELECT count(*) FROM pending_browser_calls WHERE session_id = 's'")
                    .map_err(err("count"))?,
                count("SELECT balance_after_cents FROM ledger WHERE transaction_id = 'txn-1'")
                    .map_err(err("count"))?,
                duplicate.is_err(),
                count(
                    "SELECT count(*) FROM sqlite_schema WHERE sql LIKE '%WITHOUT ROWID'
                         AND name IN ('pending_approvals', 'pending_browser_calls', 'ledger')",
                )
                .map_err(err("count"))?,
            ))
        })
        .await
        .unwrap();
    assert_eq!((browser, ledger, duplicate, keyed), (1, 95000, true, 3));
    drop(store);
    remove_db(&path);
}

/// What does not decode is an error, never a panic: a corrupt column of the chat's row fails its
/// load, naming the session; a corrupt entry (decoded only when read, ADR 0045) fails the reader
/// that needs it, naming the entry, and the rest of the chat still opens.
#[tokio::test]
async fn a_corrupt_row_is_an_error_naming_the_session_not_a_panic() {
    let store = SqliteStore::in_memory().unwrap();
    let mut record = SessionRecord::new("x", 1);
    record
        .history
        .push(crate::agent::history::HistoryItem::user("hi"));
    store.save(&record).await.unwrap();
    store
        .with(|conn| {
            conn.execute(
                "UPDATE session_entries SET body = '{oops' WHERE session_id = 'x' AND list = 0",
                [],
            )
            .map_err(err("corrupt"))
        })
        .await
        .unwrap();
    let mut read = store.load("x").await.unwrap().unwrap().record;
    assert_eq!(read.history.len(), 1);
    assert_eq!(read.history.decoded().unwrap_err().index, 0);
    store
        .with(|conn| {
            conn.execute("UPDATE sessions SET wallet = '{oops' WHERE id = 'x'", [])
                .map_err(err("corrupt"))
        })
        .await
        .unwrap();
    let e = store.load("x").await.unwrap_err();
    assert!(
        e.to_string().contains("session x") && e.to_string().contains("wallet"),
        "{e}"
    );
}

/// The WAL header's checkpoint sequence number: how many times the WAL started over.
fn wal_generation(path: &Path) -> u32 {
    let wal = std::fs::read(format!("{}-wal", path.display())).unwrap_or_default();
    wal.get(12..16)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

/// Waits (up to 10 s) for the WAL to start over after `generation`.
async fn next_generation(path: &Path, generation: u32) -> u32 {
    for _ in 0..1000 {
        let now = wal_generation(path);
        if now != generation {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the WAL never started over after generation {generation}");
}

#[tokio::test]
async fn when_commits_pause_the_wal_is_copied_and_started_over_before_the_next_commit() {
    let path = temp_path("quiet");
    let store = SqliteStore::open_checkpointing(
        &path,
        Durability::Full,
        CheckpointPolicy {
            quiet: Duration::from_millis(50),
            busy_frames: i64::MAX,
            restart_frames: i64::MAX,
        },
    )
    .unwrap();
    // Migrations are not commits the checkpointer hears of: nothing moves before a save.
    let before = wal_generation(&path);
    store.save(&waiting_record()).await.unwrap();
    let started_over = next_generation(&path, before).await;
    // The write that started it over is not a commit: it does not start another round.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(wal_generation(&path), started_over);
    // The next commit appends to the new WAL (its header is already on disk).
    store.save(&waiting_record_named("other")).await.unwrap();
    assert_eq!(wal_generation(&path), started_over);
    assert_eq!(loaded_chat(&store).await, Some(waiting_record()));
    drop(store);
    remove_db(&path);
}

#[tokio::test]
async fn a_long_wal_is_copied_while_commits_go_on() {
    let path = temp_path("busy");
    // Never quiet enough: only the WAL's length can trigger the checkpoint.
    let store = SqliteStore::open_checkpointing(
        &path,
        Durability::Normal,
        CheckpointPolicy {
            quiet: Duration::from_secs(3600),
            busy_frames: 1,
            restart_frames: i64::MAX,
        },
    )
    .unwrap();
    let before = wal_generation(&path);
    store.save(&waiting_record()).await.unwrap();
    next_generation(&path, before).await;
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(loaded_chat(&store).await, Some(waiting_record()));
    drop(store);
    remove_db(&path);
}

#[tokio::test]
async fn a_point_read_waits_for_the_reader_thread_when_the_inline_connection_is_taken() {
    let path = temp_path("inline");
    let store = SqliteStore::open(&path).unwrap();
    store.save(&waiting_record()).await.unwrap();
    let inline = store.inline.clone().unwrap();
    // Held by another thread, as by a point read in progress on another worker.
    let (taken, take) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let _held = inline.lock().unwrap();
        taken.send(()).unwrap();
        let _ = released.recv();
    });
    take.recv().unwrap();
    assert_eq!(loaded_chat(&store).await, Some(waiting_record()));
    assert_eq!(
        store
            .approval_owner("approval-chat")
            .await
            .unwrap()
            .as_deref(),
        Some("chat")
    );
    release.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(loaded_chat(&store).await, Some(waiting_record()));
    drop(store);
    remove_db(&path);
}

#[tokio::test]
async fn reservations_of_one_file_go_one_at_a_time() {
    let path = temp_path("race");
    let store = SqliteStore::open(&path).unwrap();
    let clone = store.clone();
    reservation_race_contract(&[&store, &clone]).await;
    drop((store, clone));
    remove_db(&path);
}

/// Reserves `cents` of grant `g-old` for call `call` at 10: how it went.
async fn reserve_from_old(store: &dyn PolicyStore, call: &str, cents: i64) -> Reserved {
    let claim = Claim {
        chat: "chat".into(),
        call: call.into(),
        cents,
        grant: Some("g-old".into()),
    };
    store
        .reserve(10, &mut |_| vec![claim.clone()])
        .await
        .unwrap()
}

#[tokio::test]
async fn the_reservations_migration_moves_each_grants_use_into_its_columns() {
    let path = temp_path("migrate-grants");
    let mut grant = crate::protocol::grant::Grant::sample("g-old", "process_payment");
    grant.used_cents = 1_200;
    grant.uses = 2;
    {
        let mut conn = Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        for (_, sql) in &MIGRATIONS[..12] {
            tx.execute_batch(sql).unwrap();
        }
        tx.pragma_update(None, "user_version", 12).unwrap();
        tx.execute(
            "INSERT INTO grants (id, tool, chat, created_at_ms, expires_at_ms, revoked_at_ms, body)
             VALUES ('g-old', 'process_payment', NULL, 0, 100000, NULL, ?1)",
            [crate::agent::store::encode::to_json(&grant).unwrap()],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    let grants = store.grants().await.unwrap();
    assert_eq!((grants[0].used_cents, grants[0].uses), (1_200, 2));
    // Its budget (50 USD) holds: 38 USD fit, a cent more does not.
    assert_eq!(
        reserve_from_old(&store, "c1", 3_801).await,
        Reserved::Refused
    );
    assert_eq!(reserve_from_old(&store, "c1", 3_800).await, Reserved::Kept);
    let grants = store.grants().await.unwrap();
    assert_eq!((grants[0].used_cents, grants[0].uses), (5_000, 3));
    drop(store);
    remove_db(&path);
}
