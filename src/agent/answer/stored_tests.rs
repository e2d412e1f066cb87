//! ADR 0045: an answer to a chat read back from the store decodes none of the chat's entries
//! (its history, its earlier messages), so its cost does not grow with the chat. Proved with
//! entries that no longer decode: the old load decoded every one and failed.

use std::sync::Arc;

use super::tests::ask;
use crate::agent::{
    Runtime, TurnEntry,
    gate::{ApprovalDecision, PersonInput},
    session::TurnStatus,
    store::{SessionStore, sqlite::SqliteStore},
};
use crate::protocol::Chunk;

/// A runtime on `store`, every call of it asked (no rule lets one run).
async fn runtime_on(store: &Arc<SqliteStore>) -> Arc<Runtime> {
    super::tests::runtime_with(store.clone(), store.clone(), "").await
}

#[tokio::test]
async fn an_answer_to_a_stored_chat_decodes_none_of_its_entries() {
    let path = std::env::temp_dir().join(format!(
        "countersign-undecoded-{}-{}.db",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    // One instance asks, and stops: the chat waits in the store only.
    let approval = {
        let asking = runtime_on(&store).await;
        ask(&asking, "w", "check the weather in Paris", "get_weather").await
    };
    // Every stored entry but the turn's own message (the last) no longer decodes.
    let broken = rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE session_entries SET body = '{oops' WHERE session_id = 'w' AND (list = 0
             OR (list = 1 AND position < (SELECT max(position) FROM session_entries
                                          WHERE session_id = 'w' AND list = 1)))",
            [],
        )
        .unwrap();
    assert!(broken >= 2, "the question and the model's call: {broken}");

    // Another instance gets the answer: the chat is read from the store and answered.
    let answering = runtime_on(&store).await;
    answering
        .submit(
            "w",
            &[PersonInput::Approval {
                approval_id: approval,
                decision: ApprovalDecision::Approve,
                step_up: None,
            }],
        )
        .await
        .expect("the answer needs none of the chat's entries");
    let session = answering.session("w").await.unwrap();
    let log = session.current_log().expect("the turn goes on");
    let mut reader = log.subscribe(0);
    let mut kinds = Vec::new();
    while let Some(entry) = reader.next().await {
        if let TurnEntry::Chunk(chunk) = entry {
            kinds.push(chunk.wire_type().into_owned());
            if let Chunk::Error(error) = &chunk {
                assert!(error.error_text.contains("history"), "{error:?}");
            }
        }
    }
    // The call ran and its output went out; only the model's next step, which reads the whole
    // history, met the broken entries.
    assert!(
        kinds.iter().any(|k| k == "tool-output-available"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "error"), "{kinds:?}");
    let stored = store.load("w").await.unwrap().unwrap().record;
    assert_eq!(stored.turn.unwrap().status, TurnStatus::Failed);
    drop((answering, session, store));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
