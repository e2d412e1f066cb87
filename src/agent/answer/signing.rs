//! Who signs an answer: the person the actor signed in as, with their roles as the store says
//! now (for an approval: another instance may have removed someone this one has not heard of),
//! and the passkey confirmations (step-up) their answers carry, verified.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Answer;
use crate::agent::{
    clock::Millis,
    gate::{InputError, PersonInput, Signer, StepUp, countersign::Standing},
};

/// By approval: the passkey that confirmed it and the receipt the audit log keeps.
pub(super) type Receipts = BTreeMap<String, (String, Value)>;

impl Answer<'_> {
    /// Who may sign as the store says now, when the answer holds an approval: the signer, and
    /// every signature it would join — one that no longer counts is dropped first (committed,
    /// the turn told), and the quorum waits.
    pub(super) async fn standing(&self) -> Result<Option<Standing>, InputError> {
        if !self
            .inputs
            .iter()
            .any(|i| matches!(i, PersonInput::Approval { .. }))
        {
            return Ok(None);
        }
        let standing = self
            .rt
            .people()
            .standing()
            .await
            .map_err(|e| InputError::NotRecorded {
                message: e.to_string(),
            })?;
        self.rt
            .recheck_session(&self.session, &standing, None)
            .await?;
        Ok(Some(standing))
    }

    /// The signer, with the passkey confirmations the answer carries verified and added.
    pub(super) async fn signer(
        &self,
        standing: Option<&Standing>,
        now: Millis,
    ) -> Result<(Signer, Receipts), InputError> {
        let mut signer = self.who(standing)?;
        let receipts = self.verify_step_ups(&mut signer, now).await?;
        Ok((signer, receipts))
    }

    /// Who answers, from the audit log's view of them: the person they signed in as, with their
    /// roles as `standing` says (read from the store for an approval) or else as the directory
    /// has them now; or the one local person. Someone removed since they signed in answers
    /// nothing.
    fn who(&self, standing: Option<&Standing>) -> Result<Signer, InputError> {
        let Some(id) = &self.actor.person else {
            return Ok(Signer::local());
        };
        let found = match standing {
            Some(standing) => standing.get(id).cloned(),
            None => self.rt.people().active(id).map(|person| Signer {
                id: person.id,
                name: person.name,
                roles: person.roles,
                person: true,
                step_ups: Vec::new(),
            }),
        };
        found.ok_or_else(|| InputError::NotAnApprover {
            approval_id: String::new(),
            why: "you may no longer sign in to this server".into(),
        })
    }

    /// Checks the passkey confirmations the inputs carry (step-up): each must be a fresh
    /// assertion by one of the signer's passkeys, made for that approval of this chat. Adds them
    /// to `signer` (the gate checks the arguments they are bound to); returns, by approval, the
    /// passkey and the receipt the audit log keeps.
    async fn verify_step_ups(
        &self,
        signer: &mut Signer,
        now: Millis,
    ) -> Result<Receipts, InputError> {
        let mut receipts = BTreeMap::new();
        for input in self.inputs {
            let PersonInput::Approval {
                approval_id,
                step_up: Some(credential),
                ..
            } = input
            else {
                continue;
            };
            let people = self.rt.people();
            let refused = |message: String| InputError::StepUpRefused { message };
            let passkeys = people.passkeys().map_err(|e| refused(e.to_string()))?;
            let (proof, used) = passkeys
                .finish_step_up(credential, people, now)
                .await
                .map_err(|e| refused(e.to_string()))?;
            let binding = &proof.binding;
            if binding.person != signer.id
                || binding.chat != self.chat_id
                || &binding.approval_id != approval_id
            {
                return Err(refused(
                    "it was made for another approval or another person".into(),
                ));
            }
            people.used_passkey(used, now).await;
            signer.step_ups.push(StepUp {
                approval_id: approval_id.clone(),
                args_digest: binding.args_digest.clone(),
                passkey: proof.passkey.clone(),
            });
            receipts.insert(approval_id.clone(), (proof.passkey, proof.receipt));
        }
        Ok(receipts)
    }
}
