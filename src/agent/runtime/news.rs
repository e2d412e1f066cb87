//! What other instances sharing the database say (ADR 0025): a chat committed elsewhere is read
//! again by whoever follows it here (a socket, an SSE resume), approvals that changed elsewhere
//! wake the inbox's pages (ADR 0039), a stop asked elsewhere
//! reaches the turn running here, a person removed elsewhere is signed out here (what they hold
//! open closes) and the turns running here drop their signatures. News only wakes: the database
//! is read again each time, and lost news makes everything followed here read again — except
//! for a running turn's text, which comes with its news, entry by entry, to the readers here
//! that follow the turn (ADR 0043); what is lost of it they read from the stored log.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;

use super::Runtime;
use crate::agent::{
    session::{TurnEntry, TurnLog},
    store::StoreNews,
};

impl Runtime {
    /// Follows the other instances' news for as long as the runtime exists (nothing to do on a
    /// database only this instance uses).
    pub fn follow_other_instances(self: &Arc<Self>) {
        let Some(mut news) = self.store.news() else {
            return;
        };
        let runtime = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let item = match news.recv().await {
                    Ok(item) => item,
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(
                            missed,
                            "news from other instances came faster than it was read"
                        );
                        StoreNews::Missed
                    }
                    Err(RecvError::Closed) => return,
                };
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                match item {
                    // At once and in the order heard: readers here show it as it comes.
                    StoreNews::Text {
                        chat,
                        turn,
                        at,
                        entries,
                    } => runtime.heard_text(&chat, &turn, at, entries),
                    // A load must not hold up the news behind it.
                    item => drop(tokio::spawn(async move { runtime.on_news(item).await })),
                }
            }
        });
    }

    /// Acts on one piece of news.
    pub(crate) async fn on_news(self: &Arc<Self>, news: StoreNews) {
        match news {
            StoreNews::Chat { chat, .. } => self.on_chat_news(&chat).await,
            StoreNews::Text {
                chat,
                turn,
                at,
                entries,
            } => self.heard_text(&chat, &turn, at, entries),
            StoreNews::Kept { chat, turn, len } => {
                // A reader here that heard every entry has nothing to read.
                if self
                    .followed_log(&chat, &turn)
                    .is_none_or(|log| log.len() < len)
                {
                    self.on_chat_news(&chat).await;
                }
            }
            StoreNews::Waiting { chat, approvals } => {
                tracing::debug!(session = %chat, ?approvals, "approvals changed elsewhere");
                self.inbox.heard(&chat, true);
            }
            StoreNews::Stop { chat } => {
                if let Some(session) = self.live_session(&chat).filter(|s| s.has_task())
                    && session.interrupt("stopped by the person")
                {
                    tracing::info!(session = %chat, "stopped at another instance's request");
                    self.unpark(&session);
                }
            }
            StoreNews::People => self.people_news().await,
            StoreNews::Grants => self.policy().reload_grants().await,
            StoreNews::SignIns => {}
            StoreNews::Missed => {
                // What this instance holds is read again, and every page that follows something
                // here looks again (the inbox reads the database anyway).
                let chats = self.live.chats();
                for chat in chats {
                    self.on_chat_news(&chat).await;
                }
                self.inbox.everything_changed();
                self.people_news().await;
                self.policy().reload_grants().await;
            }
        }
    }

    /// Another instance committed `chat`. A copy here that a task drives is left alone (one of
    /// the two commits will be refused); a copy in memory or a socket here makes the chat read
    /// again (a reader of its turn's log sees what the other instance added) and its follower
    /// told. Nothing is read for the inbox (ADR 0039): a page that follows the chat hears that it
    /// moved on.
    async fn on_chat_news(self: &Arc<Self>, chat: &str) {
        self.inbox.heard(chat, false);
        let live = self.live_session(chat);
        if live.as_ref().is_some_and(|s| s.has_task()) {
            return;
        }
        let held = live.is_some() || self.followers.is_followed(chat);
        drop(live);
        if !held {
            return;
        }
        match self.existing_session(chat).await {
            Ok(session) => drop(session),
            Err(e) => {
                tracing::warn!(session = %chat, error = %e.report(), "cannot read a chat another instance changed");
                return;
            }
        }
        self.followers.notify(chat);
    }

    /// Entries another instance's running turn just logged, the first being number `at` (ADR
    /// 0043): the log here that follows the turn takes them (in order, each once, waiting at a
    /// gap for the stored log). A chat nobody follows here costs a look-up; a chat being read
    /// again at this moment gets them when the read is done.
    pub(crate) fn heard_text(
        self: &Arc<Self>,
        chat: &str,
        turn: &str,
        at: usize,
        entries: Vec<TurnEntry>,
    ) {
        if let Some(log) = self.followed_log(chat, turn) {
            log.heard(at, entries);
            return;
        }
        if !self.loading(chat) {
            return;
        }
        let runtime = self.clone();
        let (chat, turn) = (chat.to_owned(), turn.to_owned());
        tokio::spawn(async move {
            drop(runtime.load_gate(&chat).await);
            if let Some(log) = runtime.followed_log(&chat, &turn) {
                log.heard(at, entries);
            }
        });
    }

    /// The log of `chat`'s turn `turn` here, if readers here follow it while another instance
    /// runs it.
    fn followed_log(&self, chat: &str, turn: &str) -> Option<Arc<TurnLog>> {
        let session = self.live_session(chat)?;
        let state = session.state();
        let live = state.live.as_ref().filter(|live| live.elsewhere)?;
        let current = state.record.turn.as_ref()?;
        (current.id == turn).then(|| live.log.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use crate::agent::{
        Runtime, RuntimeSettings,
        clock::{SequentialIds, SystemClock},
        session::{TurnEntry, TurnRecord, TurnStatus},
        store::{
            SessionStore, StoreNews,
            shared::{MemoryInstance, SharedMemory},
        },
        tools::{ToolRegistry, ToolSettings, WeatherSource},
    };
    use crate::models::demo::DemoModel;
    use crate::protocol::Chunk;

    fn instance(db: &SharedMemory) -> Arc<Runtime> {
        instance_on(db.instance())
    }

    fn instance_on(store: MemoryInstance) -> Arc<Runtime> {
        let tools = ToolRegistry::standard(&ToolSettings {
            approval_timeout: Duration::from_secs(60),
            browser_timeout: Duration::from_secs(10),
            weather: WeatherSource::Offline,
        });
        Runtime::builder(
            Arc::new(DemoModel::new(Duration::ZERO)),
            tools,
            Arc::new(SystemClock),
            Arc::new(SequentialIds::default()),
            Arc::new(store),
            RuntimeSettings::default(),
        )
        .build()
    }

    /// A turn `id` that runs (on the instance that commits it).
    fn running(id: &str) -> TurnRecord {
        TurnRecord {
            id: id.into(),
            message_id: "m".into(),
            status: TurnStatus::Running,
            steps: 0,
            calls: Vec::new(),
            held_text: Vec::new(),
            usage: Default::default(),
            inputs: 0,
            transport: Default::default(),
            timing: None,
        }
    }

    /// Issue #35's cost that does not grow with the deployment (ADR 0043): an instance hears
    /// the text of a turn another instance runs only while a copy or a reader of that turn's
    /// log is here — from the moment the chat is read, across reads again (a reader keeps the
    /// log, so no word is lost to a pause in listening), and no longer once they are gone.
    #[tokio::test]
    async fn an_instance_hears_a_turns_text_only_while_it_follows_the_turn() {
        let db = SharedMemory::new();
        let (store_a, store_b) = (db.instance(), db.instance());
        let (a, b) = (instance_on(store_a.clone()), instance_on(store_b.clone()));
        let on_a = a.session("chat").await.unwrap();
        on_a.state().record.turn = Some(running("t"));
        assert!(a.commits.commit(&on_a, Vec::new(), None).await.is_ok());
        let text = |at: usize| StoreNews::Text {
            chat: "chat".into(),
            turn: "t".into(),
            at,
            entries: vec![TurnEntry::Chunk(Chunk::text_delta("x", "word"))],
        };
        let mut heard = store_b.news().expect("a shared database has news");
        // What B heard up to A's next wake-up (news arrives in the order it is sent).
        let mut hear = async |news: StoreNews| {
            store_a.announce(news).await.unwrap();
            store_a.announce(StoreNews::SignIns).await.unwrap();
            let mut got = Vec::new();
            loop {
                match heard.try_recv().expect("sent before") {
                    StoreNews::SignIns => return got,
                    other => got.push(other),
                }
            }
        };

        // Nobody on B follows the chat: none of its text reaches B.
        assert!(hear(text(0)).await.is_empty());
        assert!(!store_b.hears_text_of("chat"));

        // A reader on B reads the chat: B hears its text from then on.
        let copy = b.session("chat").await.unwrap();
        assert!(copy.runs_elsewhere());
        assert!(store_b.hears_text_of("chat"));
        assert!(matches!(hear(text(0)).await[..], [StoreNews::Text { .. }]));

        // The reader holds the log while B reads the chat again (news of a commit there): B
        // goes on hearing, with no moment of deafness in between.
        let log = copy.current_log().expect("a copy of the running turn");
        b.forget_live(&copy);
        drop(copy);
        assert!(store_b.hears_text_of("chat"));
        let again = b.session("chat").await.unwrap();
        assert!(Arc::ptr_eq(&again.current_log().unwrap(), &log));
        assert!(store_b.hears_text_of("chat"));

        // The copy leaves memory and the reader goes: B stops hearing the chat's text.
        b.forget_live(&again);
        drop(again);
        assert!(
            store_b.hears_text_of("chat"),
            "the reader still holds the log"
        );
        drop(log);
        assert!(!store_b.hears_text_of("chat"));
        assert!(hear(text(1)).await.is_empty());
    }

    /// The removal test's race on Postgres (tests/removal.rs, two instances), step by step: an
    /// answer on B holds its copy of the chat while A commits the chat again and B, hearing
    /// it, reads the chat again. The copy the answer holds must not then be written over A's
    /// commit (B's store expects the newer version now, which the old copy never saw).
    #[tokio::test]
    async fn a_copy_read_again_after_another_instance_committed_never_writes_over_it() {
        let db = SharedMemory::new();
        let (a, b) = (instance(&db), instance(&db));
        let on_a = a.session("chat").await.unwrap();
        assert!(a.commits.commit(&on_a, Vec::new(), None).await.is_ok());
        // An answer on B takes B's copy of the chat (and takes its time: a step-up, say).
        let held = b.existing_session("chat").await.unwrap().expect("stored");
        // Meanwhile A commits the chat again (the turn it woke parks again).
        on_a.state().record.updated_at_ms = 2_000;
        assert!(a.commits.commit(&on_a, Vec::new(), None).await.is_ok());
        // B hears of it and reads the chat again.
        b.on_news(StoreNews::Chat {
            chat: "chat".into(),
            waits: false,
        })
        .await;
        let fresh = b.live_session("chat").expect("read again");
        assert!(!Arc::ptr_eq(&fresh, &held));
        assert_eq!(fresh.state().record.updated_at_ms, 2_000);
        // The answer commits the copy it held: refused, and A's commit stays.
        held.state().record.updated_at_ms = 1_000;
        let refused = b.commits.commit(&held, Vec::new(), None).await.err();
        assert!(refused.is_some_and(|r| r.is_conflict()));
        let stored = b.store.load("chat").await.unwrap().expect("stored");
        assert_eq!(stored.record.updated_at_ms, 2_000);
        // The copy read again commits.
        assert!(b.commits.commit(&fresh, Vec::new(), None).await.is_ok());
    }
}
