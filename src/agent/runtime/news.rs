//! What other instances sharing the database say (ADR 0025): a chat committed elsewhere is read
//! again by whoever follows it here (a socket, an SSE resume), approvals that changed elsewhere
//! wake the inbox's pages (ADR 0039), a stop asked elsewhere
//! reaches the turn running here, a person removed elsewhere is signed out here (what they hold
//! open closes) and the turns running here drop their signatures. News only wakes: the database
//! is read again each time, and lost news makes everything followed here read again.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;

use super::Runtime;
use crate::agent::store::StoreNews;

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
            StoreNews::Chat { chat, .. } => self.on_chat_news(&chat).await,
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
                let chats: Vec<String> = crate::agent::lock(&self.live).keys().cloned().collect();
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
}
