//! The person's grants (approvals they asked the server to remember) and today's spending,
//! kept together under one lock: this instance's copy of what the store holds, and what the
//! calls it let run claimed of them (ADR 0023; the store keeps the truth, issue #33).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::spending::Spending;
use crate::agent::{
    clock::Millis,
    store::{Claim, Spent, Unused},
    tools::ToolSpec,
};
use crate::protocol::{
    grant::{
        Grant, GrantRequest, GrantScope, GrantState, MAX_GRANT_SECONDS, MIN_GRANT_SECONDS,
        grant_duration_range,
    },
    money::format_minor,
};

/// Why a grant cannot be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("grant {0} is not known")]
    Unknown(String),
    #[error("grant {0} was already revoked")]
    AlreadyRevoked(String),
}

/// A call that held a reservation and ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedCall {
    pub chat: String,
    pub call: String,
    /// It did what it claimed for (it ran, and paid where it was to pay): what it reserved stays
    /// spent. Otherwise its reservation goes and its grant share goes back, in the store
    /// ([`crate::agent::store::PolicyStore::release`]), then here.
    pub used: bool,
    /// What it paid, in cents.
    pub paid: Option<i64>,
}

impl EndedCall {
    /// What the store lets go of for it: nothing when it used what it reserved.
    pub fn unused(&self) -> Option<Unused> {
        (!self.used).then(|| Unused {
            chat: self.chat.clone(),
            call: self.call.clone(),
        })
    }
}

/// A call a grant may let run: whose chat it is in, which tool, its arguments and what it pays
/// (cents, when the arguments read as money).
#[derive(Debug, Clone, Copy)]
pub(super) struct GrantQuery<'a> {
    pub(super) chat: &'a str,
    pub(super) requester: &'a str,
    pub(super) tool: &'a ToolSpec,
    pub(super) args: &'a Value,
    pub(super) cents: Option<i64>,
}

/// The answer a grant came with: its chat, the person who answered, the approval, and when.
#[derive(Debug, Clone, Copy)]
pub struct GrantedBy<'a> {
    pub chat: &'a str,
    pub person: &'a str,
    pub approval_id: &'a str,
    pub at_ms: Millis,
}

/// Grants and spending.
#[derive(Debug, Default)]
pub struct Book {
    grants: Vec<Grant>,
    pub(super) spending: Spending,
    /// Calls this instance reserved for that have not ended, by call id.
    held: HashMap<String, Claim>,
    /// Calls that ended whose reservations are still to be let go ([`Book::release`]).
    ending: Vec<EndedCall>,
    /// Grants whose revocation is still to be written.
    changed: BTreeSet<String>,
}

impl Book {
    pub fn new(grants: Vec<Grant>, spending: Spending) -> Self {
        Book {
            grants,
            spending,
            ..Book::default()
        }
    }

    /// Newest first.
    pub fn grants(&self) -> Vec<Grant> {
        let mut grants = self.grants.clone();
        grants.sort_by(|a, b| b.created_at_ms.cmp(&a.created_at_ms).then(b.id.cmp(&a.id)));
        grants
    }

    pub fn add(&mut self, grant: Grant) {
        self.grants.retain(|g| g.id != grant.id);
        self.grants.push(grant);
    }

    /// Takes in the grants the store has (another instance made, used or revoked some): new
    /// grants are added, a revocation holds, and a grant's use is the store's.
    pub fn merge(&mut self, stored: Vec<Grant>) {
        for grant in stored {
            match self.grants.iter_mut().find(|g| g.id == grant.id) {
                None => self.grants.push(grant),
                Some(known) => {
                    if known.revoked_at_ms.is_none() {
                        known.revoked_at_ms = grant.revoked_at_ms;
                    }
                    known.used_cents = grant.used_cents;
                    known.uses = grant.uses;
                }
            }
        }
    }

    /// Takes the day's total and the grants' use as the store has them now.
    pub fn sync(&mut self, spent: &Spent, now: Millis) {
        self.spending.sync(spent.today_cents, now);
        for stored in &spent.grants {
            if let Some(known) = self.grants.iter_mut().find(|g| g.id == stored.id) {
                known.used_cents = stored.used_cents;
                known.uses = stored.uses;
                if known.revoked_at_ms.is_none() {
                    known.revoked_at_ms = stored.revoked_at_ms;
                }
            }
        }
    }

    pub fn revoke(&mut self, id: &str, now_ms: Millis) -> Result<Grant, GrantError> {
        let grant = self
            .grants
            .iter_mut()
            .find(|g| g.id == id)
            .ok_or_else(|| GrantError::Unknown(id.to_owned()))?;
        if grant.revoked_at_ms.is_some() {
            return Err(GrantError::AlreadyRevoked(id.to_owned()));
        }
        grant.revoked_at_ms = Some(now_ms);
        Ok(grant.clone())
    }

    /// The active grant that lets `call` run now, if any: its tool, its chat (or every chat),
    /// its exact arguments (for a call grant), and room in its budget for the call's cents
    /// beyond what it already used and what calls decided with it in this step take
    /// (`pending`, by grant id).
    pub(super) fn grant_for(
        &self,
        call: &GrantQuery<'_>,
        pending: &HashMap<&str, i64>,
        now_ms: Millis,
    ) -> Option<Grant> {
        let GrantQuery {
            chat,
            requester,
            tool,
            args,
            cents,
        } = *call;
        self.grants
            .iter()
            .filter(|g| g.state(now_ms) == GrantState::Active)
            .filter(|g| g.tool == tool.name)
            // A person's grants hold in their own chats only.
            .filter(|g| g.owner() == requester)
            .filter(|g| g.chat.as_deref().is_none_or(|c| c == chat))
            .filter(|g| g.args.as_ref().is_none_or(|a| same_args(a, args)))
            .filter(|g| match g.max_cents {
                None => true,
                // A budget covers only calls whose amount is known.
                Some(max) => cents.is_some_and(|c| {
                    let taken = pending.get(g.id.as_str()).copied().unwrap_or(0);
                    g.used_cents.saturating_add(taken).saturating_add(c) <= max
                }),
            })
            // The narrowest first: an exact call, then this chat's, then a budget.
            .min_by_key(|g| (g.args.is_none(), g.chat.is_none(), g.expires_at_ms))
            .cloned()
    }

    /// The store kept `claims` (made at `now`): they count here too.
    pub(super) fn keep(&mut self, claims: &[Claim], now: Millis) {
        for claim in claims {
            if self.held.contains_key(&claim.call) {
                continue;
            }
            self.spending.reserve(&claim.call, claim.cents, now);
            if let Some(grant) = self
                .grants
                .iter_mut()
                .find(|g| Some(&g.id) == claim.grant.as_ref())
            {
                grant.used_cents = grant.used_cents.saturating_add(claim.cents);
                grant.uses += 1;
            }
            self.held.insert(claim.call.clone(), claim.clone());
        }
    }

    /// A call ended: it ran or not, and paid `paid` (or nothing). When it held a reservation,
    /// the reservation is to be let go ([`Book::take_ending`]); a grant's share of a call that
    /// did not run, or ran and paid nothing where it was to pay, goes back to the grant then.
    pub(super) fn settle(&mut self, call: &str, ran: bool, paid: Option<i64>) {
        let Some(claim) = self.held.get(call) else {
            return;
        };
        if self.ending.iter().any(|e| e.call == call) {
            return;
        }
        self.ending.push(EndedCall {
            chat: claim.chat.clone(),
            call: call.to_owned(),
            used: ran && (paid.is_some() || claim.cents == 0),
            paid,
        });
    }

    /// The calls that ended whose reservations are still held.
    pub(super) fn take_ending(&mut self) -> Vec<EndedCall> {
        std::mem::take(&mut self.ending)
    }

    /// `ending` could not be let go in the store: they are tried again with the next ones.
    pub(super) fn keep_ending(&mut self, ending: Vec<EndedCall>) {
        self.ending.splice(0..0, ending);
    }

    /// The store let `ending` go (at `now`): spending counts what they paid, and a grant's share
    /// of a call that did not use it goes back to the grant.
    pub(super) fn release(&mut self, ending: &[EndedCall], now: Millis) {
        for end in ending {
            let Some(claim) = self.held.remove(&end.call) else {
                continue;
            };
            self.spending.settle(&claim.call, end.paid, now);
            if end.used {
                continue;
            }
            if let Some(grant) = self
                .grants
                .iter_mut()
                .find(|g| Some(&g.id) == claim.grant.as_ref())
            {
                grant.used_cents = (grant.used_cents - claim.cents).max(0);
                grant.uses = grant.uses.saturating_sub(1);
            }
        }
    }

    /// Whether this instance holds a reservation for `call`.
    pub fn holds(&self, call: &str) -> bool {
        self.held.contains_key(call)
    }

    pub(super) fn mark_changed(&mut self, id: &str) {
        self.changed.insert(id.to_owned());
    }

    pub(super) fn take_changed(&mut self) -> Vec<Grant> {
        let changed = std::mem::take(&mut self.changed);
        self.grants
            .iter()
            .filter(|g| changed.contains(&g.id))
            .cloned()
            .collect()
    }
}

/// Arguments compared as JSON values (object key order never matters; 5 and 5.0 are the same
/// number).
fn same_args(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_args(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_args(v, w)))
        }
        _ => a == b,
    }
}

/// Whether the person may remember their approval of `tool` with `args` this way.
pub(super) fn check_request(
    tool: &ToolSpec,
    args: &Value,
    request: &GrantRequest,
) -> Result<(), String> {
    if !(MIN_GRANT_SECONDS..=MAX_GRANT_SECONDS).contains(&request.seconds) {
        return Err(format!(
            "a grant lasts from {} ({MIN_GRANT_SECONDS} to {MAX_GRANT_SECONDS} seconds)",
            grant_duration_range()
        ));
    }
    let pays = tool.pays.and_then(|pays| pays(args)).map(|p| p.money);
    match request.scope {
        GrantScope::Call => {
            if request.max_cents.is_some() {
                return Err("a grant of one exact call has no amount".into());
            }
        }
        GrantScope::Tool => {
            if tool.pays.is_some() {
                return Err(format!(
                    "{} pays: remember it with an amount (a budget), not for any amount",
                    tool.name
                ));
            }
            if request.max_cents.is_some() {
                return Err("a grant of a tool in this chat has no amount".into());
            }
        }
        GrantScope::Budget => {
            let Some(pays) = pays else {
                return Err(format!(
                    "{} does not pay: a budget grant is for tools that pay",
                    tool.name
                ));
            };
            let Some(max) = request.max_cents else {
                return Err("a budget grant needs its amount (maxCents)".into());
            };
            if max < pays.wallet_cents() {
                return Err(format!(
                    "the budget ({} USD) does not cover the call it is granted with ({} USD)",
                    format_minor(max, 2),
                    format_minor(pays.wallet_cents(), 2)
                ));
            }
            if max > 100_000_000 {
                return Err("a budget grant may hold at most 1,000,000.00 USD".into());
            }
        }
    }
    Ok(())
}

/// The words of a grant ("Payment up to 50.00 USD in every chat").
pub fn label(tool: &ToolSpec, args: &Value, request: &GrantRequest) -> String {
    let title = &tool.presentation.title;
    match request.scope {
        GrantScope::Call => format!("{}, again in this chat", tool.presentation.sentence(args)),
        GrantScope::Tool => format!("{title} in this chat"),
        GrantScope::Budget => format!(
            "{title} up to {} USD in all, in every chat",
            format_minor(request.max_cents.unwrap_or(0), 2)
        ),
    }
}

/// The grant an approval with `request` creates (`by`: the answer).
pub fn grant(
    id: String,
    tool: &ToolSpec,
    args: &Value,
    request: &GrantRequest,
    by: GrantedBy<'_>,
) -> Grant {
    let GrantedBy {
        chat,
        person,
        approval_id,
        at_ms: now_ms,
    } = by;
    let cents = tool
        .pays
        .and_then(|pays| pays(args))
        .map(|p| p.money.wallet_cents());
    Grant {
        id,
        scope: request.scope,
        tool: tool.name.to_string(),
        chat: (request.scope != GrantScope::Budget).then(|| chat.to_owned()),
        args: (request.scope == GrantScope::Call).then(|| args.clone()),
        max_cents: request
            .max_cents
            .filter(|_| request.scope == GrantScope::Budget),
        // The approved call itself is the grant's first use.
        used_cents: if request.scope == GrantScope::Budget {
            cents.unwrap_or(0)
        } else {
            0
        },
        uses: 0,
        created_at_ms: now_ms,
        expires_at_ms: now_ms.saturating_add((request.seconds as Millis).saturating_mul(1000)),
        revoked_at_ms: None,
        approval_id: approval_id.to_owned(),
        granted_in: chat.to_owned(),
        person: (person != crate::agent::people::LOCAL).then(|| person.to_owned()),
        label: label(tool, args, request),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_compare_as_values() {
        assert!(same_args(
            &json!({"amount": 5, "recipient": "Jack"}),
            &json!({"recipient": "Jack", "amount": 5.0})
        ));
        assert!(!same_args(
            &json!({"amount": 5, "recipient": "Jack"}),
            &json!({"amount": 5, "recipient": "Jack", "description": ""})
        ));
        assert!(!same_args(&json!([1, 2]), &json!([2, 1])));
        assert!(!same_args(&json!("5"), &json!(5)));
    }

    fn stored(id: &str, used_cents: i64, uses: u64, revoked_at_ms: Option<i64>) -> Grant {
        Grant {
            id: id.into(),
            scope: GrantScope::Budget,
            tool: "process_payment".into(),
            chat: None,
            args: None,
            max_cents: Some(10_000),
            used_cents,
            uses,
            created_at_ms: 1,
            expires_at_ms: 1_000_000,
            revoked_at_ms,
            approval_id: "a".into(),
            granted_in: "c".into(),
            person: None,
            label: "Payment up to 100.00 USD".into(),
        }
    }

    #[test]
    fn grants_another_instance_wrote_are_taken_in_with_the_stores_use_and_every_revocation() {
        let mut book = Book::default();
        book.add(stored("g1", 3_000, 2, None));
        book.add(stored("g2", 0, 0, Some(50)));
        book.merge(vec![
            // Used more elsewhere: the store's count holds.
            stored("g1", 5_000, 3, Some(60)),
            // A revocation here is not undone by an older copy.
            stored("g2", 100, 1, None),
            // New elsewhere.
            stored("g3", 0, 0, None),
        ]);
        let by_id = |book: &Book, id: &str| book.grants().into_iter().find(|g| g.id == id).unwrap();
        assert_eq!(
            (
                by_id(&book, "g1").used_cents,
                by_id(&book, "g1").uses,
                by_id(&book, "g1").revoked_at_ms
            ),
            (5_000, 3, Some(60))
        );
        assert_eq!(
            (
                by_id(&book, "g2").used_cents,
                by_id(&book, "g2").revoked_at_ms
            ),
            (100, Some(50))
        );
        assert_eq!(book.grants().len(), 3);
        // A call elsewhere failed and gave its share back: the store's use is the truth.
        book.merge(vec![stored("g1", 1_000, 1, None)]);
        assert_eq!(
            (by_id(&book, "g1").used_cents, by_id(&book, "g1").uses),
            (1_000, 1)
        );
    }
}
