//! Attachments in SQLite (migration 11, ADR 0026): a chat's files, each kept once by its SHA-256.

use rusqlite::OptionalExtension;

use super::{SqliteStore, err};
use crate::agent::{
    clock::Millis,
    store::{StoreError, StoredFile},
};

impl SqliteStore {
    /// Keeps `bytes` of `chat` under `sha` (the same file again changes nothing).
    pub(super) async fn keep_file(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        at: Millis,
    ) -> Result<(), StoreError> {
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

    /// The file of `chat` kept under `sha`, if any.
    pub(super) async fn file(
        &self,
        chat: &str,
        sha: &str,
    ) -> Result<Option<StoredFile>, StoreError> {
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
}
