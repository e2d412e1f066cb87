//! What waits for people, as the store finds it (ADR 0039): the inbox's page of a signer, one
//! approval, and every approval under one key (what a change of people rechecks).

use super::Runtime;
use crate::agent::{
    gate::{Signer, countersign::audience_of},
    inbox::{Cursor, InboxQuery, Waiting},
    store::StoreError,
};

/// How many approvals a walk over every approval under one key reads at a time.
const WALK_PAGE: usize = 500;

impl Runtime {
    /// One page (at most `limit`) of the approvals waiting that `signer` may see — their own
    /// chats', and those asked of their roles or of every person — after `after`, oldest first,
    /// their deadline not yet passed. Whether they may sign each is still [`may_sign`]'s to say.
    ///
    /// [`may_sign`]: crate::agent::gate::countersign::may_sign
    pub async fn inbox_page(
        &self,
        signer: &Signer,
        after: Option<Cursor>,
        limit: usize,
    ) -> Result<Vec<Waiting>, StoreError> {
        self.store
            .inbox(&InboxQuery {
                keys: audience_of(signer),
                now: Some(self.clock.now_ms()),
                after,
                limit,
            })
            .await
    }

    /// The approval `approval_id`, if it waits for people.
    pub async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        self.store.waiting(approval_id).await
    }

    /// The approval `approval_id` of `chat` as it stands right after an answer given here: the
    /// chat's record in memory when this instance holds it (an answer that lets a call run is
    /// committed with the call's result, a moment later), else the store's.
    pub async fn waiting_after_answer(
        &self,
        chat: &str,
        approval_id: &str,
    ) -> Result<Option<Waiting>, StoreError> {
        if let Some(session) = self.live_session(chat) {
            return Ok(crate::agent::inbox::waiting_of(&session.state().record)
                .into_iter()
                .find(|w| w.approval_id == approval_id));
        }
        self.waiting(approval_id).await
    }

    /// Every approval waiting under `key` (expired or not), a page at a time.
    pub(crate) async fn waiting_under(&self, key: &str) -> Result<Vec<Waiting>, StoreError> {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .store
                .inbox(&InboxQuery {
                    keys: vec![key.to_owned()],
                    now: None,
                    after,
                    limit: WALK_PAGE,
                })
                .await?;
            let full = page.len() == WALK_PAGE;
            after = page.last().map(Waiting::cursor);
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }
}
