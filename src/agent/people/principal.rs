//! Whoever makes a request, as the edge found them ([`Principal`]): the one local person, or a
//! person signed in with a passkey.

use std::collections::BTreeSet;

use super::{ADMIN, LOCAL, Person, SignInMode};
use crate::protocol::countersign::Me;

/// Who makes a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The one local person: no sign-in (open), the API key, or a key sign-in.
    Local {
        /// Whether they proved it with the API key.
        via_key: bool,
    },
    /// A person signed in with a passkey.
    Person {
        id: String,
        name: String,
        roles: BTreeSet<String>,
        /// The passkey they signed in with (`None`: a session from before sessions named it).
        passkey: Option<String>,
    },
}

impl Principal {
    /// The local person of a server without sign-in.
    pub fn local() -> Principal {
        Principal::Local { via_key: false }
    }

    /// `person`, signed in with `passkey`.
    pub fn of(person: &Person, passkey: Option<String>) -> Principal {
        Principal::Person {
            id: person.id.clone(),
            name: person.name.clone(),
            roles: person.roles.clone(),
            passkey,
        }
    }

    /// The passkey the person signed in with.
    pub fn passkey(&self) -> Option<&str> {
        match self {
            Principal::Local { .. } => None,
            Principal::Person { passkey, .. } => passkey.as_deref(),
        }
    }

    /// `local`, or the person's id: who owns a chat they start.
    pub fn id(&self) -> &str {
        match self {
            Principal::Local { .. } => LOCAL,
            Principal::Person { id, .. } => id,
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Principal::Local { via_key: true } => "API key",
            Principal::Local { via_key: false } => "Local person",
            Principal::Person { name, .. } => name,
        }
    }

    pub fn roles(&self) -> BTreeSet<String> {
        match self {
            Principal::Local { .. } => BTreeSet::new(),
            Principal::Person { roles, .. } => roles.clone(),
        }
    }

    pub fn is_person(&self) -> bool {
        matches!(self, Principal::Person { .. })
    }

    /// Who may manage people: an admin, or the API key (which sets up the first person).
    pub fn may_manage_people(&self) -> bool {
        match self {
            Principal::Local { via_key } => *via_key,
            Principal::Person { roles, .. } => roles.contains(ADMIN),
        }
    }

    /// Who sees the whole server (every chat's audit events, `/metrics`): an admin, or the
    /// local person (the operator: the API key, or anyone on a server without sign-in).
    pub fn sees_everything(&self) -> bool {
        match self {
            Principal::Local { .. } => true,
            Principal::Person { roles, .. } => roles.contains(ADMIN),
        }
    }

    /// What the page is told about them.
    pub fn me(&self, mode: SignInMode) -> Me {
        Me {
            id: self.id().to_owned(),
            name: self.name().to_owned(),
            roles: self.roles().into_iter().collect(),
            people: mode == SignInMode::Passkeys,
        }
    }
}
