//! Who may call when the server has an API key (`COUNTERSIGN_API_KEY`).
//!
//! * **The key** is compared in constant time, as SHA-256 digests of equal length (`subtle`), so
//!   neither the time taken nor the key's length says how much of a guess was right.
//! * **Guessing the key is throttled.** Every wrong key (in a header or the sign-in form) takes a
//!   token from the client address's bucket (`COUNTERSIGN_AUTH_FAILURE_RATE` a minute, IPv6 by
//!   /64); while the bucket is empty, that address gets 429 with `Retry-After` before any key it
//!   sends is looked at — the right one included. Other addresses are not affected. Only the key
//!   is throttled because only the key can be guessed: a session cookie, a WebSocket ticket or a
//!   passkey assertion that does not verify is no guess worth counting (each is random or signed
//!   with 128 bits or more), and counting them let a signed-out page's polling, or anyone at a
//!   shared address, lock everyone there out. A cookie that no longer signs anyone in (expired,
//!   ended, its person removed) is "signed out" (401 `signed_out`), not a failure.
//! * **A sign-in is a session, not a digest of the key.** The cookie holds a random session id,
//!   its expiry and an HMAC-SHA256 over both and a digest of the current key, under a random
//!   secret the server keeps in its database. Nothing in it lets anyone recover or test the key
//!   offline; changing the key ends every session (the MAC no longer verifies); signing out ends
//!   one (its id is recorded as ended, also across restarts).
//! * **Browsers' WebSockets** cannot send a header: same-origin pages carry the cookie, and
//!   another origin asks `POST /api/live/ticket` (with the key) for a single-use ticket valid for
//!   a minute, sent as `?ticket=` on the upgrade URL.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};

pub use crate::agent::people::{NoRandomness, random_token};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::limits::RateLimits;
use crate::{
    agent::people::Principal,
    agent::{
        clock::Millis,
        store::{SignIn, SignInStore, StoreError, lock},
    },
};

/// The sign-in cookie's name over plain HTTP.
pub const SESSION_COOKIE: &str = "countersign_session";
/// Its name over HTTPS: the `__Host-` prefix makes the browser insist on `Secure`, `Path=/` and no
/// `Domain`, so no other host can plant or overwrite it.
pub const SECURE_SESSION_COOKIE: &str = "__Host-countersign_session";

/// How long a WebSocket ticket is valid.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(60);

type HmacSha256 = Hmac<Sha256>;

/// The configured API key, kept only as its digest.
#[derive(Clone)]
pub struct ApiKey {
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(…)")
    }
}

impl ApiKey {
    pub fn new(key: &str) -> Self {
        ApiKey {
            digest: Sha256::digest(key.as_bytes()).into(),
        }
    }

    /// Whether `given` is the key (surrounding spaces ignored), in constant time.
    pub fn matches(&self, given: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(given.trim().as_bytes()).into();
        given.ct_eq(&self.digest).into()
    }
}

/// Wrong API keys per client address.
#[derive(Debug)]
pub struct Failures {
    limits: RateLimits,
}

impl Failures {
    /// `per_minute` failures a minute per address (a minute's worth at once); 0 = no limit.
    pub fn new(per_minute: u32) -> Self {
        Failures {
            limits: RateLimits::new(per_minute),
        }
    }

    /// `Err(wait)` while `address` may not try again.
    pub fn check(&self, address: &str, now: Instant) -> Result<(), Duration> {
        self.limits.check(address, now)
    }

    /// Counts one failure of `address`.
    pub fn record(&self, address: &str, now: Instant) {
        let _ = self.limits.take(address, now);
    }
}

/// A verified sign-in session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserSession {
    pub id: String,
    pub expires_ms: Millis,
    /// The person who signed in with a passkey (`None`: the API key's sign-in form).
    pub person: Option<String>,
    /// The passkey they signed in with (base64url credential id; `None` for sessions of the
    /// API key, and for `v2` tokens, which did not carry it).
    pub passkey: Option<String>,
}

/// Why a session cookie was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BrowserSessionError {
    #[error("the session token is malformed")]
    Malformed,
    #[error("the session token's signature does not verify")]
    BadSignature,
    #[error("the session has expired")]
    Expired,
    #[error("the session was ended")]
    Ended,
}

/// Sign-in sessions: issued, verified, ended.
///
/// Two kinds of token: `v1.<id>.<expiry>.<mac>` for a sign-in with the API key (the MAC covers
/// the key's digest, so a new key ends them all) and `v3.<id>.<person>.<passkey>.<expiry>.<mac>`
/// for a person's passkey sign-in, naming the passkey so every decision made in the session is
/// recorded with it (whether the person may still sign in is checked at every request). `v2`
/// tokens (`v2.<id>.<person>.<expiry>.<mac>`, without the passkey) are still accepted.
pub struct SignIns {
    secret: [u8; 32],
    key: Option<ApiKey>,
    lifetime: Duration,
    /// Ended sessions that have not expired yet (by id, with their expiry).
    ended: Mutex<HashMap<String, Millis>>,
    store: Arc<dyn SignInStore>,
}

impl std::fmt::Debug for SignIns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIns")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl SignIns {
    /// The sessions of `key`, signed with the store's secret; the ended ones still valid by
    /// time are loaded so a signed-out cookie stays refused after a restart.
    pub async fn load(
        store: Arc<dyn SignInStore>,
        key: Option<ApiKey>,
        lifetime: Duration,
        now: Millis,
    ) -> Result<Self, StoreError> {
        let secret = store.signing_secret().await?;
        let ended = store.ended_signins(now).await?.into_iter().collect();
        Ok(SignIns {
            secret,
            key,
            lifetime,
            ended: Mutex::new(ended),
            store,
        })
    }

    /// Reads the ended sessions from the store again (another instance sharing the database
    /// ended one): they are added to the ones known here. Returns those this instance did not
    /// know were ended (what they hold open here ends too).
    pub async fn reload_ended(&self, now: Millis) -> Result<Vec<String>, StoreError> {
        let stored = self.store.ended_signins(now).await?;
        let mut ended = lock(&self.ended);
        ended.retain(|_, expires| *expires > now);
        let mut news = Vec::new();
        for (id, expires) in stored {
            if ended.insert(id.clone(), expires).is_none() {
                news.push(id);
            }
        }
        Ok(news)
    }

    /// Whether session `id` was ended (signed out).
    pub fn is_ended(&self, id: &str) -> bool {
        lock(&self.ended).contains_key(id)
    }

    fn mac(
        &self,
        id: &str,
        person: Option<(&str, Option<&str>)>,
        expires_ms: Millis,
    ) -> Result<HmacSha256, BrowserSessionError> {
        let mut mac = HmacSha256::new_from_slice(&self.secret)
            .map_err(|_| BrowserSessionError::BadSignature)?;
        match person {
            None => {
                // A key sign-in: without a key there is none to verify.
                let key = self.key.as_ref().ok_or(BrowserSessionError::BadSignature)?;
                mac.update(b"countersign sign-in v1\0");
                mac.update(id.as_bytes());
                mac.update(b"\0");
                mac.update(expires_ms.to_string().as_bytes());
                mac.update(b"\0");
                // The key's digest: a new key makes every session's signature wrong.
                mac.update(&key.digest);
            }
            Some((person, None)) => {
                mac.update(b"countersign sign-in v2\0");
                mac.update(id.as_bytes());
                mac.update(b"\0");
                mac.update(person.as_bytes());
                mac.update(b"\0");
                mac.update(expires_ms.to_string().as_bytes());
            }
            Some((person, Some(passkey))) => {
                mac.update(b"countersign sign-in v3\0");
                mac.update(id.as_bytes());
                mac.update(b"\0");
                mac.update(person.as_bytes());
                mac.update(b"\0");
                mac.update(passkey.as_bytes());
                mac.update(b"\0");
                mac.update(expires_ms.to_string().as_bytes());
            }
        }
        Ok(mac)
    }

    /// A new session from `now` (of a person and the passkey they signed in with, or of the
    /// API key's sign-in form), recorded in the store, and its cookie value.
    pub async fn issue(
        &self,
        now: Millis,
        address: Option<String>,
        person: Option<(&str, &str)>,
    ) -> Result<(BrowserSession, String), StoreError> {
        let id =
            random_token(16).map_err(|e| StoreError::caused_by("cannot make a sign-in id", e))?;
        let expires_ms = now + self.lifetime.as_millis() as Millis;
        let signature = self
            .mac(&id, person.map(|(p, k)| (p, Some(k))), expires_ms)
            .map(|m| URL_SAFE_NO_PAD.encode(m.finalize().into_bytes()))
            .map_err(|e| StoreError::caused_by("cannot sign the sign-in", e))?;
        self.store
            .record_signin(&SignIn {
                id: id.clone(),
                created_ms: now,
                expires_ms,
                address,
                person: person.map(|(p, _)| p.to_owned()),
            })
            .await?;
        let token = match person {
            None => format!("v1.{id}.{expires_ms}.{signature}"),
            Some((person, passkey)) => {
                format!("v3.{id}.{person}.{passkey}.{expires_ms}.{signature}")
            }
        };
        Ok((
            BrowserSession {
                id,
                expires_ms,
                person: person.map(|(p, _)| p.to_owned()),
                passkey: person.map(|(_, k)| k.to_owned()),
            },
            token,
        ))
    }

    /// The session a cookie value names, if it verifies, has not expired and was not ended.
    pub fn verify(&self, token: &str, now: Millis) -> Result<BrowserSession, BrowserSessionError> {
        let session = self.open(token)?;
        if session.expires_ms <= now {
            return Err(BrowserSessionError::Expired);
        }
        if lock(&self.ended).contains_key(&session.id) {
            return Err(BrowserSessionError::Ended);
        }
        Ok(session)
    }

    /// The session a cookie value names if this server signed it, expired or ended or not
    /// (whose it was: what a page is told when it no longer signs anyone in).
    pub fn open(&self, token: &str) -> Result<BrowserSession, BrowserSessionError> {
        let parts: Vec<&str> = token.split('.').collect();
        let (id, person, expires, signature) = match parts.as_slice() {
            ["v1", id, expires, signature] => (*id, None, *expires, *signature),
            ["v2", id, person, expires, signature] if !person.is_empty() => {
                (*id, Some((*person, None)), *expires, *signature)
            }
            ["v3", id, person, passkey, expires, signature]
                if !person.is_empty() && !passkey.is_empty() =>
            {
                (*id, Some((*person, Some(*passkey))), *expires, *signature)
            }
            _ => return Err(BrowserSessionError::Malformed),
        };
        let expires_ms: Millis = expires
            .parse()
            .map_err(|_| BrowserSessionError::Malformed)?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| BrowserSessionError::Malformed)?;
        self.mac(id, person, expires_ms)?
            .verify_slice(&signature)
            .map_err(|_| BrowserSessionError::BadSignature)?;
        Ok(BrowserSession {
            id: id.to_owned(),
            expires_ms,
            person: person.map(|(p, _)| p.to_owned()),
            passkey: person.and_then(|(_, k)| k).map(str::to_owned),
        })
    }

    /// Ends `session` (signing out): its cookie is refused from now on, also after a restart.
    pub async fn end(&self, session: &BrowserSession, now: Millis) -> Result<(), StoreError> {
        {
            let mut ended = lock(&self.ended);
            ended.retain(|_, expires| *expires > now);
            ended.insert(session.id.clone(), session.expires_ms);
        }
        self.store.end_signin(&session.id, now).await
    }
}

/// Single-use WebSocket tickets, each for the principal that asked for it (and the sign-in
/// session it asked with: the socket ends with it).
#[derive(Debug, Default)]
pub struct Tickets {
    issued: Mutex<HashMap<String, Issued>>,
}

#[derive(Debug)]
struct Issued {
    expires: Instant,
    principal: Principal,
    signin: Option<String>,
}

/// Tickets outstanding at once, at most (the oldest are dropped first when over).
const TICKETS_KEPT: usize = 10_000;

impl Tickets {
    /// A new ticket for `principal` (signed in with session `signin`), valid for
    /// [`TICKET_LIFETIME`] from `now`.
    pub fn issue(
        &self,
        now: Instant,
        principal: Principal,
        signin: Option<String>,
    ) -> Result<String, NoRandomness> {
        let ticket = random_token(24)?;
        let mut issued = lock(&self.issued);
        issued.retain(|_, i| i.expires > now);
        if issued.len() >= TICKETS_KEPT
            && let Some(oldest) = issued
                .iter()
                .min_by_key(|(_, i)| i.expires)
                .map(|(t, _)| t.clone())
        {
            issued.remove(&oldest);
        }
        issued.insert(
            ticket.clone(),
            Issued {
                expires: now + TICKET_LIFETIME,
                principal,
                signin,
            },
        );
        Ok(ticket)
    }

    /// Uses `ticket` up: its principal and sign-in session once, if it was issued and has not
    /// expired.
    pub fn redeem(&self, ticket: &str, now: Instant) -> Option<(Principal, Option<String>)> {
        lock(&self.issued)
            .remove(ticket)
            .filter(|i| i.expires > now)
            .map(|i| (i.principal, i.signin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::store::MemoryStore;

    const KEY: &str = "a-key-of-sixteen-or-more";

    async fn signins(key: &str, store: Arc<dyn SignInStore>) -> SignIns {
        SignIns::load(
            store,
            Some(ApiKey::new(key)),
            Duration::from_secs(3600),
            1_000,
        )
        .await
        .unwrap()
    }

    #[test]
    fn the_key_matches_only_itself() {
        let key = ApiKey::new(KEY);
        assert!(key.matches(KEY));
        assert!(key.matches(&format!("  {KEY}\n")));
        assert!(!key.matches("a-key-of-sixteen-or-mor"));
        assert!(!key.matches(""));
        assert!(!format!("{key:?}").contains("sixteen"));
    }

    #[tokio::test]
    async fn a_session_verifies_until_it_expires_and_never_shows_the_key() {
        let store: Arc<dyn SignInStore> = Arc::new(MemoryStore::default());
        let signins = signins(KEY, store).await;
        let (session, token) = signins.issue(1_000, None, None).await.unwrap();
        assert!(!token.contains(KEY));
        assert_eq!(signins.verify(&token, 2_000), Ok(session.clone()));
        assert_eq!(
            signins.verify(&token, session.expires_ms),
            Err(BrowserSessionError::Expired)
        );
        // A changed expiry or id, or a token of another server, does not verify.
        let forged = token.replacen(&session.expires_ms.to_string(), "9999999999999", 1);
        assert_eq!(
            signins.verify(&forged, 2_000),
            Err(BrowserSessionError::BadSignature)
        );
        let other = super::SignIns::load(
            Arc::new(MemoryStore::default()),
            Some(ApiKey::new(KEY)),
            Duration::from_secs(3600),
            1_000,
        )
        .await
        .unwrap();
        assert_eq!(
            other.verify(&token, 2_000),
            Err(BrowserSessionError::BadSignature)
        );
        for malformed in [
            "",
            "v1",
            "v3.a.1.x",
            "v2.a..1.x",
            "v1.a.notanumber.x",
            "v1.a.1.!!!",
            "v1.a.1.x.y",
        ] {
            assert_eq!(
                signins.verify(malformed, 2_000),
                Err(BrowserSessionError::Malformed),
                "{malformed}"
            );
        }
    }

    #[tokio::test]
    async fn a_new_key_ends_every_session_and_signing_out_ends_one_for_good() {
        let store: Arc<dyn SignInStore> = Arc::new(MemoryStore::default());
        let signins = signins(KEY, store.clone()).await;
        let (first, first_token) = signins.issue(1_000, None, None).await.unwrap();
        let (_, second_token) = signins.issue(1_000, None, None).await.unwrap();
        signins.end(&first, 1_500).await.unwrap();
        assert_eq!(
            signins.verify(&first_token, 2_000),
            Err(BrowserSessionError::Ended)
        );
        assert!(signins.is_ended(&first.id));
        assert!(signins.verify(&second_token, 2_000).is_ok());
        // After a restart (same store): still ended.
        let restarted = self::signins(KEY, store.clone()).await;
        assert_eq!(
            restarted.verify(&first_token, 2_000),
            Err(BrowserSessionError::Ended)
        );
        assert!(restarted.verify(&second_token, 2_000).is_ok());
        // With another key: nothing verifies.
        let rekeyed = self::signins("another-key-entirely-16", store).await;
        assert_eq!(
            rekeyed.verify(&second_token, 2_000),
            Err(BrowserSessionError::BadSignature)
        );
    }

    #[tokio::test]
    async fn a_persons_session_names_them_and_cannot_be_moved_to_another() {
        let store: Arc<dyn SignInStore> = Arc::new(MemoryStore::default());
        // Passkeys without an API key: person sessions only.
        let signins = SignIns::load(store.clone(), None, Duration::from_secs(3600), 1_000)
            .await
            .unwrap();
        let (session, token) = signins
            .issue(1_000, None, Some(("p-ana", "key-1")))
            .await
            .unwrap();
        assert!(token.starts_with("v3."));
        assert_eq!(session.person.as_deref(), Some("p-ana"));
        assert_eq!(session.passkey.as_deref(), Some("key-1"));
        assert_eq!(signins.verify(&token, 2_000), Ok(session.clone()));
        for moved in [
            token.replacen("p-ana", "p-ben", 1),
            token.replacen("key-1", "key-2", 1),
        ] {
            assert_eq!(
                signins.verify(&moved, 2_000),
                Err(BrowserSessionError::BadSignature)
            );
        }
        // A v3 token made into a v2 one (the passkey dropped) does not verify either.
        let parts: Vec<&str> = token.split('.').collect();
        let downgraded = format!("v2.{}.{}.{}.{}", parts[1], parts[2], parts[4], parts[5]);
        assert_eq!(
            signins.verify(&downgraded, 2_000),
            Err(BrowserSessionError::BadSignature)
        );
        assert!(
            signins.issue(1_000, None, None).await.is_err(),
            "no key: no key sign-in"
        );
        signins.end(&session, 1_500).await.unwrap();
        assert_eq!(
            signins.verify(&token, 2_000),
            Err(BrowserSessionError::Ended)
        );
    }

    #[test]
    fn failures_throttle_one_address_only() {
        let failures = Failures::new(3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(failures.check("a", t0).is_ok());
            failures.record("a", t0);
        }
        assert!(failures.check("a", t0).is_err());
        assert!(failures.check("b", t0).is_ok());
        assert!(failures.check("a", t0 + Duration::from_secs(21)).is_ok());
    }

    #[test]
    fn a_ticket_is_good_once_and_for_a_minute() {
        let tickets = Tickets::default();
        let t0 = Instant::now();
        let ana = Principal::Person {
            id: "p-ana".into(),
            name: "Ana".into(),
            roles: Default::default(),
            passkey: Some("key-1".into()),
        };
        let ticket = tickets.issue(t0, ana.clone(), Some("s1".into())).unwrap();
        assert!(ticket.len() >= 32);
        assert_eq!(tickets.redeem("made-up", t0), None);
        assert_eq!(
            tickets.redeem(&ticket, t0 + Duration::from_secs(1)),
            Some((ana, Some("s1".into()))),
            "a ticket opens the socket as whoever asked for it, in their sign-in"
        );
        assert_eq!(
            tickets.redeem(&ticket, t0 + Duration::from_secs(2)),
            None,
            "single use"
        );
        let late = tickets.issue(t0, Principal::local(), None).unwrap();
        assert_eq!(tickets.redeem(&late, t0 + TICKET_LIFETIME), None);
        assert_ne!(
            tickets.issue(t0, Principal::local(), None).unwrap(),
            tickets.issue(t0, Principal::local(), None).unwrap()
        );
    }
}
