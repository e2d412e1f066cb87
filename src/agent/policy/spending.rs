//! Running totals for rules like "at most 50 USD a day without asking": what the wallet paid
//! today (UTC, every chat), plus what calls already cleared to run will pay.
//!
//! A call a rule or a grant lets run reserves its amount when it is decided, under the same lock
//! as the decision, so two calls decided at once (two parallel calls of one step, or two chats)
//! cannot both fit under a limit only one of them fits under. The reservation becomes spending
//! when the payment is made, and goes when the call ends any other way. Payments the person
//! approved count too, once made. After a restart the day's total is read back from the store's
//! ledger.

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
    paid_today: i64,
    /// Tool call id → (day, cents) it will pay.
    reserved: HashMap<String, (i64, i64)>,
}

impl Spending {
    /// Spending that starts from what the ledger says was paid on the day of `now` (cents).
    pub fn starting(now: Millis, paid_today_cents: i64) -> Self {
        Spending {
            day: day_of(now),
            paid_today: paid_today_cents,
            reserved: HashMap::new(),
        }
    }

    fn roll(&mut self, now: Millis) {
        let day = day_of(now);
        if day != self.day {
            self.day = day;
            self.paid_today = 0;
            self.reserved.retain(|_, (d, _)| *d >= day);
        }
    }

    /// Paid today plus reserved for today, in cents.
    pub fn today(&mut self, now: Millis) -> i64 {
        self.roll(now);
        let day = self.day;
        self.paid_today.saturating_add(
            self.reserved
                .values()
                .filter(|(d, _)| *d == day)
                .map(|(_, c)| *c)
                .sum(),
        )
    }

    /// Catches up with what the ledger says was paid today (`ledger_cents`, every instance's
    /// payments on a shared database): the day's total only grows, so the larger count holds
    /// (this instance's own payments may be counted before their commit is visible).
    pub fn catch_up(&mut self, ledger_cents: i64, now: Millis) {
        self.roll(now);
        self.paid_today = self.paid_today.max(ledger_cents);
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
            self.paid_today = self.paid_today.saturating_add(cents);
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
    fn the_ledger_of_every_instance_raises_the_days_total_and_never_lowers_it() {
        let now = 10 * DAY_MS + 5;
        let mut spending = Spending::starting(now, 1_000);
        spending.reserve("c1", 500, now);
        spending.catch_up(4_000, now);
        assert_eq!(spending.today(now), 4_500, "others paid 3,000 since");
        spending.catch_up(2_000, now);
        assert_eq!(
            spending.today(now),
            4_500,
            "an older read takes nothing back"
        );
        spending.catch_up(9_000, now + DAY_MS);
        assert_eq!(
            spending.today(now + DAY_MS),
            9_000,
            "a new day starts from its ledger"
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
