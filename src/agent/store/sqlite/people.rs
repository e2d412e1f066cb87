//! People, passkeys and one-time links in SQLite (migration 0009).

use std::collections::BTreeSet;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};

use super::{SqliteStore, err};
use crate::{
    agent::people::{Invite, InviteKind, Person, StoredPasskey},
    agent::{
        clock::Millis,
        store::{
            PeopleStore, StoreError,
            encode::{Chained, invite_with, person_with, roles_json},
        },
    },
};

/// A person and their roles (JSON, decoded by the caller).
fn person(row: &Row<'_>) -> rusqlite::Result<(Person, String)> {
    Ok((
        Person {
            id: row.get(0)?,
            name: row.get(1)?,
            roles: BTreeSet::new(),
            created_ms: row.get(3)?,
            invited_by: row.get(4)?,
            revoked_ms: row.get(5)?,
        },
        row.get(2)?,
    ))
}

fn passkey(row: &Row<'_>) -> rusqlite::Result<StoredPasskey> {
    Ok(StoredPasskey {
        id: row.get(0)?,
        person: row.get(1)?,
        label: row.get(2)?,
        key: row.get(3)?,
        created_ms: row.get(4)?,
        last_used_ms: row.get(5)?,
    })
}

/// An invite, its kind and its roles (both decoded by the caller).
fn invite(row: &Row<'_>) -> rusqlite::Result<(Invite, String, String)> {
    Ok((
        Invite {
            digest: row.get(0)?,
            kind: InviteKind::Person,
            person: row.get(2)?,
            name: row.get(3)?,
            roles: BTreeSet::new(),
            created_by: row.get(5)?,
            created_ms: row.get(6)?,
            expires_ms: row.get(7)?,
            used_ms: row.get(8)?,
        },
        row.get(1)?,
        row.get(4)?,
    ))
}

/// Every passkey with its person, oldest first (what the audit chain records when it starts).
pub(super) fn all_enrolled(
    conn: &rusqlite::Connection,
) -> Result<Vec<(Person, StoredPasskey)>, StoreError> {
    let rows: Vec<((Person, String), StoredPasskey)> = conn
        .prepare(
            "SELECT pe.id, pe.name, pe.roles, pe.created_ms, pe.invited_by, pe.revoked_ms,
                    p.id, p.person_id, p.label, p.passkey, p.created_ms, p.last_used_ms
             FROM passkeys p JOIN people pe ON pe.id = p.person_id
             ORDER BY p.created_ms, p.id",
        )
        .and_then(|mut stmt| {
            stmt.query_map([], |row| {
                Ok((
                    person(row)?,
                    StoredPasskey {
                        id: row.get(6)?,
                        person: row.get(7)?,
                        label: row.get(8)?,
                        key: row.get(9)?,
                        created_ms: row.get(10)?,
                        last_used_ms: row.get(11)?,
                    },
                ))
            })?
            .collect()
        })
        .map_err(err("cannot read the passkeys"))?;
    rows.into_iter()
        .map(|((person, roles), passkey)| Ok((person_with(person, &roles)?, passkey)))
        .collect()
}

fn insert_person(conn: &rusqlite::Connection, person: &Person) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO people (id, name, roles, created_ms, invited_by, revoked_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, roles = excluded.roles,
             revoked_ms = coalesce(people.revoked_ms, excluded.revoked_ms)",
        params![
            person.id,
            person.name,
            roles_json(&person.roles)?,
            person.created_ms,
            person.invited_by,
            person.revoked_ms
        ],
    )
    .map_err(err("cannot write a person"))?;
    Ok(())
}

fn insert_passkey(conn: &rusqlite::Connection, passkey: &StoredPasskey) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO passkeys (id, person_id, label, passkey, created_ms, last_used_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (id) DO UPDATE SET label = excluded.label, passkey = excluded.passkey,
             last_used_ms = excluded.last_used_ms",
        params![
            passkey.id,
            passkey.person,
            passkey.label,
            passkey.key,
            passkey.created_ms,
            passkey.last_used_ms
        ],
    )
    .map_err(err("cannot write a passkey"))?;
    Ok(())
}

#[async_trait]
impl PeopleStore for SqliteStore {
    async fn people(&self) -> Result<Vec<Person>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, name, roles, created_ms, invited_by, revoked_ms FROM people
                     ORDER BY created_ms, id",
                )
                .map_err(err("cannot read people"))?;
            let rows = stmt
                .query_map([], person)
                .map_err(err("cannot read people"))?;
            let mut people = Vec::new();
            for row in rows {
                let (person, roles) = row.map_err(err("cannot read people"))?;
                people.push(person_with(person, &roles)?);
            }
            Ok(people)
        })
        .await
    }

    async fn save_person(&self, person: &Person) -> Result<(), StoreError> {
        let person = person.clone();
        self.with(move |conn| insert_person(conn, &person)).await
    }

    async fn passkeys(&self) -> Result<Vec<StoredPasskey>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, person_id, label, passkey, created_ms, last_used_ms FROM passkeys
                     ORDER BY created_ms, id",
                )
                .map_err(err("cannot read passkeys"))?;
            stmt.query_map([], passkey)
                .and_then(|rows| rows.collect())
                .map_err(err("cannot read passkeys"))
        })
        .await
    }

    async fn save_passkey(&self, passkey: &StoredPasskey) -> Result<(), StoreError> {
        let passkey = passkey.clone();
        self.with(move |conn| insert_passkey(conn, &passkey)).await
    }

    async fn save_invite(&self, invite: &Invite) -> Result<(), StoreError> {
        let invite = invite.clone();
        let roles = roles_json(&invite.roles)?;
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO invites (digest, kind, person_id, name, roles, created_by, created_ms,
                     expires_ms, used_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    invite.digest,
                    invite.kind.as_str(),
                    invite.person,
                    invite.name,
                    roles,
                    invite.created_by,
                    invite.created_ms,
                    invite.expires_ms,
                    invite.used_ms
                ],
            )
            .map_err(err("cannot write an invite"))?;
            Ok(())
        })
        .await
    }

    async fn invite(&self, digest: &str) -> Result<Option<Invite>, StoreError> {
        let digest = digest.to_owned();
        self.read(move |conn| {
            let found = conn
                .query_row(
                    "SELECT digest, kind, person_id, name, roles, created_by, created_ms,
                         expires_ms, used_ms
                     FROM invites WHERE digest = ?1",
                    [&digest],
                    invite,
                )
                .optional()
                .map_err(err("cannot read an invite"))?;
            found
                .map(|(invite, kind, roles)| invite_with(invite, &kind, &roles))
                .transpose()
        })
        .await
    }

    async fn keep_ceremony(
        &self,
        challenge: &str,
        owner: &str,
        state: &str,
        expires: Millis,
        now: Millis,
        per_owner: usize,
    ) -> Result<(), StoreError> {
        let (challenge, owner, state) = (challenge.to_owned(), owner.to_owned(), state.to_owned());
        // The owner's newest `per_owner - 1` stay, beside the new one.
        let kept = i64::try_from(per_owner.max(1) - 1).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let context = "cannot keep a passkey ceremony";
            conn.execute(
                "DELETE FROM passkey_ceremonies WHERE expires_ms <= ?1",
                params![now],
            )
            .map_err(err(context))?;
            conn.execute(
                "DELETE FROM passkey_ceremonies WHERE owner = ?1 AND challenge NOT IN (
                     SELECT challenge FROM passkey_ceremonies WHERE owner = ?1
                     ORDER BY expires_ms DESC, challenge LIMIT ?2)",
                params![owner, kept],
            )
            .map_err(err(context))?;
            conn.execute(
                "INSERT OR REPLACE INTO passkey_ceremonies (challenge, owner, expires_ms, state)
                 VALUES (?1, ?2, ?3, ?4)",
                params![challenge, owner, expires, state],
            )
            .map_err(err(context))?;
            Ok(())
        })
        .await
    }

    async fn spend_challenge(
        &self,
        challenge: &str,
        expires: Millis,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let challenge = challenge.to_owned();
        self.with(move |conn| {
            let context = "cannot record an answered passkey challenge";
            conn.execute(
                "DELETE FROM passkey_challenges_used WHERE expires_ms <= ?1",
                params![now],
            )
            .map_err(err(context))?;
            conn.execute(
                "INSERT INTO passkey_challenges_used (challenge, expires_ms) VALUES (?1, ?2)
                 ON CONFLICT (challenge) DO NOTHING",
                params![challenge, expires],
            )
            .map(|inserted| inserted == 1)
            .map_err(err(context))
        })
        .await
    }

    async fn take_ceremony(&self, challenge: &str) -> Result<Option<(Millis, String)>, StoreError> {
        let challenge = challenge.to_owned();
        self.with(move |conn| {
            conn.query_row(
                "DELETE FROM passkey_ceremonies WHERE challenge = ?1
                 RETURNING expires_ms, state",
                params![challenge],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(err("cannot take a passkey ceremony"))
        })
        .await
    }

    async fn close_invites(&self, kind: InviteKind, at: Millis) -> Result<(), StoreError> {
        self.with(move |conn| {
            conn.execute(
                "UPDATE invites SET used_ms = ?2 WHERE kind = ?1 AND used_ms IS NULL",
                params![kind.as_str(), at],
            )
            .map(|_| ())
            .map_err(err("cannot close invites"))
        })
        .await
    }

    async fn enrol(
        &self,
        digest: &str,
        person: Option<&Person>,
        passkey: &StoredPasskey,
        at: Millis,
    ) -> Result<bool, StoreError> {
        let digest = digest.to_owned();
        let enrolled = Chained::all(&[crate::agent::store::audit::enrolled(person, passkey)])?;
        let person = person.cloned();
        let passkey = passkey.clone();
        self.with(move |conn| {
            let tx = conn
                .transaction()
                .map_err(err("cannot begin an enrolment"))?;
            let used = tx
                .execute(
                    "UPDATE invites SET used_ms = ?2
                     WHERE digest = ?1 AND used_ms IS NULL AND expires_ms > ?2",
                    params![digest, at],
                )
                .map_err(err("cannot use an invite"))?;
            if used != 1 {
                return Ok(false);
            }
            if let Some(person) = &person {
                insert_person(&tx, person)?;
            }
            insert_passkey(&tx, &passkey)?;
            super::chain::append(&tx, &enrolled)?;
            tx.commit().map_err(err("cannot commit an enrolment"))?;
            Ok(true)
        })
        .await
    }
}
