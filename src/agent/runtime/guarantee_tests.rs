//! The promise as a model test (#33; design.md, "The promise, as invariants"): random sequences
//! of asks, edits, approvals, denials, "not now" and "ask again", grants and their revocation,
//! removals and role changes, expiries and restarts run against the real runtime (gate, turn
//! loop, policy rules in Cedar, grants, people, store) and against a small reference model of
//! who must sign what, written apart from the gate.
//!
//! After every step the runtime must be where the model says — each call waiting (with the same
//! arguments on the table, the same requirement and the same signatures), run, or ended the
//! same way — and, whatever the model says:
//! * a call runs at most once, and of a call and its re-proposals ("ask again") at most one runs;
//! * it runs with the arguments the last valid signatures were given for, and those signatures
//!   satisfy the rules evaluated on those arguments, from people who may still sign when it
//!   runs;
//! * no grant's budget and no daily limit is exceeded;
//! * every decision is audited with who made it.
//!
//! Failing cases proptest finds are kept in `proptest-regressions/` and replayed first.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::agent::people::{People, Person, Principal};
use crate::agent::{
    ApprovalDecision, PersonInput, Runtime, RuntimeSettings, Transport, UserTurn,
    clock::{Clock, RandomIds, TokioClock},
    gate::CallPhase,
    history::{HistoryItem, Outcome},
    model::{Model, ModelEvent, ModelRequest, ModelStream, Usage},
    policy::{Policy, ToolFacts},
    store::{Actor, AuditKind, AuditQuery, MemoryStore, PeopleStore, SessionStore},
    tools::{ToolRegistry, ToolSettings, WeatherSource},
};
use crate::protocol::{
    FinishReason,
    grant::{GrantRequest, GrantScope},
    money::Money,
};

/// The rules: small payments run (10 USD each, 50 USD a day), Mallory never, above 100 USD two
/// approvers who did not ask, above 500 USD never; everything else asks the person.
const RULES: &str = r#"
@id("small")
permit (principal, action == Action::"process_payment", resource)
when { context.amount_cents <= 1000 && context.spent_today_cents + context.amount_cents <= 5000 };

@id("blocked")
@reason("blocked")
forbid (principal, action == Action::"process_payment", resource)
when { context.input.recipient == "Mallory" };

@id("two")
@ask
@approvers("2")
@role("approver")
@not_requester
forbid (principal, action == Action::"process_payment", resource)
when { context.amount_cents > 10000 };

@id("limit")
@reason("too large")
forbid (principal, action == Action::"process_payment", resource)
when { context.amount_cents > 50000 };
"#;

const APPROVAL_TIMEOUT: Duration = Duration::from_secs(60);
/// 2027-01-01T00:10:00Z: a day long enough for every case.
const T0: i64 = 1_798_762_200_000;
const DAILY_CENTS: i64 = 5_000;
const SMALL_CENTS: i64 = 1_000;
const OPENING_CENTS: i64 = 100_000;

/// The requester, three approvers and someone with no role.
const PEOPLE: [&str; 5] = ["rae", "ana", "ben", "cy", "dan"];
const REQUESTER: &str = "rae";

/// A model that pays what the person's message says (the message is the call's arguments as
/// JSON), then says it is done.
struct Pays;

impl Model for Pays {
    fn label(&self) -> String {
        "pays".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        use futures::StreamExt;
        let answered = !matches!(request.history.last(), Some(HistoryItem::User { .. }));
        let args = match request.history.last() {
            Some(HistoryItem::User { text, .. }) => serde_json::from_str(text).unwrap_or_default(),
            _ => Value::Null,
        };
        let mut events = Vec::new();
        if answered {
            events.push(ModelEvent::TextDelta("Done.".into()));
        } else {
            events.push(ModelEvent::ToolCall(crate::agent::history::ToolCall {
                id: String::new(),
                name: "process_payment".into(),
                args,
                provider_data: None,
            }));
        }
        events.push(ModelEvent::Finish {
            reason: if answered {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            usage: Usage::default(),
        });
        futures::stream::iter(events.into_iter().map(Ok)).boxed()
    }
}

/// A payment as the model or an editor writes it.
#[derive(Debug, Clone, PartialEq)]
struct Pay {
    amount: &'static str,
    currency: &'static str,
    recipient: &'static str,
}

impl Pay {
    fn args(&self) -> Value {
        let amount: Value = serde_json::from_str(self.amount).unwrap_or_default();
        json!({"amount": amount, "currency": self.currency, "recipient": self.recipient})
    }
}

/// The arguments as the model sees their canonical form: names trimmed, one space for each run
/// of whitespace. (Invisible characters make an edit invalid: [`Model::approve`].)
fn canonical(args: &Value) -> Value {
    let mut args = args.clone();
    for key in ["recipient", "currency"] {
        if let Some(text) = args[key].as_str() {
            args[key] = json!(text.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    args
}

fn cents(args: &Value) -> i64 {
    let amount = args["amount"].to_string();
    let currency = args["currency"].as_str().unwrap_or("USD");
    Money::parse(&amount, currency)
        .map(|m| m.wallet_cents())
        .unwrap_or(0)
}

fn invisible(args: &Value) -> bool {
    args["recipient"]
        .as_str()
        .is_some_and(|r| r.contains('\u{200b}'))
}

fn pays() -> impl Strategy<Value = Pay> {
    let amount = prop_oneof![
        Just("5"),
        Just("9"),
        Just("20"),
        Just("60"),
        Just("150"),
        Just("350"),
        Just("600"),
        Just("950"),
    ];
    let currency = prop_oneof![6 => Just("USD"), 1 => Just("KWD"), 1 => Just("KRW")];
    let recipient = prop_oneof![
        4 => Just("Vendor"),
        1 => Just(" Vendor\t"),
        1 => Just("Mallory"),
        1 => Just("\u{a0}Mallory"),
        1 => Just("Mallory\n"),
        1 => Just("Mal\u{200b}lory"),
    ];
    (amount, currency, recipient).prop_map(|(amount, currency, recipient)| Pay {
        amount,
        currency,
        recipient,
    })
}

#[derive(Debug, Clone)]
enum Op {
    /// The model asks for a payment in the requester's chat `chat`.
    Ask {
        chat: u8,
        pay: Pay,
    },
    Approve {
        who: usize,
        call: usize,
        edit: Option<Pay>,
        grant: Option<GrantScope>,
    },
    Deny {
        who: usize,
        call: usize,
    },
    NotNow {
        call: usize,
    },
    AskAgain {
        call: usize,
    },
    Revoke {
        grant: usize,
    },
    Remove {
        who: usize,
    },
    /// Gives or takes the approver role.
    Roles {
        who: usize,
        approver: bool,
    },
    /// Every approval waiting now expires.
    Expire,
    Restart,
}

fn ops() -> impl Strategy<Value = Op> {
    let who = 0..PEOPLE.len();
    // Calls by how recent they are: 0 is the newest.
    let call = prop_oneof![4 => 0..2usize, 1 => 0..8usize];
    let grant = prop_oneof![
        4 => Just(None),
        1 => Just(Some(GrantScope::Call)),
        1 => Just(Some(GrantScope::Budget)),
    ];
    prop_oneof![
        4 => (0..2u8, pays()).prop_map(|(chat, pay)| Op::Ask { chat, pay }),
        8 => (who.clone(), call.clone(), proptest::option::weighted(0.3, pays()), grant)
            .prop_map(|(who, call, edit, grant)| Op::Approve { who, call, edit, grant }),
        2 => (who.clone(), call.clone()).prop_map(|(who, call)| Op::Deny { who, call }),
        2 => call.clone().prop_map(|call| Op::NotNow { call }),
        3 => call.prop_map(|call| Op::AskAgain { call }),
        1 => (0..4usize).prop_map(|grant| Op::Revoke { grant }),
        1 => (1..PEOPLE.len()).prop_map(|who| Op::Remove { who }),
        1 => (1..PEOPLE.len(), any::<bool>()).prop_map(|(who, approver)| Op::Roles { who, approver }),
        1 => Just(Op::Expire),
        1 => Just(Op::Restart),
    ]
}

// ---- The reference model (guarantee_tests/model.rs) ----

mod model;
use model::*;

const BUDGET: i64 = 40_000;
const GRANT_SECONDS: i64 = 3_600;

// ---- The system under test ----

mod cluster;
use cluster::{Cluster, System};

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
    let result = record.history.iter().find_map(|item| match item {
        HistoryItem::ToolResults { results } => results.iter().find(|r| r.call_id == call.id),
        _ => None,
    });
    let paid = record
        .wallet
        .transactions
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

/// The call of `chat` the runtime made last (one it was not known to have made): its id, and
/// its approval's when it was gated — as the person's page sees them.
async fn new_call(
    cluster: &Cluster,
    chat: &str,
    known: &BTreeSet<String>,
) -> (String, Option<String>) {
    let record = cluster.record(chat).await.expect("the chat is kept");
    record
        .messages
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

/// Runs `ops` against the runtime and the model, checking after each.
async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let steps = ops.into_iter().map(|op| Step {
        instance: 0,
        late: false,
        op,
    });
    run_on(1, steps.collect()).await
}

/// One step of a run with several instances.
#[derive(Debug, Clone)]
struct Step {
    /// The instance it is sent to.
    instance: usize,
    /// The news it makes reaches the other instance only after the next step that is not late
    /// (until then that one acts on what it knew).
    late: bool,
    op: Op,
}

/// Who an approval or denial names when it is [`World::changed`]: the person last removed or
/// given other roles, so that what an instance that has not heard of it yet does with their
/// answer is tried often.
const CHANGED: usize = PEOPLE.len();

fn steps() -> impl Strategy<Value = Step> {
    let changed = proptest::bool::weighted(0.3);
    (0..2usize, proptest::bool::weighted(0.4), ops(), changed).prop_map(
        |(instance, late, op, changed)| {
            let op = match op {
                Op::Approve {
                    call, edit, grant, ..
                } if changed => Op::Approve {
                    who: CHANGED,
                    call,
                    edit,
                    grant,
                },
                Op::Deny { call, .. } if changed => Op::Deny { who: CHANGED, call },
                op => op,
            };
            Step { instance, late, op }
        },
    )
}

/// Runs `steps`, each sent to the instance it names, against `instances` runtimes sharing one
/// store and against the model, checking after each.
async fn run_on(instances: usize, steps: Vec<Step>) -> Result<(), TestCaseError> {
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
                let got = sys.rt.revoke_grant(&id, REQUESTER).await;
                prop_assert_eq!(got.is_ok(), !was, "{}: {:?}", at, got.err());
                world.grants[index].revoked = true;
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

/// The runtime is where the model says, and the invariants hold.
async fn check(cluster: &Cluster, world: &World, at: &str) -> Result<(), TestCaseError> {
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
        for transaction in record.wallet.transactions {
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_gate_keeps_its_promise(ops in proptest::collection::vec(ops(), 1..48)) {
        runtime().block_on(run(ops))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: TWO_INSTANCE_CASES,
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    })]

    /// The same promise with two instances sharing one database (ADR 0025), each step sent to
    /// either: an approval asked on one is answered on the other, a person removed on one signs
    /// on the other, a grant made on one is spent or revoked on the other, one restarts while
    /// the other runs on.
    #[test]
    fn two_instances_keep_the_promise(
        steps in proptest::collection::vec(steps(), 1..48)
    ) {
        runtime().block_on(run_on(2, steps))?;
    }
}

/// Cases of the two-instance test: fewer than the one-instance test's (each step costs more),
/// so the whole model test stays well under a minute.
const TWO_INSTANCE_CASES: u32 = 256;

/// The regressions of #33, one each, as sequences the model test replays.
#[test]
fn the_issues_attacks_are_refused() {
    let vendor = |amount: &'static str| Pay {
        amount,
        currency: "USD",
        recipient: "Vendor",
    };
    let cases: Vec<Vec<Op>> = vec![
        // An edit of 20 USD to 150 by the requester needs two approvers.
        vec![
            Op::Ask {
                chat: 0,
                pay: vendor("20"),
            },
            Op::Approve {
                who: 0,
                call: 0,
                edit: Some(vendor("150")),
                grant: None,
            },
            Op::Approve {
                who: 0,
                call: 0,
                edit: None,
                grant: None,
            },
        ],
        // Not now, ask again, approve with "this exact payment", then ask again three times.
        vec![
            Op::Ask {
                chat: 0,
                pay: vendor("20"),
            },
            Op::NotNow { call: 0 },
            Op::AskAgain { call: 0 },
            Op::Approve {
                who: 0,
                call: 0,
                edit: None,
                grant: Some(GrantScope::Call),
            },
            // (Calls by how recent they are: 1 is the first, 0 its re-proposal, which ran.)
            Op::AskAgain { call: 1 },
            Op::AskAgain { call: 1 },
            Op::AskAgain { call: 0 },
        ],
        // A removed approver's signature stops counting.
        vec![
            Op::Ask {
                chat: 0,
                pay: vendor("150"),
            },
            Op::Approve {
                who: 1,
                call: 0,
                edit: None,
                grant: None,
            },
            Op::Remove { who: 1 },
            Op::Approve {
                who: 2,
                call: 0,
                edit: None,
                grant: None,
            },
            Op::Restart,
            Op::Approve {
                who: 3,
                call: 0,
                edit: None,
                grant: None,
            },
        ],
        // A blocked name in another form.
        vec![Op::Ask {
            chat: 1,
            pay: Pay {
                amount: "5",
                currency: "USD",
                recipient: "\u{a0}Mallory",
            },
        }],
    ];
    for ops in cases {
        if let Err(e) = runtime().block_on(run(ops.clone())) {
            panic!("{ops:?}: {e}");
        }
    }
}

/// Cross-instance cases of #33 as sequences: what one instance did, the other — which may not
/// have heard of it yet — must honour.
#[test]
fn what_one_instance_did_binds_the_other() {
    let vendor = |amount: &'static str| Pay {
        amount,
        currency: "USD",
        recipient: "Vendor",
    };
    let at = |instance: usize, late: bool, op: Op| Step { instance, late, op };
    let approve = |who: usize, grant: Option<GrantScope>| Op::Approve {
        who,
        call: 0,
        edit: None,
        grant,
    };
    let cases: Vec<Vec<Step>> = vec![
        // An approver removed on one instance, whose news is late, signs on the other; the
        // second signature there does not make two.
        vec![
            at(
                0,
                false,
                Op::Ask {
                    chat: 0,
                    pay: vendor("150"),
                },
            ),
            at(1, false, approve(1, None)),
            at(0, true, Op::Remove { who: 1 }),
            at(1, true, approve(2, None)),
            at(1, true, approve(1, None)),
            at(0, false, approve(3, None)),
        ],
        // A grant made on one instance is revoked on the other before it heard of it; then
        // neither spends it.
        vec![
            at(
                0,
                false,
                Op::Ask {
                    chat: 0,
                    pay: vendor("20"),
                },
            ),
            at(0, true, approve(0, Some(GrantScope::Budget))),
            at(1, true, Op::Revoke { grant: 0 }),
            at(
                0,
                true,
                Op::Ask {
                    chat: 0,
                    pay: vendor("20"),
                },
            ),
            at(
                1,
                false,
                Op::Ask {
                    chat: 1,
                    pay: vendor("20"),
                },
            ),
        ],
        // A role change on an instance that has not heard of a removal does not bring the
        // removed person back.
        vec![
            at(
                0,
                false,
                Op::Ask {
                    chat: 0,
                    pay: vendor("150"),
                },
            ),
            at(0, true, Op::Remove { who: 1 }),
            at(
                1,
                true,
                Op::Roles {
                    who: 1,
                    approver: true,
                },
            ),
            at(1, false, approve(1, None)),
            at(0, false, approve(2, None)),
            at(1, false, approve(1, None)),
        ],
        // A call asked on one instance, answered on the other, which restarts in between.
        vec![
            at(
                0,
                false,
                Op::Ask {
                    chat: 1,
                    pay: vendor("150"),
                },
            ),
            at(1, false, approve(2, None)),
            at(1, false, Op::Restart),
            at(0, false, Op::Restart),
            at(1, false, approve(3, None)),
        ],
    ];
    for steps in cases {
        if let Err(e) = runtime().block_on(run_on(2, steps.clone())) {
            panic!("{steps:?}: {e}");
        }
    }
}
