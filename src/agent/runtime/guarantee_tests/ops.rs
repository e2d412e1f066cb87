//! What a case is made of: the payments the model asks for or an editor writes, the operations
//! a person, the operator or the clock performs, and the steps of a run with several instances —
//! with the strategies proptest draws them from.

use super::*;

/// A payment as the model or an editor writes it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pay {
    pub(super) amount: &'static str,
    pub(super) currency: &'static str,
    pub(super) recipient: &'static str,
}

impl Pay {
    pub(super) fn args(&self) -> Value {
        let amount: Value = serde_json::from_str(self.amount).unwrap_or_default();
        json!({"amount": amount, "currency": self.currency, "recipient": self.recipient})
    }
}

/// The arguments as the model sees their canonical form: names trimmed, one space for each run
/// of whitespace. (Invisible characters make an edit invalid: [`Model::approve`].)
pub(super) fn canonical(args: &Value) -> Value {
    let mut args = args.clone();
    for key in ["recipient", "currency"] {
        if let Some(text) = args[key].as_str() {
            args[key] = json!(text.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    args
}

pub(super) fn cents(args: &Value) -> i64 {
    let amount = args["amount"].to_string();
    let currency = args["currency"].as_str().unwrap_or("USD");
    Money::parse(&amount, currency)
        .map(|m| m.wallet_cents())
        .unwrap_or(0)
}

pub(super) fn invisible(args: &Value) -> bool {
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
pub(super) enum Op {
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
    /// The person stops the turn of chat `chat` (its stop button): what waits in it ends, on
    /// whichever instance holds it.
    Stop {
        chat: u8,
    },
    /// Every approval waiting now expires.
    Expire,
    Restart,
}

pub(super) fn ops() -> impl Strategy<Value = Op> {
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
        1 => (0..2u8).prop_map(|chat| Op::Stop { chat }),
        1 => Just(Op::Expire),
        1 => Just(Op::Restart),
    ]
}

/// One step of a run with several instances.
#[derive(Debug, Clone)]
pub(super) struct Step {
    /// The instance it is sent to.
    pub(super) instance: usize,
    /// The news it makes reaches the other instance only after the next step that is not late
    /// (until then that one acts on what it knew).
    pub(super) late: bool,
    pub(super) op: Op,
}

/// Who an approval or denial names when it is [`World::changed`]: the person last removed or
/// given other roles, so that what an instance that has not heard of it yet does with their
/// answer is tried often.
const CHANGED: usize = PEOPLE.len();

pub(super) fn steps() -> impl Strategy<Value = Step> {
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
