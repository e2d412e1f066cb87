//! Passkeys: the WebAuthn ceremonies, done by `webauthn-rs` (no cryptography of ours).
//!
//! Three ceremonies, each in two requests — options out, the authenticator's answer back. The
//! answer's `clientDataJSON` names the challenge, so nothing else needs to travel, and it may
//! reach another instance than the options came from:
//!
//! * **registration** from a one-time link: a discoverable credential (a passkey proper, so
//!   sign-in needs no name), user verification required. Its state waits in the store under its
//!   challenge, taken once, and belongs to the link: a link keeps a few at most (its oldest go);
//! * **sign-in**: a discoverable assertion; the user handle names the person. Anyone may ask for
//!   sign-in options, so asking keeps nothing: the challenge is made of its expiry and a nonce
//!   under an HMAC with a key derived from the server's secret (shared by every instance), and
//!   webauthn-rs' state is made again from it when the answer comes. Only an answer that
//!   verifies — a registered passkey's signature — is recorded (until the challenge expires), so
//!   it is used once on every instance; nobody can fill anything by asking;
//! * **step-up** for one approval: an assertion by one of the signer's passkeys whose
//!   challenge is *made of what is approved*:
//!   `SHA-256("countersign step-up v1" ‖ chat ‖ approval id ‖ SHA-256 of the arguments in
//!   canonical JSON ‖ nonce)`. The authenticator signs `clientDataJSON`, which holds the
//!   challenge, so the signature covers the exact arguments; the audit log keeps the assertion
//!   and the nonce ([`StepUpProof::receipt`]) so anyone with the passkey's public key can check
//!   later which arguments that person confirmed. Edited arguments need a new assertion. Its
//!   state waits in the store like a registration's and belongs to the signer, who keeps a few
//!   at most: nobody else's ceremonies, asked for or not, can crowd out theirs.

use std::sync::Arc;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use webauthn_rs::prelude::{
    Passkey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Url, Uuid, Webauthn, WebauthnBuilder,
};

use super::{People, PeopleError, Person, StoredPasskey};
use crate::agent::{clock::Millis, store::PeopleStore};

/// How long a registration or sign-in ceremony may take.
const CEREMONY_MS: Millis = 5 * 60 * 1000;
/// How long a step-up assertion may take (the approval is on the person's screen).
const STEP_UP_MS: Millis = 2 * 60 * 1000;
/// Registrations in progress from one one-time link, at most (the oldest go first).
const REGISTRATIONS_PER_LINK: usize = 4;
/// Step-ups in progress for one person, at most (the oldest go first).
const STEP_UPS_PER_PERSON: usize = 16;

type HmacSha256 = Hmac<Sha256>;

/// What a sign-in challenge's MAC covers first (its key is derived from the server's secret).
const SIGN_IN_CHALLENGE: &[u8] = b"countersign sign-in challenge v1\0";
/// A sign-in challenge: expiry (8 bytes, big-endian ms) ‖ nonce (16) ‖ HMAC-SHA256 (32).
const SIGN_IN_CHALLENGE_LEN: usize = 8 + 16 + 32;

/// What a step-up assertion is for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Binding {
    /// Who must make it.
    pub person: String,
    pub chat: String,
    pub approval_id: String,
    /// SHA-256 (hex) of the arguments being approved, in canonical JSON.
    pub args_digest: String,
}

/// A verified step-up assertion.
#[derive(Debug, Clone, PartialEq)]
pub struct StepUpProof {
    pub binding: Binding,
    /// The passkey's credential id (base64url).
    pub passkey: String,
    /// What lets anyone check it later: the nonce, and the assertion as the authenticator made
    /// it (`clientDataJSON`, `authenticatorData`, `signature`, base64url).
    pub receipt: Value,
}

/// The step-up challenge for `binding` with `nonce`.
pub fn step_up_challenge(binding: &Binding, nonce: &[u8]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(b"countersign step-up v1\0");
    hash.update(binding.chat.as_bytes());
    hash.update(b"\0");
    hash.update(binding.approval_id.as_bytes());
    hash.update(b"\0");
    hash.update(binding.args_digest.as_bytes());
    hash.update(b"\0");
    hash.update(nonce);
    hash.finalize().into()
}

/// A person registered from a link.
#[derive(Debug)]
pub struct Registered {
    /// The digest of the link's token.
    pub invite: String,
    pub person: String,
    pub name: String,
    pub passkey: Passkey,
}

/// A registration or step-up in progress, as the store keeps it (a sign-in keeps nothing);
/// webauthn-rs' state is serialisable with its `danger-allow-state-serialisation` feature, and
/// never leaves the server.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(tag = "ceremony", rename_all = "snake_case")]
enum Ceremony {
    Register {
        state: PasskeyRegistration,
        invite: String,
        person: String,
        name: String,
    },
    StepUp {
        state: PasskeyAuthentication,
        binding: Binding,
        nonce: Vec<u8>,
    },
}

/// The WebAuthn relying party and the ceremonies in progress.
pub struct Passkeys {
    webauthn: Webauthn,
    origin: Url,
    /// Where ceremonies in progress are kept (the people's store once people are loaded).
    ceremonies: Arc<dyn PeopleStore>,
    /// The key sign-in challenges are signed with.
    challenge_key: [u8; 32],
}

impl std::fmt::Debug for Passkeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Passkeys")
            .field("origin", &self.origin.as_str())
            .finish_non_exhaustive()
    }
}

fn refused(e: impl std::fmt::Display) -> PeopleError {
    PeopleError::Passkey(e.to_string())
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

impl Passkeys {
    /// The relying party of `public_url` (the origin people's browsers use; its host is the
    /// passkeys' RP ID), signing its sign-in challenges with a key derived from `secret` (the
    /// server's, the same on every instance). On `localhost` any port is accepted (development
    /// and tests).
    pub fn new(public_url: &Url, secret: &[u8; 32]) -> Result<Passkeys, String> {
        let host = public_url
            .host_str()
            .ok_or("the public URL has no host name")?;
        if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
            return Err(format!(
                "passkeys need a host name, not an IP address ({host}): use http://localhost:<port> \
                 on this machine, or the name people's browsers use"
            ));
        }
        let webauthn = WebauthnBuilder::new(host, public_url)
            .map_err(|e| e.to_string())?
            .rp_name("Countersign")
            .allow_any_port(host == "localhost")
            .build()
            .map_err(|e| e.to_string())?;
        // A key of its own, so that nothing signed for sessions can pass for a challenge.
        let mut derive = HmacSha256::new_from_slice(secret).map_err(|e| e.to_string())?;
        derive.update(b"countersign passkey challenges v1");
        Ok(Passkeys {
            webauthn,
            origin: public_url.clone(),
            ceremonies: Arc::new(crate::agent::store::MemoryStore::default()),
            challenge_key: derive.finalize().into_bytes().into(),
        })
    }

    /// Keeps ceremonies in progress in `store` (the database every instance shares).
    pub fn kept_in(mut self, store: Arc<dyn PeopleStore>) -> Self {
        self.ceremonies = store;
        self
    }

    /// The origin passkeys are made for.
    pub fn origin(&self) -> &Url {
        &self.origin
    }

    /// Keeps `ceremony` under `challenge` for `owner`, who keeps `per_owner` at most.
    async fn keep(
        &self,
        challenge: &[u8],
        owner: &str,
        ceremony: Ceremony,
        expires: Millis,
        now: Millis,
        per_owner: usize,
    ) -> Result<(), PeopleError> {
        let state = serde_json::to_string(&ceremony).map_err(refused)?;
        self.ceremonies
            .keep_ceremony(&b64(challenge), owner, &state, expires, now, per_owner)
            .await?;
        Ok(())
    }

    /// The ceremony the answer's `clientDataJSON` names, taken (a challenge is good once);
    /// `kind` says what the answer should have been (a refusal names it).
    async fn take(
        &self,
        client_data_json: &[u8],
        kind: &str,
        now: Millis,
    ) -> Result<Ceremony, PeopleError> {
        let challenge = challenge_of(client_data_json)?;
        match self.ceremonies.take_ceremony(&b64(&challenge)).await? {
            Some((until, state)) if until > now => serde_json::from_str(&state)
                .map_err(|_| refused("its ceremony could not be read back; start again")),
            Some(_) => Err(refused("it took too long; start again")),
            None if self.signin_challenge_expiry(&challenge).is_ok() => Err(refused(format!(
                "it answers a sign-in challenge, not a {kind}"
            ))),
            None => Err(refused(
                "it answers no challenge of this server (used already, or from elsewhere)",
            )),
        }
    }

    /// A new sign-in challenge, good until `expires`.
    fn signin_challenge(&self, expires: Millis) -> Result<Vec<u8>, PeopleError> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(refused)?;
        let mut challenge = Vec::with_capacity(SIGN_IN_CHALLENGE_LEN);
        challenge.extend_from_slice(&expires.to_be_bytes());
        challenge.extend_from_slice(&nonce);
        let mac = self.signin_mac(&challenge)?.finalize().into_bytes();
        challenge.extend_from_slice(&mac);
        Ok(challenge)
    }

    fn signin_mac(&self, expiry_and_nonce: &[u8]) -> Result<HmacSha256, PeopleError> {
        let mut mac = HmacSha256::new_from_slice(&self.challenge_key).map_err(refused)?;
        mac.update(SIGN_IN_CHALLENGE);
        mac.update(expiry_and_nonce);
        Ok(mac)
    }

    /// The expiry of `challenge` if this server made it as a sign-in challenge (checked in
    /// constant time).
    fn signin_challenge_expiry(&self, challenge: &[u8]) -> Result<Millis, PeopleError> {
        let not_ours = || refused("it answers no sign-in challenge of this server");
        if challenge.len() != SIGN_IN_CHALLENGE_LEN {
            return Err(not_ours());
        }
        let (signed, mac) = challenge.split_at(8 + 16);
        self.signin_mac(signed)?
            .verify_slice(mac)
            .map_err(|_| not_ours())?;
        let expiry: [u8; 8] = signed[..8].try_into().map_err(|_| not_ours())?;
        Ok(Millis::from_be_bytes(expiry))
    }

    /// Options for registering a passkey for `person` (a UUID) named `name`.
    pub async fn begin_registration(
        &self,
        person: &str,
        name: &str,
        existing: &[StoredPasskey],
        invite: &str,
        now: Millis,
    ) -> Result<Value, PeopleError> {
        let user = Uuid::parse_str(person).map_err(refused)?;
        let exclude: Vec<_> = existing
            .iter()
            .filter_map(|k| URL_SAFE_NO_PAD.decode(&k.id).ok())
            .collect();
        let (options, state) = self
            .webauthn
            .start_passkey_registration(
                user,
                name,
                name,
                Some(exclude).filter(|e: &Vec<_>| !e.is_empty()),
            )
            .map_err(refused)?;
        let challenge = options.public_key.challenge.clone();
        let mut options = serde_json::to_value(&options).map_err(refused)?;
        // A passkey proper: discoverable, so signing in needs no name.
        if let Some(selection) = options
            .pointer_mut("/publicKey/authenticatorSelection")
            .and_then(Value::as_object_mut)
        {
            selection.insert("residentKey".into(), json!("required"));
            selection.insert("requireResidentKey".into(), json!(true));
        }
        self.keep(
            &challenge,
            &format!("link:{invite}"),
            Ceremony::Register {
                state,
                invite: invite.to_owned(),
                person: person.to_owned(),
                name: name.to_owned(),
            },
            now + CEREMONY_MS,
            now,
            REGISTRATIONS_PER_LINK,
        )
        .await?;
        Ok(options)
    }

    /// Checks the authenticator's answer to a registration.
    pub async fn finish_registration(
        &self,
        credential: &Value,
        now: Millis,
    ) -> Result<Registered, PeopleError> {
        let credential: RegisterPublicKeyCredential = serde_json::from_value(credential.clone())
            .map_err(|e| refused(format!("the answer is not a WebAuthn registration: {e}")))?;
        let Ceremony::Register {
            state,
            invite,
            person,
            name,
        } = self
            .take(&credential.response.client_data_json, "registration", now)
            .await?
        else {
            return Err(refused(
                "it answers a challenge that was not a registration",
            ));
        };
        let passkey = self
            .webauthn
            .finish_passkey_registration(&credential, &state)
            .map_err(refused)?;
        Ok(Registered {
            invite,
            person,
            name,
            passkey,
        })
    }

    /// Options for signing in with any passkey of this server. Nothing is kept: the challenge
    /// carries its expiry under the server's MAC, and the answer is checked against it.
    pub fn begin_signin(&self, now: Millis) -> Result<Value, PeopleError> {
        let (mut options, _state) = self
            .webauthn
            .start_discoverable_authentication()
            .map_err(refused)?;
        options.public_key.challenge = self.signin_challenge(now + CEREMONY_MS)?;
        let mut options = serde_json::to_value(&options).map_err(refused)?;
        // A button press asks at once (webauthn-rs asks for the autofill UI).
        if let Some(object) = options.as_object_mut() {
            object.remove("mediation");
        }
        Ok(options)
    }

    /// Checks a sign-in answer: a challenge this server made, in time, signed by a registered
    /// passkey of someone active, never answered before (on any instance). Answers the person
    /// and the passkey, its counter updated.
    pub async fn finish_signin(
        &self,
        credential: &Value,
        people: &People,
        now: Millis,
    ) -> Result<(Person, StoredPasskey), PeopleError> {
        let credential: PublicKeyCredential = serde_json::from_value(credential.clone())
            .map_err(|e| refused(format!("the answer is not a WebAuthn assertion: {e}")))?;
        let challenge = challenge_of(&credential.response.client_data_json)?;
        let expires = self.signin_challenge_expiry(&challenge)?;
        if expires <= now {
            return Err(refused("it took too long; start again"));
        }
        // webauthn-rs' state for this challenge, made again (it holds nothing else of ours).
        let (_, state) = self
            .webauthn
            .start_discoverable_authentication()
            .map_err(refused)?;
        let state = rebind(state, &challenge)?;
        let (user, credential_id) = self
            .webauthn
            .identify_discoverable_authentication(&credential)
            .map_err(|_| refused("it names no person (the passkey has no user handle)"))?;
        let person = people
            .active(&user.to_string())
            .ok_or_else(|| refused("it belongs to no one who may sign in here"))?;
        let stored = people
            .passkey(&b64(credential_id))
            .filter(|k| k.person == person.id)
            .ok_or_else(|| refused("this passkey is not registered here"))?;
        let mut key: Passkey = serde_json::from_str(&stored.key).map_err(refused)?;
        let result = self
            .webauthn
            .finish_discoverable_authentication_v2(&credential, state, &key)
            .map_err(refused)?;
        // Recorded only now that a registered passkey signed it: nobody fills this by asking.
        if !self
            .ceremonies
            .spend_challenge(&b64(&challenge), expires, now)
            .await?
        {
            return Err(refused("it was used already; start again"));
        }
        key.update_credential(&result);
        let updated = StoredPasskey {
            key: serde_json::to_string(&key).map_err(refused)?,
            ..stored
        };
        Ok((person, updated))
    }

    /// Options for a step-up assertion of `binding` by one of `passkeys` (the signer's).
    pub async fn begin_step_up(
        &self,
        binding: Binding,
        passkeys: &[StoredPasskey],
        now: Millis,
    ) -> Result<Value, PeopleError> {
        let keys: Vec<Passkey> = passkeys
            .iter()
            .filter_map(|k| serde_json::from_str(&k.key).ok())
            .collect();
        if keys.is_empty() {
            return Err(refused("you have no passkey on this server"));
        }
        let (mut options, state) = self
            .webauthn
            .start_passkey_authentication(&keys)
            .map_err(refused)?;
        let mut nonce = vec![0u8; 16];
        getrandom::fill(&mut nonce).map_err(refused)?;
        let challenge = step_up_challenge(&binding, &nonce);
        options.public_key.challenge = challenge.to_vec();
        let state = rebind(state, &challenge)?;
        let options = serde_json::to_value(&options).map_err(refused)?;
        let owner = format!("person:{}", binding.person);
        self.keep(
            &challenge,
            &owner,
            Ceremony::StepUp {
                state,
                binding,
                nonce,
            },
            now + STEP_UP_MS,
            now,
            STEP_UPS_PER_PERSON,
        )
        .await?;
        Ok(options)
    }

    /// Checks a step-up answer: made for its binding's challenge by one of the bound person's
    /// passkeys. The caller checks that the binding is the approval and arguments at hand.
    pub async fn finish_step_up(
        &self,
        credential: &Value,
        people: &People,
        now: Millis,
    ) -> Result<(StepUpProof, StoredPasskey), PeopleError> {
        let credential: PublicKeyCredential = serde_json::from_value(credential.clone())
            .map_err(|e| refused(format!("the answer is not a WebAuthn assertion: {e}")))?;
        let Ceremony::StepUp {
            state,
            binding,
            nonce,
        } = self
            .take(&credential.response.client_data_json, "confirmation", now)
            .await?
        else {
            return Err(refused(
                "it answers a challenge that was not a confirmation",
            ));
        };
        let stored = people
            .passkey(&b64(&credential.raw_id))
            .filter(|k| k.person == binding.person)
            .ok_or_else(|| refused("it was made with a passkey that is not the signer's"))?;
        if people.active(&binding.person).is_none() {
            return Err(refused("the signer may no longer sign here"));
        }
        let result = self
            .webauthn
            .finish_passkey_authentication(&credential, &state)
            .map_err(refused)?;
        let mut key: Passkey = serde_json::from_str(&stored.key).map_err(refused)?;
        key.update_credential(&result);
        let receipt = json!({
            "nonce": b64(&nonce),
            "credentialId": stored.id,
            "clientDataJSON": b64(&credential.response.client_data_json),
            "authenticatorData": b64(&credential.response.authenticator_data),
            "signature": b64(&credential.response.signature),
        });
        let updated = StoredPasskey {
            key: serde_json::to_string(&key).map_err(refused)?,
            ..stored
        };
        Ok((
            StepUpProof {
                binding,
                passkey: updated.id.clone(),
                receipt,
            },
            updated,
        ))
    }
}

/// The challenge an answer's `clientDataJSON` names (browsers send base64url without padding;
/// padding is accepted too).
fn challenge_of(client_data_json: &[u8]) -> Result<Vec<u8>, PeopleError> {
    let client: Value = serde_json::from_slice(client_data_json)
        .map_err(|_| refused("its client data is not JSON"))?;
    let challenge = client
        .get("challenge")
        .and_then(Value::as_str)
        .ok_or_else(|| refused("its client data names no challenge"))?;
    URL_SAFE_NO_PAD
        .decode(challenge.trim_end_matches('='))
        .map_err(|_| refused("its client data names no challenge"))
}

/// An authentication `state` (step-up's or sign-in's) with `challenge` in place of the random
/// one webauthn-rs made: the state is serialisable (feature `danger-allow-state-serialisation`),
/// and the round trip is checked, so a change of its shape fails here, loudly, rather than
/// leaving an assertion unbound.
fn rebind<S: serde::Serialize + serde::de::DeserializeOwned>(
    state: S,
    challenge: &[u8],
) -> Result<S, PeopleError> {
    let mut value = serde_json::to_value(&state).map_err(refused)?;
    let encoded = b64(challenge);
    let slot = value
        .pointer_mut("/ast/challenge")
        .ok_or_else(|| refused("webauthn-rs' authentication state has no challenge to bind"))?;
    *slot = json!(encoded);
    let rebound: S = serde_json::from_value(value).map_err(refused)?;
    let check = serde_json::to_value(&rebound).map_err(refused)?;
    if check.pointer("/ast/challenge").and_then(Value::as_str) != Some(encoded.as_str()) {
        return Err(refused("the bound challenge did not stick"));
    }
    Ok(rebound)
}

/// The public key of a stored passkey (webauthn-rs' COSE key, as JSON), which checks its
/// assertions; `null` when the stored passkey does not read.
pub fn public_key(stored: &StoredPasskey) -> Value {
    serde_json::from_str::<Passkey>(&stored.key)
        .ok()
        .and_then(|p| serde_json::to_value(p.get_public_key()).ok())
        .unwrap_or(Value::Null)
}

/// A passkey as the store keeps it, from a registration.
pub fn stored(
    passkey: &Passkey,
    person: &str,
    label: String,
    now: Millis,
) -> Result<StoredPasskey, PeopleError> {
    Ok(StoredPasskey {
        id: b64(passkey.cred_id().as_ref()),
        person: person.to_owned(),
        label,
        key: serde_json::to_string(passkey).map_err(refused)?,
        created_ms: now,
        last_used_ms: None,
    })
}
