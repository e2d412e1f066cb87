//! The chats' contracts: a commit lands whole or not at all, a chat reads back as committed
//! (what later commits append, edit or remove included, ADR 0038), entries are decoded only when
//! read (ADR 0045), attachments; and the old columns the migration tests start from.

use super::*;
use crate::agent::store::encode::decode_resolutions;

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
    let mut twin = bad.wallet.transactions.read()[0].clone();
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

/// SQL that makes the wallet of [`a_paying_chat`] as a version before running totals wrote it
/// (SQLite, then Postgres).
pub(crate) const FORGET_THE_TOTALS: [&str; 2] = [
    "UPDATE sessions SET wallet = json_remove(wallet, '$.paid_cents', '$.payees')
     WHERE id = 'old-wallet'",
    "UPDATE sessions SET wallet = (wallet::jsonb - 'paid_cents' - 'payees')::TEXT
     WHERE id = 'old-wallet' RETURNING 1",
];

/// A chat whose wallet paid three times more, committed to `store` (then made old with
/// [`FORGET_THE_TOTALS`]).
pub(crate) async fn a_paying_chat(store: &dyn SessionStore) -> SessionRecord {
    let mut chat = waiting_record_named("old-wallet");
    for (i, payee) in ["Ana", "ben", "ANA"].into_iter().enumerate() {
        chat.wallet
            .pay(
                &format!("old-wallet-call-{i}"),
                Money::parse("3", "USD").unwrap(),
                payee,
                "",
                1,
                || format!("txn-{i}"),
            )
            .unwrap();
    }
    commit_as_a_session(store, &mut chat).await;
    chat
}

/// A wallet a version before running totals wrote: a load of the head reads its payments whole
/// and sums them, once — its next commit keeps the totals, and later heads count the payments.
pub(crate) async fn old_wallet_contract(store: &dyn SessionStore, chat: &SessionRecord) {
    use crate::agent::history::HistoryItem;
    let mut head = store.load_head(&chat.id).await.unwrap().unwrap().record;
    assert_eq!(
        head.wallet.transactions.whole().map(<[_]>::len),
        Some(chat.wallet.transactions.len()),
        "an old wallet's payments are read whole"
    );
    assert_eq!(head.wallet, chat.wallet, "summed as the payments made them");
    let all = head.wallet.transactions.read();
    assert_eq!(
        head.wallet.paid_cents(),
        all.iter().map(|t| t.amount_cents).sum::<i64>()
    );
    assert!(head.wallet.payees.contains("ana") && head.wallet.payees.contains("ben"));
    assert_eq!(
        all.iter()
            .filter(|t| t.recipient.eq_ignore_ascii_case("ana"))
            .count(),
        2
    );
    head.history.push(HistoryItem::user("later"));
    store.save(&head).await.unwrap();
    let again = store.load_head(&chat.id).await.unwrap().unwrap().record;
    assert!(
        again.wallet.transactions.read().is_empty(),
        "counted after the commit"
    );
    assert_eq!(
        (again.wallet.paid_cents(), &again.wallet.payees),
        (chat.wallet.paid_cents(), &chat.wallet.payees)
    );
}

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

    head_load_contract(store).await;
}

/// ADR 0045's amendment: a chat loaded with its head only knows how long its lists are and has
/// their last entries, not the rest; what an answer does (change the last message, append,
/// commit) works on that, and the entries read afterwards are the ones it left, so the copy,
/// filled, is the chat as stored. A list shortened meanwhile takes the rows before its end.
async fn head_load_contract(store: &dyn SessionStore) {
    use crate::agent::history::HistoryItem;
    use crate::protocol::UiMessage;

    let mut whole = long_record("head", 300);
    commit_as_a_session(store, &mut whole).await;
    let mut chat = store.load_head("head").await.unwrap().unwrap().record;
    assert_eq!((chat.history.len(), chat.messages.len()), (300, 300));
    assert_eq!(
        (chat.history.unread(), chat.messages.unread()),
        (299, 299),
        "only the last entry of each list is read"
    );
    assert_eq!(chat.turn, whole.turn);
    assert_eq!(
        (
            chat.wallet.balance_cents,
            chat.wallet.paid_cents(),
            &chat.wallet.payees
        ),
        (
            whole.wallet.balance_cents,
            whole.wallet.paid_cents(),
            &whole.wallet.payees
        ),
    );
    assert!(
        chat.wallet.transactions.len() == whole.wallet.transactions.len()
            && chat.wallet.transactions.read().is_empty(),
        "the payments are counted, none is read"
    );
    assert!(
        !chat.resolved_approvals.is_whole() && chat.resolved_approvals.is_empty(),
        "no answered approval is read"
    );
    assert_eq!(chat.messages.last_mut().unwrap().unwrap().id, "m299");
    assert!(chat.messages.decoded().unwrap_err().not_read());

    // An answer's changes, committed from the head: the rows not read stay as they are.
    chat.messages.last_mut().unwrap().unwrap().id = "m299-answered".into();
    chat.history.push(HistoryItem::user("answered"));
    chat.history.mark_all_changed();
    store.save(&chat).await.unwrap();
    chat.mark_committed();
    *whole.messages.last_mut().unwrap().unwrap() = chat
        .messages
        .iter()
        .next_back()
        .unwrap()
        .unwrap()
        .into_owned();
    whole.history.push(HistoryItem::user("answered"));

    let lens = [chat.history.unread(), chat.messages.unread()];
    let [history, messages] = store.read_entries("head", lens).await.unwrap();
    assert_eq!((history.len(), messages.len()), (299, 299));
    chat.history.fill(history).unwrap();
    chat.messages.fill(messages).unwrap();
    read_the_rest(store, &mut chat).await;
    assert_eq!(chat, whole, "the head and the rows read later are one chat");
    assert_eq!(store.load("head").await.unwrap().unwrap().record, whole);

    // Shortened from the head (a list cut before its first entry read), then grown again.
    let mut chat = store.load_head("head").await.unwrap().unwrap().record;
    chat.messages.truncate(100);
    chat.messages
        .push(UiMessage::user_text("after", "after the cut"));
    store.save(&chat).await.unwrap();
    chat.mark_committed();
    let lens = [chat.history.unread(), chat.messages.unread()];
    assert_eq!(lens, [300, 100]);
    let [history, messages] = store.read_entries("head", lens).await.unwrap();
    chat.history.fill(history).unwrap();
    chat.messages.fill(messages).unwrap();
    read_the_rest(store, &mut chat).await;
    whole.messages.truncate(100);
    whole
        .messages
        .push(UiMessage::user_text("after", "after the cut"));
    assert_eq!(chat, whole);
    assert_eq!(store.load("head").await.unwrap().unwrap().record, whole);

    // A list read from a chat shorter than the copy expects does not fill.
    let mut copy = store.load_head("head").await.unwrap().unwrap().record;
    let [_, short] = store.read_entries("head", [0, 50]).await.unwrap();
    assert!(copy.messages.fill(short).is_err());

    resolutions_by_id_contract(store).await;
    payments_counted_contract(store).await;
}

/// Makes `chat` (loaded with its head) whole in its answered approvals and its payments.
async fn read_the_rest(store: &dyn SessionStore, chat: &mut SessionRecord) {
    let all = store.read_resolutions(&chat.id, None).await.unwrap();
    chat.resolved_approvals
        .fill(None, decode_resolutions(&chat.id, &all).unwrap());
    let stored = store.load(&chat.id).await.unwrap().unwrap().record;
    chat.wallet
        .transactions
        .fill(stored.wallet.transactions.read())
        .unwrap();
}

/// ADR 0045's fourth amendment: a load of the head counts a wallet's payments and reads none —
/// its running totals are what a decision needs of them; a payment made on the head is
/// committed after the ones it did not read, which stay as they are.
async fn payments_counted_contract(store: &dyn SessionStore) {
    let usd = |amount: &str| Money::parse(amount, "USD").unwrap();
    let mut chat = waiting_record_named("paying");
    let (first, paid_first) = (chat.wallet.transactions.len(), chat.wallet.paid_cents());
    for i in 0..30 {
        let payee = if i % 2 == 0 { "Hanako" } else { " KEN " };
        let txn = format!("txn-{i}");
        chat.wallet
            .pay(
                &format!("paying-call-{i}"),
                usd("1.5"),
                payee,
                "",
                i,
                || txn,
            )
            .unwrap();
    }
    commit_as_a_session(store, &mut chat).await;

    let mut head = store.load_head("paying").await.unwrap().unwrap().record;
    let wallet = &head.wallet;
    assert_eq!(wallet.transactions.len(), first + 30);
    assert!(
        wallet.transactions.whole().is_none() && wallet.transactions.read().is_empty(),
        "no payment is read"
    );
    assert_eq!(
        (wallet.paid_cents(), &wallet.payees, wallet.balance_cents),
        (
            paid_first + 4_500,
            &chat.wallet.payees,
            chat.wallet.balance_cents
        )
    );
    assert!(wallet.has_paid("hanako") && wallet.has_paid("Ken") && !wallet.has_paid("Kenji"));

    // A payment on the head, committed after the ones it did not read.
    for wallet in [&mut head.wallet, &mut chat.wallet] {
        wallet
            .pay("paying-call-30", usd("2"), "Kenji", "", 30, || {
                "txn-30".into()
            })
            .unwrap();
    }
    store.save(&head).await.unwrap();
    head.mark_committed();
    let whole = store.load("paying").await.unwrap().unwrap().record;
    assert_eq!(whole.wallet, chat.wallet);
    assert_eq!(
        whole.wallet.transactions.whole().map(<[_]>::len),
        Some(first + 31)
    );
    let again = store.load_head("paying").await.unwrap().unwrap().record;
    assert_eq!(
        (again.wallet.paid_cents(), again.wallet.transactions.len()),
        (paid_first + 4_700, first + 31)
    );
    assert!(again.wallet.has_paid(" KENJI"));
}

/// ADR 0045's third amendment: a chat loaded with its head reads its answered approvals by id
/// (an id never answered is simply not there); what its commits change of them is written
/// key by key — an approval reopened that the copy never read is removed all the same, and the
/// stored map is never replaced by the few the copy knows, even when a failed commit makes the
/// next one write everything.
async fn resolutions_by_id_contract(store: &dyn SessionStore) {
    use crate::agent::gate::ApprovalResolution;
    let mut whole = long_record("by-id", 20);
    commit_as_a_session(store, &mut whole).await;
    let mut chat = store.load_head("by-id").await.unwrap().unwrap().record;
    let asked = ["approval-007".to_owned(), "approval-999".to_owned()];
    let json = store.read_resolutions("by-id", Some(&asked)).await.unwrap();
    let found = decode_resolutions("by-id", &json).unwrap();
    assert_eq!(
        found.keys().collect::<Vec<_>>(),
        ["approval-007"],
        "only the ids asked for, and only those answered"
    );
    assert_eq!(
        found["approval-007"],
        whole.resolved_approvals["approval-007"]
    );
    chat.resolved_approvals.fill(Some(asked.to_vec()), found);
    assert!(chat.resolved_approvals.unread_of(&asked).is_empty());
    assert_eq!(
        chat.resolved_approvals
            .unread_of(&["approval-003".to_owned()]),
        ["approval-003"]
    );

    // One answered now, one reopened without having been read; everything counts as changed
    // (as after a failed commit).
    let denied = ApprovalResolution::Denied {
        at_ms: 99,
        reason: None,
    };
    chat.resolved_approvals
        .insert("approval-new".into(), denied.clone());
    chat.resolved_approvals.remove(&"approval-012".to_owned());
    chat.mark_all_changed();
    store.save(&chat).await.unwrap();
    whole
        .resolved_approvals
        .insert("approval-new".into(), denied);
    whole.resolved_approvals.remove(&"approval-012".to_owned());
    let stored = store.load("by-id").await.unwrap().unwrap().record;
    assert_eq!(stored.resolved_approvals, whole.resolved_approvals);
    let all = store.read_resolutions("by-id", None).await.unwrap();
    assert_eq!(
        decode_resolutions("by-id", &all).unwrap(),
        *whole.resolved_approvals
    );
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
