//! The contracts every store keeps, and the fixtures their tests share.

use serde_json::json;

use super::*;
use crate::agent::{
    gate::{CallPhase, StepCall},
    history::ToolCall,
    session::{TurnEntry, TurnRecord, TurnStatus},
    tools::{ToolLocation, Wallet},
};
use crate::protocol::money::Money;

mod chain;
mod inbox;
mod people;
mod policy;
mod sessions;

pub(crate) use chain::chain_contract;
pub(crate) use inbox::inbox_contract;
pub(crate) use people::{people_contract, signin_contract};
pub(crate) use policy::{policy_contract, reservation_race_contract};
pub(crate) use sessions::{
    BREAK_ALL_BUT_THE_LAST_MESSAGE, FORGET_THE_TOTALS, a_bad_commit_among_many_fails_alone,
    a_long_chat, a_paying_chat, columns_before_0038, journal_contract, long_record,
    old_wallet_contract, store_contract, undecoded_entries_contract,
};

pub(crate) fn turn(status: TurnStatus) -> TurnRecord {
    TurnRecord {
        id: "t1".into(),
        message_id: "m1".into(),
        status,
        steps: 1,
        calls: Vec::new(),
        held_text: Vec::new(),
        usage: Default::default(),
        inputs: 0,
        transport: crate::agent::Transport::Sse,
        timing: None,
    }
}

/// The chat `"chat"` waiting for the approval `approval-chat` (see [`waiting_record_named`]).
pub(crate) fn waiting_record() -> SessionRecord {
    waiting_record_named("chat")
}

/// A chat whose turn waits for the approval `approval-<id>`, after one payment (`txn-<id>`).
pub(crate) fn waiting_record_named(id: &str) -> SessionRecord {
    let mut record = SessionRecord::new(id, 5);
    let mut t = turn(TurnStatus::AwaitingPerson);
    t.calls.push(StepCall {
        call: ToolCall {
            id: "call-1".into(),
            name: "process_payment".into(),
            args: json!({"amount": 50, "recipient": "Hanako"}),
            provider_data: None,
        },
        location: ToolLocation::Server,
        phase: CallPhase::AwaitingApproval {
            approval_id: format!("approval-{id}"),
            requested_at_ms: 5,
            deadline_ms: 300_005,
        },
        announced: false,
        gated_by: Some(format!("approval-{id}")),
        ruling: None,
        signatures: Vec::new(),
        signed_args: None,
        proposed_by: None,
        denied_by: None,
        revision: 0,
        revision_shown: 0,
        dropped: Vec::new(),
        countersign_closed: false,
    });
    record.turn = Some(t);
    let mut wallet = Wallet::default();
    wallet
        .pay(
            "call-0",
            Money::parse("10", "USD").unwrap(),
            "Bob",
            "",
            4,
            || format!("txn-{id}"),
        )
        .unwrap();
    record.wallet = wallet;
    record
}

/// Adds a second payment to `record`'s wallet: 5 USD to Ken at 6 (`txn-3`, call `call-3`).
pub(crate) fn pay_ken(record: &mut SessionRecord) {
    record
        .wallet
        .pay(
            "call-3",
            Money::parse("5", "USD").unwrap(),
            "Ken",
            "",
            6,
            || "txn-3".into(),
        )
        .unwrap();
}

/// 64 sessions committed at once, one of which breaks the ledger's uniqueness (two payments for
/// one tool call under different transaction ids): that commit fails alone, leaving nothing
/// behind, while the 63 around it land. The caller counts the views with its own SQL.
/// The tool lists kept for MCP servers: the last one kept per server.
pub(crate) async fn tool_list_contract(store: &dyn ToolListStore) {
    assert_eq!(store.kept_tool_list("files").await.unwrap(), None);
    store.keep_tool_list("files", "[1]", 1).await.unwrap();
    store.keep_tool_list("files", "[2]", 2).await.unwrap();
    store.keep_tool_list("other", "[]", 2).await.unwrap();
    assert_eq!(
        store.kept_tool_list("files").await.unwrap().as_deref(),
        Some("[2]")
    );
    assert_eq!(
        store.kept_tool_list("other").await.unwrap().as_deref(),
        Some("[]")
    );
}

#[tokio::test]
async fn the_memory_store_keeps_the_contract() {
    store_contract(&MemoryStore::default()).await;
    inbox_contract(&[&MemoryStore::default()]).await;
    journal_contract(&MemoryStore::default()).await;
    policy_contract(&MemoryStore::default()).await;
    let store = MemoryStore::default();
    reservation_race_contract(&[&store]).await;
    let chained = MemoryStore::default();
    chain_contract(&chained, &chained).await;
    signin_contract(&MemoryStore::default()).await;
    tool_list_contract(&MemoryStore::default()).await;
    people_contract(&MemoryStore::default()).await;
}

#[tokio::test]
async fn the_memory_store_forgets_a_paused_log_once_its_turn_is_over() {
    let store = MemoryStore::default();
    let mut record = SessionRecord::new("a", 10);
    record.turn = Some(turn(TurnStatus::AwaitingPerson));
    store
        .commit_paused(&record, &[], &[TurnEntry::Pause])
        .await
        .unwrap();
    assert_eq!(lock(&store.paused_logs).len(), 1);
    record.turn = Some(turn(TurnStatus::Finished));
    store.commit(&record, &[]).await.unwrap();
    assert!(lock(&store.paused_logs).is_empty());
}

#[test]
fn a_store_error_keeps_its_cause_apart_from_its_message() {
    let e = StoreError::caused_by("cannot commit", std::io::Error::other("disk on fire"));
    assert_eq!(e.to_string(), "session store: cannot commit");
    let cause = std::error::Error::source(&e).map(ToString::to_string);
    assert_eq!(cause.as_deref(), Some("disk on fire"));
    assert_eq!(e.report(), "session store: cannot commit: disk on fire");
    assert_eq!(StoreError::new("gone").report(), "session store: gone");
}
