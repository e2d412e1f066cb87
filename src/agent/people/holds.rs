//! What people hold open — WebSockets, streamed responses — so that when their right to be
//! signed in ends (they were removed, they signed out) every one of them ends at once.
//!
//! A request is authenticated once, when it arrives (the edge's guard); a socket or a stream
//! then lives on for minutes or hours. Each one takes a [`Hold`] for the person and the sign-in
//! session it was opened with, and ends when the hold does: [`Holds::end_person`] when the
//! person is removed (here, or on another instance: the directory's reload says so),
//! [`Holds::end_signin`] when that sign-in is ended. Holds are per instance; what ends them
//! everywhere is the store's news (ADR 0025).

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex, OnceLock, Weak,
        atomic::{AtomicU64, Ordering},
    },
};

use tokio_util::sync::CancellationToken;

/// Why a hold ended: the person may no longer be signed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// An admin removed them.
    Removed,
    /// They signed out (of the session the hold was opened with).
    SignedOut,
}

impl Ending {
    /// What the socket's close (or the stream's last error) says.
    pub fn words(self) -> &'static str {
        match self {
            Ending::Removed => "signed out: you were removed",
            Ending::SignedOut => "signed out: this sign-in ended",
        }
    }
}

/// The open holds of an instance.
#[derive(Debug, Default)]
pub struct Holds {
    next: AtomicU64,
    held: Mutex<HashMap<u64, Held>>,
}

#[derive(Debug)]
struct Held {
    person: Option<String>,
    signin: Option<String>,
    end: Arc<End>,
}

#[derive(Debug, Default)]
struct End {
    token: CancellationToken,
    why: OnceLock<Ending>,
}

impl End {
    fn end(&self, why: Ending) {
        // The first reason stays.
        let _ = self.why.set(why);
        self.token.cancel();
    }
}

/// One socket's or stream's hold: ends when its person or sign-in does; lets go when dropped.
#[derive(Debug)]
pub struct Hold {
    id: u64,
    end: Arc<End>,
    holds: Weak<Holds>,
}

impl Holds {
    /// A hold for what `person` (a person's id) opened with sign-in session `signin`. Nothing
    /// to end it by (neither: the local person without sign-in, the API key in a header): a
    /// hold that never ends.
    pub fn hold(self: &Arc<Self>, person: Option<&str>, signin: Option<&str>) -> Hold {
        let end = Arc::new(End::default());
        if person.is_none() && signin.is_none() {
            return Hold {
                id: 0,
                end,
                holds: Weak::new(),
            };
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        crate::agent::lock(&self.held).insert(
            id,
            Held {
                person: person.map(str::to_owned),
                signin: signin.map(str::to_owned),
                end: end.clone(),
            },
        );
        Hold {
            id,
            end,
            holds: Arc::downgrade(self),
        }
    }

    /// Ends every hold of `person`; how many there were.
    pub fn end_person(&self, person: &str, why: Ending) -> usize {
        self.end_where(|h| h.person.as_deref() == Some(person), why)
    }

    /// Ends every hold opened with sign-in session `signin`; how many there were.
    pub fn end_signin(&self, signin: &str) -> usize {
        self.end_where(|h| h.signin.as_deref() == Some(signin), Ending::SignedOut)
    }

    fn end_where(&self, which: impl Fn(&Held) -> bool, why: Ending) -> usize {
        let ended: Vec<Arc<End>> = crate::agent::lock(&self.held)
            .values()
            .filter(|h| which(h))
            .map(|h| h.end.clone())
            .collect();
        for end in &ended {
            end.end(why);
        }
        ended.len()
    }

    /// How many holds are open (for tests and the logs).
    pub fn len(&self) -> usize {
        crate::agent::lock(&self.held).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Hold {
    /// Completes when the hold ends, with why.
    pub async fn ended(&self) -> Ending {
        self.end.token.cancelled().await;
        self.end.why.get().copied().unwrap_or(Ending::SignedOut)
    }

    /// Why it ended, if it did.
    pub fn ending(&self) -> Option<Ending> {
        self.end.why.get().copied()
    }

    /// Ends it now (its person or sign-in turned out to be over as it was taken).
    pub fn end(&self, why: Ending) {
        self.end.end(why);
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(holds) = self.holds.upgrade() {
            crate::agent::lock(&holds.held).remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_removal_ends_the_persons_holds_and_a_sign_out_that_sign_ins_only() {
        let holds = Arc::new(Holds::default());
        let ben_phone = holds.hold(Some("ben"), Some("s1"));
        let ben_laptop = holds.hold(Some("ben"), Some("s2"));
        let ana = holds.hold(Some("ana"), Some("s3"));
        let key = holds.hold(None, Some("k1"));
        let open = holds.hold(None, None);
        assert_eq!(holds.len(), 4, "nothing to end the local person's by");

        assert_eq!(holds.end_signin("s1"), 1);
        assert_eq!(ben_phone.ended().await, Ending::SignedOut);
        assert_eq!(ben_laptop.ending(), None);
        assert_eq!(holds.end_person("ben", Ending::Removed), 2);
        assert_eq!(ben_laptop.ended().await, Ending::Removed);
        assert_eq!(
            ben_phone.ending(),
            Some(Ending::SignedOut),
            "the first reason stays"
        );
        assert_eq!(holds.end_signin("k1"), 1, "a key sign-in ends too");
        assert_eq!(key.ending(), Some(Ending::SignedOut));
        assert_eq!(ana.ending(), None);
        assert_eq!(open.ending(), None);
        drop((ben_phone, ben_laptop, key));
        assert_eq!(holds.len(), 1, "a hold lets go when dropped");
        drop(ana);
        assert!(holds.is_empty());
    }
}
