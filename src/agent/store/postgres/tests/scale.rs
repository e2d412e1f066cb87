//! What a million waiting approvals rely on: the bench's generated rows are the store's own, and
//! the overdue sweep reads a range of an index.

use super::*;

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
        .batch_execute(include_str!("../../../../../bench/sql/million.sql"))
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
