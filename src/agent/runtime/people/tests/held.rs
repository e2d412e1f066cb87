//! A hook on a store ([`Delegate`](crate::agent::store::delegate::Delegate)) whose next paused
//! commit (a turn committing its record and log as it pauses) waits until the test lets it go:
//! the turn's task is then stopped between reading what it has to tell and parking, so a test
//! can change the chat in exactly that window. Its next load can wait the same way, after it
//! has read the chat and before the copy goes live.

use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::agent::store::{
    StoreError,
    delegate::{Call, Hook},
};

/// Lets every call through, except that an armed paused commit or load waits.
#[derive(Default)]
pub(super) struct HeldPause {
    armed: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
    armed_load: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
}

/// The armed call's two ends: `reached` resolves when it is waiting; sending on `release` lets
/// it go on.
pub(super) struct Hold {
    pub(super) reached: oneshot::Receiver<()>,
    pub(super) release: oneshot::Sender<()>,
}

impl HeldPause {
    /// Makes the next paused commit wait.
    pub(super) fn hold_next_pause(&self) -> Hold {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *self.armed.lock().unwrap() = Some((reached_tx, release_rx));
        Hold { reached, release }
    }

    /// Makes the next load wait once it has read the chat (`reached`: it has).
    pub(super) fn hold_next_load(&self) -> Hold {
        let (reached_tx, reached) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        *self.armed_load.lock().unwrap() = Some((reached_tx, release_rx));
        Hold { reached, release }
    }
}

/// Waits for the test's `release` once `reached` is told, if armed.
async fn hold(armed: &Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>) {
    let armed = armed.lock().unwrap().take();
    if let Some((reached, release)) = armed {
        let _ = reached.send(());
        let _ = release.await;
    }
}

impl Hook for HeldPause {
    async fn around<'a, T: Send + 'a>(
        &'a self,
        call: Call<'a>,
        run: BoxFuture<'a, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match call {
            Call::Commit { log: Some(_), .. } => {
                hold(&self.armed).await;
                run.await
            }
            Call::Load { .. } => {
                let read = run.await;
                hold(&self.armed_load).await;
                read
            }
            _ => run.await,
        }
    }
}
