use super::*;

fn person(id: &str, name: &str, roles: &[&str]) -> Person {
    Person {
        id: id.into(),
        name: name.into(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
        created_ms: 0,
        invited_by: None,
        revoked_ms: None,
    }
}

async fn directory(people: Vec<Person>) -> People {
    let store: Arc<dyn PeopleStore> = Arc::new(crate::agent::store::MemoryStore::default());
    for p in &people {
        store.save_person(p).await.unwrap();
    }
    let url = url::Url::parse("http://localhost:3000").unwrap();
    People::load(store, Passkeys::new(&url, &[7; 32]).unwrap())
        .await
        .unwrap()
}

#[test]
fn role_and_person_names_are_checked() {
    assert_eq!(role_name(" Approver ").unwrap(), "approver");
    assert_eq!(role_name("finance_2-eu").unwrap(), "finance_2-eu");
    for bad in ["", "a b", "rôle", "x".repeat(33).as_str(), "ad;min", "<b>"] {
        assert!(role_name(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        role_names("approver, finance approver").unwrap(),
        ["approver".to_string(), "finance".to_string()].into()
    );
    assert!(role_names("approver, b@d").is_err());
    assert_eq!(person_name("  Ana  ").unwrap(), "Ana");
    for bad in ["", "   ", "a\u{0007}b", &"n".repeat(61)] {
        assert!(person_name(bad).is_err(), "{bad:?}");
    }
}

/// Whose chats a principal may touch is the chat's rule (`SessionRecord::owned_by`, tested
/// there); the principal's id is what it is asked with.
#[test]
fn a_principal_is_known_by_its_id_and_manages_people_only_by_key() {
    assert_eq!(Principal::local().id(), LOCAL);
    let ana = Principal::of(&person("p1", "Ana", &["approver"]), None);
    assert_eq!(ana.id(), "p1");
    assert!(!ana.may_manage_people());
    assert!(Principal::Local { via_key: true }.may_manage_people());
    assert!(!Principal::local().may_manage_people());
    let me = ana.me(SignInMode::Passkeys);
    assert_eq!(me.roles, ["approver"]);
    assert!(me.people);
    assert!(!Principal::local().me(SignInMode::Open).people);
}

#[tokio::test]
async fn invites_need_an_admin_or_the_key_and_device_links_are_ones_own() {
    let people = directory(vec![
        person("p-admin", "Ana", &["admin"]),
        person("p-ben", "Ben", &["approver"]),
    ])
    .await;
    let ana = Principal::of(&people.person("p-admin").unwrap(), None);
    let ben = Principal::of(&people.person("p-ben").unwrap(), None);
    let roles: BTreeSet<String> = ["approver".to_string()].into();
    let (token, invite) = people
        .invite(&ana, InviteKind::Person, Some("Cy"), roles.clone(), 1_000)
        .await
        .unwrap();
    assert_eq!(invite.digest, token_digest(&token));
    assert_ne!(invite.digest, token, "only the digest is kept");
    assert_eq!(invite.expires_ms, 1_000 + INVITE_LIFETIME_MS);
    assert_eq!(
        people.open_invite(&token, 2_000).await.unwrap().roles,
        roles
    );
    assert_eq!(
        people.open_invite(&token, invite.expires_ms).await,
        Err(PeopleError::InviteNotValid)
    );
    assert_eq!(
        people.open_invite("made-up", 2_000).await,
        Err(PeopleError::InviteNotValid)
    );
    assert_eq!(
        people
            .invite(&ben, InviteKind::Person, None, roles.clone(), 1_000)
            .await
            .unwrap_err(),
        PeopleError::NotAllowed("invite people")
    );
    assert!(
        people
            .invite(
                &Principal::Local { via_key: true },
                InviteKind::Person,
                None,
                roles,
                1_000
            )
            .await
            .is_ok()
    );
    let (_, device) = people
        .invite(&ben, InviteKind::Device, None, BTreeSet::new(), 1_000)
        .await
        .unwrap();
    assert_eq!(device.person.as_deref(), Some("p-ben"));
    assert_eq!(device.expires_ms, 1_000 + DEVICE_LINK_LIFETIME_MS);
    assert!(
        people
            .invite(
                &Principal::Local { via_key: true },
                InviteKind::Device,
                None,
                BTreeSet::new(),
                1
            )
            .await
            .is_err(),
        "the key has no passkeys to add to"
    );
    assert_eq!(
        people
            .invite(&ana, InviteKind::Person, Some(""), BTreeSet::new(), 1)
            .await
            .unwrap()
            .1
            .name,
        None
    );
}

#[tokio::test]
async fn the_last_admin_stays_an_admin_and_revoked_people_lose_their_roles() {
    let people = directory(vec![
        person("p-admin", "Ana", &["admin"]),
        person("p-ben", "Ben", &["approver"]),
    ])
    .await;
    let ana = Principal::of(&people.person("p-admin").unwrap(), None);
    assert_eq!(
        people.set_roles(&ana, "p-admin", BTreeSet::new()).await,
        Err(PeopleError::LastAdmin("Ana".into()))
    );
    assert_eq!(
        people.revoke(&ana, "p-admin", 5).await,
        Err(PeopleError::LastAdmin("Ana".into()))
    );
    let ben = people
        .set_roles(
            &ana,
            "p-ben",
            ["admin".to_string(), "approver".to_string()].into(),
        )
        .await
        .unwrap();
    assert!(ben.is_admin());
    assert_eq!(
        people
            .set_roles(
                &Principal::of(&person("p-x", "X", &[]), None),
                "p-ben",
                BTreeSet::new()
            )
            .await,
        Err(PeopleError::NotAllowed("change roles"))
    );
    assert_eq!(
        people.set_roles(&ana, "nobody", BTreeSet::new()).await,
        Err(PeopleError::UnknownPerson)
    );
    people.revoke(&ana, "p-ben", 7).await.unwrap();
    assert!(
        people.roles_of("p-ben").is_empty(),
        "a revoked person has no roles"
    );
    assert!(people.active("p-ben").is_none());
    assert_eq!(people.person("p-ben").unwrap().revoked_ms, Some(7));
    assert_eq!(people.name_of("p-ben"), "Ben");
    assert_eq!(people.name_of(LOCAL), "Local person");
    // Nobody is left to sign the set-up link's admin in: a set-up link is offered again only
    // when no admin remains, which this server still has.
    assert_eq!(people.setup_link(10).await, Ok(None));
}

#[tokio::test]
async fn a_setup_link_is_offered_while_nobody_can_manage_people() {
    let people = directory(vec![]).await;
    let first = people.setup_link(1).await.unwrap().unwrap();
    let second = people.setup_link(2).await.unwrap().unwrap();
    // Several instances starting on one database each print a link: all work until one is
    // used, which closes the others.
    let used = people.open_invite(&first, 3).await.unwrap();
    let ana = Person {
        id: "p-ana".into(),
        name: "Ana".into(),
        roles: used.roles.clone(),
        created_ms: 3,
        invited_by: None,
        revoked_ms: None,
    };
    let key = StoredPasskey {
        id: "k-ana".into(),
        person: "p-ana".into(),
        label: "Passkey".into(),
        key: "{}".into(),
        created_ms: 3,
        last_used_ms: None,
    };
    let open = people.open_invite(&second, 3).await.unwrap();
    people.enrol(&used, ana, key, 4).await.unwrap();
    assert_eq!(
        people.open_invite(&second, 5).await,
        Err(PeopleError::InviteNotValid),
        "the first set-up closes the other links"
    );
    let invite = open;
    assert_eq!(invite.kind, InviteKind::Setup);
    assert!(invite.roles.contains(ADMIN));
    assert_eq!(
        People::local(SignInMode::Open).setup_link(1).await,
        Ok(None),
        "no links without passkeys"
    );
}
