//! The inbox's queries (ADR 0039).

use super::*;

/// The inbox's queries (ADR 0039), against `stores`: instances on one database (the first
/// writes; a decision must leave every instance's inbox). Who sees what — by the role an
/// approval wants, by whose chat it is, by deadline, and what someone signed already — one page
/// at a time, stable as approvals come.
pub(crate) async fn inbox_contract(stores: &[&dyn SessionStore]) {
    use crate::agent::gate::countersign::{audience_of, test_signer};
    use crate::agent::inbox::{
        Cursor, InboxQuery, SIGNED, Waiting,
        fixtures::{Ask, finished, waiting_record as asking},
        waiting_of,
    };
    use crate::protocol::countersign::Requirement;

    let store = stores[0];
    let approver = |role: &str| Requirement {
        approvers: 2,
        role: Some(role.into()),
        not_requester: true,
        step_up: false,
    };
    let mut one = Ask::new("apv-1", 10);
    one.needs = approver("approver");
    let mut two = Ask::new("apv-2", 20);
    two.needs = Requirement::default();
    let chat_a = asking("chat-a", Some("p-ana"), &[one.clone(), two]);
    let mut three = Ask::new("apv-3", 15);
    three.needs = approver("approver");
    three.signed_by = vec!["p-cai".into()];
    let mut four = Ask::new("apv-4", 30);
    four.needs = approver("auditor");
    let chat_b = asking("chat-b", Some("p-ben"), &[three, four]);
    let mut five = Ask::new("apv-5", 12);
    five.needs = Requirement {
        approvers: 2,
        ..Requirement::default()
    };
    five.deadline_ms = 50;
    let chat_c = asking("chat-c", None, &[five]);
    for record in [&chat_a, &chat_b, &chat_c] {
        store.commit(record, &[]).await.unwrap();
    }
    store
        .commit(&SessionRecord::new("quiet", 1), &[])
        .await
        .unwrap();
    let all: Vec<Waiting> = [&chat_a, &chat_b, &chat_c]
        .into_iter()
        .flat_map(waiting_of)
        .collect();
    let entry = |id: &str| all.iter().find(|w| w.approval_id == id).unwrap().clone();
    let ids =
        |page: &[Waiting]| -> Vec<String> { page.iter().map(|w| w.approval_id.clone()).collect() };
    let query = |keys: Vec<String>, now: Option<Millis>, after: Option<Cursor>, limit| InboxQuery {
        keys,
        now,
        after,
        limit,
    };
    let cai = audience_of(&test_signer("p-cai", &["approver"]));
    let ana = audience_of(&test_signer("p-ana", &[]));
    let local = audience_of(&crate::agent::gate::Signer::local());

    for s in stores {
        // Cai has the role: the approvals that want it, oldest first, whole — not another
        // role's, not a chat's own-person approval, not one whose deadline passed.
        let page = s
            .inbox(&query(cai.clone(), Some(100), None, 10))
            .await
            .unwrap();
        assert_eq!(page, [entry("apv-1"), entry("apv-3")]);
        // Ana asked apv-1 and apv-2 (her own); apv-5 wants any person but has expired…
        let page = s
            .inbox(&query(ana.clone(), Some(100), None, 10))
            .await
            .unwrap();
        assert_eq!(ids(&page), ["apv-1", "apv-2"]);
        // …and is found while its deadline is ahead.
        let page = s
            .inbox(&query(ana.clone(), Some(40), None, 10))
            .await
            .unwrap();
        assert_eq!(ids(&page), ["apv-1", "apv-5", "apv-2"]);
        // The local person sees only their own chats' (apv-5, expired or not).
        assert!(
            s.inbox(&query(local.clone(), Some(100), None, 10))
                .await
                .unwrap()
                .is_empty()
        );
        let page = s
            .inbox(&query(local.clone(), None, None, 10))
            .await
            .unwrap();
        assert_eq!(ids(&page), ["apv-5"]);
        // What someone signed already, with who signed it.
        let signed = s
            .inbox(&query(vec![SIGNED.into()], None, None, 10))
            .await
            .unwrap();
        assert_eq!(ids(&signed), ["apv-3"]);
        assert_eq!(signed[0].signatures[0].person, "p-cai");
        // One approval, found by its id; nothing and no keys find nothing.
        assert_eq!(s.waiting("apv-4").await.unwrap(), Some(entry("apv-4")));
        assert_eq!(s.waiting("apv-none").await.unwrap(), None);
        assert!(
            s.inbox(&query(Vec::new(), None, None, 10))
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            s.waiting_counts().await.unwrap(),
            [(
                ("process_payment".to_owned(), Some("two-people".to_owned())),
                5
            )]
        );
    }

    // Pages: a cursor goes on after the last approval seen; approvals asked meanwhile before it
    // do not shift a page, those after it come in their place.
    let approvers = vec!["role:approver".to_owned()];
    let first = store
        .inbox(&query(approvers.clone(), Some(100), None, 1))
        .await
        .unwrap();
    assert_eq!(ids(&first), ["apv-1"]);
    let mut early = Ask::new("apv-0", 5);
    early.needs = approver("approver");
    let mut between = Ask::new("apv-12", 12);
    between.needs = approver("approver");
    store
        .commit(&asking("chat-d", Some("p-dan"), &[early, between]), &[])
        .await
        .unwrap();
    let mut seen = ids(&first);
    let mut after = first.last().map(Waiting::cursor);
    for s in stores.iter().cycle().take(4) {
        let page = s
            .inbox(&query(approvers.clone(), Some(100), after.clone(), 1))
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(Waiting::cursor);
        seen.extend(ids(&page));
    }
    assert_eq!(seen, ["apv-1", "apv-12", "apv-3"]);

    // A signature changes the entry and its keys; a decision takes the approvals away, from
    // every instance's inbox.
    let mut signed_one = one;
    signed_one.signed_by = vec!["p-ben".into()];
    let mut two = Ask::new("apv-2", 20);
    two.needs = Requirement::default();
    store
        .commit(&asking("chat-a", Some("p-ana"), &[signed_one, two]), &[])
        .await
        .unwrap();
    store.commit(&finished(chat_b), &[]).await.unwrap();
    for s in stores {
        let signed = s
            .inbox(&query(vec![SIGNED.into()], None, None, 10))
            .await
            .unwrap();
        assert_eq!(ids(&signed), ["apv-1"]);
        assert_eq!(signed[0].signatures[0].person, "p-ben");
        assert_eq!(s.waiting("apv-3").await.unwrap(), None);
        let page = s
            .inbox(&query(cai.clone(), Some(100), None, 10))
            .await
            .unwrap();
        assert_eq!(ids(&page), ["apv-0", "apv-1", "apv-12"]);
        assert_eq!(s.unindexed().await.unwrap(), Vec::<String>::new());
    }
}
