//! Request bodies in flight, per client address: at most `COUNTERSIGN_BODY_BYTES_PER_ADDRESS`
//! bytes of bodies that one address (IPv6 by /64) is sending or the server is still reading. A
//! body is counted from before its first byte is read until its request has been answered (its
//! response begun: by then the handler has read and decoded it); a body that does not fit waits,
//! in arrival order (a small body behind a large one waits for it too), until earlier ones are
//! done. So one client cannot make the server hold more
//! than its share of bodies at once, however many connections it opens — its own requests wait,
//! nobody else's — and a request without a body (`/healthz`, a page) never waits.
//!
//! A body declares its size (`Content-Length`, capped at `COUNTERSIGN_MAX_BODY_BYTES`: a larger
//! one is refused when read); one that does not (chunked) counts as the largest a body may be.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::agent::lock;

/// The bytes each address may have in flight, and what each has now.
#[derive(Debug)]
pub struct BodyBudget {
    /// Bytes per address (at most `u32::MAX`: a semaphore's permits are taken 32 bits at a time).
    per_address: u32,
    /// The addresses with bodies in flight (or waiting), each with its own semaphore.
    addresses: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A body's place in its address's budget, given back when dropped.
#[derive(Debug)]
pub struct BodyPermit {
    permit: Option<OwnedSemaphorePermit>,
    semaphore: Arc<Semaphore>,
    budget: Arc<BodyBudget>,
    key: String,
}

impl BodyBudget {
    /// `per_address` bytes per address (`None`: no cap).
    pub fn new(per_address: usize) -> Option<Arc<Self>> {
        (per_address > 0).then(|| {
            Arc::new(BodyBudget {
                per_address: u32::try_from(per_address).unwrap_or(u32::MAX),
                addresses: Mutex::new(HashMap::new()),
            })
        })
    }

    /// Waits until the address `key` may have `bytes` more in flight (a body larger than the
    /// whole budget takes all of it), and holds them until the permit is dropped.
    pub async fn reserve(self: &Arc<Self>, key: &str, bytes: usize) -> BodyPermit {
        let bytes = u32::try_from(bytes)
            .unwrap_or(u32::MAX)
            .clamp(1, self.per_address);
        let semaphore = lock(&self.addresses)
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_address as usize)))
            .clone();
        // The semaphore is never closed, so acquiring cannot fail.
        let permit = semaphore.clone().acquire_many_owned(bytes).await.ok();
        BodyPermit {
            permit,
            semaphore,
            budget: self.clone(),
            key: key.to_owned(),
        }
    }

    /// Bytes the address `key` has in flight now.
    pub fn in_flight(&self, key: &str) -> usize {
        lock(&self.addresses).get(key).map_or(0, |semaphore| {
            (self.per_address as usize).saturating_sub(semaphore.available_permits())
        })
    }

    /// Addresses with bodies in flight or waiting.
    pub fn addresses(&self) -> usize {
        lock(&self.addresses).len()
    }
}

impl Drop for BodyPermit {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut addresses = lock(&self.budget.addresses);
        // Nobody else holds or waits for this address's semaphore (the map and this permit are
        // its only owners): the address has nothing in flight and leaves the map.
        if Arc::strong_count(&self.semaphore) == 2 {
            addresses.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{future::Future, pin::pin, task::Poll};

    use super::*;

    /// Whether `future` is ready at its first poll.
    fn ready_now<F: Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        match future.poll(&mut std::task::Context::from_waker(waker)) {
            Poll::Ready(output) => Some(output),
            Poll::Pending => None,
        }
    }

    #[tokio::test]
    async fn an_address_waits_for_its_own_bodies_and_nobody_else_does() {
        let budget = BodyBudget::new(100).unwrap();
        let first = budget.reserve("10.0.0.1", 60).await;
        let small = budget.reserve("10.0.0.1", 40).await;
        assert_eq!(budget.in_flight("10.0.0.1"), 100);
        // A third body from the same address waits…
        let mut third = pin!(budget.reserve("10.0.0.1", 60));
        assert!(ready_now(third.as_mut()).is_none());
        // …another address does not.
        let other = budget.reserve("10.0.0.2", 100).await;
        assert_eq!(budget.in_flight("10.0.0.2"), 100);
        drop(small);
        assert!(ready_now(third.as_mut()).is_none(), "still 60 in flight");
        // When the first is done, the third goes in.
        drop(first);
        let third = ready_now(third.as_mut()).expect("admitted once the first is done");
        assert_eq!(budget.in_flight("10.0.0.1"), 60);
        // A body larger than the whole budget takes all of it, and does not wait for ever.
        drop(third);
        drop(other);
        let huge = budget.reserve("10.0.0.1", 10_000).await;
        assert_eq!(budget.in_flight("10.0.0.1"), 100);
        drop(huge);
        // Addresses with nothing in flight are forgotten.
        assert_eq!(budget.addresses(), 0);
        assert!(BodyBudget::new(0).is_none(), "0: no cap");
    }

    #[tokio::test]
    async fn waiting_bodies_go_in_in_arrival_order() {
        let budget = BodyBudget::new(10).unwrap();
        let first = budget.reserve("a", 5).await;
        let mut big = pin!(budget.reserve("a", 8));
        assert!(ready_now(big.as_mut()).is_none());
        // 2 bytes would fit beside the first, but the larger body came before it.
        let mut small = pin!(budget.reserve("a", 2));
        assert!(
            ready_now(small.as_mut()).is_none(),
            "queued behind the larger one"
        );
        drop(first);
        let big = ready_now(big.as_mut()).expect("first in line");
        let small = ready_now(small.as_mut()).expect("fits beside it");
        assert_eq!(budget.in_flight("a"), 10);
        drop((big, small));
        assert_eq!(budget.addresses(), 0);
    }
}
