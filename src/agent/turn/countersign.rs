//! The `data-countersign` parts of approvals that need several people (ADR 0024): the first when
//! the approval is asked, one each time its signatures change (one given, or one dropped: its
//! person was removed or lost the role), and one when it ends — complete
//! (then, for AI SDK v7 clients, each signature as a `tool-approval-response`), denied, or ended
//! otherwise. A part replaces the one before it (same id: the approval's).

use crate::agent::{
    gate::{CallPhase, StepCall, countersign::is_complete},
    history::Outcome,
};
use crate::protocol::{
    Chunk,
    countersign::{PROGRESS_PART, Progress, ProgressState},
};

/// The part that says where `call`'s countersigning stands now.
pub(crate) fn progress_part(call: &StepCall, state: ProgressState) -> Option<Chunk> {
    let approval_id = call.gated_by.as_ref()?;
    let progress = Progress {
        approval_id: approval_id.clone(),
        tool_call_id: call.call.id.clone(),
        needs: call.needs(),
        signatures: call.signatures.clone(),
        state,
        denied_by: call.denied_by.clone(),
        args: call.signed_args.clone(),
        dropped: call.dropped.clone(),
        reason: match &call.phase {
            CallPhase::Done {
                outcome: Outcome::Denied { reason, .. },
                ..
            } => reason.clone(),
            _ => None,
        },
    };
    Some(Chunk::data_with_id(
        PROGRESS_PART,
        approval_id.clone(),
        progress.to_value(),
    ))
}

/// What `call`'s countersigning has to tell that was not told yet (marking it told): nothing
/// for a call whose approval is the chat's person's click and was never edited into a new
/// proposal.
pub(crate) fn news(call: &mut StepCall) -> Vec<Chunk> {
    let needs = call.needs();
    let plain = needs.is_plain() && call.signed_args.is_none();
    if plain || call.countersign_closed || call.gated_by.is_none() {
        return Vec::new();
    }
    let state = match &call.phase {
        CallPhase::AwaitingApproval { .. } => ProgressState::Waiting,
        _ if is_complete(&needs, &call.signatures) => ProgressState::Complete,
        CallPhase::Done {
            outcome: Outcome::Denied { .. },
            ..
        } => ProgressState::Denied,
        _ => ProgressState::Ended,
    };
    if state == ProgressState::Waiting {
        // The part sent when it was asked told revision 0; one more for each change.
        if call.revision_shown == call.revision {
            return Vec::new();
        }
        call.revision_shown = call.revision;
        return progress_part(call, state).into_iter().collect();
    }
    call.countersign_closed = true;
    call.revision_shown = call.revision;
    let mut chunks: Vec<Chunk> = progress_part(call, state).into_iter().collect();
    if state == ProgressState::Complete
        && let Some(approval_id) = &call.gated_by
    {
        // AI SDK v7: the signatures, now that they suffice (a client shown the first as the
        // answer would have run the call early).
        for signature in &call.signatures {
            chunks.push(Chunk::tool_approval_response(
                approval_id.clone(),
                true,
                Some(format!("Approved by {}", signature.name)),
            ));
        }
    }
    chunks
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::{gate::StepCall, history::ToolCall, tools::ToolLocation};
    use crate::protocol::{
        countersign::{Requirement, Signature},
        grant::Ruling,
    };

    fn call(phase: CallPhase, signed: &[&str]) -> StepCall {
        StepCall {
            call: ToolCall {
                id: "c1".into(),
                name: "process_payment".into(),
                args: json!({"amount": 150}),
                provider_data: None,
            },
            location: ToolLocation::Server,
            phase,
            announced: true,
            gated_by: Some("a1".into()),
            ruling: Some(Ruling::Asked {
                rule: Some("two-approvers".into()),
                grantable: false,
                needs: Some(Requirement {
                    approvers: 2,
                    role: Some("approver".into()),
                    not_requester: true,
                    step_up: true,
                }),
            }),
            signatures: signed
                .iter()
                .map(|p| Signature {
                    person: (*p).into(),
                    name: p.to_uppercase(),
                    at_ms: 1,
                    step_up: true,
                })
                .collect(),
            signed_args: None,
            proposed_by: None,
            denied_by: None,
            revision: 0,
            revision_shown: 0,
            dropped: Vec::new(),
            countersign_closed: false,
        }
    }

    fn waiting() -> CallPhase {
        CallPhase::AwaitingApproval {
            approval_id: "a1".into(),
            requested_at_ms: 0,
            deadline_ms: 10,
        }
    }

    fn kinds(chunks: &[Chunk]) -> Vec<String> {
        chunks.iter().map(|c| c.wire_type().into_owned()).collect()
    }

    #[test]
    fn each_signature_is_told_once_and_the_end_with_every_signature_for_v7() {
        let mut call = call(waiting(), &[]);
        assert!(
            news(&mut call).is_empty(),
            "0 of 2 was told when it was asked"
        );
        call.signatures = super::tests::call(waiting(), &["ben"]).signatures;
        call.revision += 1;
        let told = news(&mut call);
        assert_eq!(kinds(&told), ["data-countersign"]);
        assert!(news(&mut call).is_empty(), "told once");
        call.signatures = super::tests::call(waiting(), &["ben", "ana"]).signatures;
        call.revision += 1;
        call.phase = CallPhase::Ready {
            args: json!({"amount": 150}),
            edited: false,
        };
        let told = news(&mut call);
        assert_eq!(
            kinds(&told),
            [
                "data-countersign",
                "tool-approval-response",
                "tool-approval-response"
            ]
        );
        let Chunk::Data(data) = &told[0] else {
            panic!("{told:?}")
        };
        let progress = Progress::from_value(&data.data).unwrap();
        assert_eq!(progress.state, ProgressState::Complete);
        assert_eq!(progress.words(), "Approved by BEN and ANA");
        assert!(news(&mut call).is_empty(), "closed");
    }

    #[test]
    fn a_signature_that_stopped_counting_is_told_with_whose_and_why() {
        use crate::agent::gate::countersign::{Standing, recheck};
        let mut calls = vec![call(waiting(), &["ben"])];
        calls[0].revision = 1;
        calls[0].revision_shown = 1;
        // Ben was removed: only Eve may sign now.
        let standing = Standing::new([crate::agent::gate::Signer {
            id: "eve".into(),
            name: "EVE".into(),
            roles: ["approver".to_owned()].into(),
            person: true,
            step_ups: Vec::new(),
        }]);
        let mut resolved = Default::default();
        let dropped = recheck(&mut calls, &mut resolved, &standing, "dan", 5, |_| 60);
        assert_eq!(dropped.len(), 1);
        let told = news(&mut calls[0]);
        assert_eq!(kinds(&told), ["data-countersign"]);
        let Chunk::Data(data) = &told[0] else {
            panic!("{told:?}")
        };
        let progress = Progress::from_value(&data.data).unwrap();
        assert_eq!(
            progress.words(),
            "BEN was removed; 2 more people (approver) needed"
        );
        // Strict ai@6.0.0 keeps a data part's `data` as it is: the part goes out whole.
        let strict = told[0].to_json(crate::protocol::Dialect::V6Strict).unwrap();
        let strict: serde_json::Value = serde_json::from_str(&strict).unwrap();
        assert_eq!(strict["type"], "data-countersign");
        assert_eq!(strict["data"]["dropped"][0]["why"], "was removed");
        assert!(news(&mut calls[0]).is_empty(), "told once");
    }

    #[test]
    fn a_denial_or_an_end_is_told_without_approvals() {
        let mut denied = call(
            CallPhase::Done {
                outcome: Outcome::Denied {
                    reason: Some("not this vendor".into()),
                    by: Some("Cy".into()),
                },
                edited_args: None,
            },
            &["ben"],
        );
        denied.denied_by = Some("Cy".into());
        let told = news(&mut denied);
        assert_eq!(kinds(&told), ["data-countersign"]);
        let Chunk::Data(data) = &told[0] else {
            panic!()
        };
        assert_eq!(
            Progress::from_value(&data.data).unwrap().words(),
            "Denied by Cy: not this vendor",
            "who and why reach every client, strict ai@6.0.0 included"
        );
        let mut expired = call(
            CallPhase::Done {
                outcome: Outcome::Expired,
                edited_args: None,
            },
            &[],
        );
        let told = news(&mut expired);
        let Chunk::Data(data) = &told[0] else {
            panic!()
        };
        assert_eq!(
            Progress::from_value(&data.data).unwrap().state,
            ProgressState::Ended
        );
        // A plain approval has nothing to tell.
        let mut plain = call(waiting(), &[]);
        plain.ruling = Some(Ruling::Asked {
            rule: None,
            grantable: true,
            needs: None,
        });
        assert!(news(&mut plain).is_empty());
    }
}
