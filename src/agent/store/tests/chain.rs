//! The audit chain's contract (ADR 0029).

use super::*;

/// The audit chain (ADR 0029): every append, a commit's or not, extends one chain, numbered
/// from the head without gaps; checkpoints are kept once per record; the checkpoint key and
/// the policy texts stay as first kept.
pub(crate) async fn chain_contract(store: &dyn SessionStore, policies: &dyn PolicyStore) {
    use crate::agent::audit::{
        chain::{Walk, hex},
        checkpoint::CheckpointKey,
    };
    let start = store.chain_head().await.unwrap();
    assert_eq!(start.head.seq, 0, "a new database's chain is empty");
    let mut a = SessionRecord::new("chain-a", 10);
    a.turn = Some(turn(TurnStatus::AwaitingPerson));
    let asked = audit::sample("chain-a", AuditKind::Requested, json!({"amount": 150}));
    let signed = audit::sample("chain-a", AuditKind::Countersigned, json!({"amount": 150}));
    store
        .commit(&a, &[asked.clone(), signed.clone()])
        .await
        .unwrap();
    let revoked = audit::sample("", AuditKind::Revoked, json!({"grant": "g"}));
    policies
        .append_audit(std::slice::from_ref(&revoked))
        .await
        .unwrap();
    // A commit without events leaves the chain as it is.
    store.save(&a).await.unwrap();

    let chain = store.chain(0, 10).await.unwrap();
    let seqs: Vec<i64> = chain.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    let events: Vec<&AuditEvent> = chain.iter().map(|r| &r.event).collect();
    assert_eq!(events, [&asked, &signed, &revoked]);
    let mut walk = Walk::from_start(0);
    for r in &chain {
        walk.record(r).expect("each record links to the one before");
    }
    let head = store.chain_head().await.unwrap();
    assert_eq!(head.head, walk.head());
    assert_eq!(
        store.chain(1, 1).await.unwrap()[0].seq,
        2,
        "paged after a record"
    );
    // The log's own reads carry the same hashes.
    let newest = store.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(newest[0].hash, chain[2].hash);
    let of_approval = store
        .audit(&AuditQuery {
            approval: Some("approval-1".into()),
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(of_approval.len(), 3, "the sample's approval");

    // Checkpoints: kept once per record, oldest first.
    let seed = store.audit_secret().await.unwrap();
    assert_eq!(
        store.audit_secret().await.unwrap(),
        seed,
        "one key for good"
    );
    let key = CheckpointKey::from_seed(&seed);
    assert_eq!(store.last_checkpoint().await.unwrap(), None);
    let first = key.sign(
        2,
        &crate::agent::audit::chain::parse_hash(chain[1].hash.as_deref().unwrap()).unwrap(),
        0,
        100,
    );
    let second = key.sign(3, &head.head.hash, 0, 200);
    store.keep_checkpoint(&first).await.unwrap();
    store.keep_checkpoint(&second).await.unwrap();
    store
        .keep_checkpoint(&key.sign(3, &head.head.hash, 0, 300))
        .await
        .unwrap();
    assert_eq!(
        store.checkpoints(0, 10).await.unwrap(),
        [first.clone(), second.clone()]
    );
    assert_eq!(
        store.checkpoints(2, 10).await.unwrap(),
        std::slice::from_ref(&second)
    );
    assert_eq!(store.last_checkpoint().await.unwrap(), Some(second.clone()));
    assert_eq!(second.verify(Some(&key.public())).unwrap(), head.head.hash);
    assert_eq!(second.hash, hex(&head.head.hash));

    // Policy texts, by digest, as first kept.
    policies
        .keep_policy_text("d1", "permit (principal, action, resource);", 5)
        .await
        .unwrap();
    policies
        .keep_policy_text("d1", "something else", 6)
        .await
        .unwrap();
    assert_eq!(
        policies.policy_text("d1").await.unwrap().as_deref(),
        Some("permit (principal, action, resource);")
    );
    assert_eq!(policies.policy_text("d2").await.unwrap(), None);
    assert_eq!(policies.policy_texts().await.unwrap().len(), 1);
}
