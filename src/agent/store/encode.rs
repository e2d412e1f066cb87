//! What the SQLite and Postgres stores write and read alike: a session record as the columns of
//! a commit (JSON text, the turn status's name, the pending views, the ledger and audit rows),
//! the record decoded back from its columns, and people's roles and invites' kinds as stored.
//! Each store only moves these values in and out of its own driver's rows.

use std::collections::{BTreeMap, BTreeSet};

use super::{AuditEvent, StoreError, log_of_turn};
use crate::{
    agent::people::{Invite, InviteKind, Person},
    agent::{
        gate::{ApprovalResolution, CallPhase},
        inbox::{Waiting, waiting_call},
        journal::{Appended, Entries, Keyed},
        session::{SessionRecord, TurnEntry, TurnStatus},
        tools::{Transaction as Payment, Wallet},
    },
};

/// A JSON encoding error, under `context`.
fn json_err(context: &str) -> impl Fn(serde_json::Error) -> StoreError + '_ {
    move |e| StoreError::caused_by(context, e)
}

/// `value` as the JSON text a column holds.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(json_err("cannot encode the session"))
}

/// The turn status as stored (`awaiting_person`): its serde name.
fn status_name(status: TurnStatus) -> Result<String, StoreError> {
    match serde_json::to_value(status).map_err(json_err("turn status"))? {
        serde_json::Value::String(s) => Ok(s),
        other => Err(StoreError::new(format!("unexpected turn status {other}"))),
    }
}

/// A commit, encoded before it reaches the database (the SQLite writer thread and a Postgres
/// connection only write): the record's columns, its indexed views, its ledger and the audit
/// rows.
pub(crate) struct Write {
    pub(crate) id: String,
    pub(crate) created_at_ms: i64,
    pub(crate) updated_at_ms: i64,
    pub(crate) status: Option<String>,
    /// The wallet without its payments (those are entries of [`List::Payments`]).
    pub(crate) wallet: String,
    pub(crate) tool_state: String,
    pub(crate) turn: Option<String>,
    /// The entries of the record's lists that changed since its last commit (ADR 0038).
    pub(crate) entries: Vec<ListChange>,
    /// The answered approvals that changed since the last commit.
    pub(crate) resolutions: MapChange,
    /// Whose chat it is (written once, when the row is made).
    pub(crate) owner: Option<String>,
    /// The paused turn's id and log (a JSON array), when the commit carries one.
    pub(crate) log: Option<(String, String)>,
    /// The record's turn is over: its paused log, if any, is dropped.
    pub(crate) turn_over: bool,
    pub(crate) approvals: Vec<PendingApprovalRow>,
    pub(crate) browser_calls: Vec<PendingBrowserRow>,
    /// The payments made since the last commit (all of them when the record is written whole).
    pub(crate) ledger: Vec<Payment>,
    pub(crate) audit: Vec<Chained>,
}

/// A list of a chat's record stored as one row per entry (`session_entries.list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum List {
    History = 0,
    Messages = 1,
    Payments = 2,
}

impl List {
    pub(crate) fn code(self) -> i64 {
        self as i64
    }
}

/// The entries of a list from `from` on, as written now: the rows at `from` and after are
/// replaced by `bodies` (each an entry's JSON), so an append writes the new entries only, and an
/// edit or a removal rewrites from the first entry it touched.
pub(crate) struct ListChange {
    pub(crate) list: List,
    pub(crate) from: i64,
    pub(crate) bodies: Vec<String>,
}

impl ListChange {
    fn of<T: serde::Serialize + Clone>(
        list: List,
        entries: &Entries<T>,
    ) -> Result<ListChange, StoreError> {
        let from = entries.changed_from();
        Ok(ListChange {
            list,
            from: i64::try_from(from).map_err(|_| StoreError::new("a list is too long"))?,
            // A stored entry is written back as it was read: a commit decodes nothing.
            // (`from` is never before an entry not read: those rows stay as they are.)
            bodies: entries
                .bodies_from(from)
                .map_err(|e| StoreError::caused_by("cannot encode the session", e))?,
        })
    }
}

/// What changed in a map of the record (its answered approvals), keyed by the map's keys.
pub(crate) struct MapChange {
    /// Everything may have changed: the stored map is replaced by `upserts`.
    pub(crate) whole: bool,
    /// Entries written (added or changed), with their JSON.
    pub(crate) upserts: Vec<(String, String)>,
    /// Keys no longer in the map.
    pub(crate) removed: Vec<String>,
}

impl MapChange {
    fn of<V: serde::Serialize + Clone>(map: &Keyed<String, V>) -> Result<MapChange, StoreError> {
        let encode = |(k, v): (&String, &V)| Ok((k.clone(), to_json(v)?));
        Ok(match map.changes() {
            None => MapChange {
                whole: true,
                upserts: map.iter().map(encode).collect::<Result<_, StoreError>>()?,
                removed: Vec::new(),
            },
            Some(keys) => {
                let mut change = MapChange {
                    whole: false,
                    upserts: Vec::new(),
                    removed: Vec::new(),
                };
                for key in keys.iter() {
                    match map.get_key_value(key) {
                        Some(entry) => change.upserts.push(encode(entry)?),
                        None => change.removed.push(key.clone()),
                    }
                }
                change
            }
        })
    }
}

/// An audit event encoded for the chain: its JSON (the `event` column) and the digest its chain
/// hash covers (ADR 0029). The store gives it its `seq` and hash when it appends it.
pub(crate) struct Chained {
    pub(crate) event: AuditEvent,
    pub(crate) json: String,
    pub(crate) digest: crate::agent::audit::chain::Hash,
}

impl Chained {
    pub(crate) fn all(events: &[AuditEvent]) -> Result<Vec<Chained>, StoreError> {
        events
            .iter()
            .map(|e| {
                Ok(Chained {
                    event: e.clone(),
                    json: to_json(e)?,
                    digest: crate::agent::audit::chain::digest_of(e),
                })
            })
            .collect()
    }
}

/// An audit event as stored (`json`), decoded and hashed the way it reads back: what the chain
/// of records written before it existed is made of (ADR 0029).
pub(crate) fn stored_event(seq: i64, json: &str) -> Result<AuditEvent, StoreError> {
    AuditEvent::from_json(json)
        .map_err(|e| StoreError::caused_by(format!("audit entry {seq} is unreadable"), e))
}

/// A row of `pending_approvals`: a call of the record's turn that waits for people. `Hash`, so
/// the SQLite writer can tell views that did not change.
#[derive(Hash)]
pub(crate) struct PendingApprovalRow {
    pub(crate) approval_id: String,
    pub(crate) tool_call_id: String,
    pub(crate) tool: String,
    pub(crate) args: String,
    pub(crate) requested_at_ms: i64,
    pub(crate) deadline_ms: i64,
    /// Whose chat it is (the local person's id for theirs).
    pub(crate) owner: String,
    /// The rule that asks, if one does.
    pub(crate) rule: Option<String>,
    /// The inbox's entry ([`Waiting`]) as JSON: what a page shows without opening the chat.
    pub(crate) entry: String,
    /// The keys the inbox finds it by ([`Waiting::keys`]): rows of `approval_keys`.
    pub(crate) keys: Vec<String>,
}

impl PendingApprovalRow {
    /// The row of `waiting`, a call of its chat's turn (`call_args`: the call's own arguments).
    pub(crate) fn of(waiting: &Waiting, call_args: &serde_json::Value) -> Result<Self, StoreError> {
        Ok(PendingApprovalRow {
            approval_id: waiting.approval_id.clone(),
            tool_call_id: waiting.tool_call_id.clone(),
            tool: waiting.tool.clone(),
            args: call_args.to_string(),
            requested_at_ms: waiting.requested_at_ms,
            deadline_ms: waiting.deadline_ms,
            owner: waiting.owner.clone(),
            rule: waiting.rule.clone(),
            entry: to_json(waiting)?,
            keys: waiting.keys(),
        })
    }
}

/// The inbox's entry of a `pending_approvals` row, as stored (`entry`).
pub(crate) fn decode_waiting(approval_id: &str, entry: &str) -> Result<Waiting, StoreError> {
    serde_json::from_str(entry).map_err(|e| {
        StoreError::caused_by(
            format!("waiting approval {approval_id}: its stored entry is unreadable"),
            e,
        )
    })
}

/// A row of `pending_browser_calls`: a call of the record's turn that waits for the browser.
#[derive(Hash)]
pub(crate) struct PendingBrowserRow {
    pub(crate) tool_call_id: String,
    pub(crate) tool: String,
    pub(crate) args: String,
    pub(crate) deadline_ms: i64,
}

impl Write {
    /// Encodes `record` with `audit` and, for [`super::SessionStore::commit_paused`], `log`.
    pub(crate) fn new(
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: Option<&[TurnEntry]>,
    ) -> Result<Self, StoreError> {
        let mut approvals = Vec::new();
        let mut browser_calls = Vec::new();
        let turn_over = record.turn.as_ref().is_some_and(|t| t.status.is_over());
        for call in record.turn.iter().flat_map(|t| &t.calls) {
            // What waits is what `inbox::waiting_of` says: nothing once the turn is over.
            if let Some(waiting) = waiting_call(record, call).filter(|_| !turn_over) {
                approvals.push(PendingApprovalRow::of(&waiting, &call.call.args)?);
            }
            if let CallPhase::AwaitingBrowser {
                args, deadline_ms, ..
            } = &call.phase
            {
                browser_calls.push(PendingBrowserRow {
                    tool_call_id: call.call.id.clone(),
                    tool: call.call.name.clone(),
                    args: args.to_string(),
                    deadline_ms: *deadline_ms,
                });
            }
        }
        Ok(Write {
            id: record.id.clone(),
            created_at_ms: record.created_at_ms,
            updated_at_ms: record.updated_at_ms,
            status: record
                .turn
                .as_ref()
                .map(|t| status_name(t.status))
                .transpose()?,
            wallet: to_json(&Wallet {
                transactions: Appended::default(),
                ..record.wallet.clone()
            })?,
            entries: vec![
                ListChange::of(List::History, &record.history)?,
                ListChange::of(List::Messages, &record.messages)?,
                ListChange::of(List::Payments, record.wallet.transactions.entries())?,
            ],
            resolutions: MapChange::of(&record.resolved_approvals)?,
            tool_state: to_json(&record.tool_state)?,
            owner: record.owner.clone(),
            turn: record.turn.as_ref().map(to_json).transpose()?,
            turn_over,
            log: match (log, &record.turn) {
                (Some(entries), Some(turn)) => Some((turn.id.clone(), to_json(&entries)?)),
                _ => None,
            },
            approvals,
            browser_calls,
            // From the first changed payment on: never one not read (nothing changes those).
            ledger: record
                .wallet
                .transactions
                .since(record.wallet.transactions.entries().changed_from())
                .ok_or_else(|| StoreError::new("a commit would write payments it did not read"))?
                .to_vec(),
            audit: Chained::all(audit)?,
        })
    }
}

/// The stored columns of a session, as read from its row: what [`decode_record`] turns back
/// into a record.
pub(crate) struct RecordColumns {
    /// The lists' entries, each entry's JSON in order: kept undecoded in the record (ADR 0045)
    /// — or, for a load of the head only, their last entries ([`ListTail`]).
    pub(crate) history: ListTail,
    pub(crate) messages: ListTail,
    /// The wallet without its payments, and its payments as the load read them.
    pub(crate) wallet: String,
    pub(crate) payments: PaymentsRead,
    /// `None`: the session has no turn.
    pub(crate) turn: Option<String>,
    /// The answered approvals (a JSON object, [`resolutions_json`]); `None` for a load of the
    /// head only: each is read by id when an answer names it ([`super::SessionStore::read_resolutions`]).
    pub(crate) resolved: Option<String>,
    pub(crate) tool_state: String,
    pub(crate) created_at_ms: i64,
    pub(crate) updated_at_ms: i64,
    pub(crate) owner: Option<String>,
}

/// A wallet's payments as a load read them (ADR 0045, fourth amendment).
#[derive(Debug)]
pub(crate) enum PaymentsRead {
    /// All of them: a JSON array ([`entries_json`]).
    Whole(String),
    /// Only how many there are: a load of the head of a chat whose wallet keeps running totals
    /// ([`Wallet::keeps_totals`]).
    Counted(usize),
}

impl Default for PaymentsRead {
    fn default() -> Self {
        PaymentsRead::Whole("[]".to_owned())
    }
}

impl PaymentsRead {
    /// How a load reads the payments of a wallet stored as `wallet`: counted if `head` and the
    /// wallet keeps running totals (`last` is the last payment's position, `None`: none), else
    /// whole (`whole` reads them).
    pub(crate) fn of(
        wallet: &str,
        head: bool,
        last: impl FnOnce() -> Result<Option<i64>, StoreError>,
        whole: impl FnOnce() -> Result<String, StoreError>,
    ) -> Result<Self, StoreError> {
        if head && Wallet::keeps_totals(wallet) {
            Ok(PaymentsRead::Counted(
                ListTail::of_last(last()?, Vec::new())?.len,
            ))
        } else {
            whole().map(PaymentsRead::Whole)
        }
    }
}

/// A list as a load read it: its length in the store and its last entries (each one's JSON, in
/// order): all of them for a whole load, the last [`TAIL`] for a load of the head only.
#[derive(Default)]
pub(crate) struct ListTail {
    pub(crate) len: usize,
    pub(crate) tail: Vec<String>,
}

impl ListTail {
    /// A list read whole.
    pub(crate) fn whole(bodies: Vec<String>) -> Self {
        ListTail {
            len: bodies.len(),
            tail: bodies,
        }
    }

    /// A list of which only the last entries were read: `last` is the position of the last
    /// entry (`None`: the list is empty), `tail` the last entries.
    pub(crate) fn of_last(last: Option<i64>, tail: Vec<String>) -> Result<Self, StoreError> {
        let len = match last {
            None => 0,
            Some(last) => usize::try_from(last + 1)
                .map_err(|_| StoreError::new(format!("a stored entry at position {last}")))?,
        };
        if tail.len() > len {
            return Err(StoreError::new("a list has more entries than positions"));
        }
        Ok(ListTail { len, tail })
    }
}

/// How many of a list's last entries a load of the head reads: the turn's own message is the
/// last, and it is all an answer reads (ADR 0045, amendment).
pub(crate) const TAIL: i64 = 1;

/// A column of session `id` that does not decode: an error naming the session and the column.
fn unreadable<'a>(
    id: &'a str,
    what: &'static str,
) -> impl Fn(serde_json::Error) -> StoreError + 'a {
    move |e| StoreError::caused_by(format!("session {id}: the stored {what} is unreadable"), e)
}

/// The record of session `id` from its stored columns.
pub(crate) fn decode_record(id: &str, columns: RecordColumns) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        id: id.to_owned(),
        created_at_ms: columns.created_at_ms,
        updated_at_ms: columns.updated_at_ms,
        // Decoded only when read (ADR 0045): an answer to a long chat decodes none of them.
        history: Entries::on_disk(columns.history.len, columns.history.tail),
        messages: Entries::on_disk(columns.messages.len, columns.messages.tail),
        // Its payments read whole, or (a head, with running totals) counted.
        wallet: Wallet::from_stored(
            &columns.wallet,
            match &columns.payments {
                PaymentsRead::Whole(json) => Appended::committed(
                    serde_json::from_str(json).map_err(unreadable(id, "payments"))?,
                ),
                PaymentsRead::Counted(len) => Appended::on_disk(*len),
            },
        )
        .map_err(|e| {
            StoreError::caused_by(format!("session {id}: the stored wallet is unreadable"), e)
        })?,
        tool_state: serde_json::from_str(&columns.tool_state)
            .map_err(unreadable(id, "tool state"))?,
        turn: columns
            .turn
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(unreadable(id, "turn"))?,
        resolved_approvals: match columns.resolved {
            Some(json) => Keyed::committed(decode_resolutions(id, &json)?),
            None => Keyed::by_key(),
        },
        owner: columns.owner,
    })
}

/// Chat `id`'s answered approvals from their JSON object ([`resolutions_json`]).
pub(crate) fn decode_resolutions(
    id: &str,
    json: &str,
) -> Result<BTreeMap<String, ApprovalResolution>, StoreError> {
    serde_json::from_str(json).map_err(unreadable(id, "resolved approvals"))
}

/// The JSON array of a list's stored entries (`bodies`, each an entry's JSON, in order).
pub(crate) fn entries_json<'a>(bodies: impl IntoIterator<Item = &'a str>) -> String {
    let mut json = String::from("[");
    for (i, body) in bodies.into_iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(body);
    }
    json.push(']');
    json
}

/// The JSON object of the stored answered approvals (`(approval id, its JSON)`).
pub(crate) fn resolutions_json<'a>(
    rows: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<String, StoreError> {
    let mut json = String::from("{");
    for (i, (key, body)) in rows.into_iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&to_json(&key)?);
        json.push(':');
        json.push_str(body);
    }
    json.push('}');
    Ok(json)
}

/// The paused log stored for `record` (the turn `turn_id`'s, its JSON `entries`), if it still
/// belongs to the record's turn (see [`log_of_turn`]).
pub(crate) fn decode_paused_log(
    record: &SessionRecord,
    turn_id: &str,
    entries: &str,
) -> Result<Option<Vec<TurnEntry>>, StoreError> {
    let entries = serde_json::from_str(entries).map_err(unreadable(&record.id, "turn log"))?;
    Ok(log_of_turn(record, turn_id, entries))
}

/// The stored log `entries` of turn `turn_id`, if it is the log of `record`'s turn (whatever its
/// status: another instance follows a running or finished turn with it).
pub(crate) fn decode_turn_log(
    record: &SessionRecord,
    turn_id: &str,
    entries: &str,
) -> Result<Option<Vec<TurnEntry>>, StoreError> {
    if record.turn.as_ref().is_none_or(|t| t.id != turn_id) {
        return Ok(None);
    }
    let entries = serde_json::from_str(entries).map_err(unreadable(&record.id, "turn log"))?;
    Ok(Some(entries))
}

/// A person's or an invite's roles as stored (a JSON array).
pub(crate) fn roles_json(roles: &BTreeSet<String>) -> Result<String, StoreError> {
    serde_json::to_string(roles).map_err(|e| StoreError::caused_by("cannot encode roles", e))
}

fn roles_of(text: &str, whose: &str) -> Result<BTreeSet<String>, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::caused_by(format!("the roles of {whose} are unreadable"), e))
}

/// `person`, read from a row, with the roles stored beside it.
pub(crate) fn person_with(mut person: Person, roles: &str) -> Result<Person, StoreError> {
    person.roles = roles_of(roles, &person.id)?;
    Ok(person)
}

/// `invite`, read from a row, with the kind and roles stored beside it.
pub(crate) fn invite_with(
    mut invite: Invite,
    kind: &str,
    roles: &str,
) -> Result<Invite, StoreError> {
    invite.kind = InviteKind::parse(kind)
        .ok_or_else(|| StoreError::new(format!("an invite has the unknown kind {kind:?}")))?;
    invite.roles = roles_of(roles, "an invite")?;
    Ok(invite)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::store::tests::long_record;

    /// What a commit of a long chat carries (ADR 0038): everything the first time, then only
    /// what changed — whatever the chat's length.
    #[test]
    fn a_commit_carries_what_changed_not_what_exists() {
        let mut chat = long_record("c", 1_000);
        let first = Write::new(&chat, &[], None).unwrap();
        let counts = |w: &Write| w.entries.iter().map(|c| c.bodies.len()).collect::<Vec<_>>();
        assert_eq!(counts(&first), [1_000, 1_000, 2]);
        assert!(first.resolutions.whole);
        assert_eq!(first.ledger.len(), 2);

        chat.mark_committed();
        let idle = Write::new(&chat, &[], None).unwrap();
        assert_eq!(counts(&idle), [0, 0, 0]);
        assert!(!idle.resolutions.whole && idle.resolutions.upserts.is_empty());
        assert!(idle.ledger.is_empty());

        chat.history
            .push(crate::agent::history::HistoryItem::user("one more"));
        chat.messages.last_mut().unwrap().unwrap().id = "renamed".into();
        chat.resolved_approvals.remove(&"approval-005".to_owned());
        let next = Write::new(&chat, &[], None).unwrap();
        assert_eq!(counts(&next), [1, 1, 0]);
        assert_eq!(
            next.entries.iter().map(|c| c.from).collect::<Vec<_>>(),
            [1_000, 999, 2]
        );
        assert_eq!(next.resolutions.removed, ["approval-005"]);
        assert!(
            next.wallet.contains("\"transactions\":[]"),
            "{}",
            next.wallet
        );
    }
}
