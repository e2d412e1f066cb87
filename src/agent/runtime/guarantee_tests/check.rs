//! The check after every step: each call is where the reference model says (waiting with the
//! same proposal, requirement and signatures, run, or ended the same way), and the invariants
//! hold whatever the model says.

use super::*;

/// One call as the runtime holds it.
#[derive(Debug, PartialEq)]
struct Seen {
    state: State,
    proposal: Option<Value>,
    needs: Option<Needs>,
    signatures: Vec<String>,
}

async fn seen(cluster: &Cluster, call: &Call) -> Seen {
    let record = cluster.record(&call.chat).await.expect("the chat is kept");
    if let Some(waiting) = record
        .turn
        .as_ref()
        .and_then(|t| t.calls.iter().find(|c| c.call.id == call.id))
        .filter(|c| matches!(c.phase, CallPhase::AwaitingApproval { .. }))
    {
        let needs = waiting.needs();
        return Seen {
            state: State::Waiting,
            proposal: Some(waiting.proposal().clone()),
            needs: Some(if needs.is_plain() {
                Needs::Requester
            } else {
                Needs::TwoApprovers
            }),
            signatures: waiting
                .signatures
                .iter()
                .map(|s| s.person.clone())
                .collect(),
        };
    }
    let history = record.history.to_vec().expect("the history decodes");
    let result = history.iter().find_map(|item| match item {
        HistoryItem::ToolResults { results } => results.iter().find(|r| r.call_id == call.id),
        _ => None,
    });
    let paid = record
        .wallet
        .transactions
        .whole()
        .expect("the checked chat is loaded whole")
        .iter()
        .any(|t| t.tool_call_id == call.id);
    let state = match result.map(|r| (&r.outcome, &r.edited_args)) {
        Some((Outcome::Output { .. }, edited)) => State::Ran {
            args: edited.clone().unwrap_or_else(|| call.args.clone()),
            paid,
        },
        Some((Outcome::Error { .. }, edited)) if !paid => State::Ran {
            args: edited.clone().unwrap_or_else(|| call.args.clone()),
            paid: false,
        },
        Some((Outcome::Denied { .. }, _)) => State::Ended("denied"),
        Some((Outcome::DeniedByRule { .. }, _)) => State::Ended("refused"),
        Some((Outcome::Expired, _)) => State::Ended("expired"),
        Some((Outcome::Dismissed, _)) => State::Ended("dismissed"),
        Some((Outcome::Superseded | Outcome::Interrupted, _)) => State::Ended("superseded"),
        other => panic!("call {} of {}: {other:?} {record:?}", call.id, call.chat),
    };
    Seen {
        state,
        proposal: None,
        needs: None,
        signatures: Vec::new(),
    }
}

fn expected(call: &Call) -> Seen {
    match &call.state {
        State::Waiting => Seen {
            state: State::Waiting,
            proposal: Some(call.proposal.clone()),
            needs: Some(call.needs),
            signatures: call.signatures.clone(),
        },
        other => Seen {
            state: other.clone(),
            proposal: None,
            needs: None,
            signatures: Vec::new(),
        },
    }
}

/// The runtime is where the model says, and the invariants hold.
pub(super) async fn check(cluster: &Cluster, world: &World, at: &str) -> Result<(), TestCaseError> {
    for call in world.calls.iter().filter(|c| !c.id.is_empty()) {
        let mut seen = seen(cluster, call).await;
        if world.news_was_late
            && let Some(needs) = seen.needs
        {
            seen.signatures.retain(|s| world.may_sign(s, needs));
        }
        let want = expected(call);
        prop_assert_eq!(&seen, &want, "{}: call {} ({:?})", at, call.id, call.args);
    }
    // A call runs at most once, and of a re-proposal chain at most one runs.
    let mut paid: BTreeSet<String> = BTreeSet::new();
    let mut roots: BTreeSet<usize> = BTreeSet::new();
    for chat in ["chat-0", "chat-1"] {
        let Some(record) = cluster.record(chat).await else {
            continue;
        };
        for transaction in record.wallet.transactions.read().iter() {
            prop_assert!(
                paid.insert(transaction.tool_call_id.clone()),
                "{}: paid twice",
                at
            );
            let call = world
                .calls
                .iter()
                .find(|c| c.id == transaction.tool_call_id)
                .ok_or_else(|| TestCaseError::fail(format!("{at}: a payment nobody allowed")))?;
            prop_assert!(roots.insert(call.root), "{}: a call ran again", at);
            // It ran with the arguments on the table when it was approved.
            let State::Ran { args, .. } = &call.state else {
                return Err(TestCaseError::fail(format!("{at}: ran, but {call:?}")));
            };
            prop_assert_eq!(
                transaction.recipient.as_str(),
                args["recipient"].as_str().unwrap_or("")
            );
            prop_assert_eq!(transaction.amount_cents, cents(args));
        }
    }
    // No budget is exceeded.
    for grant in cluster.grants().await {
        if let Some(max) = grant.max_cents {
            prop_assert!(grant.used_cents <= max, "{}: {grant:?}", at);
        }
    }
    // Every decision is audited with who made it.
    for record in cluster.audit().await {
        let event = record.event;
        let by_person = matches!(
            event.kind,
            AuditKind::Approved
                | AuditKind::Edited
                | AuditKind::Denied
                | AuditKind::Countersigned
                | AuditKind::Proposed
                | AuditKind::Dismissed
        );
        if by_person {
            prop_assert!(
                event.actor.as_ref().is_some_and(|a| a.person.is_some()),
                "{}: {:?} without who",
                at,
                event
            );
        }
    }
    Ok(())
}
