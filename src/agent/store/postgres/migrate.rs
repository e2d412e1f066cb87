//! The schema: the migrations in `migrations/postgres/`, compiled in, and how an instance
//! applies the ones its database lacks (one at a time across instances, under an advisory lock).

use deadpool_postgres::Client;

use super::{chain, err};
use crate::agent::store::StoreError;

/// The migrations, in order: `(version, sql)`.
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        include_str!("../../../../migrations/postgres/0001_schema.sql"),
    ),
    (
        2,
        include_str!("../../../../migrations/postgres/0002_session_versions.sql"),
    ),
    (
        3,
        include_str!("../../../../migrations/postgres/0003_turn_owners.sql"),
    ),
    (
        4,
        include_str!("../../../../migrations/postgres/0004_passkey_ceremonies.sql"),
    ),
    (
        5,
        include_str!("../../../../migrations/postgres/0005_attachments.sql"),
    ),
    (
        6,
        include_str!("../../../../migrations/postgres/0006_passkey_ceremony_owners.sql"),
    ),
    (
        7,
        include_str!("../../../../migrations/postgres/0007_spending_reservations.sql"),
    ),
    (
        8,
        include_str!("../../../../migrations/postgres/0008_audit_chain.sql"),
    ),
    (
        9,
        include_str!("../../../../migrations/postgres/0009_inbox.sql"),
    ),
    (
        10,
        include_str!("../../../../migrations/postgres/0010_append_only_chats.sql"),
    ),
    (
        11,
        include_str!("../../../../migrations/postgres/0011_deadline_index.sql"),
    ),
    (
        12,
        include_str!("../../../../migrations/postgres/0012_daily_spending.sql"),
    ),
];

/// The migration that makes the audit log a chain ([`chain::start`] runs right after it).
pub(super) const CHAIN_MIGRATION: i64 = 8;

/// The advisory lock instances take while they migrate ("CSGN", then 1 for the schema).
const MIGRATION_LOCK: i64 = 0x4353_474e_0000_0001;

/// Brings the database to the newest schema this build knows, in one transaction under
/// [`MIGRATION_LOCK`]: an instance that starts while another migrates waits, then finds nothing
/// left to do.
pub(super) async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(err("cannot begin a migration"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(err("cannot take the migration lock"))?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS countersign_schema (version BIGINT NOT NULL)")
        .await
        .map_err(err("cannot make the schema version table"))?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(max(version), 0)::BIGINT FROM countersign_schema",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(err("cannot read the schema version"))?;
    let newest = MIGRATIONS.last().map_or(0, |(v, _)| *v);
    if current > newest {
        return Err(StoreError::new(format!(
            "the database was migrated by a newer Countersign (schema {current}; this build \
             knows up to {newest})"
        )));
    }
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| StoreError::caused_by(format!("migration {version} failed"), e))?;
        if version == CHAIN_MIGRATION {
            chain::start(&tx).await?;
        }
        tx.execute(
            "INSERT INTO countersign_schema (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(err("cannot record the schema version"))?;
        tracing::info!(version, "database migrated");
    }
    tx.commit()
        .await
        .map_err(err("cannot commit the migrations"))
}
