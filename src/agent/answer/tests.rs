//! A grant lives only with the answer that asked for it: an answer whose commit fails leaves
//! no grant anything could run on, and one retried after a conflict keeps only the retry's.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::future::BoxFuture;

use crate::agent::{
    Runtime, RuntimeSettings, Transport, TurnEntry, UserTurn,
    clock::{SequentialIds, SystemClock},
    gate::{ApprovalDecision, InputError, PersonInput},
    policy::{Policy, ToolFacts},
    session::TurnStatus,
    store::{
        AuditKind, AuditQuery, AuditRecord, MemoryStore, PolicyStore, SessionStore, StoreError,
        delegate::{Call, Delegate, Hook},
    },
    tools::{ToolRegistry, ToolSettings, WeatherSource},
};
use crate::models::demo::DemoModel;
use crate::protocol::grant::{GrantRequest, GrantScope};

/// The weather is asked for (no rule lets it run) and may be granted.
const POLICY: &str = r#"
@id("small") permit (principal, action == Action::"process_payment", resource)
when { context.amount_cents <= 100 };
"#;

/// How the next commits fail.
#[derive(Clone, Copy)]
enum Failing {
    /// The database is gone (the answer is not recorded).
    Broken,
    /// Another instance committed the chat first.
    Conflict,
}

/// A hook whose next commit fails as `how` says (`left`: how many are still to fail).
struct FailingCommits {
    how: std::sync::Mutex<Failing>,
    left: AtomicUsize,
}

impl FailingCommits {
    fn fail_next(&self, how: Failing) {
        *self.how.lock().unwrap() = how;
        self.left.store(1, Ordering::SeqCst);
    }
}

impl Hook for FailingCommits {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let due = matches!(call, Call::Commit { .. })
            && self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if !due {
            return run.await;
        }
        match *self.how.lock().unwrap() {
            Failing::Broken => Err(StoreError::new("the disk is gone")),
            Failing::Conflict => Err(StoreError::conflict("changed elsewhere")),
        }
    }
}

/// The memory store behind the failing commits.
type Store = Delegate<FailingCommits, MemoryStore>;

/// A runtime on `store` (the demo model, the weather offline) deciding with the Cedar `rules`,
/// its grants and spending kept in `grants`.
pub(super) async fn runtime_with(
    store: Arc<dyn SessionStore>,
    grants: Arc<dyn PolicyStore>,
    rules: &str,
) -> Arc<Runtime> {
    let tools = ToolRegistry::standard(&ToolSettings {
        approval_timeout: Duration::from_secs(600),
        browser_timeout: Duration::from_secs(10),
        weather: WeatherSource::Offline,
    });
    let policy = Policy::from_text(rules, &ToolFacts::all(&tools)).unwrap();
    policy.restore(grants, 0).await.unwrap();
    Runtime::builder(
        Arc::new(DemoModel::new(Duration::ZERO)),
        tools,
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        store,
        RuntimeSettings::default(),
    )
    .policy(Arc::new(policy))
    .build()
}

/// Starts a turn of `text` in `chat` and waits until it pauses (logged after the commit of the
/// record and its log); its first call, named `tool`, waits for approval: its approval's id.
pub(super) async fn ask(runtime: &Arc<Runtime>, chat: &str, text: &str, tool: &str) -> String {
    let user = UserTurn {
        text: text.into(),
        transport: Transport::Sse,
        ..UserTurn::default()
    };
    let started = runtime.start_turn(chat, user, None).await.unwrap();
    let mut reader = started.log.subscribe(0);
    while !matches!(reader.next().await, Some(TurnEntry::Pause) | None) {}
    let session = runtime.session(chat).await.unwrap();
    let call = session.snapshot().turn.unwrap().calls[0].clone();
    assert_eq!(call.call.name, tool);
    call.approval_id().expect("asked").to_owned()
}

/// A runtime on `store` whose chat "w" waits for the approval of a weather lookup; the
/// approval's id.
async fn weather_waits(store: &Arc<Store>) -> (Arc<Runtime>, String) {
    let runtime = runtime_with(store.clone(), store.inner().clone(), POLICY).await;
    let approval = ask(&runtime, "w", "check the weather in Paris", "get_weather").await;
    (runtime, approval)
}

/// A plain approval of `approval`.
pub(super) fn approve(approval: &str) -> [PersonInput; 1] {
    [PersonInput::Approval {
        approval_id: approval.to_owned(),
        decision: ApprovalDecision::Approve,
        step_up: None,
    }]
}

fn approve_and_remember(approval: &str) -> [PersonInput; 1] {
    [PersonInput::Approval {
        approval_id: approval.to_owned(),
        decision: ApprovalDecision::ApproveAndGrant {
            args: None,
            grant: GrantRequest {
                scope: GrantScope::Tool,
                seconds: 3600,
                max_cents: None,
            },
        },
        step_up: None,
    }]
}

fn store() -> Arc<Store> {
    Arc::new(Delegate::new(
        Arc::new(MemoryStore::default()),
        FailingCommits {
            how: std::sync::Mutex::new(Failing::Broken),
            left: AtomicUsize::new(0),
        },
    ))
}

#[tokio::test]
async fn an_answer_that_is_not_recorded_leaves_no_grant_to_run_on() {
    let store = store();
    let (runtime, approval) = weather_waits(&store).await;
    store.hook().fail_next(Failing::Broken);
    let refused = runtime.submit("w", &approve_and_remember(&approval)).await;
    assert!(
        matches!(refused, Err(InputError::NotRecorded { .. })),
        "{refused:?}"
    );
    // The approval still waits; the grant it asked for exists nowhere that could run a call.
    let session = runtime.session("w").await.unwrap();
    assert_eq!(
        session.snapshot().turn.unwrap().status,
        TurnStatus::AwaitingPerson
    );
    let here = runtime.policy().grants();
    assert_eq!(here.len(), 1, "{here:?}");
    assert!(here[0].revoked_at_ms.is_some(), "{here:?}");
    let stored = PolicyStore::grants(store.inner().as_ref()).await.unwrap();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(stored[0].revoked_at_ms.is_some(), "{stored:?}");
    // Answered again, it is recorded with a grant of its own.
    runtime
        .submit("w", &approve_and_remember(&approval))
        .await
        .unwrap();
    let stored = PolicyStore::grants(store.inner().as_ref()).await.unwrap();
    let live: Vec<_> = stored
        .iter()
        .filter(|g| g.revoked_at_ms.is_none())
        .collect();
    assert_eq!(live.len(), 1, "{stored:?}");
}

#[tokio::test]
async fn an_answer_retried_after_a_conflict_keeps_only_the_retrys_grant() {
    let store = store();
    let (runtime, approval) = weather_waits(&store).await;
    store.hook().fail_next(Failing::Conflict);
    // Refused once as changed elsewhere, read again and answered on the fresh copy.
    runtime
        .submit("w", &approve_and_remember(&approval))
        .await
        .unwrap();
    let stored = PolicyStore::grants(store.inner().as_ref()).await.unwrap();
    assert_eq!(stored.len(), 2, "{stored:?}");
    let live: Vec<_> = stored
        .iter()
        .filter(|g| g.revoked_at_ms.is_none())
        .collect();
    assert_eq!(live.len(), 1, "{stored:?}");
    let granted: Vec<AuditRecord> = store
        .inner()
        .audit(&AuditQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.event.kind == AuditKind::Granted)
        .collect();
    assert_eq!(granted.len(), 1, "{granted:?}");
    assert_eq!(granted[0].event.grant.as_deref(), Some(live[0].id.as_str()));
}

/// A payment's approval is handed to its turn, which commits answer, payment and result
/// together: when that commit is refused because another instance changed the chat first, the
/// grant made with the approval goes with it.
#[tokio::test]
async fn a_grant_handed_to_a_turn_that_cannot_commit_goes_with_it() {
    let store = store();
    let (runtime, _) = weather_waits(&store).await;
    // The weather turn ends (denied), then a payment waits.
    runtime
        .submit(
            "w",
            &[PersonInput::Approval {
                approval_id: runtime
                    .session("w")
                    .await
                    .unwrap()
                    .snapshot()
                    .turn
                    .unwrap()
                    .calls[0]
                    .approval_id()
                    .unwrap()
                    .to_owned(),
                decision: ApprovalDecision::Deny { reason: None },
                step_up: None,
            }],
        )
        .await
        .unwrap();
    let ended = runtime.session("w").await.unwrap().current_log().unwrap();
    let mut reader = ended.subscribe(0);
    while !matches!(reader.next().await, Some(TurnEntry::End) | None) {}
    let approval = ask(&runtime, "w", "Send $5 to Jack", "process_payment").await;
    store.hook().fail_next(Failing::Conflict);
    runtime
        .submit(
            "w",
            &[PersonInput::Approval {
                approval_id: approval,
                decision: ApprovalDecision::ApproveAndGrant {
                    args: None,
                    grant: GrantRequest {
                        scope: GrantScope::Budget,
                        seconds: 3600,
                        max_cents: Some(5_000),
                    },
                },
                step_up: None,
            }],
        )
        .await
        .expect("handed to the turn");
    // The turn's commit is refused; its grant is withdrawn before the turn stops.
    let withdrawn = async {
        loop {
            let stored = PolicyStore::grants(store.inner().as_ref()).await.unwrap();
            if !stored.is_empty() && stored.iter().all(|g| g.revoked_at_ms.is_some()) {
                return stored;
            }
            tokio::task::yield_now().await;
        }
    };
    let stored = tokio::time::timeout(Duration::from_secs(5), withdrawn)
        .await
        .expect("the grant is withdrawn");
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(
        runtime
            .policy()
            .grants()
            .iter()
            .all(|g| g.revoked_at_ms.is_some())
    );
}

/// A hook that holds the next commit once armed: it says when that commit arrived, waits until
/// the test lets it go, then fails it (the database is gone).
#[derive(Default)]
struct HeldCommit {
    armed: std::sync::atomic::AtomicBool,
    arrived: tokio::sync::Notify,
    release: tokio::sync::Notify,
    /// Set while the held commit waits.
    holding: std::sync::atomic::AtomicBool,
    /// Told when another commit reaches the store while one is held.
    overtook: tokio::sync::Notify,
}

impl Hook for HeldCommit {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if !(matches!(call, Call::Commit { .. }) && self.armed.swap(false, Ordering::SeqCst)) {
            if matches!(call, Call::Commit { .. }) && self.holding.load(Ordering::SeqCst) {
                self.overtook.notify_one();
            }
            return run.await;
        }
        self.holding.store(true, Ordering::SeqCst);
        self.arrived.notify_one();
        self.release.notified().await;
        self.holding.store(false, Ordering::SeqCst);
        Err(StoreError::new("the disk is gone"))
    }
}

/// Chat "w" waiting for the approval of a weather lookup, on a store whose commits `hook` can
/// hold (once armed).
struct HeldChat {
    hook: Arc<HeldCommit>,
    store: Arc<Delegate<Arc<HeldCommit>, MemoryStore>>,
    runtime: Arc<Runtime>,
    approval: String,
    session: Arc<crate::agent::Session>,
}

async fn held_chat() -> HeldChat {
    let hook = Arc::new(HeldCommit::default());
    let store = Arc::new(Delegate::new(
        Arc::new(MemoryStore::default()),
        hook.clone(),
    ));
    let runtime = runtime_with(store.clone(), store.inner().clone(), POLICY).await;
    let approval = ask(&runtime, "w", "check the weather in Paris", "get_weather").await;
    let session = runtime.session("w").await.unwrap();
    HeldChat {
        hook,
        store,
        runtime,
        approval,
        session,
    }
}

/// While an approval's commit is on its way, the call it cleared does not start, whatever
/// wakes the turn meanwhile; when that commit fails, the call waits again, never having run.
/// (Before, the turn woken by anything else started it at once: a failed commit then took back
/// an approval whose call had run.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_does_not_start_before_its_approval_is_recorded() {
    use crate::agent::gate::CallPhase;
    let HeldChat {
        hook,
        store,
        runtime,
        approval,
        session,
    } = held_chat().await;
    hook.armed.store(true, Ordering::SeqCst);
    let answering = {
        let (runtime, approval) = (runtime.clone(), approval.clone());
        tokio::spawn(async move { runtime.submit("w", &approve(&approval)).await })
    };
    hook.arrived.notified().await;
    // Applied, not recorded: something else wakes the turn (here: revives the parked turn),
    // which looks at its calls again.
    assert!(matches!(
        session.snapshot().turn.unwrap().calls[0].phase,
        CallPhase::Ready { .. }
    ));
    runtime.wake(&session);
    tokio::time::timeout(Duration::from_secs(10), async {
        while session.snapshot().turn.unwrap().status != TurnStatus::Running {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the turn looked at its calls");
    let phase = session
        .snapshot()
        .turn
        .unwrap()
        .calls
        .first()
        .map(|c| c.phase.clone());
    assert!(
        matches!(phase, Some(CallPhase::Ready { .. })),
        "the call started before its approval was recorded: {phase:?}"
    );
    hook.release.notify_one();
    let refused = answering.await.unwrap();
    assert!(
        matches!(refused, Err(InputError::NotRecorded { .. })),
        "{refused:?}"
    );
    let turn = session.snapshot().turn.unwrap();
    assert!(
        matches!(turn.calls[0].phase, CallPhase::AwaitingApproval { .. }),
        "{:?}",
        turn.calls[0].phase
    );
    let audit = store.inner().audit(&AuditQuery::default()).await.unwrap();
    assert!(
        audit.iter().all(|r| r.event.kind != AuditKind::Executed),
        "nothing ran: {audit:?}"
    );
}

/// While an approval's commit is on its way, no other commit of the chat writes it: the turn,
/// interrupted meanwhile, commits its end only once the answer is settled. When the answer's
/// commit then fails, the store never held the approval (before, the turn's commit wrote it
/// without its `approved` event, and it stayed: the failed answer could no longer be taken
/// back from a turn that had moved on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_commit_writes_an_approval_still_on_its_way() {
    use crate::agent::gate::ApprovalResolution;
    let HeldChat {
        hook,
        store,
        runtime,
        approval,
        session,
    } = held_chat().await;
    hook.armed.store(true, Ordering::SeqCst);
    let answering = {
        let (runtime, approval) = (runtime.clone(), approval.clone());
        tokio::spawn(async move { runtime.submit("w", &approve(&approval)).await })
    };
    hook.arrived.notified().await;
    let log = session.current_log().unwrap();
    assert!(runtime.interrupt("w", "the person stopped it").await);
    // The interrupted turn ends and would commit; it must wait for the answer.
    let overtaken = tokio::time::timeout(Duration::from_secs(2), hook.overtook.notified()).await;
    assert!(
        overtaken.is_err(),
        "the turn committed the chat while an approval's commit was on its way"
    );
    hook.release.notify_one();
    let refused = answering.await.unwrap();
    assert!(
        matches!(refused, Err(InputError::NotRecorded { .. })),
        "{refused:?}"
    );
    let mut reader = log.subscribe(0);
    tokio::time::timeout(Duration::from_secs(10), async {
        while reader.next().await.is_some() {}
    })
    .await
    .expect("the turn ended");
    for record in [
        session.snapshot(),
        store.inner().load("w").await.unwrap().unwrap().record,
    ] {
        let resolution = record.resolved_approvals.get(&approval).cloned();
        assert!(
            !matches!(resolution, Some(ApprovalResolution::Approved { .. })),
            "an approval whose commit failed is on record: {resolution:?}"
        );
        let turn = record.turn.unwrap();
        assert_eq!(turn.status, TurnStatus::Interrupted);
    }
    let audit = store.inner().audit(&AuditQuery::default()).await.unwrap();
    assert!(
        audit
            .iter()
            .all(|r| !matches!(r.event.kind, AuditKind::Approved | AuditKind::Executed)),
        "{audit:?}"
    );
    // The approval's story ends as the turn ended it (which saw the call cleared and so
    // recorded nothing of the approval itself).
    assert!(
        audit.iter().any(|r| r.event.kind == AuditKind::Interrupted
            && r.event.approval_id.as_deref() == Some(approval.as_str())),
        "{audit:?}"
    );
}

/// While a denial's commit is on its way, its turn, woken by something else, tells nobody of
/// it; when the commit fails, the call waits again and no client ever heard it was denied.
/// (Before, the woken turn announced the denial at once.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_told_only_once_it_is_recorded() {
    use crate::{agent::gate::CallPhase, protocol::Chunk};
    let HeldChat {
        hook,
        store: _,
        runtime,
        approval,
        session,
    } = held_chat().await;
    let log = session.current_log().unwrap();
    let from = log.len();
    hook.armed.store(true, Ordering::SeqCst);
    let answering = {
        let (runtime, approval) = (runtime.clone(), approval.clone());
        tokio::spawn(async move {
            let deny = [PersonInput::Approval {
                approval_id: approval,
                decision: ApprovalDecision::Deny { reason: None },
                step_up: None,
            }];
            runtime.submit("w", &deny).await
        })
    };
    hook.arrived.notified().await;
    runtime.wake(&session);
    let denied = |log: &Arc<crate::agent::TurnLog>| {
        log.entries_from(from)
            .iter()
            .any(|e| matches!(e, TurnEntry::Chunk(Chunk::ToolOutputDenied(_))))
    };
    let mut reader = log.subscribe(from);
    let told = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            match reader.next().await {
                Some(TurnEntry::Chunk(Chunk::ToolOutputDenied(_))) => return,
                Some(_) => {}
                None => std::future::pending().await,
            }
        }
    })
    .await;
    assert!(told.is_err(), "a denial was told before it was recorded");
    hook.release.notify_one();
    let refused = answering.await.unwrap();
    assert!(
        matches!(refused, Err(InputError::NotRecorded { .. })),
        "{refused:?}"
    );
    let turn = session.snapshot().turn.unwrap();
    assert!(
        matches!(turn.calls[0].phase, CallPhase::AwaitingApproval { .. }),
        "{:?}",
        turn.calls[0].phase
    );
    assert!(!denied(&log), "a denial that was not recorded was told");
}
