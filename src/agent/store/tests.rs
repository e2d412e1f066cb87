//! The contracts every store keeps, and the fixtures their tests share.

use serde_json::json;

use super::*;
use crate::agent::{
    gate::{CallPhase, StepCall},
    history::ToolCall,
    session::{TurnEntry, TurnRecord, TurnStatus},
    tools::{ToolLocation, Wallet},
};
use crate::protocol::money::Money;

pub(crate) fn turn(status: TurnStatus) -> TurnRecord {
    TurnRecord {
        id: "t1".into(),
        message_id: "m1".into(),
        status,
        steps: 1,
        calls: Vec::new(),
        held_text: Vec::new(),
        usage: Default::default(),
        inputs: 0,
        transport: crate::agent::Transport::Sse,
        timing: None,
    }
}

/// The chat `"chat"` waiting for the approval `approval-chat` (see [`waiting_record_named`]).
pub(crate) fn waiting_record() -> SessionRecord {
    waiting_record_named("chat")
}

/// A chat whose turn waits for the approval `approval-<id>`, after one payment (`txn-<id>`).
pub(crate) fn waiting_record_named(id: &str) -> SessionRecord {
    let mut record = SessionRecord::new(id, 5);
    let mut t = turn(TurnStatus::AwaitingPerson);
    t.calls.push(StepCall {
        call: ToolCall {
            id: "call-1".into(),
            name: "process_payment".into(),
            args: json!({"amount": 50, "recipient": "Hanako"}),
            provider_data: None,
        },
        location: ToolLocation::Server,
        phase: CallPhase::AwaitingApproval {
            approval_id: format!("approval-{id}"),
            requested_at_ms: 5,
            deadline_ms: 300_005,
        },
        announced: false,
        gated_by: Some(format!("approval-{id}")),
        ruling: None,
        signatures: Vec::new(),
        signed_args: None,
        proposed_by: None,
        denied_by: None,
        revision: 0,
        revision_shown: 0,
        dropped: Vec::new(),
        countersign_closed: false,
    });
    record.turn = Some(t);
    let mut wallet = Wallet::default();
    wallet
        .pay(
            "call-0",
            Money::parse("10", "USD").unwrap(),
            "Bob",
            "",
            4,
            || format!("txn-{id}"),
        )
        .unwrap();
    record.wallet = wallet;
    record
}

/// Adds a second payment to `record`'s wallet: 5 USD to Ken at 6 (`txn-3`, call `call-3`).
pub(crate) fn pay_ken(record: &mut SessionRecord) {
    record
        .wallet
        .pay(
            "call-3",
            Money::parse("5", "USD").unwrap(),
            "Ken",
            "",
            6,
            || "txn-3".into(),
        )
        .unwrap();
}

/// 64 sessions committed at once, one of which breaks the ledger's uniqueness (two payments for
/// one tool call under different transaction ids): that commit fails alone, leaving nothing
/// behind, while the 63 around it land. The caller counts the views with its own SQL.
pub(crate) async fn a_bad_commit_among_many_fails_alone<S: SessionStore + Clone>(store: &S) {
    let mut bad = SessionRecord::new("bad", 1);
    bad.wallet
        .pay(
            "call-9",
            Money::parse("1", "USD").unwrap(),
            "A",
            "",
            1,
            || "txn-a".into(),
        )
        .unwrap();
    let mut twin = bad.wallet.transactions[0].clone();
    twin.id = "txn-b".into();
    bad.wallet.transactions.push(twin);
    let mut tasks = Vec::new();
    for i in 0..64 {
        let store = store.clone();
        let record = if i == 32 {
            bad.clone()
        } else {
            waiting_record_named(&format!("chat-{i}"))
        };
        let event = audit::sample(&record.id, AuditKind::Requested, json!({"i": i}));
        tasks.push(tokio::spawn(async move {
            store.commit(&record, std::slice::from_ref(&event)).await
        }));
    }
    let mut failed = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        if let Err(e) = task.await.unwrap() {
            failed.push((i, e));
        }
    }
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, 32);
    assert!(failed[0].1.report().contains("ledger"), "{}", failed[0].1);
    assert!(store.load("bad").await.unwrap().is_none());
    assert_eq!(store.list().await.unwrap().len(), 63);
    assert_eq!(store.unfinished().await.unwrap().len(), 63);
    let audit = store.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(
        audit.len(),
        63,
        "the failed commit's audit event is not kept"
    );
    assert!(audit.iter().all(|r| r.event.session_id != "bad"));
}

/// The contract every store keeps; run against each implementation.
pub(crate) async fn store_contract(store: &dyn SessionStore) {
    attachment_contract(store).await;
    let mut a = SessionRecord::new("a", 10);
    store.save(&a).await.unwrap();
    store.save(&SessionRecord::new("b", 20)).await.unwrap();
    assert_eq!(store.list().await.unwrap(), ["b", "a"]);
    a.updated_at_ms = 30;
    a.turn = Some(turn(TurnStatus::AwaitingPerson));
    let event = audit::sample("a", AuditKind::Requested, json!({"amount": 50}));
    store
        .commit(&a, std::slice::from_ref(&event))
        .await
        .unwrap();
    assert_eq!(store.list().await.unwrap(), ["a", "b"]);
    assert_eq!(store.load("a").await.unwrap().unwrap().record, a);
    assert!(store.load("zzz").await.unwrap().is_none());
    assert_eq!(store.unfinished().await.unwrap(), ["a"]);
    assert_eq!(store.approval_owner("apv-x").await.unwrap(), None);

    let mut b = SessionRecord::new("b", 40);
    b.turn = Some(turn(TurnStatus::Finished));
    let denied = audit::sample("b", AuditKind::Denied, json!({"amount": 5}));
    store
        .commit(&b, std::slice::from_ref(&denied))
        .await
        .unwrap();
    assert_eq!(store.unfinished().await.unwrap(), ["a"]);

    let all = store.audit(&AuditQuery::default()).await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].event, denied, "newest first");
    assert_eq!(all[1].event, event);
    assert!(all[0].seq > all[1].seq);
    let only_a = AuditQuery {
        session: Some("a".into()),
        ..AuditQuery::default()
    };
    assert_eq!(store.audit(&only_a).await.unwrap().len(), 1);
    let denials = AuditQuery {
        kind: Some(AuditKind::Denied),
        ..AuditQuery::default()
    };
    assert_eq!(
        store.audit(&denials).await.unwrap()[0].event.session_id,
        "b"
    );
    let before = AuditQuery {
        before: Some(all[0].seq),
        ..AuditQuery::default()
    };
    assert_eq!(store.audit(&before).await.unwrap()[0].event, event);

    // A paused turn's log comes back with its record, and only while it is that turn's.
    let mut p = SessionRecord::new("p", 50);
    p.turn = Some(turn(TurnStatus::AwaitingPerson));
    let log = vec![
        TurnEntry::Chunk(crate::protocol::Chunk::start("m1")),
        TurnEntry::Chunk(crate::protocol::Chunk::tool_approval_request(
            "apv-1", "call-1",
        )),
        TurnEntry::Pause,
    ];
    store.commit_paused(&p, &[], &log).await.unwrap();
    let loaded = store.load("p").await.unwrap().unwrap();
    assert_eq!(
        (loaded.record, loaded.paused_log),
        (p.clone(), Some(log.clone()))
    );
    // A later commit of the same turn keeps the log; a new turn (or the end) drops it.
    p.updated_at_ms = 60;
    store.save(&p).await.unwrap();
    assert_eq!(
        store.load("p").await.unwrap().unwrap().paused_log,
        Some(log)
    );
    p.turn = Some(TurnRecord {
        id: "t2".into(),
        ..turn(TurnStatus::AwaitingPerson)
    });
    store.save(&p).await.unwrap();
    assert_eq!(store.load("p").await.unwrap().unwrap().paused_log, None);
    p.turn = Some(turn(TurnStatus::Finished));
    store.save(&p).await.unwrap();
    assert_eq!(store.load("p").await.unwrap().unwrap().paused_log, None);

    // Whose chat it is, read without its entries: nobody's yet, someone's, or no such chat.
    assert_eq!(store.chat_owner("p").await.unwrap(), Some(None));
    assert_eq!(store.chat_owner("zzz").await.unwrap(), None);
    let mut owned = SessionRecord::new("owned", 70);
    owned.owner = Some("p-ann".into());
    store.save(&owned).await.unwrap();
    assert_eq!(
        store.chat_owner("owned").await.unwrap(),
        Some(Some("p-ann".into()))
    );
    // A chat stored before anyone's first turn, which that turn then makes theirs: the commit
    // records the owner (it did not: the row kept no owner, so the chat read back was no one's).
    store
        .save(&SessionRecord::new("claimed", 80))
        .await
        .unwrap();
    let mut claimed = store.load("claimed").await.unwrap().unwrap().record;
    claimed.owner = Some("p-ben".into());
    claimed.updated_at_ms = 90;
    store.commit(&claimed, &[]).await.unwrap();
    assert_eq!(
        store.chat_owner("claimed").await.unwrap(),
        Some(Some("p-ben".into()))
    );
    assert_eq!(
        store.load("claimed").await.unwrap().unwrap().record,
        claimed
    );
    // Written once: a later commit naming someone else does not take the chat.
    let mut taken = claimed.clone();
    taken.owner = Some("p-eve".into());
    store.commit(&taken, &[]).await.unwrap();
    assert_eq!(
        store.chat_owner("claimed").await.unwrap(),
        Some(Some("p-ben".into()))
    );
}

/// A chat of `turns` turns (a history item, a message and an answered approval each) that waits
/// for an approval after one payment.
pub(crate) fn long_record(id: &str, turns: i64) -> SessionRecord {
    use crate::agent::{gate::ApprovalResolution, history::HistoryItem};
    let mut chat = waiting_record_named(id);
    for i in 0..turns {
        chat.history.push(HistoryItem::user(format!("turn {i}")));
        chat.messages.push(crate::protocol::UiMessage::user_text(
            format!("m{i}"),
            format!("turn {i} \u{1F4B8} \"quoted\""),
        ));
        chat.resolved_approvals.insert(
            format!("approval-{i:03}"),
            ApprovalResolution::Approved {
                at_ms: i,
                edited: false,
            },
        );
    }
    pay_ken(&mut chat);
    chat
}

/// SQL that breaks every stored entry of [`a_long_chat`] except its last message: what
/// [`undecoded_entries_contract`] opens (the same text on SQLite and Postgres).
pub(crate) const BREAK_ALL_BUT_THE_LAST_MESSAGE: &str = "UPDATE session_entries SET body = '{oops'
     WHERE session_id = 'long' AND (list = 0 OR (list = 1 AND position < 999))";

/// A chat of 1,000 turns, committed to `store` (its entries are then broken with
/// [`BREAK_ALL_BUT_THE_LAST_MESSAGE`]).
pub(crate) async fn a_long_chat(store: &dyn SessionStore) -> SessionRecord {
    let mut chat = long_record("long", 1_000);
    store.save(&chat).await.unwrap();
    chat.mark_committed();
    chat
}

/// ADR 0045: a chat's entries are decoded only when read. [`a_long_chat`], all of whose entries
/// but its last message no longer decode, still opens, counts its entries, has its last message
/// changed and an entry appended, and commits them (writing back the rest as they were read);
/// only a reader of a whole list meets the broken entry, as an error naming it. On the code
/// before ADR 0045 the load itself failed.
pub(crate) async fn undecoded_entries_contract(store: &dyn SessionStore) {
    use crate::agent::history::HistoryItem;
    let mut chat = store.load("long").await.unwrap().unwrap().record;
    assert_eq!((chat.history.len(), chat.messages.len()), (1_000, 1_000));
    assert_eq!(chat.history.undecoded(), 1_000, "the load decodes no entry");
    assert_eq!(chat.messages.last_mut().unwrap().unwrap().id, "m999");
    assert_eq!(
        chat.messages.undecoded(),
        999,
        "only the last message is decoded"
    );
    assert_eq!(chat.history.decoded().unwrap_err().index, 0);
    chat.history.push(HistoryItem::user("one more"));
    chat.messages.last_mut().unwrap().unwrap().id = "m999-edited".into();
    store.save(&chat).await.unwrap();
    let mut again = store.load("long").await.unwrap().unwrap().record;
    assert_eq!(again.history.len(), 1_001);
    let last = again
        .history
        .iter()
        .next_back()
        .unwrap()
        .unwrap()
        .into_owned();
    assert_eq!(last, HistoryItem::user("one more"));
    assert_eq!(
        again.messages.last_mut().unwrap().unwrap().id,
        "m999-edited"
    );
    assert_eq!(
        again.messages.iter().nth(998).unwrap().unwrap_err().index,
        998
    );
    assert_eq!(again.turn, chat.turn);
    assert_eq!(again.resolved_approvals, chat.resolved_approvals);
    assert_eq!(again.wallet, chat.wallet);
}

/// A chat's columns as stores wrote them before ADR 0038 (its row held the whole chat, as JSON).
pub(crate) struct ColumnsBefore0038 {
    pub(crate) history: String,
    pub(crate) messages: String,
    pub(crate) wallet: String,
    pub(crate) turn: Option<String>,
    pub(crate) resolved: String,
    pub(crate) tool_state: String,
}

/// A chat's columns as stores wrote them before ADR 0038: for the tests that migrate such a
/// database.
pub(crate) fn columns_before_0038(r: &SessionRecord) -> ColumnsBefore0038 {
    use encode::to_json;
    ColumnsBefore0038 {
        history: to_json(&r.history).unwrap(),
        messages: to_json(&r.messages).unwrap(),
        wallet: to_json(&r.wallet).unwrap(),
        turn: r.turn.as_ref().map(|t| to_json(t).unwrap()),
        resolved: to_json(&r.resolved_approvals).unwrap(),
        tool_state: to_json(&r.tool_state).unwrap(),
    }
}

/// Commits `record` as a session does (only what changed since its last commit, ADR 0038), then
/// checks that the chat reads back exactly as it is.
async fn commit_as_a_session(store: &dyn SessionStore, record: &mut SessionRecord) {
    store.save(record).await.unwrap();
    record.mark_committed();
    let loaded = store.load(&record.id).await.unwrap().unwrap().record;
    assert_eq!(&loaded, record);
}

/// A chat's growing parts (its history, messages, payments and answered approvals, ADR 0038):
/// whatever later commits append, edit or remove — each writing only what changed, on top of
/// what an earlier commit or another copy of the store wrote — the chat reads back as it was
/// committed, a long one included.
pub(crate) async fn journal_contract(store: &dyn SessionStore) {
    use crate::agent::{gate::ApprovalResolution, history::HistoryItem};
    use crate::protocol::UiMessage;

    let mut chat = long_record("journal", 400);
    commit_as_a_session(store, &mut chat).await;

    // What a restarted server (or another instance) reads is where it goes on from.
    let mut chat = store.load("journal").await.unwrap().unwrap().record;
    chat.history.push(HistoryItem::user("appended"));
    chat.messages
        .push(UiMessage::user_text("m-new", "appended"));
    pay_ken(&mut chat);
    chat.resolved_approvals.insert(
        "approval-new".into(),
        ApprovalResolution::Denied {
            at_ms: 9,
            reason: Some("no".into()),
        },
    );
    commit_as_a_session(store, &mut chat).await;

    // An old message edited, the last one edited, an answered approval removed.
    *chat.messages.get_mut(3).unwrap().unwrap() = UiMessage::user_text("m3", "edited long after");
    *chat.messages.last_mut().unwrap().unwrap() = UiMessage::user_text("m-new", "edited at once");
    chat.resolved_approvals.remove(&"approval-007".to_owned());
    commit_as_a_session(store, &mut chat).await;

    // Messages and history items removed; the rest changed through the whole list.
    chat.messages.truncate(250);
    chat.history
        .all_mut()
        .unwrap()
        .retain(|h| !matches!(h, HistoryItem::User { text, .. } if text.ends_with('5')));
    chat.resolved_approvals.clear();
    commit_as_a_session(store, &mut chat).await;

    // Emptied, then grown again.
    chat.messages.truncate(0);
    commit_as_a_session(store, &mut chat).await;
    chat.messages.push(UiMessage::user_text("again", "again"));
    commit_as_a_session(store, &mut chat).await;
    assert_eq!(
        store
            .load("journal")
            .await
            .unwrap()
            .unwrap()
            .record
            .messages
            .len(),
        1
    );

    // Another chat's entries are its own.
    let mut other = waiting_record_named("journal-2");
    other.messages.push(UiMessage::user_text("o", "other"));
    commit_as_a_session(store, &mut other).await;
    let loaded = store.load("journal").await.unwrap().unwrap().record;
    assert_eq!(loaded, chat);
}

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

/// Sign-ins: one secret for good; ended sessions are listed until they expire.
pub(crate) async fn tool_list_contract(store: &dyn ToolListStore) {
    assert_eq!(store.kept_tool_list("files").await.unwrap(), None);
    store.keep_tool_list("files", "[1]", 1).await.unwrap();
    store.keep_tool_list("files", "[2]", 2).await.unwrap();
    store.keep_tool_list("other", "[]", 2).await.unwrap();
    assert_eq!(
        store.kept_tool_list("files").await.unwrap().as_deref(),
        Some("[2]")
    );
    assert_eq!(
        store.kept_tool_list("other").await.unwrap().as_deref(),
        Some("[]")
    );
}

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

/// Decisions in these contracts are made on day 0, after the fixtures' payments (at 4).
const NOW: Millis = 10;

/// A claim of `cents` by call `call` of `chat`, through `grant`.
fn claim(chat: &str, call: &str, cents: i64, grant: Option<&str>) -> Claim {
    Claim {
        chat: chat.into(),
        call: call.into(),
        cents,
        grant: grant.map(Into::into),
    }
}

/// Reserves `claims` on `store` at `at`: how it went, and the day's total the decision saw.
async fn reserve_at(store: &dyn PolicyStore, at: Millis, claims: Vec<Claim>) -> (Reserved, i64) {
    let mut seen = None;
    let reserved = store
        .reserve(at, &mut |spent| {
            seen = Some(spent.today_cents);
            claims.clone()
        })
        .await
        .unwrap();
    (reserved, seen.expect("the decision saw the day's spending"))
}

/// The day's total at [`NOW`], and the budget grant's use (cents, uses) as the store has them,
/// both from `spent` and from `grants`.
async fn totals(store: &dyn PolicyStore) -> (i64, i64, u64) {
    let spent = store.spent(NOW).await.unwrap();
    let listed = store.grants().await.unwrap();
    let grant = listed.iter().find(|g| g.id == "g-budget").unwrap();
    let seen = spent.grants.iter().find(|g| g.id == "g-budget").unwrap();
    assert_eq!((seen.used_cents, seen.uses), (grant.used_cents, grant.uses));
    (spent.today_cents, grant.used_cents, grant.uses)
}

/// Budgets and daily totals (issue #33): reservations count once, all or nothing, never past a
/// grant's budget; a payment counts once whether reserved, paid, or both; what did not run goes
/// back, once; a revocation keeps the use and stops the grant.
pub(crate) async fn policy_contract<S: SessionStore + PolicyStore>(store: &S) {
    // A budget of 50 USD that used 10 with the call it was granted with.
    let mut grant = Grant::sample("g-budget", "process_payment");
    grant.used_cents = 1_000;
    store.save_grant(&grant).await.unwrap();
    assert_eq!(totals(store).await, (0, 1_000, 0));

    // A 10 USD payment (call-0 of "chat") runs by the grant: the day and the grant count it.
    let paying = claim("chat", "call-0", 1_000, Some("g-budget"));
    let kept = reserve_at(store, NOW, vec![paying.clone()]).await;
    assert_eq!(kept, (Reserved::Kept, 0));
    assert_eq!(totals(store).await, (1_000, 2_000, 1));
    // Kept again (a retry, a restart): it counts once.
    assert_eq!(
        reserve_at(store, NOW, vec![paying]).await,
        (Reserved::Kept, 1_000)
    );
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // All or nothing: a claim past the budget (31 USD of the 30 left) refuses the other one too.
    let past = vec![
        claim("chat", "call-5", 500, None),
        claim("other", "call-6", 3_100, Some("g-budget")),
    ];
    assert_eq!(
        reserve_at(store, NOW, past).await,
        (Reserved::Refused, 1_000)
    );
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // The payment is made and committed: its ledger row counts it, not twice, and the grant
    // keeps its use; the next reservation sweeps its reservation away.
    store.commit(&waiting_record(), &[]).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // A call that did not run gives back its share of the day and of the grant, once.
    let unused = claim("other", "call-7", 2_000, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![unused]).await,
        (Reserved::Kept, 1_000)
    );
    assert_eq!(totals(store).await, (3_000, 4_000, 2));
    let ended = Unused {
        chat: "other".into(),
        call: "call-7".into(),
    };
    store.release(std::slice::from_ref(&ended)).await.unwrap();
    store.release(&[ended]).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));
    // The paid call's reservation is gone: releasing it gives nothing back.
    let paid = Unused {
        chat: "chat".into(),
        call: "call-0".into(),
    };
    store.release(&[paid]).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));

    // Exactly the budget fits (30 USD left).
    let rest = claim("other", "call-8", 3_000, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![rest]).await,
        (Reserved::Kept, 1_000)
    );
    assert_eq!(totals(store).await, (4_000, 5_000, 2));
    let none_left = claim("other", "call-9", 1, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![none_left]).await.0,
        Reserved::Refused
    );

    // A revocation written later keeps the use, and nothing reserves from a revoked grant.
    store
        .release(&[Unused {
            chat: "other".into(),
            call: "call-8".into(),
        }])
        .await
        .unwrap();
    grant.revoked_at_ms = Some(NOW);
    store.save_grant(&grant).await.unwrap();
    assert_eq!(totals(store).await, (1_000, 2_000, 1));
    let after = claim("other", "call-10", 100, Some("g-budget"));
    assert_eq!(
        reserve_at(store, NOW, vec![after]).await.0,
        Reserved::Refused
    );

    // Nor from one that expired (at 100 000 ms), though it has room.
    let other = Grant::sample("g-other", "process_payment");
    store.save_grant(&other).await.unwrap();
    let late = claim("other", "call-11", 100, Some("g-other"));
    assert_eq!(
        reserve_at(store, 100_000, vec![late.clone()]).await.0,
        Reserved::Refused
    );
    assert_eq!(
        reserve_at(store, 99_999, vec![late]).await.0,
        Reserved::Kept
    );

    // The next UTC day starts from nothing.
    let tomorrow = crate::agent::policy::spending::start_of_day(NOW) + 86_400_000;
    assert_eq!(store.spent(tomorrow).await.unwrap().today_cents, 0);
}

/// Reservations decided at once through `stores` (handles of one database: an instance each)
/// never fit more under a limit than fits: 30 claims of 7 USD, each kept only while the day's
/// total stays within 100 USD, keep 14.
pub(crate) async fn reservation_race_contract(stores: &[&dyn PolicyStore]) {
    let attempts = (0..30).map(|i| {
        let store = stores[i % stores.len()];
        async move {
            let call = format!("race-{i}");
            let mut fits = false;
            let reserved = store
                .reserve(NOW, &mut |spent| {
                    fits = spent.today_cents + 700 <= 10_000;
                    if fits {
                        vec![claim("race", &call, 700, None)]
                    } else {
                        Vec::new()
                    }
                })
                .await
                .unwrap();
            reserved == Reserved::Kept && fits
        }
    });
    let kept = futures::future::join_all(attempts)
        .await
        .into_iter()
        .filter(|kept| *kept)
        .count();
    assert_eq!(kept, 14);
    for store in stores {
        assert_eq!(store.spent(NOW).await.unwrap().today_cents, 9_800);
    }
}

#[tokio::test]
async fn the_memory_store_keeps_the_contract() {
    store_contract(&MemoryStore::default()).await;
    inbox_contract(&[&MemoryStore::default()]).await;
    journal_contract(&MemoryStore::default()).await;
    policy_contract(&MemoryStore::default()).await;
    let store = MemoryStore::default();
    reservation_race_contract(&[&store]).await;
    let chained = MemoryStore::default();
    chain_contract(&chained, &chained).await;
    signin_contract(&MemoryStore::default()).await;
    tool_list_contract(&MemoryStore::default()).await;
    people_contract(&MemoryStore::default()).await;
}

#[tokio::test]
async fn the_memory_store_forgets_a_paused_log_once_its_turn_is_over() {
    let store = MemoryStore::default();
    let mut record = SessionRecord::new("a", 10);
    record.turn = Some(turn(TurnStatus::AwaitingPerson));
    store
        .commit_paused(&record, &[], &[TurnEntry::Pause])
        .await
        .unwrap();
    assert_eq!(lock(&store.paused_logs).len(), 1);
    record.turn = Some(turn(TurnStatus::Finished));
    store.commit(&record, &[]).await.unwrap();
    assert!(lock(&store.paused_logs).is_empty());
}

#[test]
fn a_store_error_keeps_its_cause_apart_from_its_message() {
    let e = StoreError::caused_by("cannot commit", std::io::Error::other("disk on fire"));
    assert_eq!(e.to_string(), "session store: cannot commit");
    let cause = std::error::Error::source(&e).map(ToString::to_string);
    assert_eq!(cause.as_deref(), Some("disk on fire"));
    assert_eq!(e.report(), "session store: cannot commit: disk on fire");
    assert_eq!(StoreError::new("gone").report(), "session store: gone");
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

/// Attachments: kept once per chat by their digest, read back byte for byte, only in their chat.
async fn attachment_contract(store: &dyn SessionStore) {
    let sha = "ab".repeat(32);
    let bytes: Vec<u8> = (0..=255).cycle().take(70_000).collect();
    assert_eq!(store.attachment("a", &sha).await.unwrap(), None);
    store
        .save_attachment("a", &sha, "image/png", &bytes, 1)
        .await
        .unwrap();
    // Kept again (the same message sent twice): nothing changes, no error.
    store
        .save_attachment("a", &sha, "image/jpeg", &bytes, 2)
        .await
        .unwrap();
    assert_eq!(
        store.attachment("a", &sha).await.unwrap(),
        Some(StoredFile {
            media_type: "image/png".into(),
            bytes: bytes.clone(),
        })
    );
    assert_eq!(
        store.attachment("b", &sha).await.unwrap(),
        None,
        "another chat's"
    );
}

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
