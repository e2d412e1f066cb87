//! Decisions that reserve (issue #33): what the calls a decision lets run claim of the day's
//! spending and of grants' budgets is kept in the store in the same step as the decision, and
//! let go when the calls end.

use super::{ChatWallet, Decider, Policy, Requester};
use crate::agent::{
    clock::Millis,
    lock,
    store::{Reserved, Spent},
    tools::ToolRegistry,
};

/// How often a decision is made again when a grant it used changed under it (revoked, or
/// expired, between the store's read and its write) before nothing is reserved at all.
const ATTEMPTS: usize = 3;

impl Policy {
    /// Decides with `step` — the gate's request for a step's calls, or the payments cleared to
    /// run ([`Decider::clear_to_run`]) — on the day's total and the grants' use as the store has
    /// them, and keeps what the calls it lets run claim, in one step of the store: no other
    /// decision, of this instance or another on the same database, comes in between. `step` may
    /// run more than once (first on this instance's copy: a step whose calls neither pay nor
    /// use a grant is decided there, without the store; then again whenever a grant it used
    /// was revoked meanwhile); its last result counts.
    ///
    /// When the store cannot keep the claims, `step` runs once more on a decider that reserves
    /// nothing: what would have claimed asks the person, a payment cleared to run does not start.
    pub async fn decide<T: Send>(
        &self,
        tools: &ToolRegistry,
        chat: &str,
        requester: &Requester,
        wallet: &ChatWallet,
        now: Millis,
        mut step: impl FnMut(&mut Decider<'_>) -> T + Send,
    ) -> T {
        let _one_at_a_time = self.reserving.lock().await;
        let Some(store) = self.store.get() else {
            // In memory only: the book is the truth, and its lock makes the step one.
            let mut decider = self.decider(tools, chat, requester, wallet.clone());
            let decided = step(&mut decider);
            let claims = std::mem::take(&mut decider.claims);
            decider.book.keep(&claims, now);
            return decided;
        };
        {
            let mut decider = self.decider(tools, chat, requester, wallet.clone());
            let decided = step(&mut decider);
            if !decider.spends {
                return decided;
            }
        }
        for _ in 0..ATTEMPTS {
            let mut decided = None;
            let mut claims = Vec::new();
            let reserved = {
                let mut decide = |spent: &Spent| {
                    let mut decider = self.decider(tools, chat, requester, wallet.clone());
                    decider.book.sync(spent, now);
                    decided = Some(step(&mut decider));
                    claims = std::mem::take(&mut decider.claims);
                    claims.clone()
                };
                store.reserve(now, &mut decide).await
            };
            match (reserved, decided) {
                (Ok(Reserved::Kept), Some(decided)) => {
                    lock(&self.book).keep(&claims, now);
                    return decided;
                }
                (Ok(Reserved::Refused), _) => {
                    tracing::info!(
                        chat,
                        "a grant changed while calls were decided; deciding again"
                    );
                }
                (Ok(Reserved::Kept), None) => {
                    tracing::error!(chat, "the store kept nothing and decided nothing");
                    break;
                }
                (Err(e), _) => {
                    tracing::error!(chat, error = %e.report(), "cannot reserve what calls will spend; nothing that spends runs without a person");
                    break;
                }
            }
        }
        let mut decider = self.decider(tools, chat, requester, wallet.clone());
        decider.unreserved = true;
        step(&mut decider)
    }

    /// A call ended: it ran or not, and paid `paid_cents` (or nothing). What it reserved and did
    /// not use goes back with the next [`Policy::flush`]. Call it for a payment once its commit
    /// is on disk.
    pub fn settle(&self, call: &str, ran: bool, paid_cents: Option<i64>) {
        lock(&self.book).settle(call, ran, paid_cents);
    }

    /// Lets go, in the store and then here, the reservations of the calls that ended
    /// ([`Policy::settle`]): what a call paid counts in the day's total; a grant's share of a
    /// call that did not use it goes back to the grant. Writes the revocations that could not
    /// be written before. A store that fails keeps them for the next flush (until then they
    /// count, which never lets anything run that should not).
    pub async fn flush(&self, now: Millis) {
        let _one_at_a_time = self.reserving.lock().await;
        let ending = lock(&self.book).take_ending();
        match self.store.get() {
            None => lock(&self.book).release(&ending, now),
            Some(store) => {
                let unused: Vec<_> = ending.iter().filter_map(|e| e.unused()).collect();
                match store.release(&unused).await {
                    Ok(()) => lock(&self.book).release(&ending, now),
                    Err(e) => {
                        tracing::error!(error = %e.report(), "cannot let go of what ended calls reserved");
                        lock(&self.book).keep_ending(ending);
                    }
                }
            }
        }
        let changed = lock(&self.book).take_changed();
        for grant in changed {
            if let Err(e) = self.save_grant(&grant).await {
                tracing::error!(grant = %grant.id, error = %e.report(), "cannot write a grant");
                lock(&self.book).mark_changed(&grant.id);
            }
        }
    }

    /// Catches this instance's copy of the day's total and of the grants' use up with the
    /// store (on a database several instances share, theirs count too). A store that cannot be
    /// read changes nothing.
    pub async fn catch_up_spending(&self, now: Millis) {
        let Some(store) = self.store.get() else {
            return;
        };
        let _one_at_a_time = self.reserving.lock().await;
        match store.spent(now).await {
            Ok(spent) => lock(&self.book).sync(&spent, now),
            Err(e) => {
                tracing::warn!(error = %e.report(), "cannot read the day's spending");
            }
        }
    }

    /// Whether this instance holds a reservation for `call` (it was let run and has not ended).
    pub fn holds(&self, call: &str) -> bool {
        lock(&self.book).holds(call)
    }
}

#[cfg(test)]
mod tests;
