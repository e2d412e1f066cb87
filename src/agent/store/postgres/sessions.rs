//! Reading a stored chat (ADR 0038, ADR 0045): whole, or its head only — the row, the last
//! entries of its lists and their lengths — and the entries a head left unread, taken only
//! while the row's version is the one this instance last read or wrote.

use super::*;

/// The SQL of a stored list of session `s` (ADR 0038): its entries as one JSON array, in order
/// (`json`, not `jsonb`: each entry's text as it was written).
fn stored_list(list: List) -> String {
    format!(
        "COALESCE((SELECT json_agg(e.body::json ORDER BY e.position) FROM session_entries e
                   WHERE e.session_id = s.id AND e.list = {}), '[]'::json)::TEXT",
        list.code()
    )
}

/// The SQL of a stored list of session `s` as its entries' texts, in order: what the record
/// keeps undecoded until a reader needs them (ADR 0045).
fn stored_bodies(list: List) -> String {
    format!(
        "COALESCE((SELECT array_agg(e.body ORDER BY e.position) FROM session_entries e
                   WHERE e.session_id = s.id AND e.list = {}), '{{}}'::TEXT[])",
        list.code()
    )
}

/// The SQL of the last [`TAIL`] entries of a stored list of session `s`, the last first (a load
/// of the head, ADR 0045's amendment): one step down the index whatever the list's length.
fn stored_tail(list: List) -> String {
    format!(
        "ARRAY(SELECT e.body FROM session_entries e WHERE e.session_id = s.id AND e.list = {}
               ORDER BY e.position DESC LIMIT {TAIL})",
        list.code()
    )
}

/// The SQL of the last position of a stored list of session `s` (NULL: it is empty).
fn stored_last(list: List) -> String {
    format!(
        "(SELECT max(e.position) FROM session_entries e WHERE e.session_id = s.id AND e.list = {})",
        list.code()
    )
}

/// The SQL of session `s`'s answered approvals, as one JSON object.
const STORED_RESOLUTIONS: &str = "COALESCE((SELECT json_object_agg(r.approval_id, r.body::json)
                                            FROM session_resolutions r
                                            WHERE r.session_id = s.id), '{}'::json)::TEXT";

/// The columns of a stored session, as [`SessionStore::load`] selects them.
struct SessionRow {
    record: RecordColumns,
    /// The row's version (see [`Versions`]).
    version: i64,
    /// The stored log of a turn (its id and entries), if one is stored.
    log: Option<(String, String)>,
    /// The instance running the turn, if it is running.
    running_on: Option<String>,
    /// Whether that instance is alive.
    owner_alive: bool,
}

impl SessionRow {
    /// The row of a load (`head`: of a load of the head, whose lists are their last entries,
    /// the last first, and their last positions).
    fn of(row: &Row, head: bool) -> Result<Self, StoreError> {
        let list = |at: usize| -> Result<ListTail, StoreError> {
            let bodies: Vec<String> = row.try_get(at).map_err(err("cannot read the session"))?;
            if !head {
                return Ok(ListTail::whole(bodies));
            }
            let last: Option<i64> = row
                .try_get(at + 15)
                .map_err(err("cannot read the session"))?;
            let mut tail = bodies;
            tail.reverse();
            ListTail::of_last(last, tail)
        };
        let (history, messages) = (list(0)?, list(1)?);
        // NULL: the head of a chat whose wallet keeps running totals: its payments are counted.
        let payments = match row
            .try_get::<_, Option<String>>(14)
            .map_err(err("cannot read the session"))?
        {
            Some(json) => PaymentsRead::Whole(json),
            None => {
                let last: Option<i64> = row.try_get(17).map_err(err("cannot read the session"))?;
                PaymentsRead::Counted(ListTail::of_last(last, Vec::new())?.len)
            }
        };
        Self::columns(row, history, messages, payments).map_err(err("cannot read the session"))
    }

    fn columns(
        row: &Row,
        history: ListTail,
        messages: ListTail,
        payments: PaymentsRead,
    ) -> Result<Self, tokio_postgres::Error> {
        let turn_id: Option<String> = row.try_get(9)?;
        let entries: Option<String> = row.try_get(10)?;
        Ok(SessionRow {
            record: RecordColumns {
                history,
                messages,
                wallet: row.try_get(2)?,
                turn: row.try_get(3)?,
                resolved: row.try_get(4)?,
                tool_state: row.try_get(5)?,
                created_at_ms: row.try_get(6)?,
                updated_at_ms: row.try_get(7)?,
                owner: row.try_get(8)?,
                payments,
            },
            log: turn_id.zip(entries),
            version: row.try_get(11)?,
            running_on: row.try_get(12)?,
            owner_alive: row.try_get(13)?,
        })
    }
}

impl PostgresStore {
    /// [`SessionStore::load`], or (`head`) [`SessionStore::load_head`].
    pub(super) async fn load_session(
        &self,
        id: &str,
        head: bool,
    ) -> Result<Option<StoredSession>, StoreError> {
        let lists = if head {
            [
                stored_tail(List::History),
                stored_tail(List::Messages),
                stored_last(List::History),
                stored_last(List::Messages),
                // The payments of a wallet that keeps running totals are counted, not read
                // (ADR 0045, fourth amendment): NULL, and the last one's position. The test is
                // `Wallet::keeps_totals` in SQL; were they ever to disagree, a wallet counted
                // without totals fails to load (`WalletJsonError::NoTotals`), never misreads.
                format!(
                    "CASE WHEN jsonb_typeof(s.wallet::jsonb -> 'paid_cents') = 'number'
                           AND jsonb_typeof(s.wallet::jsonb -> 'payees') = 'array'
                          THEN NULL ELSE {} END",
                    stored_list(List::Payments)
                ),
                stored_last(List::Payments),
            ]
        } else {
            [
                stored_bodies(List::History),
                stored_bodies(List::Messages),
                "NULL::BIGINT".into(),
                "NULL::BIGINT".into(),
                stored_list(List::Payments),
                "NULL::BIGINT".into(),
            ]
        };
        // One statement, so one snapshot, for the record, its turn's log and its owner.
        let Some(row) = self
            .row(
                &format!(
                    "SELECT {}, {}, s.wallet, s.turn, {},
                            s.tool_state, s.created_at_ms, s.updated_at_ms, s.owner,
                            p.turn_id, p.entries, s.version, s.running_on, {}, {}, {}, {}, {}
                     FROM sessions s
                     LEFT JOIN paused_turn_logs p ON p.session_id = s.id
                     WHERE s.id = $1",
                    lists[0],
                    lists[1],
                    // A load of the head reads no answered approval: each is read by id.
                    if head {
                        "NULL::TEXT"
                    } else {
                        STORED_RESOLUTIONS
                    },
                    alive("s.running_on"),
                    lists[4],
                    lists[2],
                    lists[3],
                    lists[5],
                ),
                &[&id],
                "cannot read the session",
            )
            .await?
        else {
            // Not there: a commit expects it still not to be.
            self.versions.set(id, 0);
            return Ok(None);
        };
        let row = SessionRow::of(&row, head)?;
        self.versions.set(id, row.version);
        let record = decode_record(id, row.record)?;
        let status = record.turn.as_ref().map(|t| t.status);
        // A running turn another instance owns is followed, not resumed; one whose owner
        // stopped answering is taken over (by one instance: the others follow it).
        let elsewhere = status == Some(TurnStatus::Running)
            && row.running_on.as_deref() != Some(&*self.instance)
            && (row.owner_alive
                || !self
                    .claim(id, row.running_on.as_deref(), row.version)
                    .await?);
        let (paused_log, followed_log) = match row.log {
            Some((turn_id, entries)) if status == Some(TurnStatus::AwaitingPerson) => {
                (decode_paused_log(&record, &turn_id, &entries)?, None)
            }
            Some((turn_id, entries)) if elsewhere || status.is_some_and(TurnStatus::is_over) => {
                (None, decode_turn_log(&record, &turn_id, &entries)?)
            }
            _ => (None, None),
        };
        Ok(Some(StoredSession {
            record,
            paused_log,
            elsewhere,
            followed_log,
        }))
    }

    /// `row` of chat `id` (its first column the row's version), if no other instance committed
    /// the chat since this one last read or wrote it (the test a commit passes); else a
    /// conflict, as when the chat is gone.
    fn as_last_read(&self, id: &str, row: Option<Row>, context: &str) -> Result<Row, StoreError> {
        let Some(row) = row else {
            return Err(StoreError::conflict(format!(
                "chat {id} is no longer stored"
            )));
        };
        let version: i64 = row.try_get(0).map_err(err(context))?;
        if Some(version) != self.versions.get(id) {
            return Err(StoreError::conflict(format!(
                "chat {id} changed in the database since this instance read it"
            )));
        }
        Ok(row)
    }

    /// Read in one statement with the row's version: the rows are taken only if the version
    /// is the one this instance last read or wrote — the test a commit passes — so no other
    /// instance changed the chat since the head was read (this instance's own commits never
    /// rewrite an entry not read).
    pub(super) async fn entries_before(
        &self,
        id: &str,
        lens: [usize; 2],
    ) -> Result<[Vec<String>; 2], StoreError> {
        let context = "cannot read the session's entries";
        let before = |len: usize| i64::try_from(len).unwrap_or(i64::MAX);
        let (history, messages) = (before(lens[0]), before(lens[1]));
        let row = self
            .row(
                "SELECT s.version,
                        ARRAY(SELECT e.body FROM session_entries e
                              WHERE e.session_id = s.id AND e.list = $2 AND e.position < $3
                              ORDER BY e.position),
                        ARRAY(SELECT e.body FROM session_entries e
                              WHERE e.session_id = s.id AND e.list = $4 AND e.position < $5
                              ORDER BY e.position)
                 FROM sessions s WHERE s.id = $1",
                &[
                    &id,
                    &(List::History.code() as i16),
                    &history,
                    &(List::Messages.code() as i16),
                    &messages,
                ],
                context,
            )
            .await?;
        let row = self.as_last_read(id, row, context)?;
        Ok([
            row.try_get(1).map_err(err(context))?,
            row.try_get(2).map_err(err(context))?,
        ])
    }

    /// [`SessionStore::read_resolutions`]: read in one statement with the row's version, and
    /// taken only if no other instance committed the chat since (as [`Self::entries_before`]).
    pub(super) async fn resolutions_of(
        &self,
        id: &str,
        approvals: Option<&[String]>,
    ) -> Result<String, StoreError> {
        let context = "cannot read the session's answered approvals";
        let row = self
            .row(
                "SELECT s.version,
                        COALESCE((SELECT json_object_agg(r.approval_id, r.body::json)
                                  FROM session_resolutions r
                                  WHERE r.session_id = s.id
                                    AND ($2::TEXT[] IS NULL OR r.approval_id = ANY($2))),
                                 '{}'::json)::TEXT
                 FROM sessions s WHERE s.id = $1",
                &[&id, &approvals],
                context,
            )
            .await?;
        let row = self.as_last_read(id, row, context)?;
        row.try_get(1).map_err(err(context))
    }
}
