//! People, passkeys and one-time links in Postgres (the SQLite store's migration 0009, ported).

use std::collections::BTreeSet;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::{PostgresStore, err, execute_in};
use crate::{
    agent::people::{Invite, InviteKind, Person, StoredPasskey},
    agent::{
        clock::Millis,
        store::{
            PeopleStore, StoreError, StoreNews,
            encode::{Chained, invite_with, person_with, roles_json},
        },
    },
};

/// A person and their roles (JSON, decoded by the caller).
fn person(row: &Row) -> Result<(Person, String), tokio_postgres::Error> {
    Ok((
        Person {
            id: row.try_get(0)?,
            name: row.try_get(1)?,
            roles: BTreeSet::new(),
            created_ms: row.try_get(3)?,
            invited_by: row.try_get(4)?,
            revoked_ms: row.try_get(5)?,
        },
        row.try_get(2)?,
    ))
}

/// A passkey as stored.
fn passkey(row: &Row) -> Result<StoredPasskey, tokio_postgres::Error> {
    Ok(StoredPasskey {
        id: row.try_get(0)?,
        person: row.try_get(1)?,
        label: row.try_get(2)?,
        key: row.try_get(3)?,
        created_ms: row.try_get(4)?,
        last_used_ms: row.try_get(5)?,
    })
}

/// An invite, its kind and its roles (both decoded by the caller).
fn invite(row: &Row) -> Result<(Invite, String, String), tokio_postgres::Error> {
    Ok((
        Invite {
            digest: row.try_get(0)?,
            kind: InviteKind::Person,
            person: row.try_get(2)?,
            name: row.try_get(3)?,
            roles: BTreeSet::new(),
            created_by: row.try_get(5)?,
            created_ms: row.try_get(6)?,
            expires_ms: row.try_get(7)?,
            used_ms: row.try_get(8)?,
        },
        row.try_get(1)?,
        row.try_get(4)?,
    ))
}

#[async_trait]
impl PeopleStore for PostgresStore {
    async fn people(&self) -> Result<Vec<Person>, StoreError> {
        let context = "cannot read people";
        let rows = self
            .rows(
                "SELECT id, name, roles, created_ms, invited_by, revoked_ms FROM people
                 ORDER BY created_ms, id",
                &[],
                context,
            )
            .await?;
        let mut people = Vec::with_capacity(rows.len());
        for row in &rows {
            let (person, roles) = person(row).map_err(err(context))?;
            people.push(person_with(person, &roles)?);
        }
        Ok(people)
    }

    async fn save_person(&self, person: &Person) -> Result<(), StoreError> {
        let roles = roles_json(&person.roles)?;
        insert_person(&self.client().await?, person, &roles).await?;
        self.tell(StoreNews::People).await;
        Ok(())
    }

    async fn passkeys(&self) -> Result<Vec<StoredPasskey>, StoreError> {
        let context = "cannot read passkeys";
        self.rows(
            "SELECT id, person_id, label, passkey, created_ms, last_used_ms FROM passkeys
             ORDER BY created_ms, id",
            &[],
            context,
        )
        .await?
        .iter()
        .map(passkey)
        .collect::<Result<_, _>>()
        .map_err(err(context))
    }

    async fn save_passkey(&self, passkey: &StoredPasskey) -> Result<(), StoreError> {
        insert_passkey(&self.client().await?, passkey).await?;
        self.tell(StoreNews::People).await;
        Ok(())
    }

    async fn save_invite(&self, invite: &Invite) -> Result<(), StoreError> {
        let roles = roles_json(&invite.roles)?;
        let kind = invite.kind.as_str();
        self.execute(
            "INSERT INTO invites (digest, kind, person_id, name, roles, created_by, created_ms,
                 expires_ms, used_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &invite.digest,
                &kind,
                &invite.person,
                &invite.name,
                &roles,
                &invite.created_by,
                &invite.created_ms,
                &invite.expires_ms,
                &invite.used_ms,
            ],
            "cannot write an invite",
        )
        .await?;
        Ok(())
    }

    async fn invite(&self, digest: &str) -> Result<Option<Invite>, StoreError> {
        let context = "cannot read an invite";
        let Some(row) = self
            .row(
                "SELECT digest, kind, person_id, name, roles, created_by, created_ms, expires_ms,
                     used_ms
                 FROM invites WHERE digest = $1",
                &[&digest],
                context,
            )
            .await?
        else {
            return Ok(None);
        };
        let (invite, kind, roles) = invite(&row).map_err(err(context))?;
        invite_with(invite, &kind, &roles).map(Some)
    }

    async fn close_invites(&self, kind: InviteKind, at: Millis) -> Result<(), StoreError> {
        let kind = kind.as_str();
        self.execute(
            "UPDATE invites SET used_ms = $2 WHERE kind = $1 AND used_ms IS NULL",
            &[&kind, &at],
            "cannot close invites",
        )
        .await?;
        Ok(())
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
        let context = "cannot keep a passkey ceremony";
        // The owner's newest `per_owner - 1` stay, beside the new one.
        let kept = i64::try_from(per_owner.max(1) - 1).unwrap_or(i64::MAX);
        // One statement: the expired go, the owner's oldest beyond the cap go, the new one stays.
        // (Two of one owner's at once may leave one more than the cap until the owner's next.)
        self.execute(
            "WITH gone AS (DELETE FROM passkey_ceremonies WHERE expires_ms <= $5),
             crowded AS (
                 DELETE FROM passkey_ceremonies WHERE owner = $2 AND challenge IN (
                     SELECT challenge FROM passkey_ceremonies
                     WHERE owner = $2 AND expires_ms > $5
                     ORDER BY expires_ms DESC, challenge OFFSET $6))
             INSERT INTO passkey_ceremonies (challenge, owner, expires_ms, state)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (challenge) DO UPDATE SET
                 owner = EXCLUDED.owner, expires_ms = EXCLUDED.expires_ms, state = EXCLUDED.state",
            &[&challenge, &owner, &expires, &state, &now, &kept],
            context,
        )
        .await?;
        Ok(())
    }

    async fn spend_challenge(
        &self,
        challenge: &str,
        expires: Millis,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let context = "cannot record an answered passkey challenge";
        let inserted = self
            .execute(
                "WITH gone AS (DELETE FROM passkey_challenges_used WHERE expires_ms <= $3)
                 INSERT INTO passkey_challenges_used (challenge, expires_ms) VALUES ($1, $2)
                 ON CONFLICT (challenge) DO NOTHING",
                &[&challenge, &expires, &now],
                context,
            )
            .await?;
        Ok(inserted == 1)
    }

    async fn take_ceremony(&self, challenge: &str) -> Result<Option<(Millis, String)>, StoreError> {
        let context = "cannot take a passkey ceremony";
        self.row(
            "DELETE FROM passkey_ceremonies WHERE challenge = $1 RETURNING expires_ms, state",
            &[&challenge],
            context,
        )
        .await?
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .transpose()
        .map_err(err(context))
    }

    async fn enrol(
        &self,
        digest: &str,
        person: Option<&Person>,
        passkey: &StoredPasskey,
        at: Millis,
    ) -> Result<bool, StoreError> {
        let roles = person.map(|p| roles_json(&p.roles)).transpose()?;
        let enrolled = Chained::all(&[crate::agent::store::audit::enrolled(person, passkey)])?;
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(err("cannot begin an enrolment"))?;
        // Two enrolments with one invite at once: the second waits for the first's row lock,
        // then finds the invite used and changes nothing.
        let used = execute_in(
            &tx,
            "UPDATE invites SET used_ms = $2
             WHERE digest = $1 AND used_ms IS NULL AND expires_ms > $2",
            &[&digest, &at],
            "cannot use an invite",
        )
        .await?;
        if used != 1 {
            // Nothing was written: dropping the transaction rolls it back.
            return Ok(false);
        }
        if let (Some(person), Some(roles)) = (person, &roles) {
            insert_person(&tx, person, roles).await?;
        }
        insert_passkey(&tx, passkey).await?;
        super::chain::append(&tx, &enrolled).await?;
        tx.commit()
            .await
            .map_err(err("cannot commit an enrolment"))?;
        self.tell(StoreNews::People).await;
        Ok(true)
    }
}

/// Every passkey with its person, oldest first (what the audit chain records when it starts).
pub(super) async fn all_enrolled(
    tx: &impl GenericClient,
) -> Result<Vec<(Person, StoredPasskey)>, StoreError> {
    let context = "cannot read the passkeys";
    let rows = tx
        .query(
            "SELECT pe.id, pe.name, pe.roles, pe.created_ms, pe.invited_by, pe.revoked_ms,
                    p.id, p.person_id, p.label, p.passkey, p.created_ms, p.last_used_ms
             FROM passkeys p JOIN people pe ON pe.id = p.person_id
             ORDER BY p.created_ms, p.id",
            &[],
        )
        .await
        .map_err(err(context))?;
    rows.iter()
        .map(|row| {
            let (person, roles) = person(row).map_err(err(context))?;
            let passkey = StoredPasskey {
                id: row.try_get(6).map_err(err(context))?,
                person: row.try_get(7).map_err(err(context))?,
                label: row.try_get(8).map_err(err(context))?,
                key: row.try_get(9).map_err(err(context))?,
                created_ms: row.try_get(10).map_err(err(context))?,
                last_used_ms: row.try_get(11).map_err(err(context))?,
            };
            Ok((person_with(person, &roles)?, passkey))
        })
        .collect()
}

/// Inserts or updates `person` (its roles encoded by the caller) inside `tx` (a transaction,
/// or a connection of the pool on its own).
async fn insert_person(
    tx: &impl GenericClient,
    person: &Person,
    roles: &str,
) -> Result<(), StoreError> {
    execute_in(
        tx,
        "INSERT INTO people (id, name, roles, created_ms, invited_by, revoked_ms)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, roles = EXCLUDED.roles,
             revoked_ms = COALESCE(people.revoked_ms, EXCLUDED.revoked_ms)",
        &[
            &person.id,
            &person.name,
            &roles,
            &person.created_ms,
            &person.invited_by,
            &person.revoked_ms,
        ],
        "cannot write a person",
    )
    .await?;
    Ok(())
}

/// Inserts or updates `passkey` inside `tx` (a transaction, or a connection of the pool on its
/// own).
async fn insert_passkey(
    tx: &impl GenericClient,
    passkey: &StoredPasskey,
) -> Result<(), StoreError> {
    execute_in(
        tx,
        "INSERT INTO passkeys (id, person_id, label, passkey, created_ms, last_used_ms)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (id) DO UPDATE SET label = EXCLUDED.label, passkey = EXCLUDED.passkey,
             last_used_ms = EXCLUDED.last_used_ms",
        &[
            &passkey.id,
            &passkey.person,
            &passkey.label,
            &passkey.key,
            &passkey.created_ms,
            &passkey.last_used_ms,
        ],
        "cannot write a passkey",
    )
    .await?;
    Ok(())
}
