//! People, passkeys, invites and sign-ins: the contracts of the people and sign-in stores.

use super::*;

/// Sign-ins: one secret for good; ended sessions are listed until they expire.
pub(crate) async fn signin_contract(store: &dyn SignInStore) {
    let secret = store.signing_secret().await.unwrap();
    assert_eq!(store.signing_secret().await.unwrap(), secret);
    assert_ne!(secret, [0; 32]);
    for (id, expires) in [("s1", 1_000), ("s2", 5_000), ("s3", 5_000)] {
        store
            .record_signin(&SignIn {
                id: id.into(),
                created_ms: 100,
                expires_ms: expires,
                address: Some("127.0.0.1".into()),
                person: None,
            })
            .await
            .unwrap();
    }
    assert!(store.ended_signins(200).await.unwrap().is_empty());
    store.end_signin("s1", 300).await.unwrap();
    store.end_signin("s2", 300).await.unwrap();
    store.end_signin("unknown", 300).await.unwrap();
    let mut ended = store.ended_signins(2_000).await.unwrap();
    ended.sort();
    assert_eq!(
        ended,
        [("s2".to_string(), 5_000)],
        "s1 expired, s3 was not ended"
    );
}

/// What every [`PeopleStore`] must do: people and passkeys round trip, an invite is used
/// once (two enrolments at once: one wins, the other writes nothing), expired ones never.
pub(crate) async fn people_contract(store: &dyn PeopleStore) {
    ceremony_contract(store).await;
    use crate::agent::people::{Invite, InviteKind, Person, StoredPasskey};
    let ana = Person {
        id: "p-ana".into(),
        name: "Ana".into(),
        roles: ["admin".to_string(), "approver".to_string()].into(),
        created_ms: 10,
        invited_by: None,
        revoked_ms: None,
    };
    let key = |id: &str, person: &str| StoredPasskey {
        id: id.into(),
        person: person.into(),
        label: "laptop".into(),
        key: "{}".into(),
        created_ms: 10,
        last_used_ms: None,
    };
    let invite = |digest: &str, kind, expires_ms| Invite {
        digest: digest.into(),
        kind,
        person: None,
        name: Some("Ben".into()),
        roles: ["approver".to_string()].into(),
        created_by: Some("p-ana".into()),
        created_ms: 10,
        expires_ms,
        used_ms: None,
    };
    store
        .save_invite(&invite("d-setup", InviteKind::Setup, 1_000))
        .await
        .unwrap();
    assert_eq!(
        store.invite("d-setup").await.unwrap().unwrap().roles.len(),
        1
    );
    assert!(store.invite("nope").await.unwrap().is_none());
    assert!(
        store
            .enrol("d-setup", Some(&ana), &key("k1", "p-ana"), 20)
            .await
            .unwrap()
    );
    assert!(
        !store
            .enrol("d-setup", Some(&ana), &key("k2", "p-ana"), 21)
            .await
            .unwrap(),
        "an invite is used once"
    );
    assert_eq!(
        store.invite("d-setup").await.unwrap().unwrap().used_ms,
        Some(20)
    );
    store
        .save_invite(&invite("d-late", InviteKind::Person, 50))
        .await
        .unwrap();
    let ben = Person {
        id: "p-ben".into(),
        name: "Ben".into(),
        roles: ["approver".to_string()].into(),
        created_ms: 60,
        invited_by: Some("p-ana".into()),
        revoked_ms: None,
    };
    assert!(
        !store
            .enrol("d-late", Some(&ben), &key("k3", "p-ben"), 60)
            .await
            .unwrap(),
        "an expired invite makes no one"
    );
    assert_eq!(store.people().await.unwrap(), vec![ana.clone()]);
    let keys = store.passkeys().await.unwrap();
    assert_eq!(
        keys.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(),
        ["k1"]
    );
    let mut used = key("k1", "p-ana");
    used.last_used_ms = Some(99);
    used.key = "{\"counter\":1}".into();
    store.save_passkey(&used).await.unwrap();
    assert_eq!(store.passkeys().await.unwrap(), vec![used]);
    let mut revoked = ana.clone();
    revoked.revoked_ms = Some(70);
    revoked.roles.remove("admin");
    store.save_person(&revoked).await.unwrap();
    assert_eq!(store.people().await.unwrap(), vec![revoked.clone()]);
    // A copy from before the removal (another instance's, given a role) does not bring her
    // back: the roles change, the removal stays.
    let mut stale = ana.clone();
    stale.roles = ["approver".to_string()].into();
    store.save_person(&stale).await.unwrap();
    let kept = store.people().await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].revoked_ms, Some(70), "{kept:?}");
    assert_eq!(kept[0].roles, stale.roles);
    store
        .save_invite(&invite("d-s2", InviteKind::Setup, 1_000))
        .await
        .unwrap();
    store
        .save_invite(&invite("d-p2", InviteKind::Person, 1_000))
        .await
        .unwrap();
    store.close_invites(InviteKind::Setup, 80).await.unwrap();
    assert_eq!(
        store.invite("d-s2").await.unwrap().unwrap().used_ms,
        Some(80)
    );
    assert_eq!(store.invite("d-p2").await.unwrap().unwrap().used_ms, None);
}

/// Passkey ceremonies: kept until they expire, taken once, at most `per_owner` of one owner (their
/// oldest go) and no owner's counted against another's; answered stateless challenges recorded
/// once, until they expire.
async fn ceremony_contract(store: &dyn PeopleStore) {
    store
        .keep_ceremony("c1", "ana", "{\"a\":1}", 100, 10, 2)
        .await
        .unwrap();
    store
        .keep_ceremony("c2", "ana", "{}", 101, 11, 2)
        .await
        .unwrap();
    // Ben's are his own: Ana's two do not stop them, his do not push hers out.
    for (i, challenge) in ["b1", "b2", "b3"].into_iter().enumerate() {
        store
            .keep_ceremony(challenge, "ben", "{}", 100 + i as i64, 12, 2)
            .await
            .unwrap();
    }
    assert_eq!(
        store.take_ceremony("b1").await.unwrap(),
        None,
        "Ben's oldest made room for his newest"
    );
    assert!(store.take_ceremony("b3").await.unwrap().is_some());
    assert_eq!(
        store.take_ceremony("c1").await.unwrap(),
        Some((100, "{\"a\":1}".to_owned()))
    );
    assert_eq!(store.take_ceremony("c1").await.unwrap(), None, "taken once");
    // A third of Ana's pushes out her oldest left (c2), never someone else's.
    store
        .keep_ceremony("c3", "ana", "{}", 150, 20, 2)
        .await
        .unwrap();
    store
        .keep_ceremony("c4", "ana", "{}", 151, 21, 2)
        .await
        .unwrap();
    assert_eq!(store.take_ceremony("c2").await.unwrap(), None);
    assert!(store.take_ceremony("b2").await.unwrap().is_some());
    // At 150 the others have expired: they go.
    store
        .keep_ceremony("c5", "cy", "{}", 200, 150, 2)
        .await
        .unwrap();
    assert_eq!(store.take_ceremony("c3").await.unwrap(), None);
    assert!(store.take_ceremony("c4").await.unwrap().is_some());
    assert_eq!(
        store.take_ceremony("c5").await.unwrap(),
        Some((200, "{}".to_owned()))
    );

    // A stateless challenge is answered once, however many times it is offered.
    assert!(store.spend_challenge("s1", 100, 10).await.unwrap());
    assert!(!store.spend_challenge("s1", 100, 20).await.unwrap());
    assert!(store.spend_challenge("s2", 100, 20).await.unwrap());
    assert!(
        store.take_ceremony("s1").await.unwrap().is_none(),
        "an answered challenge is no ceremony to take"
    );
    assert!(!store.spend_challenge("s1", 100, 99).await.unwrap());
}
