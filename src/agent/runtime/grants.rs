//! Grants revoked by their grantor or with their person's removal, or withdrawn with an answer
//! that will never be on record: kept, audited, and read again first on a database other
//! instances share.

use std::sync::Arc;

use crate::agent::{
    clock::Clock,
    policy::Policy,
    store::{Actor, AuditEvent, AuditKind},
};

/// Why a grant could not be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantChange {
    #[error(transparent)]
    Refused(#[from] crate::agent::policy::GrantError),
    #[error(
        "the grant is revoked, but the revocation could not be written yet: it holds until the server restarts, and is written again with the next change"
    )]
    NotRecorded,
}

/// The runtime's changes to grants once made ([`super::Runtime::grants`]); the policy keeps
/// them and decides with them.
pub struct Grants {
    policy: Arc<Policy>,
    clock: Arc<dyn Clock>,
    /// Whether other instances share the database (then the grants are read again first).
    shared: bool,
}

impl Grants {
    pub(super) fn new(policy: Arc<Policy>, clock: Arc<dyn Clock>, shared: bool) -> Self {
        Grants {
            policy,
            clock,
            shared,
        }
    }

    /// Revokes the person's grant `id`: from now on it lets nothing run. The revocation is kept
    /// and audited; when it cannot be written it still holds until the server stops, and the
    /// error says so.
    ///
    /// Only its grantor (`by`) may revoke it; someone else's grant is "not known" to them.
    pub async fn revoke(
        &self,
        id: &str,
        by: &str,
    ) -> Result<crate::protocol::grant::Grant, GrantChange> {
        // Another instance may have made or revoked it since this one last heard (#33).
        self.read_again().await;
        let theirs = self
            .policy
            .grants()
            .iter()
            .any(|g| g.id == id && g.owner() == by);
        if !theirs {
            return Err(GrantChange::Refused(
                crate::agent::policy::GrantError::Unknown(id.to_owned()),
            ));
        }
        self.revoke_and_record(id, None, None).await
    }

    /// On a database other instances share: the grants as the store has them now, whatever
    /// news of theirs is late (a grant made there is revocable here at once, and one revoked
    /// there is not revoked twice). Alone on its store, this instance's book is the store's.
    pub(super) async fn read_again(&self) {
        if self.shared {
            self.policy.reload_grants().await;
        }
    }

    /// Revokes grant `id` now, and keeps and audits the revocation (`actor`: who did it; `why`:
    /// said after the grant's label). When it cannot be written it still holds until the server
    /// stops, and the error says so.
    pub(super) async fn revoke_and_record(
        &self,
        id: &str,
        actor: Option<&Actor>,
        why: Option<&str>,
    ) -> Result<crate::protocol::grant::Grant, GrantChange> {
        let now = self.clock.now_ms();
        let grant = self.policy.revoke_grant(id, now)?;
        let mut event = crate::agent::store::audit::event(
            crate::agent::store::AuditKind::Revoked,
            now,
            &grant.granted_in,
            "",
            "",
            &grant.tool,
            grant.args.as_ref().unwrap_or(&serde_json::Value::Null),
        );
        event.approval_id = Some(grant.approval_id.clone());
        event.grant = Some(grant.id.clone());
        event.reason = Some(match why {
            Some(why) => format!("{} — {why}", grant.label),
            None => grant.label.clone(),
        });
        event.actor = actor.cloned();
        let written = match self.policy.save_grant(&grant).await {
            Ok(()) => self.policy.audit(&[event]).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            tracing::error!(grant = %id, error = &e as &dyn std::error::Error, "a revoked grant could not be written");
            // It stays revoked here, and is written with the next grant that changes.
            self.policy.mark_grant_changed(id);
            return Err(GrantChange::NotRecorded);
        }
        tracing::info!(grant = %id, "grant revoked");
        Ok(grant)
    }

    /// Takes back grants made for an answer that will never be on record (its commit failed
    /// for good): each is revoked here at once and its revocation written, as the store may
    /// already have it. No `revoked` event: its `granted` one was never written either. A
    /// revocation that cannot be written holds here and is written with the next grant that
    /// changes. A grant lives only with the answer that asked for it (ADR 0023).
    pub(crate) async fn withdraw(&self, ids: Vec<String>) {
        let now = self.clock.now_ms();
        let policy = &self.policy;
        for id in &ids {
            let revoked = match policy.revoke_grant(id, now) {
                Ok(revoked) => revoked,
                Err(e) => {
                    tracing::warn!(grant = %id, error = &e as &dyn std::error::Error, "a grant of an answer not recorded was already gone");
                    continue;
                }
            };
            tracing::warn!(grant = %id, "a grant whose answer was not recorded is withdrawn");
            if let Err(e) = policy.save_grant(&revoked).await {
                tracing::error!(grant = %id, error = &e as &dyn std::error::Error, "cannot write the withdrawal of a grant whose answer was not recorded");
                policy.mark_grant_changed(id);
            }
        }
    }

    /// [`Grants::withdraw`] for the grants whose `granted` events are among `events`, which
    /// will never be written.
    pub(crate) async fn withdraw_of(&self, events: &[AuditEvent]) {
        let granted = events
            .iter()
            .filter(|e| e.kind == AuditKind::Granted)
            .filter_map(|e| e.grant.clone())
            .collect();
        self.withdraw(granted).await;
    }
}
