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

// ---- What a case is made of (guarantee_tests/ops.rs) ----

mod ops;
use ops::*;

// ---- The reference model (guarantee_tests/model.rs) ----

mod model;
use model::*;

const BUDGET: i64 = 40_000;
const GRANT_SECONDS: i64 = 3_600;

// ---- The system under test (guarantee_tests/cluster.rs) ----

mod cluster;
use cluster::{Cluster, System};

// ---- A run, and the check after each step (guarantee_tests/drive.rs, check.rs) ----

mod check;
mod drive;
use check::check;
use drive::{run, run_on};

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
        // A turn stopped on one instance while the other holds it and has not heard: the
        // approval there, and a second signature after it, run nothing; a new ask still works.
        vec![
            at(
                0,
                false,
                Op::Ask {
                    chat: 0,
                    pay: vendor("20"),
                },
            ),
            at(1, true, Op::Stop { chat: 0 }),
            at(0, true, approve(0, None)),
            at(0, false, approve(2, None)),
            at(
                1,
                false,
                Op::Ask {
                    chat: 0,
                    pay: vendor("20"),
                },
            ),
            at(0, false, Op::Stop { chat: 0 }),
            at(1, false, approve(0, None)),
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
