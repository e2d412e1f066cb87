//! Chats in SQLite: a chat is its `sessions` row plus one row per history item, message and
//! payment (`session_entries`) and per answered approval (`session_resolutions`), read as one
//! snapshot; commits go through the writer thread; attachments, listings and the audit log.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, types::Value as SqlValue};

use super::{SqliteStore, err, inbox};
use crate::agent::{
    clock::Millis,
    inbox::{InboxQuery, Waiting, WaitingCounts},
    session::{SessionRecord, TurnEntry, TurnStatus},
    store::{
        AuditEvent, AuditQuery, AuditRecord, ChainHead, Checkpoint, SessionStore, StoreError,
        StoredFile, StoredSession,
        audit::AuditKind,
        encode::{
            List, ListTail, PaymentsRead, RecordColumns, TAIL, Write, decode_paused_log,
            decode_record, entries_json, resolutions_json, stored_event,
        },
    },
};

/// Reads session `id`'s lists and answered approvals into `columns` (ADR 0038): the history
/// and the messages whole, or (`head`) only their lengths and last entries and no answered
/// approval (ADR 0045).
fn read_entries(
    conn: &Connection,
    id: &str,
    columns: &mut RecordColumns,
    head: bool,
) -> Result<(), StoreError> {
    if head {
        columns.history = read_tail(conn, id, List::History)?;
        columns.messages = read_tail(conn, id, List::Messages)?;
    } else {
        let [history, messages] = read_lists(conn, id, [None, None])?;
        columns.history = ListTail::whole(history);
        columns.messages = ListTail::whole(messages);
    }
    // A head counts the payments of a wallet that keeps running totals (ADR 0045, fourth
    // amendment); any other load reads them whole.
    columns.payments = PaymentsRead::of(
        &columns.wallet,
        head,
        || last_position(conn, id, List::Payments),
        || {
            let payments = read_list(conn, id, List::Payments, None)?;
            Ok(entries_json(payments.iter().map(String::as_str)))
        },
    )?;
    // A load of the head reads no answered approval: each is read by id when named.
    columns.resolved = if head {
        None
    } else {
        Some(read_resolutions(conn, id, None)?)
    };
    Ok(())
}

/// The position of the last entry of session `id`'s `list` (`None`: it is empty): one step
/// down its index.
fn last_position(conn: &Connection, id: &str, list: List) -> Result<Option<i64>, StoreError> {
    conn.prepare_cached(
        "SELECT position FROM session_entries WHERE session_id = ?1 AND list = ?2
         ORDER BY position DESC LIMIT 1",
    )
    .and_then(|mut stmt| {
        stmt.query_row(rusqlite::params![id, list.code()], |row| row.get(0))
            .optional()
    })
    .map_err(err("cannot count the session's entries"))
}

/// Session `id`'s answered approvals of the ids `approvals` (`None`: all), as one JSON object
/// ([`resolutions_json`]): one step down the primary key per id.
fn read_resolutions(
    conn: &Connection,
    id: &str,
    approvals: Option<&[String]>,
) -> Result<String, StoreError> {
    let context = "cannot read the session's answered approvals";
    let resolved: Vec<(String, String)> = match approvals {
        None => conn
            .prepare_cached(
                "SELECT approval_id, body FROM session_resolutions WHERE session_id = ?1
                 ORDER BY approval_id",
            )
            .and_then(|mut stmt| {
                stmt.query_map([id], |row| Ok((row.get(0)?, row.get(1)?)))
                    .and_then(|rows| rows.collect())
            })
            .map_err(err(context))?,
        Some(approvals) => {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT body FROM session_resolutions WHERE session_id = ?1 AND approval_id = ?2",
                )
                .map_err(err(context))?;
            let mut found = Vec::new();
            for approval in approvals {
                let body: Option<String> = stmt
                    .query_row([id, approval.as_str()], |row| row.get(0))
                    .optional()
                    .map_err(err(context))?;
                found.extend(body.map(|body| (approval.clone(), body)));
            }
            found
        }
    };
    resolutions_json(resolved.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

/// The entries of session `id`'s `list` (before position `before`, if given), in order.
fn read_list(
    conn: &Connection,
    id: &str,
    list: List,
    before: Option<usize>,
) -> Result<Vec<String>, StoreError> {
    let context = "cannot read the session's entries";
    let before = before.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
    conn.prepare_cached(
        "SELECT body FROM session_entries WHERE session_id = ?1 AND list = ?2 AND position < ?3
         ORDER BY position",
    )
    .and_then(|mut stmt| {
        stmt.query_map(rusqlite::params![id, list.code(), before], |row| row.get(0))
            .and_then(|rows| rows.collect())
    })
    .map_err(err(context))
}

/// Session `id`'s history and messages (the first `before[i]` entries of each, if given).
fn read_lists(
    conn: &Connection,
    id: &str,
    before: [Option<usize>; 2],
) -> Result<[Vec<String>; 2], StoreError> {
    Ok([
        read_list(conn, id, List::History, before[0])?,
        read_list(conn, id, List::Messages, before[1])?,
    ])
}

/// The length and last entries of session `id`'s `list`: one step down its index, whatever
/// its length (positions are an entry's index, so the last one's is the length less one).
fn read_tail(conn: &Connection, id: &str, list: List) -> Result<ListTail, StoreError> {
    let mut last: Vec<(i64, String)> = conn
        .prepare_cached(
            "SELECT position, body FROM session_entries WHERE session_id = ?1 AND list = ?2
             ORDER BY position DESC LIMIT ?3",
        )
        .and_then(|mut stmt| {
            stmt.query_map(rusqlite::params![id, list.code(), TAIL], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .and_then(|rows| rows.collect())
        })
        .map_err(err("cannot read the session's last entries"))?;
    last.reverse();
    let end = last.last().map(|(position, _)| *position);
    ListTail::of_last(end, last.into_iter().map(|(_, body)| body).collect())
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let id = id.to_owned();
        self.point_read(move |conn| read_session(conn, &id, false))
            .await
    }

    async fn load_head(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let id = id.to_owned();
        self.point_read(move |conn| read_session(conn, &id, true))
            .await
    }

    async fn read_entries(
        &self,
        id: &str,
        lens: [usize; 2],
    ) -> Result<[Vec<String>; 2], StoreError> {
        let id = id.to_owned();
        self.point_read(move |conn| {
            // One snapshot for both lists.
            let conn = conn
                .transaction()
                .map_err(err("cannot begin reading the session's entries"))?;
            read_lists(&conn, &id, lens.map(Some))
        })
        .await
    }

    async fn read_resolutions(
        &self,
        id: &str,
        approvals: Option<&[String]>,
    ) -> Result<String, StoreError> {
        let (id, approvals) = (id.to_owned(), approvals.map(<[String]>::to_vec));
        self.point_read(move |conn| read_resolutions(conn, &id, approvals.as_deref()))
            .await
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        self.write(Write::new(record, audit, None)?).await
    }

    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError> {
        self.write(Write::new(record, audit, Some(log))?).await
    }

    async fn chat_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        let id = id.to_owned();
        self.point_read(move |conn| {
            conn.prepare_cached("SELECT owner FROM sessions WHERE id = ?1")
                .and_then(|mut stmt| stmt.query_row([&id], |row| row.get(0)).optional())
                .map_err(err("cannot look up whose chat this is"))
        })
        .await
    }

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        let approval_id = approval_id.to_owned();
        self.point_read(move |conn| {
            conn.prepare_cached("SELECT session_id FROM pending_approvals WHERE approval_id = ?1")
                .and_then(|mut stmt| stmt.query_row([&approval_id], |row| row.get(0)).optional())
                .map_err(err("cannot look up an approval"))
        })
        .await
    }

    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        let query = query.clone();
        self.read(move |conn| inbox::page(conn, &query)).await
    }

    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        let approval_id = approval_id.to_owned();
        self.point_read(move |conn| inbox::one(conn, &approval_id))
            .await
    }

    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError> {
        self.read(|conn| inbox::counts(conn)).await
    }

    async fn unindexed(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn| inbox::unindexed(conn)).await
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
        // Each file is kept once per chat by its SHA-256: the same file again changes nothing.
        let (chat, sha, media_type, bytes) = (
            chat.to_owned(),
            sha.to_owned(),
            media_type.to_owned(),
            bytes.to_vec(),
        );
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        self.with(move |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO attachments
                     (session_id, sha256, media_type, size, bytes, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut stmt| {
                stmt.execute(rusqlite::params![chat, sha, media_type, size, bytes, at])
            })
            .map(|_| ())
            .map_err(err("cannot keep an attachment"))
        })
        .await
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        let (chat, sha) = (chat.to_owned(), sha.to_owned());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT media_type, bytes FROM attachments WHERE session_id = ?1 AND sha256 = ?2",
            )
            .and_then(|mut stmt| {
                stmt.query_row([&chat, &sha], |row| {
                    Ok(StoredFile {
                        media_type: row.get(0)?,
                        bytes: row.get(1)?,
                    })
                })
                .optional()
            })
            .map_err(err("cannot read an attachment"))
        })
        .await
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare("SELECT id FROM sessions ORDER BY updated_at_ms DESC, id")
                .map_err(err("cannot list sessions"))?;
            stmt.query_map([], |row| row.get(0))
                .and_then(|rows| rows.collect())
                .map_err(err("cannot list sessions"))
        })
        .await
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id FROM sessions WHERE turn_status IN ('running', 'awaiting_person')
                     ORDER BY id",
                )
                .map_err(err("cannot list unfinished turns"))?;
            stmt.query_map([], |row| row.get(0))
                .and_then(|rows| rows.collect())
                .map_err(err("cannot list unfinished turns"))
        })
        .await
    }

    fn database(&self) -> &'static str {
        "sqlite"
    }

    async fn chain_head(&self) -> Result<ChainHead, StoreError> {
        self.read_chain_head().await
    }

    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        self.read_chain(after, limit).await
    }

    async fn keep_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.write_checkpoint(checkpoint).await
    }

    async fn checkpoints(&self, after: i64, limit: usize) -> Result<Vec<Checkpoint>, StoreError> {
        self.read_checkpoints(after, limit).await
    }

    async fn last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        self.read_last_checkpoint().await
    }

    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        self.checkpoint_seed().await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let query = query.clone();
        self.read(move |conn| audit_page(conn, &query)).await
    }
}

/// Session `id` as one snapshot: its row, its entries (`head`: the lists' lengths and last
/// entries only) and answered approvals, and the log of a turn paused for a person.
fn read_session(
    conn: &mut Connection,
    id: &str,
    head: bool,
) -> Result<Option<StoredSession>, StoreError> {
    // One snapshot for the record and its paused log (dropping it ends the read).
    let conn = conn
        .transaction()
        .map_err(err("cannot begin reading the session"))?;
    let columns = conn
        .prepare_cached(
            "SELECT wallet, turn, tool_state, created_at_ms, updated_at_ms, owner
             FROM sessions WHERE id = ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_row([id], |row| {
                Ok(RecordColumns {
                    wallet: row.get(0)?,
                    // An empty text is no turn, as NULL is.
                    turn: row
                        .get::<_, Option<String>>(1)?
                        .filter(|turn| !turn.is_empty()),
                    tool_state: row.get(2)?,
                    created_at_ms: row.get(3)?,
                    updated_at_ms: row.get(4)?,
                    owner: row.get(5)?,
                    history: ListTail::default(),
                    messages: ListTail::default(),
                    payments: PaymentsRead::default(),
                    resolved: None,
                })
            })
            .optional()
        })
        .map_err(err("cannot read the session"))?;
    let Some(mut columns) = columns else {
        return Ok(None);
    };
    read_entries(&conn, id, &mut columns, head)?;
    let record = decode_record(id, columns)?;
    let waiting = record
        .turn
        .as_ref()
        .is_some_and(|t| t.status == TurnStatus::AwaitingPerson);
    let log = if waiting {
        conn.prepare_cached("SELECT turn_id, entries FROM paused_turn_logs WHERE session_id = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([id], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })
                .optional()
            })
            .map_err(err("cannot read the paused turn's log"))?
    } else {
        None
    };
    let paused_log = match log {
        Some((turn_id, entries)) => decode_paused_log(&record, &turn_id, &entries)?,
        None => None,
    };
    Ok(Some(StoredSession::new(record, paused_log)))
}

/// A page of the audit log, newest first, as `query` narrows it.
fn audit_page(conn: &mut Connection, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
    let mut sql = format!("SELECT {AUDIT_RECORD_COLUMNS} FROM audit WHERE 1 = 1");
    let mut args: Vec<SqlValue> = Vec::new();
    if let Some(session) = &query.session {
        sql.push_str(" AND session_id = ?");
        args.push(SqlValue::Text(session.clone()));
    }
    if let Some(tool) = &query.tool {
        sql.push_str(" AND tool = ?");
        args.push(SqlValue::Text(tool.clone()));
    }
    if let Some(kind) = query.kind {
        sql.push_str(" AND kind = ?");
        args.push(SqlValue::Text(AuditKind::as_str(kind).to_owned()));
    }
    if let Some(before) = query.before {
        sql.push_str(" AND seq < ?");
        args.push(SqlValue::Integer(before));
    }
    if let Some(approval) = &query.approval {
        sql.push_str(" AND approval_id = ?");
        args.push(SqlValue::Text(approval.clone()));
    }
    if let Some(person) = &query.visible_to {
        sql.push_str(
            " AND (session_id IN (SELECT id FROM sessions WHERE coalesce(owner, 'local') = ?)
                   OR json_extract(event, '$.actor.person') = ?)",
        );
        args.push(SqlValue::Text(person.clone()));
        args.push(SqlValue::Text(person.clone()));
    }
    sql.push_str(" ORDER BY seq DESC LIMIT ?");
    args.push(SqlValue::Integer(query.limit() as i64));
    let context = "cannot query the audit log";
    let mut stmt = conn.prepare(&sql).map_err(err(context))?;
    audit_records(&mut stmt, rusqlite::params_from_iter(args), context)
}

/// The columns an audit record is read from, in the order [`audit_records`] reads them.
pub(super) const AUDIT_RECORD_COLUMNS: &str = "seq, event, hash";

/// The records `stmt` (a `SELECT` of [`AUDIT_RECORD_COLUMNS`]) finds: the one reader of an audit
/// row, for a page of the log and for the chain alike.
pub(super) fn audit_records(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    context: &str,
) -> Result<Vec<AuditRecord>, StoreError> {
    let rows: Vec<(i64, String, Option<String>)> = stmt
        .query_map(params, |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .and_then(|rows| rows.collect())
        .map_err(err(context))?;
    rows.into_iter()
        .map(|(seq, event, hash)| {
            Ok(AuditRecord {
                seq,
                event: stored_event(seq, &event)?,
                hash,
            })
        })
        .collect()
}
