//! What is on disk and when: the session record mirrors what the client saw, and an output,
//! a turn's end or a denial reaches readers only once its commit is stored (`HoldingStore`).

use super::*;

#[tokio::test(start_paused = true)]
async fn the_session_record_mirrors_what_the_client_saw() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let record = rt.session("c").await.unwrap().snapshot();
    assert_eq!(record.messages.len(), 2);
    let messages = record.messages.to_vec().unwrap();
    let assistant = &messages[1];
    assert_eq!(assistant.id, "msg-1");
    let tool = assistant.tool_parts().next().expect("a tool part");
    assert_eq!(
        tool.state,
        countersign::protocol::ToolState::ApprovalRequested
    );
    assert_eq!(tool.approval.as_ref().map(|a| a.id.as_str()), Some("apv-1"));
    let listed = rt.list_sessions().await.unwrap();
    assert_eq!(listed, ["c"]);
}

/// A store's hook that records what each commit carried and can hold commits until released;
/// `inner` keeps the chats ([`runtime_on`] puts it in front of it).
#[derive(Default)]
struct HoldingStore {
    inner: Arc<MemoryStore>,
    held: std::sync::atomic::AtomicBool,
    release: tokio::sync::Notify,
    commits: std::sync::Mutex<Vec<(Vec<AuditKind>, i64)>>,
}

impl HoldingStore {
    /// Waits while commits are held, then notes what this one carries.
    async fn hold_and_note(&self, record: &SessionRecord, audit: &[AuditEvent]) {
        if self.held.load(std::sync::atomic::Ordering::SeqCst) {
            self.release.notified().await;
        }
        self.commits.lock().unwrap().push((
            audit.iter().map(|e| e.kind).collect(),
            record.wallet.balance_cents,
        ));
    }
}

impl Hook for HoldingStore {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if let Call::Commit { record, audit, .. } = call {
            self.hold_and_note(record, audit).await;
        }
        run.await
    }
}

fn runtime_on(store: Arc<HoldingStore>) -> Arc<Runtime> {
    let tools = ToolRegistry::standard(&ToolSettings {
        approval_timeout: APPROVAL_TIMEOUT,
        browser_timeout: BROWSER_TIMEOUT,
        weather: WeatherSource::Offline,
    });
    Runtime::new(
        Arc::new(DemoModel::new(Duration::ZERO)),
        tools,
        Arc::new(TokioClock::starting_at(1_800_000_000_000)),
        Arc::new(SequentialIds::default()),
        Arc::new(Delegate::new(store.inner.clone(), store)),
        RuntimeSettings::default(),
    )
}

/// A chat whose payment waits for approval, on a store that now holds every commit (nothing
/// committed so far is listed).
async fn payment_waiting_on_a_held_store() -> (Arc<HoldingStore>, Arc<Runtime>) {
    let store = Arc::new(HoldingStore::default());
    let rt = runtime_on(store.clone());
    start(&rt, "c", "Send $50 to Hanako").await;
    store.commits.lock().unwrap().clear();
    store.held.store(true, std::sync::atomic::Ordering::SeqCst);
    (store, rt)
}

impl HoldingStore {
    /// Lets held commits (and every later one) through.
    fn let_through(&self) {
        self.held.store(false, std::sync::atomic::Ordering::SeqCst);
        self.release.notify_waiters();
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_output_reaches_its_readers_before_the_model_goes_on() {
    let rt = runtime();
    start(&rt, "c", "Send $50 to Hanako").await;
    let receipt = rt.submit("c", &[approve("apv-1")]).await.expect("accepted");
    let is_output = |e: &TurnEntry| matches!(e, TurnEntry::Chunk(Chunk::ToolOutputAvailable(_)));
    let mut reader = receipt.log.subscribe(receipt.from);
    while let Some(entry) = reader.next().await {
        if is_output(&entry) {
            break;
        }
    }
    // The reader woke for the output; the turn has not taken the thread back since.
    let logged = receipt.log.entries_from(0);
    let after: Vec<_> = logged
        .iter()
        .skip_while(|e| !is_output(e))
        .skip(1)
        .collect();
    assert!(
        logged.iter().any(is_output) && after.is_empty(),
        "logged after the output before its reader ran: {after:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_turn_ends_in_its_log_only_once_its_last_commit_is_on_disk() {
    let store = Arc::new(HoldingStore::default());
    store.held.store(true, std::sync::atomic::Ordering::SeqCst);
    let rt = runtime_on(store.clone());
    let started = rt
        .start_turn(
            "c",
            UserTurn {
                text: "Hello".into(),
                ..UserTurn::default()
            },
            None,
        )
        .await
        .expect("turn starts");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let so_far = started.log.entries_from(0);
    assert!(
        so_far
            .iter()
            .any(|e| matches!(e, TurnEntry::Chunk(Chunk::Finish(_)))),
        "the turn has finished: {so_far:?}"
    );
    assert!(
        !so_far.iter().any(|e| matches!(e, TurnEntry::End)),
        "its end ([DONE]) waits for the commit"
    );

    store.let_through();
    let all = read_all(&started.log).await;
    assert!(matches!(all.last(), Some(TurnEntry::End)));
    assert_eq!(store.commits.lock().unwrap().len(), 1);
    let stored = store.inner.load("c").await.unwrap().expect("committed");
    assert_eq!(
        stored.record.turn.map(|t| t.status),
        Some(TurnStatus::Finished)
    );
}

#[tokio::test(start_paused = true)]
async fn an_approved_payment_is_committed_with_its_result_before_its_output() {
    let (store, rt) = payment_waiting_on_a_held_store().await;

    // The approval of a payment needs no commit of its own: the call answer returns at once.
    let receipt = tokio::time::timeout(Duration::from_secs(1), rt.submit("c", &[approve("apv-1")]))
        .await
        .expect("an approval of an in-record tool does not wait for the disk")
        .expect("input accepted");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !has_output(&receipt.log.entries_from(receipt.from)),
        "the output waits for the commit"
    );
    assert!(store.commits.lock().unwrap().is_empty());

    store.let_through();
    let rest = read_segment(&receipt.log, receipt.from).await;
    assert!(has_output(&rest));
    let commits = store.commits.lock().unwrap().clone();
    assert_eq!(
        commits[0],
        (vec![AuditKind::Approved, AuditKind::Executed], 95_000),
        "approval, payment and result in one commit: {commits:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_denial_is_committed_before_the_turn_hears_of_it() {
    let (store, rt) = payment_waiting_on_a_held_store().await;

    let submit = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.submit("c", &[deny("apv-1", Some("no"))]).await })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!submit.is_finished(), "the denial waits for its commit");
    let session = rt.session("c").await.unwrap();
    assert_eq!(session.turn_status(), Some(TurnStatus::AwaitingPerson));

    store.let_through();
    let receipt = submit.await.unwrap().expect("input accepted");
    read_segment(&receipt.log, receipt.from).await;
    let commits = store.commits.lock().unwrap().clone();
    assert_eq!(
        commits[0],
        (vec![AuditKind::Denied], 100_000),
        "{commits:?}"
    );
}
