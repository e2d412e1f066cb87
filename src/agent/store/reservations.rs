//! What calls about to run take from the day's spending and from grants' budgets, kept in the
//! database before they run ([`super::PolicyStore::reserve`], issue #33).
//!
//! A call a rule or a grant lets run, and a payment a person approved, is a [`Claim`]: what it
//! will pay today and the grant whose budget it uses. The decision that lets it run and the
//! claim are one step of the database: the store hands the decision the day's total and the
//! grants' use as they are ([`Spent`]), and keeps the claims it returns before any other
//! reservation of the day is decided — on Postgres under a lock every instance takes, in one
//! transaction — with each grant's use raised by a conditional update that never passes its
//! budget. A claim is kept once per (chat, call), so a retry or a restart never counts it twice.
//!
//! The day's total is what the ledger says was paid today plus what reservations of the day
//! hold for calls that have not paid: a reservation stops counting the moment its payment's
//! ledger row is committed (a later reservation sweeps it away), and a call that ends without
//! using what it reserved gives back its share of the day and of its grant
//! ([`super::PolicyStore::release`]).

use std::collections::HashMap;

use super::{StoreError, lock};
use crate::{
    agent::{
        clock::Millis,
        policy::spending::{day_of, start_of_day},
        session::SessionRecord,
    },
    protocol::grant::Grant,
};

/// What a call about to run takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub chat: String,
    pub call: String,
    /// What it will pay, in the wallet's cents (0: it pays nothing).
    pub cents: i64,
    /// The grant that lets it run: one more use of it, and `cents` of its budget.
    pub grant: Option<String>,
}

/// A grant's use as the database has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantUse {
    pub id: String,
    pub used_cents: i64,
    pub uses: u64,
    pub revoked_at_ms: Option<Millis>,
}

/// The day's spending and the grants' use, as the database has them now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spent {
    /// Paid today (UTC, every wallet) plus what reservations of today hold for calls that have
    /// not paid yet, in the wallets' cents.
    pub today_cents: i64,
    pub grants: Vec<GrantUse>,
}

/// How a reservation went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// Every claim is kept (a claim kept before, by the same chat and call, counts once).
    Kept,
    /// Nothing is kept: a grant claimed was revoked or expired meanwhile, or has no room left.
    /// Decide again.
    Refused,
}

/// A call that ended without using what it reserved: it did not run, or ran and paid nothing
/// where it was to pay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unused {
    pub chat: String,
    pub call: String,
}

/// One reservation row: (day, cents, grant).
type Row = (i64, i64, Option<String>);

/// The reservations of a store that keeps everything in memory ([`super::MemoryStore`]).
#[derive(Debug, Default)]
pub(super) struct Reservations {
    /// (chat, call) → its reservation.
    rows: HashMap<(String, String), Row>,
}

impl Reservations {
    /// The day of `now`'s spending, from `records`' ledgers and the reservations.
    pub(super) fn spent(
        &self,
        records: &HashMap<String, SessionRecord>,
        grants: &[Grant],
        now: Millis,
    ) -> Spent {
        let since = start_of_day(now);
        let ledger: i64 = records
            .values()
            // The memory store's chats are whole (its loads read everything): every payment.
            .flat_map(|r| r.wallet.transactions.read())
            .filter(|t| t.timestamp_ms >= since)
            .map(|t| t.amount_cents)
            .sum();
        let day = day_of(now);
        let reserved: i64 = self
            .rows
            .iter()
            .filter(|((chat, call), (d, _, _))| *d == day && !paid(records, chat, call))
            .map(|(_, (_, cents, _))| *cents)
            .sum();
        Spent {
            today_cents: ledger + reserved,
            grants: grants.iter().map(GrantUse::of).collect(),
        }
    }

    /// Keeps `claims` (made at `now`), all or nothing, raising their grants' use in `grants`;
    /// reservations of calls `records` has the payments of go.
    pub(super) fn keep(
        &mut self,
        claims: &[Claim],
        grants: &mut [Grant],
        records: &HashMap<String, SessionRecord>,
        now: Millis,
    ) -> Reserved {
        let mut taken: HashMap<&str, i64> = HashMap::new();
        let fresh: Vec<&Claim> = claims
            .iter()
            .filter(|c| !self.rows.contains_key(&(c.chat.clone(), c.call.clone())))
            .collect();
        for claim in &fresh {
            if let Some(id) = &claim.grant {
                *taken.entry(id).or_default() += claim.cents;
            }
        }
        for (id, cents) in &taken {
            let fits = grants.iter().any(|g| {
                g.id == *id
                    && g.revoked_at_ms.is_none()
                    && g.expires_at_ms > now
                    && g.max_cents.is_none_or(|max| g.used_cents + cents <= max)
            });
            if !fits {
                return Reserved::Refused;
            }
        }
        for claim in fresh {
            if let Some(grant) = grants
                .iter_mut()
                .find(|g| Some(&g.id) == claim.grant.as_ref())
            {
                grant.used_cents += claim.cents;
                grant.uses += 1;
            }
            self.rows.insert(
                (claim.chat.clone(), claim.call.clone()),
                (day_of(now), claim.cents, claim.grant.clone()),
            );
        }
        self.rows.retain(|(chat, call), (day, _, _)| {
            *day >= day_of(now) - 1 && !paid(records, chat, call)
        });
        Reserved::Kept
    }

    /// Lets the reservations of `unused` go, giving back their grant shares.
    pub(super) fn release(&mut self, unused: &[Unused], grants: &mut [Grant]) {
        for call in unused {
            let Some((_, cents, grant)) = self.rows.remove(&(call.chat.clone(), call.call.clone()))
            else {
                continue;
            };
            if let Some(id) = grant
                && let Some(grant) = grants.iter_mut().find(|g| g.id == id)
            {
                grant.used_cents = (grant.used_cents - cents).max(0);
                grant.uses = grant.uses.saturating_sub(1);
            }
        }
    }
}

/// Whether `records` has the payment of `call` of `chat` (its ledger row).
fn paid(records: &HashMap<String, SessionRecord>, chat: &str, call: &str) -> bool {
    records.get(chat).is_some_and(|r| {
        r.wallet
            .transactions
            .read()
            .iter()
            .any(|t| t.tool_call_id == call)
    })
}

impl GrantUse {
    pub fn of(grant: &Grant) -> Self {
        GrantUse {
            id: grant.id.clone(),
            used_cents: grant.used_cents,
            uses: grant.uses,
            revoked_at_ms: grant.revoked_at_ms,
        }
    }
}

/// [`super::PolicyStore::reserve`] for the memory store: everything under its locks.
pub(super) fn reserve_in_memory(
    store: &super::MemoryStore,
    now: Millis,
    decide: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
) -> Result<Reserved, StoreError> {
    let mut reservations = lock(&store.reservations);
    let spent = {
        let records = lock(&store.records);
        reservations.spent(&records, &lock(&store.grants), now)
    };
    let claims = decide(&spent);
    let records = lock(&store.records);
    Ok(reservations.keep(&claims, &mut lock(&store.grants), &records, now))
}
