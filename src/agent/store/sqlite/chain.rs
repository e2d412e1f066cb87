//! The audit chain in SQLite (ADR 0029): records appended after the last one, in the writer's
//! transaction (one writer: commit order is the writer's order), checkpoints, policy texts, the
//! checkpoint key's seed, and the chaining of the records that were there before the chain.

use rusqlite::{Connection, OptionalExtension, params};

use super::{
    SqliteStore, StoreError, err,
    sessions::{AUDIT_RECORD_COLUMNS, audit_records},
};
use crate::agent::{
    audit::chain::{ChainHead, Head, event_digest, hex, link, parse_hash},
    store::{AuditRecord, Checkpoint, audit, encode::Chained, encode::stored_event},
};

/// The last record's `seq` and hash (none yet: the chain's start).
fn head(conn: &Connection) -> Result<Head, StoreError> {
    let last: Option<(i64, Option<String>)> = conn
        .prepare_cached("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")
        .and_then(|mut stmt| {
            stmt.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(err("cannot read the audit chain's head"))?;
    match last {
        None => Ok(Head::default()),
        Some((seq, hash)) => Ok(Head {
            seq,
            hash: hash.as_deref().and_then(parse_hash).ok_or_else(|| {
                StoreError::new(format!("audit entry {seq} has no readable chain hash"))
            })?,
        }),
    }
}

/// Appends `events` after the chain's head, inside the caller's transaction.
pub(super) fn append(conn: &Connection, events: &[Chained]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let mut head = head(conn)?;
    for chained in events {
        head = head.next(&chained.digest);
        let event = &chained.event;
        conn.prepare_cached(
            "INSERT INTO audit (seq, at_ms, kind, session_id, turn_id, tool_call_id, approval_id,
                 tool, args_digest, event, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                head.seq,
                event.at_ms,
                event.kind.as_str(),
                event.session_id,
                event.turn_id,
                event.tool_call_id,
                event.approval_id,
                event.tool,
                event.args_digest,
                chained.json,
                hex(&head.hash),
            ])
        })
        .map_err(err("cannot append to the audit log"))?;
    }
    Ok(())
}

/// Starts the chain (in the transaction of the migration that made its tables): the records
/// already there are chained oldest first, `audit_chain.since` remembers where they end, and
/// the passkeys registered before are recorded after them (`enrolled`, with their person's
/// roles now), so that step-ups made with them can be checked against the chain.
pub(super) fn start(tx: &Connection) -> Result<(), StoreError> {
    let rows: Vec<(i64, String)> = tx
        .prepare("SELECT seq, event FROM audit ORDER BY seq")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect()
        })
        .map_err(err("cannot read the audit log to chain it"))?;
    let mut head = Head::default();
    for (seq, json) in &rows {
        let event = stored_event(*seq, json)?;
        let digest = event_digest(&serde_json::to_value(&event).unwrap_or_default());
        head = Head {
            seq: *seq,
            hash: link(&head.hash, *seq, &digest),
        };
        tx.execute(
            "UPDATE audit SET hash = ?2 WHERE seq = ?1",
            params![seq, hex(&head.hash)],
        )
        .map_err(err("cannot chain the audit log"))?;
    }
    tx.execute(
        "INSERT INTO audit_chain (id, since) VALUES (1, ?1)",
        [head.seq],
    )
    .map_err(err("cannot start the audit chain"))?;
    let passkeys = super::people::all_enrolled(tx)?;
    let events: Vec<_> = passkeys
        .iter()
        .map(|(person, passkey)| audit::enrolled(Some(person), passkey))
        .collect();
    append(tx, &Chained::all(&events)?)?;
    if !rows.is_empty() {
        tracing::info!(
            records = rows.len(),
            passkeys = passkeys.len(),
            "the audit log is a chain from now on"
        );
    }
    Ok(())
}

fn checkpoint_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Checkpoint> {
    Ok(Checkpoint {
        seq: row.get(0)?,
        hash: row.get(1)?,
        since: row.get(2)?,
        at_ms: row.get(3)?,
        key: row.get(4)?,
        signature: row.get(5)?,
    })
}

impl SqliteStore {
    pub(super) async fn read_chain_head(&self) -> Result<ChainHead, StoreError> {
        self.read(|conn| {
            let since = conn
                .query_row("SELECT since FROM audit_chain WHERE id = 1", [], |row| {
                    row.get(0)
                })
                .optional()
                .map_err(err("cannot read where the audit chain starts"))?
                .unwrap_or(0);
            Ok(ChainHead {
                head: head(conn)?,
                since,
            })
        })
        .await
    }

    pub(super) async fn read_chain(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let context = "cannot read the audit chain";
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {AUDIT_RECORD_COLUMNS} FROM audit WHERE seq > ?1 ORDER BY seq LIMIT ?2"
                ))
                .map_err(err(context))?;
            audit_records(&mut stmt, [after, limit], context)
        })
        .await
    }

    pub(super) async fn write_checkpoint(&self, c: &Checkpoint) -> Result<(), StoreError> {
        let c = c.clone();
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO audit_checkpoints (seq, hash, since, at_ms, key, signature)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (seq) DO NOTHING",
                params![c.seq, c.hash, c.since, c.at_ms, c.key, c.signature],
            )
            .map(|_| ())
            .map_err(err("cannot keep a checkpoint"))
        })
        .await
    }

    pub(super) async fn read_checkpoints(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Checkpoint>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT seq, hash, since, at_ms, key, signature FROM audit_checkpoints
                 WHERE seq > ?1 ORDER BY seq LIMIT ?2",
            )
            .and_then(|mut stmt| stmt.query_map([after, limit], checkpoint_of)?.collect())
            .map_err(err("cannot read the checkpoints"))
        })
        .await
    }

    pub(super) async fn read_last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT seq, hash, since, at_ms, key, signature FROM audit_checkpoints
                 ORDER BY seq DESC LIMIT 1",
            )
            .and_then(|mut stmt| stmt.query_row([], checkpoint_of).optional())
            .map_err(err("cannot read the checkpoints"))
        })
        .await
    }

    pub(super) async fn checkpoint_seed(&self) -> Result<[u8; 32], StoreError> {
        self.server_secret("audit", "audit key").await
    }

    pub(super) async fn keep_policy(
        &self,
        digest: &str,
        text: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        let (digest, text) = (digest.to_owned(), text.to_owned());
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO audit_policies (digest, text, first_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (digest) DO NOTHING",
                params![digest, text, at],
            )
            .map(|_| ())
            .map_err(err("cannot keep a policy text"))
        })
        .await
    }

    pub(super) async fn policy(&self, digest: &str) -> Result<Option<String>, StoreError> {
        let digest = digest.to_owned();
        self.read(move |conn| {
            conn.query_row(
                "SELECT text FROM audit_policies WHERE digest = ?1",
                [digest],
                |row| row.get(0),
            )
            .optional()
            .map_err(err("cannot read a policy text"))
        })
        .await
    }

    pub(super) async fn policies(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.read(|conn| {
            conn.prepare("SELECT digest, text FROM audit_policies ORDER BY first_ms, digest")
                .and_then(|mut stmt| {
                    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                        .collect()
                })
                .map_err(err("cannot read the policy texts"))
        })
        .await
    }
}
