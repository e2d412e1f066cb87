//! ADR 0045: an answer to a chat read back from the store decodes none of the chat's entries
//! (its history, its earlier messages), so its cost does not grow with the chat. Proved with
//! entries that no longer decode: the old load decoded every one and failed.

use std::sync::Arc;

use super::tests::ask;
use futures::future::BoxFuture;

use crate::agent::{
    Runtime, TurnEntry,
    session::TurnStatus,
    store::{
        SessionStore, StoreError,
        delegate::{Call, Delegate, Hook},
        sqlite::SqliteStore,
    },
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
        .submit("w", &super::tests::approve(&approval))
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

/// Whole loads refused and entry rows held until the test lets them go.
struct RowsHeld {
    released: tokio::sync::watch::Sender<bool>,
    rows_asked: std::sync::atomic::AtomicBool,
}

impl Default for RowsHeld {
    fn default() -> Self {
        RowsHeld {
            released: tokio::sync::watch::channel(false).0,
            rows_asked: Default::default(),
        }
    }
}

impl Hook for RowsHeld {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match call {
            Call::Load { head: false, .. } if !*self.released.borrow() => {
                Err(StoreError::new("a whole load while the answer goes"))
            }
            Call::Read("read_entries") => {
                self.rows_asked
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let mut released = self.released.subscribe();
                let _ = released.wait_for(|go| *go).await;
                run.await
            }
            _ => run.await,
        }
    }
}

/// Another runtime on `inner`, whose whole loads are refused and whose entry rows are held
/// ([`RowsHeld`]) until the test releases them.
async fn answering_with_rows_held(inner: &Arc<SqliteStore>) -> (Arc<RowsHeld>, Arc<Runtime>) {
    answering_under(inner, "").await
}

/// [`answering_with_rows_held`], with the policy `rules`.
async fn answering_under(inner: &Arc<SqliteStore>, rules: &str) -> (Arc<RowsHeld>, Arc<Runtime>) {
    let hook = Arc::new(RowsHeld::default());
    let store = Arc::new(Delegate::new(
        inner.clone() as Arc<dyn SessionStore>,
        hook.clone(),
    ));
    let answering = super::tests::runtime_with(store, inner.clone(), rules).await;
    (hook, answering)
}

/// ADR 0045's amendment: an answer to a chat that left memory loads its head only. No whole
/// load and no read of its entry rows happens before the call's output goes out (both are
/// held back here: the old answer's whole load is refused, and so it failed); the model's
/// next step then reads the rows, and the turn ends as it would have.
#[tokio::test]
async fn an_answer_to_a_stored_chat_reads_none_of_its_entry_rows() {
    let inner = Arc::new(SqliteStore::in_memory().unwrap());
    let approval = {
        let asking = runtime_on(&inner).await;
        ask(&asking, "w", "check the weather in Paris", "get_weather").await
    };
    let (hook, answering) = answering_with_rows_held(&inner).await;
    answering
        .submit("w", &super::tests::approve(&approval))
        .await
        .expect("the answer needs the chat's head only");
    let session = answering.live_session("w").expect("answered here");
    let mut reader = session
        .current_log()
        .expect("the turn goes on")
        .subscribe(0);
    let mut kinds = Vec::new();
    let output = async {
        while let Some(entry) = reader.next().await {
            if let TurnEntry::Chunk(chunk) = entry {
                kinds.push(chunk.wire_type().into_owned());
                if kinds.last().is_some_and(|k| k == "tool-output-available") {
                    return;
                }
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), output)
        .await
        .expect("the call's output goes out before any entry row is read");
    assert!(
        kinds.iter().any(|k| k == "tool-output-available"),
        "{kinds:?}"
    );
    hook.released.send_replace(true);
    while let Some(entry) = reader.next().await {
        if let TurnEntry::Chunk(chunk) = entry {
            kinds.push(chunk.wire_type().into_owned());
        }
    }
    assert!(!kinds.iter().any(|k| k == "error"), "{kinds:?}");
    assert!(
        hook.rows_asked.load(std::sync::atomic::Ordering::SeqCst),
        "the model's step read the rows"
    );
    let stored = inner.load("w").await.unwrap().unwrap().record;
    assert_eq!(
        stored.turn.as_ref().map(|t| t.status),
        Some(TurnStatus::Finished)
    );
    assert_eq!(
        stored,
        session.snapshot(),
        "the copy, made whole, is the chat"
    );
}

/// ADR 0045's third amendment: an answer to a chat that left memory reads how the approvals it
/// names were resolved, by id, and none of the chat's other answered approvals (they grow with
/// the chat) — until the model's step makes the copy whole. A late answer to an approval
/// answered long ago is still refused as answered, not as unknown.
#[tokio::test]
async fn an_answer_reads_the_resolutions_it_names_and_no_other() {
    use crate::agent::gate::{ApprovalResolution, InputError};
    let inner = Arc::new(SqliteStore::in_memory().unwrap());
    let approval = {
        let asking = runtime_on(&inner).await;
        ask(&asking, "w", "check the weather in Paris", "get_weather").await
    };
    // Earlier turns' answers, as stored.
    let mut record = inner.load("w").await.unwrap().unwrap().record;
    for i in 0..50 {
        record.resolved_approvals.insert(
            format!("old-{i}"),
            ApprovalResolution::Denied {
                at_ms: i,
                reason: None,
            },
        );
    }
    inner.save(&record).await.unwrap();
    let (hook, answering) = answering_with_rows_held(&inner).await;
    answering
        .submit("w", &super::tests::approve(&approval))
        .await
        .unwrap();
    let session = answering.live_session("w").expect("answered here");
    // The model's step waits for the rows (held): the copy knows only what was named.
    let resolved = session.snapshot().resolved_approvals;
    assert!(!resolved.is_whole());
    assert_eq!(resolved.keys().collect::<Vec<_>>(), [&approval]);
    let late = answering
        .submit("w", &super::tests::approve("old-7"))
        .await
        .unwrap_err();
    assert!(
        matches!(&late, InputError::ApprovalAlreadyAnswered { approval_id } if approval_id == "old-7"),
        "{late:?}"
    );
    let resolved = session.snapshot().resolved_approvals;
    assert_eq!(resolved.len(), 2, "the one named was read: {resolved:?}");
    // An AI SDK client resending the conversation: its copy of an old denial is an echo (read
    // by id, it matches); below, its copy turned into an approval is refused as answered.
    let resent = |approval_id: &str, decision| {
        super::Answers::Resent(crate::agent::gate::Resent {
            message_id: String::new(),
            answers: vec![crate::agent::gate::PersonInput::Approval {
                approval_id: approval_id.to_owned(),
                decision,
                step_up: None,
            }],
        })
    };
    let actor = crate::agent::store::Actor::default();
    let echo = answering
        .answer(
            "w",
            Some(session.clone()),
            resent(
                "old-8",
                crate::agent::gate::ApprovalDecision::Deny { reason: None },
            ),
            &actor,
        )
        .await;
    assert!(
        matches!(echo, Ok(super::AnswerOutcome::Nothing(_))),
        "{echo:?}"
    );
    hook.released.send_replace(true);
    let mut reader = session.current_log().unwrap().subscribe(0);
    while reader.next().await.is_some() {}
    // (A refused copy is judged again against the whole chat, whose rows were held above.)
    let flipped = answering
        .answer(
            "w",
            Some(session.clone()),
            resent("old-9", crate::agent::gate::ApprovalDecision::Approve),
            &actor,
        )
        .await;
    assert!(
        matches!(&flipped, Err(InputError::ApprovalAlreadyAnswered { approval_id }) if approval_id == "old-9"),
        "{flipped:?}"
    );
    let copy = session.snapshot();
    assert!(
        copy.resolved_approvals.is_whole(),
        "the model's step read them all"
    );
    assert_eq!(copy.resolved_approvals.len(), 51);
    assert_eq!(inner.load("w").await.unwrap().unwrap().record, copy);
}

/// ADR 0045's fourth amendment, attacked: the rules about what a chat paid hold for an answer to
/// a chat that left memory, whose earlier payments are counted, not read. The chat paid $6; a $1
/// payment waits; the answer edits it to $5, which the chat's $10 budget forbids — a wallet that
/// knew only the payments it read would have let it run. A rule that, once a chat has paid,
/// lets it pay only people it paid before refuses an edit to a new payee, and lets the $1 to
/// Hanako (paid in a row not read) run — a wallet that forgot whom it paid would refuse that.
#[tokio::test]
async fn a_chat_budget_holds_for_an_answer_that_reads_no_payment() {
    use crate::agent::gate::{ApprovalDecision, InputError, PersonInput};
    const BUDGET: &str = r#"
@id("chat-budget") @reason("This chat has spent its budget.")
  forbid (principal, action == Action::"process_payment", resource)
  when { context.spent_in_chat_cents + context.amount_cents > 1000 };
@id("known-payees") @reason("Once a chat has paid, it pays only people it paid before.")
  forbid (principal, action == Action::"process_payment", resource)
  when { context.new_payee && context.spent_in_chat_cents > 0 };
"#;
    let inner = Arc::new(SqliteStore::in_memory().unwrap());
    let approval = {
        let asking = super::tests::runtime_with(inner.clone(), inner.clone(), BUDGET).await;
        let first = ask(&asking, "p", "Send $6 to Hanako", "process_payment").await;
        asking
            .submit("p", &super::tests::approve(&first))
            .await
            .unwrap();
        let session = asking.session("p").await.unwrap();
        let mut reader = session.current_log().unwrap().subscribe(0);
        while reader.next().await.is_some() {}
        ask(&asking, "p", "Send $1 to Hanako", "process_payment").await
    };
    let paid = |record: &crate::agent::session::SessionRecord| {
        (record.wallet.transactions.len(), record.wallet.paid_cents())
    };
    assert_eq!(
        paid(&inner.load("p").await.unwrap().unwrap().record),
        (1, 600)
    );

    let (hook, answering) = answering_under(&inner, BUDGET).await;
    let edit = |amount: u32, recipient: &str| {
        [PersonInput::Approval {
            approval_id: approval.clone(),
            decision: ApprovalDecision::ApproveWithEdits {
                args: serde_json::json!({"amount": amount, "recipient": recipient, "currency": "USD"}),
            },
            step_up: None,
        }]
    };
    for (amount, recipient, rule) in [(5, "Hanako", "chat-budget"), (1, "Kenji", "known-payees")] {
        let refused = answering
            .submit("p", &edit(amount, recipient))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, InputError::EditForbidden { rule: r, .. } if r == rule),
            "${amount} to {recipient}: {rule} forbids it: {refused:?}"
        );
    }
    let session = answering.live_session("p").expect("loaded here");
    let copy = session.snapshot();
    assert!(
        copy.wallet.transactions.read().is_empty() && copy.wallet.paid_cents() == 600,
        "the answer read no payment, and knows what the chat paid"
    );
    // The payment as asked fits the budget and pays someone paid before (in a row the answer
    // never read): approved, it runs, and the totals move.
    answering
        .submit("p", &super::tests::approve(&approval))
        .await
        .unwrap();
    hook.released.send_replace(true);
    let mut reader = session.current_log().unwrap().subscribe(0);
    while reader.next().await.is_some() {}
    let stored = inner.load("p").await.unwrap().unwrap().record;
    assert_eq!(paid(&stored), (2, 700));
    let live = session.snapshot().wallet;
    assert_eq!(
        (
            live.paid_cents(),
            &live.payees,
            live.balance_cents,
            live.transactions.len()
        ),
        (700, &stored.wallet.payees, stored.wallet.balance_cents, 2),
        "the copy that read one payment agrees with the stored wallet"
    );
}
