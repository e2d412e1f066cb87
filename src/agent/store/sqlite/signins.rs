//! Sign-ins in SQLite (migration 0005), and the server's secrets they and the audit key are
//! made from.

use async_trait::async_trait;
use rusqlite::params;

use super::{SqliteStore, err};
use crate::agent::store::{SignIn, SignInStore, StoreError};

/// How long an expired sign-in stays recorded (for the record; it verifies no more), in ms.
const EXPIRED_SIGNINS_KEPT_MS: i64 = 30 * 24 * 3600 * 1000;

impl SqliteStore {
    /// The server's secret `name` (32 random bytes made at first use, then the same for good;
    /// `what` names it in errors): the sign-in secret, the audit key's seed.
    pub(super) async fn server_secret(
        &self,
        name: &'static str,
        what: &'static str,
    ) -> Result<[u8; 32], StoreError> {
        let fresh = crate::agent::store::fresh_secret()?;
        self.with(move |conn| {
            let (storing, reading) = (
                format!("cannot store the {what}"),
                format!("cannot read the {what}"),
            );
            conn.execute(
                "INSERT INTO server_secrets (name, value) VALUES (?1, ?2)
                 ON CONFLICT (name) DO NOTHING",
                params![name, &fresh[..]],
            )
            .map_err(err(&storing))?;
            let value: Vec<u8> = conn
                .query_row(
                    "SELECT value FROM server_secrets WHERE name = ?1",
                    [name],
                    |row| row.get(0),
                )
                .map_err(err(&reading))?;
            value
                .try_into()
                .map_err(|_| StoreError::new(format!("the stored {what} is not 32 bytes")))
        })
        .await
    }
}

#[async_trait]
impl SignInStore for SqliteStore {
    async fn signing_secret(&self) -> Result<[u8; 32], StoreError> {
        self.server_secret("signin", "sign-in secret").await
    }

    async fn record_signin(&self, signin: &SignIn) -> Result<(), StoreError> {
        let signin = signin.clone();
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO signins (id, created_ms, expires_ms, address, person_id)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    signin.id,
                    signin.created_ms,
                    signin.expires_ms,
                    signin.address,
                    signin.person
                ],
            )
            .map_err(err("cannot record a sign-in"))?;
            // Sessions long expired are of no use to anyone.
            conn.execute(
                "DELETE FROM signins WHERE expires_ms < ?1",
                [signin.created_ms - EXPIRED_SIGNINS_KEPT_MS],
            )
            .map_err(err("cannot forget expired sign-ins"))?;
            Ok(())
        })
        .await
    }

    async fn end_signin(&self, id: &str, at: i64) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.with(move |conn| {
            conn.execute(
                "UPDATE signins SET ended_ms = ?2 WHERE id = ?1 AND ended_ms IS NULL",
                params![id, at],
            )
            .map(|_| ())
            .map_err(err("cannot end a sign-in"))
        })
        .await
    }

    async fn ended_signins(&self, now: i64) -> Result<Vec<(String, i64)>, StoreError> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, expires_ms FROM signins
                     WHERE ended_ms IS NOT NULL AND expires_ms > ?1",
                )
                .map_err(err("cannot list ended sign-ins"))?;
            stmt.query_map([now], |row| Ok((row.get(0)?, row.get(1)?)))
                .and_then(|rows| rows.collect())
                .map_err(err("cannot list ended sign-ins"))
        })
        .await
    }
}
