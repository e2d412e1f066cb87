//! The SQLite schema's migrations (`migrations/`, compiled in): the applied version is SQLite's
//! `user_version`, so a newer binary upgrades an older file at start-up and an older binary
//! refuses a newer file instead of misreading it.

use rusqlite::Connection;

use super::{chain, err};
use crate::agent::store::StoreError;

/// The migrations, in order: `(version, sql)`.
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        include_str!("../../../../migrations/0001_sessions_and_audit.sql"),
    ),
    (
        2,
        include_str!("../../../../migrations/0002_audit_without_autoincrement.sql"),
    ),
    (
        3,
        include_str!("../../../../migrations/0003_paused_turn_log.sql"),
    ),
    (
        4,
        include_str!("../../../../migrations/0004_narrow_views.sql"),
    ),
    (5, include_str!("../../../../migrations/0005_signins.sql")),
    (
        6,
        include_str!("../../../../migrations/0006_tool_state.sql"),
    ),
    (
        7,
        include_str!("../../../../migrations/0007_mcp_tool_lists.sql"),
    ),
    (
        8,
        include_str!("../../../../migrations/0008_grants_and_ledger_time.sql"),
    ),
    (
        9,
        include_str!("../../../../migrations/0009_people_and_passkeys.sql"),
    ),
    (
        10,
        include_str!("../../../../migrations/0010_passkey_ceremonies.sql"),
    ),
    (
        11,
        include_str!("../../../../migrations/0011_attachments.sql"),
    ),
    (
        12,
        include_str!("../../../../migrations/0012_passkey_ceremony_owners.sql"),
    ),
    (
        13,
        include_str!("../../../../migrations/0013_spending_reservations.sql"),
    ),
    (
        14,
        include_str!("../../../../migrations/0014_audit_chain.sql"),
    ),
    (15, include_str!("../../../../migrations/0015_inbox.sql")),
    (
        16,
        include_str!("../../../../migrations/0016_append_only_chats.sql"),
    ),
    (
        17,
        include_str!("../../../../migrations/0017_daily_spending.sql"),
    ),
];

/// The migration that makes the audit log a chain: the records already there are chained right
/// after it, in its transaction ([`chain::start`]).
const CHAIN_MIGRATION: i64 = 14;

pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(err("cannot read the schema version"))?;
    let newest = MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0);
    if current > newest {
        return Err(StoreError::new(format!(
            "the database has schema version {current}, newer than this build knows ({newest}); \
             use a newer Countersign or another COUNTERSIGN_DB"
        )));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let tx = conn
            .transaction()
            .map_err(err("cannot begin a migration"))?;
        tx.execute_batch(sql)
            .map_err(|e| StoreError::caused_by(format!("migration {version} failed"), e))?;
        if *version == CHAIN_MIGRATION {
            chain::start(&tx)?;
        }
        tx.pragma_update(None, "user_version", version)
            .map_err(err("cannot record the schema version"))?;
        tx.commit().map_err(err("cannot commit a migration"))?;
        tracing::info!(version, "database migrated");
    }
    Ok(())
}
