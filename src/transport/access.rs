//! Whose chat a request may touch (ADR 0024): a chat belongs to the person who started it (the
//! one local person on a server without passkeys). Another person's chat is answered as if it
//! did not exist; approvals of it that a rule lets others countersign are decided from the
//! inbox, through the gate, never through the chat's own routes.
//!
//! Two questions, [`own_chat`] (with the chat) and [`may_touch_chat`] (without reading it), each
//! taking the principal's id ([`crate::agent::people::Principal::id`], or [`principal_id`] of an
//! actor), so every route, socket and server function asks them alike.

use std::sync::Arc;

use super::error::ApiError;
use crate::agent::{Runtime, SessionRecord, session::Session};

/// The chat `chat_id` if it exists and is `principal`'s (`None`: it does not exist yet, and a
/// turn started in it makes it theirs); another's is refused. The rule is the chat's
/// ([`crate::agent::SessionRecord::owned_by`]); this is how every route and socket asks it.
pub async fn own_chat(
    runtime: &Arc<Runtime>,
    principal: &str,
    chat_id: &str,
) -> Result<Option<Arc<Session>>, ApiError> {
    refuse_foreign(runtime.existing_session(chat_id).await?, principal, chat_id)
}

/// [`own_chat`] as a person's answer needs the chat: one not in memory is loaded with its head
/// only ([`Runtime::session_head`], ADR 0045), so an answer costs the same in a long chat.
pub async fn own_chat_to_answer(
    runtime: &Arc<Runtime>,
    principal: &str,
    chat_id: &str,
) -> Result<Option<Arc<Session>>, ApiError> {
    refuse_foreign(runtime.session_head(chat_id).await?, principal, chat_id)
}

/// `found` (chat `chat_id`, if it exists) unless it is someone else's than `principal`.
fn refuse_foreign(
    found: Option<Arc<Session>>,
    principal: &str,
    chat_id: &str,
) -> Result<Option<Arc<Session>>, ApiError> {
    match found {
        Some(session) if !session.owned_by(principal) => {
            tracing::info!(chat = %chat_id, "refused: someone else's chat");
            Err(ApiError::not_your_chat())
        }
        other => Ok(other),
    }
}

/// [`own_chat`] without the chat: refuses another's chat the same way, from its owner alone
/// ([`Runtime::chat_owner`]), for routes that only need to know they may go on. It reads none
/// of the chat's entries, so it costs the same after a thousand turns as after one (ADR 0038).
pub async fn may_touch_chat(
    runtime: &Runtime,
    principal: &str,
    chat_id: &str,
) -> Result<(), ApiError> {
    match runtime.chat_owner(chat_id).await? {
        Some(owner) if !SessionRecord::stored_owner_is(owner.as_deref(), principal) => {
            tracing::info!(chat = %chat_id, "refused: someone else's chat");
            Err(ApiError::not_your_chat())
        }
        _ => Ok(()),
    }
}

/// The principal id an actor of the audit log stands for.
pub fn principal_id(actor: &crate::agent::store::Actor) -> &str {
    actor
        .person
        .as_deref()
        .unwrap_or(crate::agent::people::LOCAL)
}
