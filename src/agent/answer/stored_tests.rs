//! ADR 0045: an answer to a chat read back from the store decodes none of the chat's entries
//! (its history, its earlier messages), so its cost does not grow with the chat. Proved with
//! entries that no longer decode: the old load decoded every one and failed.

use std::{sync::Arc, time::Duration};

use crate::agent::{
    Runtime, RuntimeSettings, Transport, TurnEntry, UserTurn,
    clock::{SequentialIds, SystemClock},
    gate::{ApprovalDecision, PersonInput},
    policy::{Policy, ToolFacts},
    session::TurnStatus,
    store::{PolicyStore, SessionStore, sqlite::SqliteStore},
    tools::{ToolRegistry, ToolSettings, WeatherSource},
};
use crate::models::demo::DemoModel;
use crate::protocol::Chunk;

/// A runtime on `store` (the demo model; the weather asks for an approval).
async fn runtime_on(store: &Arc<SqliteStore>) -> Arc<Runtime> {
    let tools = ToolRegistry::standard(&ToolSettings {
        approval_timeout: Duration::from_secs(600),
        browser_timeout: Duration::from_secs(10),
        weather: WeatherSource::Offline,
    });
    let policy = Policy::from_text("", &ToolFacts::all(&tools)).unwrap();
    let policy_store: Arc<dyn PolicyStore> = store.clone();
    policy.restore(policy_store, 0).await.unwrap();
    Runtime::builder(
        Arc::new(DemoModel::new(Duration::ZERO)),
        tools,
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        store.clone(),
        RuntimeSettings::default(),
    )
    .policy(Arc::new(policy))
    .build()
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
        let started = asking
            .start_turn(
                "w",
                UserTurn {
                    message_id: None,
                    text: "check the weather in Paris".into(),
                    attachments: Vec::new(),
                    transport: Transport::Sse,
                    ask_again: None,
                },
                None,
            )
            .await
            .unwrap();
        let mut reader = started.log.subscribe(0);
        // Logged after the commit of the record and its log.
        while !matches!(reader.next().await, Some(TurnEntry::Pause) | None) {}
        let record = asking.session("w").await.unwrap().snapshot();
        let call = &record.turn.as_ref().unwrap().calls[0];
        assert_eq!(call.call.name, "get_weather");
        call.approval_id().expect("asked").to_owned()
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
