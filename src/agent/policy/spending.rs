//! Running totals for rules like "at most 50 USD a day without asking": what the wallets paid
//! today (UTC, every chat), plus what calls already cleared to run will pay.
//!
//! The database's total is the truth ([`crate::agent::store::reservations`]): a call a rule or
//! a grant lets run, and a payment a person approved, reserves its amount there in the same step
//! as the decision that lets it run, so no two calls — of one step, of two chats, of two
//! instances — both fit under a limit only one of them fits under. [`Spending`] is this
//! instance's copy: what the database said at the last decision (or the last catch-up each
//! second), with the reservations this instance holds on top. It decides nothing that runs; the
//! rules read it when a person's approval comes in (checked again, exactly, before it runs) and
//! where no store is kept (`countersign policy test`).

use std::collections::HashMap;

use crate::agent::clock::Millis;

const DAY_MS: Millis = 86_400_000;

/// The UTC day `at_ms` falls on (days since 1970-01-01).
pub fn day_of(at_ms: Millis) -> i64 {
    at_ms.div_euclid(DAY_MS)
}

/// The first millisecond of the UTC day of `at_ms`.
pub fn start_of_day(at_ms: Millis) -> Millis {
    day_of(at_ms) * DAY_MS
}

/// Today's spending and the reservations of calls cleared but not finished.
#[derive(Debug, Default)]
pub struct Spending {
    day: i64,
    /// Today's total besides this instance's reservations: what every wallet paid, and what
    /// other instances reserved, as the store last said (plus what this instance paid since).
    others: i64,
    /// Tool call id → (day, cents) it will pay.
    reserved: HashMap<String, (i64, i64)>,
}

impl Spending {
    /// Spending that starts from the day's total the store has on the day of `now` (cents).
    pub fn starting(now: Millis, total_cents: i64) -> Self {
        Spending {
            day: day_of(now),
            others: total_cents,
            reserved: HashMap::new(),
        }
    }

    fn roll(&mut self, now: Millis) {
        let day = day_of(now);
        if day != self.day {
            self.day = day;
            self.others = 0;
            self.reserved.retain(|_, (d, _)| *d >= day);
        }
    }

    /// What this instance reserved for today.
    fn own_today(&self) -> i64 {
        self.reserved
            .values()
            .filter(|(d, _)| *d == self.day)
            .map(|(_, c)| *c)
            .sum()
    }

    /// Paid today plus reserved for today, in cents.
    pub fn today(&mut self, now: Millis) -> i64 {
        self.roll(now);
        self.others.saturating_add(self.own_today())
    }

    /// Takes the day's total as the store has it now (`total_cents`: every instance's payments
    /// and reservations, this instance's included).
    pub fn sync(&mut self, total_cents: i64, now: Millis) {
        self.roll(now);
        self.others = total_cents.saturating_sub(self.own_today());
    }

    /// Reserves `cents` for `call`, decided at `now`.
    pub fn reserve(&mut self, call: &str, cents: i64, now: Millis) {
        self.roll(now);
        self.reserved.insert(call.to_owned(), (day_of(now), cents));
    }

    /// `call` ended at `now`: it paid `paid` cents, or nothing. Its reservation goes either way.
    pub fn settle(&mut self, call: &str, paid: Option<i64>, now: Millis) {
        self.roll(now);
        self.reserved.remove(call);
        if let Some(cents) = paid {
            self.others = self.others.saturating_add(cents);
        }
    }

    /// Whether `call` holds a reservation.
    pub fn is_reserved(&self, call: &str) -> bool {
        self.reserved.contains_key(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stores_total_replaces_what_others_spent_and_keeps_this_instances_reservations() {
        let now = 10 * DAY_MS + 5;
        let mut spending = Spending::starting(now, 1_000);
        spending.reserve("c1", 500, now);
        assert_eq!(spending.today(now), 1_500);
        // The store counts c1 too: others paid or reserved 3,000 since.
        spending.sync(4_500, now);
        assert_eq!(spending.today(now), 4_500);
        // Others' calls ended without paying: the total goes down as well as up.
        spending.sync(2_000, now);
        assert_eq!(spending.today(now), 2_000);
        spending.settle("c1", Some(500), now);
        assert_eq!(spending.today(now), 2_000, "paid what it reserved");
        spending.sync(9_000, now + DAY_MS);
        assert_eq!(
            spending.today(now + DAY_MS),
            9_000,
            "a new day starts from the store's"
        );
    }

    const NOON: Millis = 20_000 * DAY_MS + DAY_MS / 2;

    #[test]
    fn reservations_count_until_they_are_settled() {
        let mut s = Spending::starting(NOON, 1_000);
        assert_eq!(s.today(NOON), 1_000);
        s.reserve("a", 3_000, NOON);
        s.reserve("b", 500, NOON);
        assert_eq!(s.today(NOON), 4_500);
        s.settle("a", Some(3_000), NOON + 1);
        s.settle("b", None, NOON + 1);
        assert_eq!(s.today(NOON + 2), 4_000);
        assert!(!s.is_reserved("a"));
    }

    #[test]
    fn a_new_utc_day_starts_from_zero() {
        let mut s = Spending::starting(NOON, 4_000);
        s.reserve("late", 700, NOON + DAY_MS / 2 - 1);
        assert_eq!(s.today(NOON + DAY_MS / 2), 0, "midnight UTC");
        // A payment decided yesterday and made today counts today.
        s.settle("late", Some(700), NOON + DAY_MS / 2 + 5);
        assert_eq!(s.today(NOON + DAY_MS), 700);
        assert_eq!(start_of_day(NOON), 20_000 * DAY_MS);
    }
}
