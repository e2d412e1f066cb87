//! The WebAuthn ceremonies in process, with webauthn-rs' own software authenticator answering
//! exactly as a browser's would: registration, sign-in, and step-up assertions bound to the
//! arguments — and what each refuses.

use std::sync::Arc;

use serde_json::{Value, json};
use webauthn_authenticator_rs::{WebauthnAuthenticator, softpasskey::SoftPasskey};
use webauthn_rs::prelude::{CreationChallengeResponse, RequestChallengeResponse, Url};

use super::passkeys::{Binding, Passkeys, step_up_challenge, stored};
use super::{People, PeopleError, Person};
use crate::agent::store::{MemoryStore, PeopleStore};

const ANA: &str = "6f1c1d9e-8a43-4c55-9a57-3f2f4c1b8a01";
const BEN: &str = "0b3e2a55-1d7e-4f0a-8d2c-7c6b5a4e3d02";

fn origin() -> Url {
    Url::parse("http://localhost:3000").expect("a URL")
}

fn person(id: &str, name: &str, revoked: bool) -> Person {
    Person {
        id: id.into(),
        name: name.into(),
        roles: ["approver".to_string()].into(),
        created_ms: 0,
        invited_by: None,
        revoked_ms: revoked.then_some(1),
    }
}

/// A directory of Ana and Ben (Ben revoked when asked), no passkeys yet.
async fn directory(ben_revoked: bool) -> People {
    let store: Arc<dyn PeopleStore> = Arc::new(MemoryStore::default());
    store
        .save_person(&person(ANA, "Ana", false))
        .await
        .expect("saved");
    store
        .save_person(&person(BEN, "Ben", ben_revoked))
        .await
        .expect("saved");
    People::load(
        store,
        Passkeys::new(&origin(), &[7; 32]).expect("a relying party"),
    )
    .await
    .expect("loaded")
}

/// Someone's authenticator and the id of the passkey it made.
struct Device {
    person: &'static str,
    authenticator: SoftPasskey,
    credential: String,
}

/// Registers a passkey for `person` in `people` (as a finished one-time link would).
async fn register(people: &People, person: &'static str, now: i64) -> Device {
    let passkeys = people.passkeys().expect("passkeys are on");
    let mut options = passkeys
        .begin_registration(person, "someone", &[], "invite-digest", now)
        .await
        .expect("options");
    assert_eq!(
        options["publicKey"]["authenticatorSelection"]["residentKey"],
        "required"
    );
    // The test kit keeps no resident keys; browsers make the passkey discoverable.
    options["publicKey"]["authenticatorSelection"]["requireResidentKey"] = json!(false);
    let options: CreationChallengeResponse = serde_json::from_value(options).expect("options");
    let mut authenticator = SoftPasskey::new(true);
    let credential = authenticator
        .do_registration(origin(), options)
        .expect("the authenticator registers");
    let id = credential.id.clone();
    let registered = passkeys
        .finish_registration(&serde_json::to_value(&credential).expect("JSON"), now)
        .await
        .expect("registered");
    assert_eq!(registered.person, person);
    assert_eq!(registered.invite, "invite-digest");
    let key = stored(&registered.passkey, person, "test".into(), now).expect("stored");
    assert_eq!(key.id, id);
    people.used_passkey(key, now).await;
    Device {
        person,
        authenticator,
        credential: id,
    }
}

/// The device's answer to `options` (with its user handle, as a discoverable passkey's).
fn answer(device: &mut Device, mut options: Value) -> Value {
    if options["publicKey"]["allowCredentials"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        options["publicKey"]["allowCredentials"] =
            json!([{"type": "public-key", "id": device.credential}]);
    }
    let options: RequestChallengeResponse = serde_json::from_value(options).expect("options");
    let mut credential = device
        .authenticator
        .do_authentication(origin(), options)
        .expect("the authenticator asserts");
    credential.response.user_handle = Some(
        uuid::Uuid::parse_str(device.person)
            .expect("a UUID")
            .as_bytes()
            .to_vec(),
    );
    serde_json::to_value(credential).expect("JSON")
}

fn binding(person: &str, args_digest: &str) -> Binding {
    Binding {
        person: person.into(),
        chat: "chat-1".into(),
        approval_id: "approval-1".into(),
        args_digest: args_digest.into(),
    }
}

fn refusal<T>(result: Result<T, PeopleError>) -> String {
    match result {
        Err(PeopleError::Passkey(why)) => why,
        Err(other) => panic!("expected a refused passkey, got: {other}"),
        Ok(_) => panic!("expected a refused passkey, it was accepted"),
    }
}

fn challenge_of(assertion: &Value) -> String {
    let client = assertion["response"]["clientDataJSON"]
        .as_str()
        .expect("client data");
    let client = base64::Engine::decode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        client.trim_end_matches('='),
    )
    .expect("base64url");
    let client: Value = serde_json::from_slice(&client).expect("JSON");
    client["challenge"]
        .as_str()
        .expect("a challenge")
        .trim_end_matches('=')
        .to_owned()
}

#[tokio::test]
async fn a_registered_passkey_signs_its_person_in_once_per_challenge() {
    let people = directory(false).await;
    let mut ana = register(&people, ANA, 1_000).await;
    let passkeys = people.passkeys().expect("on");

    let options = passkeys.begin_signin(2_000).expect("options");
    let assertion = answer(&mut ana, options);
    let (who, key) = passkeys
        .finish_signin(&assertion, &people, 2_100)
        .await
        .expect("signed in");
    assert_eq!(who.id, ANA);
    assert_eq!(key.id, ana.credential);

    // The same answer again (a replay): its challenge was answered.
    let why = refusal(passkeys.finish_signin(&assertion, &people, 2_200).await);
    assert!(why.contains("used already"), "{why}");
}

#[tokio::test]
async fn asking_for_sign_in_options_keeps_nothing_so_no_flood_locks_anyone_out() {
    let people = directory(false).await;
    let mut ana = register(&people, ANA, 1_000).await;
    let passkeys = people.passkeys().expect("on");
    // Ana's confirmation is waiting when the flood starts.
    let waiting = passkeys
        .begin_step_up(binding(ANA, "d1"), &people.passkeys_of(ANA), 1_500)
        .await
        .expect("options");
    // More anonymous requests for options than the old shared cap of ceremonies (10,000) held.
    for i in 0..10_001 {
        passkeys
            .begin_signin(2_000 + i)
            .unwrap_or_else(|e| panic!("request {i} was refused: {e}"));
    }
    // Everyone still signs in and confirms.
    let options = passkeys.begin_signin(20_000).expect("options");
    let (who, _) = passkeys
        .finish_signin(&answer(&mut ana, options), &people, 20_100)
        .await
        .expect("signed in after the flood");
    assert_eq!(who.id, ANA);
    passkeys
        .finish_step_up(&answer(&mut ana, waiting), &people, 20_200)
        .await
        .expect("the waiting confirmation still verifies");
    let fresh = passkeys
        .begin_step_up(binding(ANA, "d2"), &people.passkeys_of(ANA), 20_300)
        .await
        .expect("a new confirmation");
    passkeys
        .finish_step_up(&answer(&mut ana, fresh), &people, 20_400)
        .await
        .expect("confirmed");
}

#[tokio::test]
async fn a_sign_in_challenge_is_this_servers_until_it_expires_on_any_instance() {
    let store: Arc<dyn PeopleStore> = Arc::new(MemoryStore::default());
    store
        .save_person(&person(ANA, "Ana", false))
        .await
        .expect("saved");
    // Two instances on one database share its secret; a third server has its own.
    let instance = |secret: [u8; 32]| {
        let store = store.clone();
        async move {
            People::load(
                store,
                Passkeys::new(&origin(), &secret).expect("a relying party"),
            )
            .await
            .expect("loaded")
        }
    };
    let a = instance([7; 32]).await;
    let mut ana = register(&a, ANA, 1_000).await;
    let b = instance([7; 32]).await;
    let elsewhere = instance([8; 32]).await;

    // Options from A, the answer to B; the same answer again, to A or B: used.
    let options = a
        .passkeys()
        .expect("on")
        .begin_signin(2_000)
        .expect("options");
    let assertion = answer(&mut ana, options);
    let (who, _) = b
        .passkeys()
        .expect("on")
        .finish_signin(&assertion, &b, 2_100)
        .await
        .expect("signed in on the other instance");
    assert_eq!(who.id, ANA);
    for instance in [&a, &b] {
        let why = refusal(
            instance
                .passkeys()
                .expect("on")
                .finish_signin(&assertion, instance, 2_200)
                .await,
        );
        assert!(why.contains("used already"), "{why}");
    }

    // Another server's challenge is none of this one's.
    let options = elsewhere
        .passkeys()
        .expect("on")
        .begin_signin(3_000)
        .expect("options");
    let why = refusal(
        a.passkeys()
            .expect("on")
            .finish_signin(&answer(&mut ana, options), &a, 3_100)
            .await,
    );
    assert!(why.contains("no sign-in challenge of this server"), "{why}");

    // Five minutes to answer; a refused answer is recorded nowhere, so a late one stays refused.
    let options = a
        .passkeys()
        .expect("on")
        .begin_signin(4_000)
        .expect("options");
    let late = answer(&mut ana, options);
    for _ in 0..2 {
        let why = refusal(
            a.passkeys()
                .expect("on")
                .finish_signin(&late, &a, 4_000 + 5 * 60 * 1000)
                .await,
        );
        assert!(why.contains("too long"), "{why}");
    }
}

#[tokio::test]
async fn one_persons_confirmations_never_crowd_out_anothers() {
    let people = directory(false).await;
    let mut ana = register(&people, ANA, 1_000).await;
    let mut ben = register(&people, BEN, 1_000).await;
    let passkeys = people.passkeys().expect("on");
    let anas = passkeys
        .begin_step_up(binding(ANA, "d"), &people.passkeys_of(ANA), 2_000)
        .await
        .expect("options");
    // Ben asks for a thousand confirmations (a script, a stuck button).
    let mut first = None;
    let mut last = None;
    for i in 0..1_000 {
        let options = passkeys
            .begin_step_up(binding(BEN, "d"), &people.passkeys_of(BEN), 2_001 + i)
            .await
            .expect("options");
        first.get_or_insert_with(|| options.clone());
        last = Some(options);
    }
    passkeys
        .finish_step_up(&answer(&mut ana, anas), &people, 3_100)
        .await
        .expect("Ana's confirmation is untouched");
    passkeys
        .finish_step_up(&answer(&mut ben, last.expect("asked")), &people, 3_200)
        .await
        .expect("Ben's newest is kept");
    let why = refusal(
        passkeys
            .finish_step_up(&answer(&mut ben, first.expect("asked")), &people, 3_300)
            .await,
    );
    assert!(
        why.contains("answers no challenge"),
        "his oldest made room: {why}"
    );
}

#[tokio::test]
async fn a_revoked_person_cannot_sign_in_or_confirm() {
    let people = directory(true).await;
    let mut ben = register(&people, BEN, 1_000).await;
    let passkeys = people.passkeys().expect("on");

    let options = passkeys.begin_signin(2_000).expect("options");
    let why = refusal(
        passkeys
            .finish_signin(&answer(&mut ben, options), &people, 2_100)
            .await,
    );
    assert!(why.contains("no one who may sign in"), "{why}");

    let options = passkeys
        .begin_step_up(binding(BEN, "d1"), &people.passkeys_of(BEN), 3_000)
        .await
        .expect("options");
    let why = refusal(
        passkeys
            .finish_step_up(&answer(&mut ben, options), &people, 3_100)
            .await,
    );
    assert!(why.contains("may no longer sign"), "{why}");
}

#[tokio::test]
async fn a_step_up_assertion_signs_a_challenge_made_of_the_exact_arguments() {
    let people = directory(false).await;
    let mut ana = register(&people, ANA, 1_000).await;
    let passkeys = people.passkeys().expect("on");

    let bound = binding(ANA, "digest-of-150-usd-to-jack");
    let options = passkeys
        .begin_step_up(bound.clone(), &people.passkeys_of(ANA), 2_000)
        .await
        .expect("options");
    let assertion = answer(&mut ana, options);
    let (proof, key) = passkeys
        .finish_step_up(&assertion, &people, 2_100)
        .await
        .expect("confirmed");
    assert_eq!(proof.binding, bound);
    assert_eq!(proof.passkey, ana.credential);
    assert_eq!(key.id, ana.credential);

    // The receipt lets anyone recompute what was signed: the challenge is the arguments'.
    let nonce = proof.receipt["nonce"].as_str().expect("a nonce");
    let nonce = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, nonce)
        .expect("base64url");
    let expected = base64::Engine::encode(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        step_up_challenge(&bound, &nonce),
    );
    assert_eq!(challenge_of(&assertion), expected);
    assert_eq!(
        proof.receipt["clientDataJSON"], assertion["response"]["clientDataJSON"],
        "the receipt keeps what the authenticator signed"
    );
    // Other arguments make another challenge: this assertion cannot stand for them.
    let edited = binding(ANA, "digest-of-1500-usd-to-jack");
    assert_ne!(
        base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            step_up_challenge(&edited, &nonce),
        ),
        expected
    );

    // Replayed, it is refused.
    let why = refusal(passkeys.finish_step_up(&assertion, &people, 2_200).await);
    assert!(why.contains("answers no challenge"), "{why}");
}

#[tokio::test]
async fn a_step_up_needs_the_signers_own_passkey_the_right_ceremony_and_no_delay() {
    let people = directory(false).await;
    let mut ana = register(&people, ANA, 1_000).await;
    let mut ben = register(&people, BEN, 1_000).await;
    let passkeys = people.passkeys().expect("on");

    // Ben's authenticator answers a confirmation bound to Ana.
    let options = passkeys
        .begin_step_up(binding(ANA, "d"), &people.passkeys_of(BEN), 2_000)
        .await
        .expect("options");
    let why = refusal(
        passkeys
            .finish_step_up(&answer(&mut ben, options), &people, 2_100)
            .await,
    );
    assert!(why.contains("not the signer's"), "{why}");

    // A sign-in answer is no confirmation, and a confirmation no sign-in.
    let options = passkeys.begin_signin(3_000).expect("options");
    let why = refusal(
        passkeys
            .finish_step_up(&answer(&mut ana, options), &people, 3_100)
            .await,
    );
    assert!(why.contains("not a confirmation"), "{why}");
    let options = passkeys
        .begin_step_up(binding(ANA, "d"), &people.passkeys_of(ANA), 4_000)
        .await
        .expect("options");
    let why = refusal(
        passkeys
            .finish_signin(&answer(&mut ana, options), &people, 4_100)
            .await,
    );
    assert!(why.contains("no sign-in challenge"), "{why}");

    // Two minutes to confirm, then the challenge is void.
    let options = passkeys
        .begin_step_up(binding(ANA, "d"), &people.passkeys_of(ANA), 5_000)
        .await
        .expect("options");
    let why = refusal(
        passkeys
            .finish_step_up(
                &answer(&mut ana, options),
                &people,
                5_000 + 2 * 60 * 1000 + 1,
            )
            .await,
    );
    assert!(why.contains("too long"), "{why}");

    // Someone with no passkey here gets no options at all.
    let why = refusal(passkeys.begin_step_up(binding(BEN, "d"), &[], 6_000).await);
    assert!(why.contains("no passkey"), "{why}");
}

#[tokio::test]
async fn an_answer_that_is_not_webauthn_is_refused_with_a_reason() {
    let people = directory(false).await;
    let passkeys = people.passkeys().expect("on");
    for bad in [
        json!(null),
        json!({"id": "x"}),
        json!("a string"),
        json!({"id": "AA", "rawId": "AA", "type": "public-key",
               "response": {"clientDataJSON": "bm90IGpzb24", "authenticatorData": "AA",
                            "signature": "AA"}, "extensions": {}}),
    ] {
        let why = refusal(passkeys.finish_step_up(&bad, &people, 0).await);
        assert!(
            why.contains("not a WebAuthn assertion") || why.contains("not JSON"),
            "{bad}: {why}"
        );
        let why = refusal(passkeys.finish_registration(&bad, 0).await);
        assert!(
            why.contains("not a WebAuthn registration") || why.contains("not JSON"),
            "{bad}: {why}"
        );
    }
}
