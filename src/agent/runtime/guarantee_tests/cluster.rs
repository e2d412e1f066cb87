//! The system under test: one runtime alone on its store, or two sharing one database
//! ([`SharedMemory`]: versions, turn ownership and news as on Postgres, ADR 0025), each
//! restarted on its own.

use super::*;
use crate::agent::{
    session::SessionRecord,
    store::{PolicyStore, shared::SharedMemory},
};

/// How often an instance sharing the database looks for turns other instances left behind.
const OVERDUE_SWEEP: Duration = Duration::from_secs(1);

/// A model that pays what the person's message says (the message is the call's arguments as
/// JSON), then says it is done.
struct Pays;

impl Model for Pays {
    fn label(&self) -> String {
        "pays".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        use futures::StreamExt;
        let answered = !matches!(request.history.last(), Some(HistoryItem::User { .. }));
        let args = match request.history.last() {
            Some(HistoryItem::User { text, .. }) => serde_json::from_str(text).unwrap_or_default(),
            _ => Value::Null,
        };
        let mut events = Vec::new();
        if answered {
            events.push(ModelEvent::TextDelta("Done.".into()));
        } else {
            events.push(ModelEvent::ToolCall(crate::agent::history::ToolCall {
                id: String::new(),
                name: "process_payment".into(),
                args,
                provider_data: None,
            }));
        }
        events.push(ModelEvent::Finish {
            reason: if answered {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            usage: Usage::default(),
        });
        futures::stream::iter(events.into_iter().map(Ok)).boxed()
    }
}

/// One instance: a runtime on its handle of the store.
pub(super) struct System {
    pub(super) rt: Arc<Runtime>,
    pub(super) clock: Arc<TokioClock>,
}

/// Where the instances keep what they share.
enum Db {
    Alone(Arc<MemoryStore>),
    Shared(SharedMemory),
}

/// The instances, all on one store.
pub(super) struct Cluster {
    db: Db,
    systems: Vec<System>,
}

fn person(name: &str, approver: bool, active: bool) -> Person {
    Person {
        id: name.to_owned(),
        name: name.to_uppercase(),
        roles: if approver {
            ["approver".to_owned()].into()
        } else {
            BTreeSet::new()
        },
        created_ms: T0,
        invited_by: None,
        revoked_ms: (!active).then_some(T0),
    }
}

impl System {
    async fn boot<S>(store: Arc<S>, world: &World) -> System
    where
        S: SessionStore + PolicyStore + PeopleStore,
    {
        let tools = ToolRegistry::standard(&ToolSettings {
            approval_timeout: APPROVAL_TIMEOUT,
            browser_timeout: Duration::from_secs(10),
            weather: WeatherSource::Offline,
        });
        let facts = ToolFacts::all(&tools);
        let clock = Arc::new(TokioClock::starting_at(world.now));
        let policy = Policy::from_text(RULES, &facts).expect("the rules load");
        policy
            .restore(store.clone(), world.now)
            .await
            .expect("the book is read");
        // People live in the same store as the chats (a restart reads them back).
        let mut people = PeopleStore::people(store.as_ref()).await.expect("people");
        if people.is_empty() {
            for (name, (active, approver)) in &world.people {
                let someone = person(name, *approver, *active);
                store.save_person(&someone).await.expect("kept");
                people.push(someone);
            }
        }
        let rt = Runtime::builder(
            Arc::new(Pays),
            tools,
            clock.clone(),
            Arc::new(RandomIds),
            store.clone(),
            RuntimeSettings::default(),
        )
        .policy(Arc::new(policy))
        .people(Arc::new(People::with_people_in(store.clone(), people)))
        .build();
        rt.resume_unfinished()
            .await
            .expect("unfinished turns resume");
        // As the server starts one (nothing to do on a store only it uses).
        rt.spawn_overdue_sweeper(OVERDUE_SWEEP);
        rt.follow_other_instances();
        System { rt, clock }
    }

    pub(super) fn actor(who: &str) -> Actor {
        Actor {
            transport: Transport::Api.as_str().into(),
            person: Some(who.to_owned()),
            name: Some(who.to_uppercase()),
            ..Actor::default()
        }
    }

    /// Whether every turn here stands still: parked for the person, or ended with its task
    /// done.
    fn still(&self) -> bool {
        ["chat-0", "chat-1"].iter().all(|chat| {
            let Some(session) = self.rt.live_session(chat) else {
                return true;
            };
            let state = session.state();
            // A parked turn whose deadline passed is about to be woken.
            let due = state.record.turn.as_ref().is_some_and(|t| {
                crate::agent::gate::next_deadline(&t.calls)
                    .is_some_and(|d| d <= self.clock.now_ms())
            });
            match state.live.as_ref() {
                None => true,
                Some(turn) if turn.log.is_ended() => {
                    turn.task.as_ref().is_none_or(|t| t.is_finished())
                }
                Some(turn) => !due && turn.parked.is_some() && turn.task.is_none(),
            }
        })
    }
}

impl Cluster {
    /// `instances` runtimes on one store: alone on a [`MemoryStore`], or sharing a
    /// [`SharedMemory`] database.
    pub(super) async fn boot(instances: usize, world: &World) -> Cluster {
        let db = if instances == 1 {
            Db::Alone(Arc::new(MemoryStore::default()))
        } else {
            Db::Shared(SharedMemory::new())
        };
        let mut cluster = Cluster {
            db,
            systems: Vec::new(),
        };
        for _ in 0..instances {
            let system = cluster.start(world).await;
            cluster.systems.push(system);
        }
        cluster
    }

    async fn start(&self, world: &World) -> System {
        match &self.db {
            Db::Alone(store) => System::boot(store.clone(), world).await,
            Db::Shared(db) => System::boot(Arc::new(db.instance()), world).await,
        }
    }

    /// Instance `at` (of as many as there are).
    pub(super) fn at(&self, at: usize) -> &System {
        &self.systems[at % self.systems.len()]
    }

    pub(super) fn now(&self) -> i64 {
        self.systems[0].clock.now_ms()
    }

    /// Instance `at` stops (what it held in memory is lost) and starts again on the store.
    pub(super) async fn restart(&mut self, at: usize, world: &World) {
        self.settle().await;
        let at = at % self.systems.len();
        drop(self.systems.remove(at));
        let system = self.start(world).await;
        self.systems.insert(at, system);
        self.settle().await;
    }

    /// Waits, without letting time pass, until every turn stands still on every instance and
    /// the news they sent each other was acted on.
    pub(super) async fn settle(&self) {
        let mut still_rounds = 0;
        for _ in 0..10_000 {
            // News travels as tasks: a few turns of the scheduler deliver it.
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
            if self.systems.iter().all(System::still) {
                still_rounds += 1;
                if self.systems.len() == 1 || still_rounds > 4 {
                    return;
                }
            } else {
                still_rounds = 0;
            }
        }
        panic!("a turn made no progress");
    }

    /// News between the instances is late from now on (nothing to hold back for one alone).
    pub(super) fn hold_news(&self) {
        if let Db::Shared(db) = &self.db {
            db.hold_news();
        }
    }

    /// The news held back arrives.
    pub(super) async fn deliver_news(&self) {
        if let Db::Shared(db) = &self.db {
            db.deliver_news();
            self.settle().await;
        }
    }

    /// `chat`'s record as the store has it (alone: as its runtime holds it).
    pub(super) async fn record(&self, chat: &str) -> Option<SessionRecord> {
        match &self.db {
            Db::Alone(_) => self.systems[0]
                .rt
                .existing_session(chat)
                .await
                .expect("the chat loads")
                .map(|s| s.snapshot()),
            Db::Shared(db) => db
                .database()
                .load(chat)
                .await
                .expect("the chat loads")
                .map(|s| s.record),
        }
    }

    fn store(&self) -> &MemoryStore {
        match &self.db {
            Db::Alone(store) => store,
            Db::Shared(db) => db.database(),
        }
    }

    /// The grants as the store has them, and as each instance's book has them.
    pub(super) async fn grants(&self) -> Vec<crate::protocol::grant::Grant> {
        let mut all = PolicyStore::grants(self.store())
            .await
            .expect("grants read");
        for system in &self.systems {
            all.extend(system.rt.policy().grants());
        }
        all
    }

    pub(super) async fn audit(&self) -> Vec<crate::agent::store::AuditRecord> {
        self.store()
            .audit(&AuditQuery {
                limit: Some(AuditQuery::MAX_LIMIT),
                ..AuditQuery::default()
            })
            .await
            .expect("the audit log reads")
    }
}
