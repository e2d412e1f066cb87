//! What other instances sharing the database say (ADR 0025): a chat committed elsewhere is read
//! again by whoever follows it here (a socket, an SSE resume, the inbox), a stop asked elsewhere
//! reaches the turn running here, a person removed elsewhere is signed out here (what they hold
//! open closes) and the turns running here drop their signatures. News only wakes: the database
//! is read again each time, and lost news makes everything followed here read again.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;

use super::Runtime;
use crate::agent::{session::TurnStatus, store::StoreNews};

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
                // A load must not hold up the news behind it.
                tokio::spawn(async move { runtime.on_news(item).await });
            }
        });
    }

    /// Acts on one piece of news.
    pub(crate) async fn on_news(self: &Arc<Self>, news: StoreNews) {
        match news {
            StoreNews::Chat { chat, waits } => self.on_chat_news(&chat, waits).await,
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
                // What this instance holds or lists is read again (an approval first asked
                // elsewhere while news was lost shows when its chat next changes).
                let mut chats: Vec<String> =
                    crate::agent::lock(&self.live).keys().cloned().collect();
                chats.extend(self.inbox.chats());
                chats.sort();
                chats.dedup();
                for chat in chats {
                    self.on_chat_news(&chat, false).await;
                }
                self.people_news().await;
                self.policy().reload_grants().await;
            }
        }
    }

    /// Another instance committed `chat` (`waits`: it waits for people now). A copy here that
    /// a task drives is left alone (one of the two commits will be refused); a copy in memory or
    /// a socket here makes the chat read again (a reader of its turn's log sees what the other
    /// instance added) and its follower told; otherwise the inbox's index is refreshed from the
    /// record if the chat waits or waited for someone.
    async fn on_chat_news(self: &Arc<Self>, chat: &str, waits: bool) {
        let live = self.live_session(chat);
        if live.as_ref().is_some_and(|s| s.has_task()) {
            return;
        }
        let held = live.is_some() || self.followers.is_followed(chat);
        drop(live);
        if !held {
            // Only the inbox may care: its index is refreshed from the record, which need not
            // come into memory.
            if waits || self.inbox.knows(chat) {
                match self.store.load(chat).await {
                    Ok(Some(stored)) => {
                        // A running turn whose instance stopped answering is taken over by the
                        // load that found it so (ADR 0025): it runs here from now on.
                        let taken_over = !stored.elsewhere
                            && stored
                                .record
                                .turn
                                .as_ref()
                                .is_some_and(|t| t.status == TurnStatus::Running);
                        if taken_over {
                            drop(self.make_live(stored));
                        } else {
                            self.inbox.sync_loaded(&stored.record);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(session = %chat, error = %e.report(), "cannot read a chat another instance changed");
                    }
                }
            }
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
}
