//! The audit chain in Postgres (ADR 0029). Every instance appends to one chain: the transaction
//! that appends locks the head's row (`audit_chain`, `FOR UPDATE`) as its last step before it
//! commits, numbers its records after the head, writes them and moves the head. A second
//! transaction waits for the lock and then reads the head the first one committed (READ
//! COMMITTED re-reads a locked row once it is free), so records are numbered in commit order
//! with no gaps and no forks, and a record is never visible before one with a smaller number.
//! The lock is held for two statements and the commit.

use deadpool_postgres::GenericClient;

use super::{
    PostgresStore,
    audit::{RECORD_COLUMNS, record},
    err, execute_in,
};
use crate::agent::{
    audit::chain::{ChainHead, Head, event_digest, hex, link, parse_hash},
    store::{AuditRecord, Checkpoint, StoreError, audit, encode::Chained, encode::stored_event},
};

/// Appends `events` after the chain's head inside `tx` (a transaction: the head stays locked
/// until it ends).
pub(super) async fn append(tx: &impl GenericClient, events: &[Chained]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let context = "cannot append to the audit log";
    let stmt = tx
        .prepare_cached("SELECT seq, hash FROM audit_chain WHERE id FOR UPDATE")
        .await
        .map_err(err(context))?;
    let row = tx.query_one(&stmt, &[]).await.map_err(err(context))?;
    let seq: i64 = row.try_get(0).map_err(err(context))?;
    let hash: &str = row.try_get(1).map_err(err(context))?;
    let mut head = Head {
        seq,
        hash: parse_hash(hash)
            .ok_or_else(|| StoreError::new("the audit chain's head hash is unreadable"))?,
    };
    let n = events.len();
    let (mut seqs, mut hashes) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for chained in events {
        head = head.next(&chained.digest);
        seqs.push(head.seq);
        hashes.push(hex(&head.hash));
    }
    let at: Vec<i64> = events.iter().map(|c| c.event.at_ms).collect();
    let kinds: Vec<&str> = events.iter().map(|c| c.event.kind.as_str()).collect();
    let sessions: Vec<&str> = events.iter().map(|c| c.event.session_id.as_str()).collect();
    let turns: Vec<&str> = events.iter().map(|c| c.event.turn_id.as_str()).collect();
    let calls: Vec<&str> = events
        .iter()
        .map(|c| c.event.tool_call_id.as_str())
        .collect();
    let approvals: Vec<Option<&str>> = events
        .iter()
        .map(|c| c.event.approval_id.as_deref())
        .collect();
    let tools: Vec<&str> = events.iter().map(|c| c.event.tool.as_str()).collect();
    let digests: Vec<&str> = events
        .iter()
        .map(|c| c.event.args_digest.as_str())
        .collect();
    let jsons: Vec<&str> = events.iter().map(|c| c.json.as_str()).collect();
    let head_hash = hex(&head.hash);
    execute_in(
        tx,
        "WITH appended AS (
             INSERT INTO audit (seq, at_ms, kind, session_id, turn_id, tool_call_id, approval_id,
                                tool, args_digest, event, hash)
             SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[],
                                  $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::TEXT[], $9::TEXT[],
                                  $10::TEXT[], $11::TEXT[]))
         UPDATE audit_chain SET seq = $12, hash = $13 WHERE id",
        &[
            &seqs, &at, &kinds, &sessions, &turns, &calls, &approvals, &tools, &digests, &jsons,
            &hashes, &head.seq, &head_hash,
        ],
        context,
    )
    .await?;
    Ok(())
}

/// Starts the chain in the migration's transaction (see the SQLite store's `chain::start`):
/// the records already there chained oldest first, the head and where they end kept, and the
/// passkeys registered before recorded after them.
pub(super) async fn start(tx: &impl GenericClient) -> Result<(), StoreError> {
    let context = "cannot chain the audit log";
    let rows = tx
        .query("SELECT seq, event FROM audit ORDER BY seq", &[])
        .await
        .map_err(err(context))?;
    let mut head = Head::default();
    for row in &rows {
        let seq: i64 = row.try_get(0).map_err(err(context))?;
        let json: &str = row.try_get(1).map_err(err(context))?;
        let event = stored_event(seq, json)?;
        let digest = event_digest(&serde_json::to_value(&event).unwrap_or_default());
        head = Head {
            seq,
            hash: link(&head.hash, seq, &digest),
        };
        tx.execute(
            "UPDATE audit SET hash = $2 WHERE seq = $1",
            &[&seq, &hex(&head.hash)],
        )
        .await
        .map_err(err(context))?;
    }
    tx.execute(
        "INSERT INTO audit_chain (id, since, seq, hash) VALUES (TRUE, $1, $1, $2)",
        &[&head.seq, &hex(&head.hash)],
    )
    .await
    .map_err(err("cannot start the audit chain"))?;
    let passkeys = super::people::all_enrolled(tx).await?;
    let events: Vec<_> = passkeys
        .iter()
        .map(|(person, passkey)| audit::enrolled(Some(person), passkey))
        .collect();
    append(tx, &Chained::all(&events)?).await?;
    if !rows.is_empty() {
        tracing::info!(
            records = rows.len(),
            passkeys = passkeys.len(),
            "the audit log is a chain from now on"
        );
    }
    Ok(())
}

fn checkpoint_of(row: &tokio_postgres::Row) -> Result<Checkpoint, tokio_postgres::Error> {
    Ok(Checkpoint {
        seq: row.try_get(0)?,
        hash: row.try_get(1)?,
        since: row.try_get(2)?,
        at_ms: row.try_get(3)?,
        key: row.try_get(4)?,
        signature: row.try_get(5)?,
    })
}

impl PostgresStore {
    pub(super) async fn read_chain_head(&self) -> Result<ChainHead, StoreError> {
        let context = "cannot read the audit chain's head";
        let row = self
            .row(
                "SELECT since, seq, hash FROM audit_chain WHERE id",
                &[],
                context,
            )
            .await?
            .ok_or_else(|| StoreError::new("the audit chain has no head"))?;
        let hash: &str = row.try_get(2).map_err(err(context))?;
        Ok(ChainHead {
            since: row.try_get(0).map_err(err(context))?,
            head: Head {
                seq: row.try_get(1).map_err(err(context))?,
                hash: parse_hash(hash)
                    .ok_or_else(|| StoreError::new("the audit chain's head hash is unreadable"))?,
            },
        })
    }

    pub(super) async fn read_chain(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let context = "cannot read the audit chain";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql =
            format!("SELECT {RECORD_COLUMNS} FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2");
        let rows = self.rows(&sql, &[&after, &limit], context).await?;
        rows.iter().map(|row| record(row, context)).collect()
    }

    pub(super) async fn write_checkpoint(&self, c: &Checkpoint) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO audit_checkpoints (seq, hash, since, at_ms, key, signature)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (seq) DO NOTHING",
            &[&c.seq, &c.hash, &c.since, &c.at_ms, &c.key, &c.signature],
            "cannot keep a checkpoint",
        )
        .await?;
        Ok(())
    }

    pub(super) async fn read_checkpoints(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Checkpoint>, StoreError> {
        let context = "cannot read the checkpoints";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.rows(
            "SELECT seq, hash, since, at_ms, key, signature FROM audit_checkpoints
             WHERE seq > $1 ORDER BY seq LIMIT $2",
            &[&after, &limit],
            context,
        )
        .await?
        .iter()
        .map(checkpoint_of)
        .collect::<Result<_, _>>()
        .map_err(err(context))
    }

    pub(super) async fn read_last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        let context = "cannot read the checkpoints";
        self.row(
            "SELECT seq, hash, since, at_ms, key, signature FROM audit_checkpoints
             ORDER BY seq DESC LIMIT 1",
            &[],
            context,
        )
        .await?
        .map(|row| checkpoint_of(&row))
        .transpose()
        .map_err(err(context))
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
        self.execute(
            "INSERT INTO audit_policies (digest, text, first_ms) VALUES ($1, $2, $3)
             ON CONFLICT (digest) DO NOTHING",
            &[&digest, &text, &at],
            "cannot keep a policy text",
        )
        .await?;
        Ok(())
    }

    pub(super) async fn policy(&self, digest: &str) -> Result<Option<String>, StoreError> {
        let context = "cannot read a policy text";
        self.row(
            "SELECT text FROM audit_policies WHERE digest = $1",
            &[&digest],
            context,
        )
        .await?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(err(context))
    }

    pub(super) async fn policies(&self) -> Result<Vec<(String, String)>, StoreError> {
        let context = "cannot read the policy texts";
        self.rows(
            "SELECT digest, text FROM audit_policies ORDER BY first_ms, digest",
            &[],
            context,
        )
        .await?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(err(context))
    }
}
