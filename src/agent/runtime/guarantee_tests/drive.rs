//! Drives a case: each step is done on the runtime (through the instance it names) and on the
//! reference model, and the two are compared after it ([`check`]).

use super::*;

/// Runs `ops` against the runtime and the model, checking after each.
pub(super) async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let steps = ops.into_iter().map(|op| Step {
        instance: 0,
        late: false,
        op,
    });
    run_on(1, steps.collect()).await
}

/// Runs `steps`, each sent to the instance it names, against `instances` runtimes sharing one
/// store and against the model, checking after each.
pub(super) async fn run_on(instances: usize, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut world = World::new();
    let mut cluster = Cluster::boot(instances, &world).await;
    let mut known: BTreeSet<String> = BTreeSet::new();
    for (step, Step { instance, late, op }) in steps.into_iter().enumerate() {
        let at = format!("step {step}: {op:?} at instance {instance}");
        world.now = cluster.now();
        world.instance = instance;
        if late {
            cluster.hold_news();
            world.news_was_late = true;
        }
        let sys = cluster.at(instance);
        match op {
            Op::Ask { chat, pay } => {
                if !world.active(REQUESTER) {
                    continue;
                }
                let chat = format!("chat-{chat}");
                let args = pay.args();
                let started = sys
                    .rt
                    .start_turn_as(
                        &chat,
                        UserTurn {
                            message_id: None,
                            text: args.to_string(),
                            attachments: Vec::new(),
                            transport: Transport::Api,
                            ask_again: None,
                        },
                        Vec::new(),
                        None,
                        REQUESTER,
                    )
                    .await;
                prop_assert!(started.is_ok(), "{at}: {started:?}");
                cluster.settle().await;
                world.supersede(&chat);
                if invisible(&args) {
                    // The model's call is invalid: it never reaches the gate.
                    continue;
                }
                let index = world.ask(&chat, canonical(&args), None);
                let (id, approval) = new_call(&cluster, &chat, &known).await;
                known.insert(id.clone());
                world.calls[index].id = id;
                world.calls[index].approval = approval;
            }
            Op::Approve {
                who,
                call,
                edit,
                grant,
            } => {
                let Some(index) = pick(&world, call) else {
                    continue;
                };
                let who = world.person(who);
                let c = world.calls[index].clone();
                let Some(approval) = c.approval.clone() else {
                    continue;
                };
                let edit = edit.map(|p| p.args());
                let request = grant.map(|scope| GrantRequest {
                    scope,
                    seconds: GRANT_SECONDS as u64,
                    max_cents: (scope == GrantScope::Budget).then_some(BUDGET),
                });
                let decision = match (&edit, request) {
                    (args, Some(grant)) => ApprovalDecision::ApproveAndGrant {
                        args: args.clone(),
                        grant,
                    },
                    (Some(args), None) => ApprovalDecision::ApproveWithEdits { args: args.clone() },
                    (None, None) => ApprovalDecision::Approve,
                };
                let grants_before = world.grants.len();
                let want = world.approve(index, who, edit.as_ref(), grant);
                let got = sys
                    .rt
                    .submit_as(&c.chat, &[input(&approval, decision)], &System::actor(who))
                    .await;
                cluster.settle().await;
                prop_assert_eq!(got.is_ok(), want.is_ok(), "{}: {:?}", at, got.err());
                if world.grants.len() > grants_before {
                    // Learn the runtime's id of the grant just made.
                    let made = cluster
                        .grants()
                        .await
                        .into_iter()
                        .find(|g| !world.grants.iter().any(|w| w.id == g.id))
                        .expect("the grant was kept");
                    world.grants.last_mut().expect("made").id = made.id;
                }
            }
            Op::Deny { who, call } => {
                let Some(index) = pick(&world, call) else {
                    continue;
                };
                let c = world.calls[index].clone();
                let Some(approval) = c.approval.clone() else {
                    continue;
                };
                let who = world.person(who);
                let want = world.deny(index, who);
                let got = sys
                    .rt
                    .submit_as(
                        &c.chat,
                        &[input(&approval, ApprovalDecision::Deny { reason: None })],
                        &System::actor(who),
                    )
                    .await;
                cluster.settle().await;
                prop_assert_eq!(got.is_ok(), want.is_ok(), "{}: {:?}", at, got.err());
            }
            Op::NotNow { call } => {
                let Some(index) = pick(&world, call) else {
                    continue;
                };
                let c = world.calls[index].clone();
                let Some(approval) = c.approval.clone() else {
                    continue;
                };
                let want = world.not_now(index);
                let got = sys
                    .rt
                    .submit_as(
                        &c.chat,
                        &[input(&approval, ApprovalDecision::Dismiss)],
                        &System::actor(REQUESTER),
                    )
                    .await;
                cluster.settle().await;
                prop_assert_eq!(got.is_ok(), want.is_ok(), "{}: {:?}", at, got.err());
            }
            Op::AskAgain { call } => {
                if !world.active(REQUESTER) {
                    continue;
                }
                let Some(index) = pick(&world, call) else {
                    continue;
                };
                let c = world.calls[index].clone();
                let want = world.ask_again(index);
                let got = sys
                    .rt
                    .start_turn_as(
                        &c.chat,
                        UserTurn {
                            message_id: None,
                            text: "Ask me again".into(),
                            attachments: Vec::new(),
                            transport: Transport::Api,
                            ask_again: Some(c.id.clone()),
                        },
                        Vec::new(),
                        None,
                        REQUESTER,
                    )
                    .await;
                cluster.settle().await;
                prop_assert_eq!(got.is_ok(), want.is_ok(), "{}: {:?}", at, got.err());
                if let Ok(new) = want {
                    let (id, approval) = new_call(&cluster, &c.chat, &known).await;
                    known.insert(id.clone());
                    world.calls[new].id = id;
                    world.calls[new].approval = approval;
                }
            }
            Op::Revoke { grant } => {
                if world.grants.is_empty() {
                    continue;
                }
                let index = grant % world.grants.len();
                let id = world.grants[index].id.clone();
                let was = world.grants[index].revoked;
                let got = sys.rt.grants().revoke(&id, REQUESTER).await;
                prop_assert_eq!(got.is_ok(), !was, "{}: {:?}", at, got.err());
                world.grants[index].revoked = true;
                // It read the grants from the store first: every one is known here now.
                learn_grants(&mut world, instance);
            }
            Op::Remove { who } => {
                let who = PEOPLE[who];
                if !world.active(who) {
                    continue;
                }
                sys.rt
                    .remove_person(&operator(), &System::actor("operator"), who)
                    .await
                    .map_err(|e| TestCaseError::fail(format!("{at}: {e}")))?;
                if let Some(entry) = world.people.get_mut(who) {
                    entry.0 = false;
                }
                world.changed = who;
                world.drop_signatures();
                // A removal reads the grants from the store first (to revoke the person's):
                // every grant, made wherever, is known here now.
                learn_grants(&mut world, instance);
                cluster.settle().await;
            }
            Op::Roles { who, approver } => {
                let who = PEOPLE[who];
                let roles = if approver {
                    ["approver".to_owned()].into()
                } else {
                    BTreeSet::new()
                };
                let changed = sys
                    .rt
                    .set_person_roles(&operator(), &System::actor("operator"), who, roles)
                    .await;
                if !world.active(who) {
                    // Someone removed stays removed whatever roles they are given (on an
                    // instance that may not have heard of the removal yet, too).
                    cluster.settle().await;
                } else {
                    changed.map_err(|e| TestCaseError::fail(format!("{at}: {e}")))?;
                }
                if let Some(entry) = world.people.get_mut(who) {
                    entry.1 = approver;
                }
                world.changed = who;
                world.drop_signatures();
                cluster.settle().await;
            }
            Op::Stop { chat } => {
                let chat = format!("chat-{chat}");
                sys.rt.interrupt(&chat, "stopped by the person").await;
                cluster.settle().await;
                // Nothing of it that waited may run or be answered any more.
                world.supersede(&chat);
            }
            Op::Expire => {
                tokio::time::advance(APPROVAL_TIMEOUT + Duration::from_secs(1)).await;
                cluster.settle().await;
                for call in &mut world.calls {
                    if call.state == State::Waiting {
                        call.state = State::Ended("expired");
                    }
                }
            }
            Op::Restart => {
                cluster.restart(instance, &world).await;
                // It read every grant from the store.
                for grant in &mut world.grants {
                    grant.known_at.insert(instance);
                }
            }
        }
        if !late {
            cluster.deliver_news().await;
            for grant in &mut world.grants {
                grant.known_at.extend(0..instances);
            }
        }
        world.now = cluster.now();
        check(&cluster, &world, &at).await?;
    }
    Ok(())
}

/// Who removes people and changes roles: the operator, with the API key.
fn operator() -> Principal {
    Principal::Local { via_key: true }
}

/// A call the model knows, by how recent it is (`None` when there is none yet).
fn pick(world: &World, back: usize) -> Option<usize> {
    let len = world.calls.len();
    (len > 0).then(|| len - 1 - back % len)
}

/// The call of `chat` the runtime made last (one it was not known to have made): its id, and
/// its approval's when it was gated — as the person's page sees them.
async fn new_call(
    cluster: &Cluster,
    chat: &str,
    known: &BTreeSet<String>,
) -> (String, Option<String>) {
    let record = cluster.record(chat).await.expect("the chat is kept");
    let messages = record.messages.to_vec().expect("the messages decode");
    messages
        .iter()
        .rev()
        .flat_map(|m| m.parts.iter())
        .find_map(|part| match part {
            crate::protocol::UiPart::Tool(tool) if !known.contains(&tool.tool_call_id) => Some((
                tool.tool_call_id.clone(),
                tool.approval.as_ref().map(|a| a.id.clone()),
            )),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a new call in {:?}", record.messages))
}

fn input(approval: &str, decision: ApprovalDecision) -> PersonInput {
    PersonInput::Approval {
        approval_id: approval.to_owned(),
        decision,
        step_up: None,
    }
}

/// `instance` read every grant from the store (it knows of those made elsewhere whose news is
/// late).
fn learn_grants(world: &mut World, instance: usize) {
    for grant in &mut world.grants {
        grant.known_at.insert(instance);
    }
}
