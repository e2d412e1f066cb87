//! Who may sign is read from the store when it matters, not from a directory that may not
//! have heard yet: a removal made on another instance (the store changed behind this
//! directory's back) keeps a signature from completing a quorum, and from running a call the
//! quorum had already cleared.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::future::BoxFuture;

mod held;

use crate::agent::people::{People, Person, Principal};
use crate::agent::{
    Runtime, RuntimeSettings, Transport, TurnEntry, UserTurn,
    clock::{SequentialIds, SystemClock},
    gate::{ApprovalDecision, CallPhase, PersonInput, StepCall},
    policy::{Policy, ToolFacts},
    store::{
        Actor, AuditKind, AuditQuery, MemoryStore, PeopleStore, SessionStore, StoreError,
        delegate::{Call, Delegate, Hook},
    },
    tools::{ToolRegistry, ToolSettings, WeatherSource},
};
use crate::models::demo::DemoModel;
use crate::protocol::{
    Chunk,
    countersign::{PROGRESS_PART, Progress},
};

/// Two approvers, not the requester (no step-up: these answers come without passkeys).
const POLICY: &str = r#"
@id("two-approvers") @ask @approvers("2") @role("approver") @not_requester
forbid (principal, action == Action::"process_payment", resource)
when { context.amount_cents > 10000 };
"#;

fn person(id: &str, roles: &[&str]) -> Person {
    let mut name = id.to_owned();
    name[..1].make_ascii_uppercase();
    Person {
        id: id.into(),
        name,
        roles: roles.iter().map(|r| r.to_string()).collect(),
        created_ms: 0,
        invited_by: None,
        revoked_ms: None,
    }
}

/// Another instance, on the people store it shares: as the `remove_after`-th read of the
/// people returns, `who` is removed there; that read still sees them, every later one does not.
#[derive(Default)]
struct RemovedElsewhere {
    people: Arc<MemoryStore>,
    reads: AtomicUsize,
    plan: Mutex<Option<(usize, Person)>>,
}

impl RemovedElsewhere {
    fn remove_after(&self, reads: usize, who: &Person) {
        let mut removed = who.clone();
        removed.revoked_ms = Some(1);
        *self.plan.lock().unwrap() = Some((reads, removed));
    }
}

impl Hook for RemovedElsewhere {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let answer = run.await?;
        if matches!(call, Call::Read("people")) {
            let read = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
            let due = {
                let plan = self.plan.lock().unwrap();
                plan.as_ref()
                    .filter(|(after, _)| *after == read)
                    .map(|(_, p)| p.clone())
            };
            if let Some(removed) = due {
                self.people.save_person(&removed).await?;
            }
        }
        Ok(answer)
    }
}

/// The people store of the team: a memory store, another instance's removals in front of it.
type TeamStore = Delegate<RemovedElsewhere, MemoryStore>;

struct Team {
    runtime: Arc<Runtime>,
    people: Arc<TeamStore>,
    sessions: Arc<MemoryStore>,
    ben: Person,
    approval: String,
}

/// Ana, Ben and Eve (approvers) and Dan, whose 150 USD payment waits for two of them.
async fn team() -> Team {
    let sessions = Arc::new(MemoryStore::default());
    team_on(sessions.clone(), sessions).await
}

/// [`team`], its chats kept by `store` (which keeps them in `sessions`).
async fn team_on(store: Arc<dyn SessionStore>, sessions: Arc<MemoryStore>) -> Team {
    let shared = Arc::new(MemoryStore::default());
    let people = Arc::new(Delegate::new(
        shared.clone(),
        RemovedElsewhere {
            people: shared,
            ..RemovedElsewhere::default()
        },
    ));
    let team = [
        person("ana", &["approver"]),
        person("ben", &["approver"]),
        person("eve", &["approver"]),
        person("dan", &[]),
    ];
    for p in &team {
        people.save_person(p).await.unwrap();
    }
    let tools = ToolRegistry::standard(&ToolSettings {
        approval_timeout: Duration::from_secs(60),
        browser_timeout: Duration::from_secs(10),
        weather: WeatherSource::Offline,
    });
    let policy = Policy::from_text(POLICY, &ToolFacts::all(&tools)).unwrap();
    let runtime = Runtime::builder(
        Arc::new(DemoModel::new(Duration::ZERO)),
        tools,
        Arc::new(SystemClock),
        Arc::new(SequentialIds::default()),
        store,
        RuntimeSettings::default(),
    )
    .policy(Arc::new(policy))
    .people(Arc::new(People::with_people_in(
        people.clone(),
        team.to_vec(),
    )))
    .build();
    let started = runtime
        .start_turn_as(
            "c",
            UserTurn {
                message_id: None,
                text: "Send $150 to Jack".into(),
                attachments: Vec::new(),
                transport: Transport::Sse,
                ask_again: None,
            },
            Vec::new(),
            None,
            "dan",
        )
        .await
        .unwrap();
    let mut reader = started.log.subscribe(0);
    while !matches!(reader.next().await, Some(TurnEntry::Pause) | None) {}
    let approval = call(&runtime).await.approval_id().unwrap().to_owned();
    Team {
        runtime,
        people,
        sessions,
        ben: team[1].clone(),
        approval,
    }
}

async fn call(runtime: &Arc<Runtime>) -> StepCall {
    runtime
        .session("c")
        .await
        .unwrap()
        .snapshot()
        .turn
        .unwrap()
        .calls[0]
        .clone()
}

fn approve(approval: &str) -> [PersonInput; 1] {
    [PersonInput::Approval {
        approval_id: approval.to_owned(),
        decision: ApprovalDecision::Approve,
        step_up: None,
    }]
}

fn as_person(id: &str) -> Actor {
    Actor {
        transport: "inbox".into(),
        person: Some(id.into()),
        ..Actor::default()
    }
}

/// Reads the turn's log until a chunk is `wanted` (`what` it is, for the failure), and on to
/// the pause or the end after it (what the turn committed with it).
async fn until(runtime: &Arc<Runtime>, what: &str, wanted: impl Fn(&Chunk) -> bool) {
    let log = runtime.session("c").await.unwrap().current_log().unwrap();
    let mut reader = log.subscribe(0);
    let found = async {
        let mut seen = false;
        while let Some(entry) = reader.next().await {
            match entry {
                TurnEntry::Chunk(chunk) if wanted(&chunk) => seen = true,
                TurnEntry::Pause | TurnEntry::End if seen => return,
                _ => {}
            }
        }
        assert!(seen, "the turn ended without {what}");
    };
    tokio::time::timeout(Duration::from_secs(5), found)
        .await
        .unwrap_or_else(|_| panic!("never {what}"));
}

/// Until a `data-countersign` part says `words` (what the card and the inbox show).
async fn told(runtime: &Arc<Runtime>, words: &str) {
    until(runtime, &format!("told {words:?}"), |chunk| {
        matches!(chunk, Chunk::Data(data) if data.name == PROGRESS_PART
            && Progress::from_value(&data.data).is_some_and(|p| p.words() == words))
    })
    .await;
}

async fn dropped_events(sessions: &MemoryStore) -> Vec<String> {
    sessions
        .audit(&AuditQuery {
            kind: Some(AuditKind::Dropped),
            ..AuditQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| r.event.reason)
        .collect()
}

fn names(call: &StepCall) -> Vec<&str> {
    call.signatures.iter().map(|s| s.name.as_str()).collect()
}

#[tokio::test]
async fn a_signature_of_someone_removed_elsewhere_does_not_complete_the_quorum() {
    let Team {
        runtime,
        people,
        sessions,
        ben,
        approval,
    } = team().await;
    runtime
        .submit_as("c", &approve(&approval), &as_person("ben"))
        .await
        .unwrap();
    // Another instance removes Ben: the store says so, this directory has not heard yet.
    let mut removed = ben.clone();
    removed.revoked_ms = Some(1);
    people.inner().save_person(&removed).await.unwrap();
    assert!(
        runtime.people().active("ben").is_some(),
        "a stale directory"
    );

    runtime
        .submit_as("c", &approve(&approval), &as_person("eve"))
        .await
        .unwrap();
    let waiting = call(&runtime).await;
    assert!(
        matches!(waiting.phase, CallPhase::AwaitingApproval { .. }),
        "{:?}",
        waiting.phase
    );
    assert_eq!(names(&waiting), ["Eve"]);
    assert_eq!(waiting.dropped[0].name, "Ben");
    assert_eq!(waiting.dropped[0].why, "was removed");
    told(
        &runtime,
        "Ben was removed; 1 more approver needed (Eve approved)",
    )
    .await;
    assert_eq!(
        dropped_events(&sessions).await,
        ["Ben's signature no longer counts: Ben was removed"]
    );
    // Nor may Ben sign again on this instance: the store, not the directory, says who he is.
    let refused = runtime
        .submit_as("c", &approve(&approval), &as_person("ben"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "not_an_approver");
}

#[tokio::test]
async fn a_call_the_quorum_cleared_waits_again_when_a_signer_is_removed_before_it_runs() {
    let Team {
        runtime,
        people,
        sessions,
        ben,
        approval,
    } = team().await;
    runtime
        .submit_as("c", &approve(&approval), &as_person("ben"))
        .await
        .unwrap();
    // Eve's answer completes the quorum (the store still has Ben as it is read for it); Ben is
    // removed elsewhere right after, before the payment runs.
    people
        .hook()
        .remove_after(people.hook().reads.load(Ordering::SeqCst) + 1, &ben);
    runtime
        .submit_as("c", &approve(&approval), &as_person("eve"))
        .await
        .unwrap();
    told(
        &runtime,
        "Ben was removed; 1 more approver needed (Eve approved)",
    )
    .await;
    let waiting = call(&runtime).await;
    assert!(
        matches!(waiting.phase, CallPhase::AwaitingApproval { .. }),
        "it did not run: {:?}",
        waiting.phase
    );
    assert_eq!(waiting.approval_id(), Some(approval.as_str()));
    assert_eq!(
        dropped_events(&sessions).await,
        ["Ben's signature no longer counts: Ben was removed; the call waits for approvals again"]
    );
    let record = runtime.session("c").await.unwrap().snapshot();
    assert!(
        !record.resolved_approvals.contains_key(&approval),
        "its approval may be answered again"
    );
    // Ana's signature completes it with two that count: now it runs.
    runtime
        .submit_as("c", &approve(&approval), &as_person("ana"))
        .await
        .unwrap();
    until(&runtime, "ran", |chunk| {
        matches!(chunk, Chunk::ToolOutputAvailable(_))
    })
    .await;
    told(&runtime, "Approved by Eve and Ana").await;
}

/// The lost news of a flaky attack test (`tests/removal.rs`
/// `a_role_change_drops_the_signatures_that_no_longer_qualify`, 5 failures in 80 runs under
/// load): a role change that drops a signature while the turn's task is telling the signature
/// (between reading the chat and parking) woke a task that then parked on what it had read,
/// so the page kept showing the signature until the next answer. A dropped signature is news
/// the turn may not park on.
#[tokio::test]
async fn a_signature_dropped_while_the_turn_tells_it_is_told_before_the_turn_parks() {
    let memory = Arc::new(MemoryStore::default());
    let store = Arc::new(Delegate::new(memory.clone(), held::HeldPause::default()));
    let Team {
        runtime, approval, ..
    } = team_on(store.clone(), memory).await;
    // The turn tells Ben's signature and stops in the commit of its pause.
    let hold = store.hook().hold_next_pause();
    runtime
        .submit_as("c", &approve(&approval), &as_person("ben"))
        .await
        .unwrap();
    hold.reached.await.unwrap();
    // The role change, made now: it is done once the chat shows it.
    let changing = {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let actor = Actor {
                transport: "api".into(),
                ..Actor::default()
            };
            runtime
                .set_person_roles(
                    &Principal::Local { via_key: true },
                    &actor,
                    "ben",
                    ["finance".to_owned()].into(),
                )
                .await
        })
    };
    while !names(&call(&runtime).await).is_empty() {
        tokio::task::yield_now().await;
    }
    hold.release.send(()).unwrap();
    changing.await.unwrap().unwrap();
    // No waiting here: the change returned once the turn had told it and committed it.
    let log = runtime.session("c").await.unwrap().current_log().unwrap();
    let told: Vec<Progress> = log
        .entries_from(0)
        .into_iter()
        .filter_map(|entry| match entry {
            TurnEntry::Chunk(Chunk::Data(data)) if data.name == PROGRESS_PART => {
                Progress::from_value(&data.data)
            }
            _ => None,
        })
        .collect();
    let last = told.last().expect("progress parts");
    assert!(last.signatures.is_empty(), "{last:?}");
    assert_eq!(last.dropped[0].name, "Ben", "{last:?}");
    assert_eq!(last.dropped[0].why, "no longer has the role approver");
    assert_eq!(log.entries_from(0).last(), Some(&TurnEntry::Pause));
}

/// A person who joined on another instance a moment ago (the store has them, this directory
/// has not heard yet) is someone, not "removed": `tests/people.rs`
/// `on_postgres_people_sign_in_and_out_on_any_instance` was refused as removed on the instance
/// that had not yet heard of the registration (2 runs in 12 under load).
#[tokio::test]
async fn someone_who_joined_on_another_instance_is_known_at_once() {
    let Team {
        runtime, people, ..
    } = team().await;
    let fay = person("fay", &["approver"]);
    people.inner().save_person(&fay).await.unwrap();
    assert!(runtime.people().active("fay").is_none(), "not heard yet");
    assert_eq!(
        runtime.active_person("fay").await.map(|p| p.name),
        Some("Fay".into())
    );
    // Someone removed stays removed, and an unknown id is nobody.
    let mut ben = person("ben", &["approver"]);
    ben.revoked_ms = Some(1);
    people.inner().save_person(&ben).await.unwrap();
    runtime.people().reload().await;
    assert!(runtime.active_person("ben").await.is_none());
    assert!(runtime.active_person("nobody").await.is_none());
}

/// Found by reading (stop 45), not by a failure: on a database only this instance uses, a
/// request that found the chat out of memory read it, and while its read was on the way a role
/// change loaded the chat, dropped Ben's signature, committed, and its turn parked and left
/// memory; the first request's older copy then went live, showing Ben's signature again (and
/// an answer on it would have committed the old record over the new). Loads of one chat go one
/// at a time on every store.
#[tokio::test(start_paused = true)]
async fn a_chat_read_before_a_change_never_goes_live_after_it() {
    let memory = Arc::new(MemoryStore::default());
    let store = Arc::new(Delegate::new(memory.clone(), held::HeldPause::default()));
    let Team {
        runtime, approval, ..
    } = team_on(store.clone(), memory).await;
    runtime
        .submit_as("c", &approve(&approval), &as_person("ben"))
        .await
        .unwrap();
    // The turn tells Ben's signature, parks, and the chat leaves memory.
    while runtime.live_session("c").is_some() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A page reads the chat (Ben's signature in it) and stops before its copy goes live.
    let hold = store.hook().hold_next_load();
    let reading = {
        let runtime = runtime.clone();
        tokio::spawn(async move { runtime.existing_session("c").await })
    };
    hold.reached.await.unwrap();
    let changing = {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let actor = Actor {
                transport: "api".into(),
                ..Actor::default()
            };
            runtime
                .set_person_roles(
                    &Principal::Local { via_key: true },
                    &actor,
                    "ben",
                    ["finance".to_owned()].into(),
                )
                .await
        })
    };
    // Everything that can run without the page's read runs (time is paused: this returns
    // once every task waits).
    tokio::time::sleep(Duration::from_secs(1)).await;
    hold.release.send(()).unwrap();
    let read = reading.await.unwrap().unwrap().expect("stored");
    changing.await.unwrap().unwrap();
    let shown = read.snapshot().turn.unwrap().calls[0].clone();
    assert!(names(&shown).is_empty(), "{:?}", names(&shown));
    assert!(names(&call(&runtime).await).is_empty());
}
