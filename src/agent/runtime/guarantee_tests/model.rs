//! The reference model of the promise: what each call needs, and what the world allows once
//! the steps so far are done — what the system under test is checked against.

use super::*;

/// What a call needs: the requester's click, or two approvers who did not ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Needs {
    Requester,
    TwoApprovers,
}

/// How the rules judge arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Judged {
    Forbidden,
    Two,
    /// The small-payments rule lets it run (when asked; at an approval it is free).
    Runs,
    Free,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum State {
    Waiting,
    /// Ran with these arguments: paid, or failed for want of money.
    Ran {
        args: Value,
        paid: bool,
    },
    Ended(&'static str),
}

#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) chat: String,
    /// The runtime's id of the call, and of its approval.
    pub(super) id: String,
    pub(super) approval: Option<String>,
    /// The call this one asks again (its re-proposal chain's first call).
    pub(super) root: usize,
    pub(super) asked_again: bool,
    pub(super) proposal: Value,
    /// The call's own arguments (an edit on the table differs).
    pub(super) args: Value,
    pub(super) needs: Needs,
    pub(super) grantable: bool,
    pub(super) signatures: Vec<String>,
    pub(super) state: State,
}

#[derive(Debug, Clone)]
pub(super) struct Grant {
    pub(super) id: String,
    pub(super) scope: GrantScope,
    pub(super) chat: String,
    pub(super) args: Value,
    pub(super) max: i64,
    pub(super) used: i64,
    pub(super) expires: i64,
    pub(super) revoked: bool,
    /// The instances that know of it: the one it was made on, the others once its news reached
    /// them or they restarted. Until then a call there does not use it: it asks the person.
    pub(super) known_at: BTreeSet<usize>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct World {
    /// Active people and whether they are approvers.
    pub(super) people: BTreeMap<&'static str, (bool, bool)>,
    pub(super) calls: Vec<Call>,
    pub(super) grants: Vec<Grant>,
    pub(super) spent_today: i64,
    pub(super) balances: BTreeMap<String, i64>,
    pub(super) now: i64,
    /// Some news between instances was late: a record may still list a signature that no
    /// longer counts (it is dropped when the call is next answered, and never counts).
    pub(super) news_was_late: bool,
    /// The person last removed or given other roles ([`CHANGED`]).
    pub(super) changed: &'static str,
    /// The instance the step is sent to.
    pub(super) instance: usize,
}

impl World {
    pub(super) fn new() -> Self {
        let mut world = World {
            now: T0,
            changed: PEOPLE[1],
            ..World::default()
        };
        for (i, name) in PEOPLE.iter().enumerate() {
            world.people.insert(name, (true, (1..=3).contains(&i)));
        }
        world
    }

    /// The person an approval or denial names: one of [`PEOPLE`], or [`CHANGED`].
    pub(super) fn person(&self, who: usize) -> &'static str {
        PEOPLE.get(who).copied().unwrap_or(self.changed)
    }

    pub(super) fn active(&self, who: &str) -> bool {
        self.people.get(who).is_some_and(|(active, _)| *active)
    }

    pub(super) fn approver(&self, who: &str) -> bool {
        self.people
            .get(who)
            .is_some_and(|(a, approver)| *a && *approver)
    }

    pub(super) fn judge(&self, args: &Value) -> Judged {
        let cents = cents(args);
        if args["recipient"] == "Mallory" || cents > 50_000 {
            Judged::Forbidden
        } else if cents > 10_000 {
            Judged::Two
        } else if cents <= SMALL_CENTS && self.spent_today + cents <= DAILY_CENTS {
            Judged::Runs
        } else {
            Judged::Free
        }
    }

    pub(super) fn may_sign(&self, who: &str, needs: Needs) -> bool {
        match needs {
            Needs::Requester => who == REQUESTER && self.active(who),
            Needs::TwoApprovers => who != REQUESTER && self.approver(who),
        }
    }

    /// People who may no longer sign what they signed (removed, or without the role now):
    /// their signatures stop counting, at once.
    pub(super) fn drop_signatures(&mut self) {
        let world = self.clone();
        for call in &mut self.calls {
            if call.state == State::Waiting {
                call.signatures.retain(|s| world.may_sign(s, call.needs));
            }
        }
    }

    /// The grant that lets `args` run in `chat` now, as the runtime's book picks it.
    pub(super) fn grant_for(&self, chat: &str, args: &Value) -> Option<usize> {
        let cents = cents(args);
        self.grants
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.revoked && self.now < g.expires)
            .filter(|(_, g)| g.known_at.contains(&self.instance))
            .filter(|(_, g)| match g.scope {
                GrantScope::Call => g.chat == chat && g.args == *args,
                _ => g.used + cents <= g.max,
            })
            .min_by_key(|(_, g)| (g.scope != GrantScope::Call, g.expires))
            .map(|(i, _)| i)
    }

    /// Runs `call` with `args`: the wallet pays, or refuses for want of money.
    pub(super) fn run(&mut self, call: usize, args: Value) {
        let chat = self.calls[call].chat.clone();
        let cents = cents(&args);
        let balance = self.balances.entry(chat).or_insert(OPENING_CENTS);
        let paid = *balance >= cents;
        if paid {
            *balance -= cents;
            self.spent_today += cents;
        }
        self.calls[call].state = State::Ran { args, paid };
    }

    /// Ends every waiting call of `chat` (a new message supersedes its turn, or the person
    /// stops it).
    pub(super) fn supersede(&mut self, chat: &str) {
        for call in &mut self.calls {
            if call.chat == chat && call.state == State::Waiting {
                call.state = State::Ended("superseded");
            }
        }
    }

    /// A new call of `chat` with `args` (a model's, or a re-proposal's), judged by the rules
    /// and grants: what the runtime must do with it.
    pub(super) fn ask(&mut self, chat: &str, args: Value, root: Option<usize>) -> usize {
        let index = self.calls.len();
        let judged = self.judge(&args);
        self.calls.push(Call {
            chat: chat.to_owned(),
            id: String::new(),
            approval: None,
            root: root.unwrap_or(index),
            asked_again: false,
            proposal: args.clone(),
            args: args.clone(),
            needs: if judged == Judged::Two {
                Needs::TwoApprovers
            } else {
                Needs::Requester
            },
            grantable: judged == Judged::Free,
            signatures: Vec::new(),
            state: State::Waiting,
        });
        match judged {
            Judged::Forbidden => self.calls[index].state = State::Ended("refused"),
            Judged::Runs => self.run(index, args),
            Judged::Free => {
                if let Some(grant) = self.grant_for(chat, &args) {
                    self.grants[grant].used += cents(&args);
                    self.run(index, args);
                }
            }
            Judged::Two => {}
        }
        index
    }

    /// What an approval does: `Err(())` when the runtime must refuse it (nothing changes).
    pub(super) fn approve(
        &mut self,
        call: usize,
        who: &str,
        edit: Option<&Value>,
        grant: Option<GrantScope>,
    ) -> Result<(), ()> {
        let c = &self.calls[call];
        if c.state != State::Waiting || !self.active(who) || !self.may_sign(who, c.needs) {
            return Err(());
        }
        if edit.is_some_and(invisible) {
            return Err(());
        }
        let args = edit.map(canonical).unwrap_or_else(|| c.proposal.clone());
        let new_proposal = args != c.proposal;
        if !new_proposal && c.signatures.iter().any(|s| s == who) {
            return Err(());
        }
        let judged = self.judge(&args);
        if judged == Judged::Forbidden {
            if new_proposal {
                return Err(());
            }
            self.calls[call].state = State::Ended("refused");
            return Ok(());
        }
        let needs = if judged == Judged::Two {
            Needs::TwoApprovers
        } else {
            c.needs
        };
        let grew = needs != c.needs;
        let signs = self.may_sign(who, needs);
        if !signs {
            if !new_proposal || grant.is_some() {
                return Err(());
            }
            let c = &mut self.calls[call];
            c.needs = needs;
            c.grantable = false;
            c.signatures.clear();
            c.proposal = args;
            return Ok(());
        }
        let grantable = c.grantable && !grew && needs == Needs::Requester;
        if let Some(scope) = grant
            && (!grantable || (scope == GrantScope::Budget && cents(&args) > BUDGET))
        {
            return Err(());
        }
        let chat = c.chat.clone();
        let c = &mut self.calls[call];
        if grew {
            c.needs = needs;
            c.grantable = false;
        }
        if new_proposal {
            c.signatures.clear();
            c.proposal = args.clone();
        }
        if let Some(scope) = grant {
            self.grants.push(Grant {
                id: String::new(),
                scope,
                chat,
                args: args.clone(),
                max: BUDGET,
                used: if scope == GrantScope::Budget {
                    cents(&args)
                } else {
                    0
                },
                expires: self.now + GRANT_SECONDS * 1000,
                revoked: false,
                known_at: [self.instance].into(),
            });
        }
        if needs == Needs::Requester {
            self.run(call, args);
            return Ok(());
        }
        self.calls[call].signatures.push(who.to_owned());
        if self.calls[call].signatures.len() >= 2 {
            self.run(call, args);
        }
        Ok(())
    }

    pub(super) fn deny(&mut self, call: usize, who: &str) -> Result<(), ()> {
        let c = &self.calls[call];
        let may = self.active(who) && (who == REQUESTER || self.may_sign(who, c.needs));
        if c.state != State::Waiting || !may {
            return Err(());
        }
        self.calls[call].state = State::Ended("denied");
        Ok(())
    }

    pub(super) fn not_now(&mut self, call: usize) -> Result<(), ()> {
        if self.calls[call].state != State::Waiting || !self.active(REQUESTER) {
            return Err(());
        }
        self.calls[call].state = State::Ended("dismissed");
        Ok(())
    }

    /// "Ask again": `Ok(index)` of the new call.
    pub(super) fn ask_again(&mut self, call: usize) -> Result<usize, ()> {
        let c = &self.calls[call];
        let undecided = matches!(c.state, State::Ended("expired" | "dismissed"));
        if !undecided || c.asked_again {
            return Err(());
        }
        let (chat, args, root) = (c.chat.clone(), c.args.clone(), c.root);
        self.calls[call].asked_again = true;
        self.supersede(&chat);
        Ok(self.ask(&chat, args, Some(root)))
    }
}
