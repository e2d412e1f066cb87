//! People: who is signed in, what they may do, and the passkeys they prove it with (ADR 0024).
//!
//! Countersign runs in one of three ways (`COUNTERSIGN_SIGN_IN`):
//!
//! * **open** (the default without an API key): one local person, no sign-in — the
//!   two-command demo;
//! * **key**: the same one local person, behind the API key (`/signin` takes the key);
//! * **passkeys**: people, each signing in with a passkey (WebAuthn, [`passkeys`]). The first
//!   person (an admin) comes from a one-time link printed at start-up or made with the API key;
//!   admins invite others with one-time links and give them roles. The API key still works for
//!   scripts; it acts as the local person, who is no one's approver.
//!
//! Whoever makes a request is its [`Principal`]; the edge puts it on every request. A chat
//! belongs to the principal that started it; the approval gate asks who signs
//! ([`crate::agent::gate::Signer`]) and whose chat it is. [`People`] is the directory: the
//! people and their passkeys in memory, written through to the store.

pub mod holds;
pub mod passkeys;
mod principal;

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, RwLock},
};

use serde::{Deserialize, Serialize};

use crate::agent::{
    clock::Millis,
    store::{PeopleStore, StoreError},
};

pub use holds::{Ending, Hold, Holds};
pub use passkeys::{Passkeys, StepUpProof};
pub use principal::Principal;

/// The id of the one local person (open and key modes, and the API key in passkeys mode).
pub const LOCAL: &str = crate::protocol::countersign::LOCAL_PERSON;

/// The role that manages people.
pub const ADMIN: &str = "admin";

/// How long an invitation link is good for.
pub const INVITE_LIFETIME_MS: Millis = 7 * 24 * 3600 * 1000;

/// How long the link that adds a passkey on another device is good for.
pub const DEVICE_LINK_LIFETIME_MS: Millis = 15 * 60 * 1000;

/// How the server signs people in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignInMode {
    /// One local person, no sign-in.
    #[default]
    Open,
    /// One local person behind the API key.
    Key,
    /// People with passkeys.
    Passkeys,
}

impl SignInMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SignInMode::Open => "open",
            SignInMode::Key => "key",
            SignInMode::Passkeys => "passkeys",
        }
    }
}

/// A person who signs in with passkeys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    /// A UUID (also the WebAuthn user handle of their passkeys).
    pub id: String,
    pub name: String,
    pub roles: BTreeSet<String>,
    pub created_ms: Millis,
    /// Who invited them (`None`: the set-up link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invited_by: Option<String>,
    /// When an admin revoked them: they can no longer sign in or sign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_ms: Option<Millis>,
}

impl Person {
    pub fn is_active(&self) -> bool {
        self.revoked_ms.is_none()
    }

    pub fn is_admin(&self) -> bool {
        self.roles.contains(ADMIN)
    }
}

/// A passkey as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPasskey {
    /// The credential id, base64url.
    pub id: String,
    pub person: String,
    /// "Passkey added on 2026-11-26" — what the person sees in their list.
    pub label: String,
    /// webauthn-rs' `Passkey`, as JSON (public key, counter, backup state).
    pub key: String,
    pub created_ms: Millis,
    pub last_used_ms: Option<Millis>,
}

/// What an invitation link makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InviteKind {
    /// The first person, an admin (printed at start-up).
    Setup,
    /// A new person with the invite's roles.
    Person,
    /// Another passkey for an existing person (a second device).
    Device,
}

impl InviteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InviteKind::Setup => "setup",
            InviteKind::Person => "person",
            InviteKind::Device => "device",
        }
    }

    pub fn parse(text: &str) -> Option<InviteKind> {
        [InviteKind::Setup, InviteKind::Person, InviteKind::Device]
            .into_iter()
            .find(|k| k.as_str() == text)
    }
}

/// A one-time link: only its digest is stored, so the store never holds a usable link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    /// SHA-256 (hex) of the link's token.
    pub digest: String,
    pub kind: InviteKind,
    /// [`InviteKind::Device`]: whose passkey it adds.
    pub person: Option<String>,
    /// The name the admin suggested (the invitee may change it).
    pub name: Option<String>,
    pub roles: BTreeSet<String>,
    pub created_by: Option<String>,
    pub created_ms: Millis,
    pub expires_ms: Millis,
    pub used_ms: Option<Millis>,
}

impl Invite {
    pub fn is_open(&self, now: Millis) -> bool {
        self.used_ms.is_none() && now < self.expires_ms
    }
}

/// The digest an invite is stored under.
pub fn token_digest(token: &str) -> String {
    crate::agent::store::audit::sha256_hex(token.trim().as_bytes())
}

/// Why something about people was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PeopleError {
    #[error(
        "sign-in with passkeys is off on this server (COUNTERSIGN_SIGN_IN=passkeys turns it on)"
    )]
    Off,
    #[error("only an admin (or the API key) may {0}")]
    NotAllowed(&'static str),
    #[error("{0:?} is not a role name: use 1 to 32 lowercase letters, digits, - or _")]
    InvalidRole(String),
    #[error("a name must have 1 to 60 characters, without control characters")]
    InvalidName,
    #[error("this link is not valid: it was used already, has expired, or never existed")]
    InviteNotValid,
    #[error("no such person")]
    UnknownPerson,
    #[error("{0} is the last admin; make someone else an admin first")]
    LastAdmin(String),
    #[error("the passkey was not accepted: {0}")]
    Passkey(String),
    #[error("{0}")]
    Store(String),
}

impl From<StoreError> for PeopleError {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e.report(), "the people store failed");
        PeopleError::Store(
            "the server could not record this; nothing was changed — try again".into(),
        )
    }
}

/// A role name: lowercase letters, digits, `-` and `_`, 1 to 32 of them.
pub fn role_name(text: &str) -> Result<String, PeopleError> {
    let role = text.trim().to_ascii_lowercase();
    let valid = !role.is_empty()
        && role.len() <= 32
        && role
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if valid {
        Ok(role)
    } else {
        Err(PeopleError::InvalidRole(text.chars().take(40).collect()))
    }
}

/// Role names from a comma- or space-separated list (duplicates dropped).
pub fn role_names(text: &str) -> Result<BTreeSet<String>, PeopleError> {
    text.split([',', ' '])
        .filter(|r| !r.trim().is_empty())
        .map(role_name)
        .collect()
}

/// A person's name: trimmed, 1 to 60 characters, no control characters.
pub fn person_name(text: &str) -> Result<String, PeopleError> {
    let name = text.trim();
    let count = name.chars().count();
    if count == 0 || count > 60 || name.chars().any(char::is_control) {
        return Err(PeopleError::InvalidName);
    }
    Ok(name.to_owned())
}

/// What changed about someone who could sign in, as a change of people is told to the rest of
/// the server (here, or read again after another instance's news).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// They were removed: their sessions ended, their signatures no longer count.
    Removed(Person),
    /// Their roles changed (from `was`): a signature that needed a role they lost no longer
    /// counts.
    RolesChanged {
        person: Person,
        was: BTreeSet<String>,
    },
}

impl Change {
    pub fn person(&self) -> &Person {
        match self {
            Change::Removed(person) | Change::RolesChanged { person, .. } => person,
        }
    }
}

/// The people and their passkeys, in memory and written through to the store.
pub struct People {
    mode: SignInMode,
    store: Arc<dyn PeopleStore>,
    directory: RwLock<Directory>,
    /// The WebAuthn ceremonies (`None` unless the mode is passkeys).
    passkeys: Option<Passkeys>,
    /// What people hold open here (sockets, streams), to end when they may no longer be
    /// signed in.
    holds: Arc<Holds>,
}

impl std::fmt::Debug for People {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("People")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Directory {
    people: BTreeMap<String, Person>,
    passkeys: BTreeMap<String, StoredPasskey>,
}

/// Who of `people` may sign, as the gate needs them.
fn standing_of(people: Vec<Person>) -> crate::agent::gate::countersign::Standing {
    crate::agent::gate::countersign::Standing::new(
        people
            .into_iter()
            .filter(Person::is_active)
            .map(|p| crate::agent::gate::Signer {
                id: p.id,
                name: p.name,
                roles: p.roles,
                person: true,
                step_ups: Vec::new(),
            }),
    )
}

fn read(lock: &RwLock<Directory>) -> std::sync::RwLockReadGuard<'_, Directory> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write(lock: &RwLock<Directory>) -> std::sync::RwLockWriteGuard<'_, Directory> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl People {
    /// No people: one local person (open or key mode).
    pub fn local(mode: SignInMode) -> People {
        People {
            mode,
            store: Arc::new(crate::agent::store::MemoryStore::default()),
            directory: RwLock::default(),
            passkeys: None,
            holds: Arc::default(),
        }
    }

    /// People signing in with `passkeys`, loaded from `store`.
    pub async fn load(
        store: Arc<dyn PeopleStore>,
        passkeys: Passkeys,
    ) -> Result<People, StoreError> {
        let people = store.people().await?;
        let keys = store.passkeys().await?;
        let store_for_ceremonies = store.clone();
        Ok(People {
            mode: SignInMode::Passkeys,
            store,
            directory: RwLock::new(Directory {
                people: people.into_iter().map(|p| (p.id.clone(), p)).collect(),
                passkeys: keys.into_iter().map(|k| (k.id.clone(), k)).collect(),
            }),
            passkeys: Some(passkeys.kept_in(store_for_ceremonies)),
            holds: Arc::default(),
        })
    }

    pub fn mode(&self) -> SignInMode {
        self.mode
    }

    /// Reads people and passkeys from the store again (another instance sharing the database
    /// changed them), and returns who was removed or had their roles changed since the
    /// directory last knew them; what the removed held open here ends. A store that cannot be
    /// read keeps the directory as it was, and says so.
    pub async fn reload(&self) -> Vec<Change> {
        if self.mode != SignInMode::Passkeys {
            return Vec::new();
        }
        let read = async {
            Ok::<_, StoreError>((self.store.people().await?, self.store.passkeys().await?))
        };
        let (people, keys) = match read.await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e.report(), "cannot read people again; keeping the directory as it was");
                return Vec::new();
            }
        };
        let changes = {
            let mut directory = write(&self.directory);
            let changes: Vec<Change> = people
                .iter()
                .filter_map(|now| {
                    let before = directory.people.get(&now.id)?;
                    if before.is_active() && !now.is_active() {
                        Some(Change::Removed(now.clone()))
                    } else if now.is_active() && before.roles != now.roles {
                        Some(Change::RolesChanged {
                            person: now.clone(),
                            was: before.roles.clone(),
                        })
                    } else {
                        None
                    }
                })
                .collect();
            *directory = Directory {
                people: people.into_iter().map(|p| (p.id.clone(), p)).collect(),
                passkeys: keys.into_iter().map(|k| (k.id.clone(), k)).collect(),
            };
            changes
        };
        for change in &changes {
            if let Change::Removed(person) = change {
                let ended = self.holds.end_person(&person.id, Ending::Removed);
                tracing::info!(person = %person.id, ended, "removed on another instance: signed out here");
            }
        }
        changes
    }

    /// Who may sign now, read from the store rather than this directory (another instance may
    /// have removed someone this one has not heard of yet): everyone who may sign in, with their
    /// roles. Nobody without passkeys.
    pub async fn standing(&self) -> Result<crate::agent::gate::countersign::Standing, PeopleError> {
        if self.mode != SignInMode::Passkeys {
            return Ok(Default::default());
        }
        Ok(standing_of(self.store.people().await?))
    }

    /// [`People::standing`] as this directory has it (when the store cannot be read).
    pub fn standing_here(&self) -> crate::agent::gate::countersign::Standing {
        standing_of(read(&self.directory).people.values().cloned().collect())
    }

    /// What this instance's sockets and streams hold.
    pub fn holds(&self) -> &Arc<Holds> {
        &self.holds
    }

    /// A hold for a socket or stream `principal` opens with sign-in session `signin` (`None`:
    /// the API key in a header, or no sign-in at all): it ends when they are removed or that
    /// sign-in ends. Taken after the edge let the request in, so a removal in between is
    /// looked for again here.
    pub fn hold(&self, principal: &Principal, signin: Option<&str>) -> Hold {
        let person = match principal {
            Principal::Person { id, .. } => Some(id.as_str()),
            Principal::Local { .. } => None,
        };
        let hold = self.holds.hold(person, signin);
        if let Some(person) = person
            && self.active(person).is_none()
        {
            hold.end(Ending::Removed);
        }
        hold
    }

    /// The WebAuthn ceremonies, when people sign in with passkeys.
    pub fn passkeys(&self) -> Result<&Passkeys, PeopleError> {
        self.passkeys.as_ref().ok_or(PeopleError::Off)
    }

    pub fn person(&self, id: &str) -> Option<Person> {
        read(&self.directory).people.get(id).cloned()
    }

    /// The person, if they exist and were not revoked.
    pub fn active(&self, id: &str) -> Option<Person> {
        self.person(id).filter(Person::is_active)
    }

    /// Everyone, by name.
    pub fn list(&self) -> Vec<Person> {
        let mut people: Vec<Person> = read(&self.directory).people.values().cloned().collect();
        people.sort_by(|a, b| {
            a.name
                .to_lowercase()
                .cmp(&b.name.to_lowercase())
                .then(a.id.cmp(&b.id))
        });
        people
    }

    /// The roles `id` has now (none for the local person, someone unknown or revoked).
    pub fn roles_of(&self, id: &str) -> BTreeSet<String> {
        self.active(id).map(|p| p.roles).unwrap_or_default()
    }

    /// A name for `id`: the person's, or the local person's.
    pub fn name_of(&self, id: &str) -> String {
        match self.person(id) {
            Some(p) => p.name,
            None if id == LOCAL => "Local person".to_owned(),
            None => "someone who was removed".to_owned(),
        }
    }

    /// The passkeys of `person`.
    pub fn passkeys_of(&self, person: &str) -> Vec<StoredPasskey> {
        read(&self.directory)
            .passkeys
            .values()
            .filter(|k| k.person == person)
            .cloned()
            .collect()
    }

    pub fn passkey(&self, id: &str) -> Option<StoredPasskey> {
        read(&self.directory).passkeys.get(id).cloned()
    }

    /// Whether someone active is an admin.
    pub fn has_admin(&self) -> bool {
        read(&self.directory)
            .people
            .values()
            .any(|p| p.is_active() && p.is_admin())
    }

    /// A new one-time link's token and its invite (stored by digest). `by` must be allowed to
    /// make it: an admin or the API key for people, anyone for their own device link.
    pub async fn invite(
        &self,
        by: &Principal,
        kind: InviteKind,
        name: Option<&str>,
        roles: BTreeSet<String>,
        now: Millis,
    ) -> Result<(String, Invite), PeopleError> {
        self.passkeys()?;
        let (person, lifetime) = match kind {
            InviteKind::Device => {
                let Principal::Person { id, .. } = by else {
                    return Err(PeopleError::NotAllowed("add a passkey for someone else"));
                };
                (Some(id.clone()), DEVICE_LINK_LIFETIME_MS)
            }
            InviteKind::Person | InviteKind::Setup => {
                // The set-up link is made by the server itself while nobody can manage people.
                let first = kind == InviteKind::Setup && !self.has_admin();
                if !by.may_manage_people() && !first {
                    return Err(PeopleError::NotAllowed("invite people"));
                }
                (None, INVITE_LIFETIME_MS)
            }
        };
        let name = name
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(person_name)
            .transpose()?;
        let token = random_token(24).map_err(|e| PeopleError::Store(e.to_string()))?;
        let mut roles = roles;
        if kind == InviteKind::Setup {
            roles.insert(ADMIN.to_owned());
        }
        let invite = Invite {
            digest: token_digest(&token),
            kind,
            person,
            name,
            roles: if kind == InviteKind::Device {
                BTreeSet::new()
            } else {
                roles
            },
            created_by: match by {
                Principal::Person { id, .. } => Some(id.clone()),
                Principal::Local { .. } => None,
            },
            created_ms: now,
            expires_ms: now + lifetime,
            used_ms: None,
        };
        self.store.save_invite(&invite).await?;
        Ok((token, invite))
    }

    /// The link printed at start-up while nobody can manage people: a new token (the previous
    /// start's link stops working).
    pub async fn setup_link(&self, now: Millis) -> Result<Option<String>, PeopleError> {
        if self.passkeys.is_none() || self.has_admin() {
            return Ok(None);
        }
        // Links printed before stay open (several instances starting on one database each
        // print one); the first one used closes them all.
        let (token, _) = self
            .invite(
                &Principal::Local { via_key: true },
                InviteKind::Setup,
                None,
                BTreeSet::new(),
                now,
            )
            .await?;
        Ok(Some(token))
    }

    /// The open invite a link's token names.
    pub async fn open_invite(&self, token: &str, now: Millis) -> Result<Invite, PeopleError> {
        self.open_invite_by_digest(&token_digest(token), now).await
    }

    /// The open invite stored under `digest`.
    pub async fn open_invite_by_digest(
        &self,
        digest: &str,
        now: Millis,
    ) -> Result<Invite, PeopleError> {
        self.passkeys()?;
        match self.store.invite(digest).await? {
            Some(invite) if invite.is_open(now) => Ok(invite),
            _ => Err(PeopleError::InviteNotValid),
        }
    }

    /// Uses `invite` up and keeps what it made: a new person (or, for a device link, the
    /// existing one) with `passkey`. One transaction: the link works once, even when two
    /// browsers finish at the same moment.
    pub async fn enrol(
        &self,
        invite: &Invite,
        person: Person,
        passkey: StoredPasskey,
        now: Millis,
    ) -> Result<Person, PeopleError> {
        let new_person = invite.kind != InviteKind::Device;
        let used = self
            .store
            .enrol(&invite.digest, new_person.then_some(&person), &passkey, now)
            .await?;
        if !used {
            return Err(PeopleError::InviteNotValid);
        }
        if invite.kind == InviteKind::Setup {
            self.store.close_invites(InviteKind::Setup, now).await?;
        }
        let mut directory = write(&self.directory);
        if new_person {
            directory.people.insert(person.id.clone(), person.clone());
        }
        directory.passkeys.insert(passkey.id.clone(), passkey);
        Ok(person)
    }

    /// Gives `person` exactly `roles`. Only an admin (or the API key); the last admin keeps
    /// theirs.
    pub async fn set_roles(
        &self,
        by: &Principal,
        person: &str,
        roles: BTreeSet<String>,
    ) -> Result<Person, PeopleError> {
        if !by.may_manage_people() {
            return Err(PeopleError::NotAllowed("change roles"));
        }
        let mut changed = self.person(person).ok_or(PeopleError::UnknownPerson)?;
        if changed.is_admin() && !roles.contains(ADMIN) && self.is_last_admin(&changed.id) {
            return Err(PeopleError::LastAdmin(changed.name));
        }
        changed.roles = roles;
        self.store.save_person(&changed).await?;
        write(&self.directory)
            .people
            .insert(changed.id.clone(), changed.clone());
        Ok(changed)
    }

    /// Revokes `person`: their sessions end at once, here (what they hold open closes) and, by
    /// the store's news, on every instance. What else ends with them (grants, signatures, turns)
    /// is the runtime's ([`crate::agent::Runtime::remove_person`]).
    pub async fn revoke(
        &self,
        by: &Principal,
        person: &str,
        now: Millis,
    ) -> Result<Person, PeopleError> {
        if !by.may_manage_people() {
            return Err(PeopleError::NotAllowed("remove people"));
        }
        let mut changed = self.person(person).ok_or(PeopleError::UnknownPerson)?;
        if changed.is_admin() && self.is_last_admin(&changed.id) {
            return Err(PeopleError::LastAdmin(changed.name));
        }
        changed.revoked_ms.get_or_insert(now);
        self.store.save_person(&changed).await?;
        write(&self.directory)
            .people
            .insert(changed.id.clone(), changed.clone());
        self.holds.end_person(&changed.id, Ending::Removed);
        Ok(changed)
    }

    fn is_last_admin(&self, id: &str) -> bool {
        !read(&self.directory)
            .people
            .values()
            .any(|p| p.id != id && p.is_active() && p.is_admin())
    }

    /// Records a passkey's use (its signature counter and backup state as webauthn-rs updated
    /// them).
    pub async fn used_passkey(&self, mut passkey: StoredPasskey, now: Millis) {
        passkey.last_used_ms = Some(now);
        if let Err(e) = self.store.save_passkey(&passkey).await {
            tracing::warn!(error = %e.report(), passkey = %passkey.id, "cannot record a passkey's use");
        }
        write(&self.directory)
            .passkeys
            .insert(passkey.id.clone(), passkey);
    }

    /// For tests: a directory of these people, without passkeys.
    #[cfg(test)]
    pub fn with_people(people: Vec<Person>) -> People {
        Self::with_people_in(
            Arc::new(crate::agent::store::MemoryStore::default()),
            people,
        )
    }

    /// For tests: [`People::with_people`], written through to `store` (which may then change
    /// behind the directory's back, as another instance's would).
    #[cfg(test)]
    pub fn with_people_in(store: Arc<dyn PeopleStore>, people: Vec<Person>) -> People {
        People {
            mode: SignInMode::Passkeys,
            store,
            directory: RwLock::new(Directory {
                people: people.into_iter().map(|p| (p.id.clone(), p)).collect(),
                passkeys: BTreeMap::new(),
            }),
            passkeys: None,
            holds: Arc::default(),
        }
    }
}

/// The operating system's random source failed: no token can be made safely.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct NoRandomness(String);

/// `bytes` random bytes from the operating system, base64url.
pub fn random_token(bytes: usize) -> Result<String, NoRandomness> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|e| NoRandomness(e.to_string()))?;
    Ok(base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        buffer,
    ))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod passkey_tests;
