//! The store's boundary, metered: [`Metered`] is the [`Hook`] of a [`Delegate`] in front of the
//! runtime's [`SessionStore`], and counts what passes through it: commits and their latency,
//! and errors by operation. Every call is passed on as it is; nothing else changes.

use std::{future::Future, sync::Arc, time::Instant};

use futures::future::BoxFuture;

use super::{Metrics, StoreOp};
use crate::agent::store::{
    SessionStore, StoreError,
    delegate::{Call, Delegate, Hook},
};

/// Counts a [`SessionStore`]'s calls in [`Metrics`].
pub struct Metered {
    metrics: Arc<Metrics>,
}

impl Metered {
    /// `inner`, its calls counted in `metrics`.
    pub fn wrap(inner: Arc<dyn SessionStore>, metrics: Arc<Metrics>) -> Arc<dyn SessionStore> {
        Arc::new(Delegate::new(inner, Metered { metrics }))
    }
}

impl Hook for Metered {
    /// Counts the call's error as its operation's; times a commit.
    fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'a {
        let op = match call {
            Call::Load { .. } | Call::ChatOwner { .. } => StoreOp::Load,
            Call::Commit { .. } => StoreOp::Commit,
            Call::Read(_) => StoreOp::Read,
            Call::Write(_) => StoreOp::Write,
            Call::Ping => StoreOp::Ping,
        };
        async move {
            let started = Instant::now();
            let result = run.await;
            if op == StoreOp::Commit {
                self.metrics.committed(started.elapsed());
            }
            if result.is_err() {
                self.metrics.store_error(op);
            }
            result
        }
    }
}
