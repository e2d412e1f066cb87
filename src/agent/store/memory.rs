//! The store that keeps everything in memory, lost on restart: the tests' and the demo's, and
//! the reference the contract tests hold the databases to.

use super::*;
use crate::agent::journal::{Appended, Entries, Keyed};

/// Everything in memory, lost on restart.
#[derive(Debug, Default)]
pub struct MemoryStore {
    pub(super) records: Mutex<HashMap<String, SessionRecord>>,
    /// The log of each session's paused turn, by turn id.
    pub(super) paused_logs: Mutex<HashMap<String, (String, Vec<TurnEntry>)>>,
    pub(super) audit: Mutex<Vec<AuditRecord>>,
    pub(super) checkpoints: Mutex<Vec<Checkpoint>>,
    pub(super) policies: Mutex<std::collections::BTreeMap<String, String>>,
    pub(super) secret: Mutex<Option<[u8; 32]>>,
    pub(super) audit_secret: Mutex<Option<[u8; 32]>>,
    pub(super) signins: Mutex<HashMap<String, (SignIn, Option<Millis>)>>,
    pub(super) tool_lists: Mutex<HashMap<String, String>>,
    pub(super) grants: Mutex<Vec<Grant>>,
    pub(super) reservations: Mutex<reservations::Reservations>,
    pub(super) people: Mutex<PeopleTables>,
    /// (chat, sha) → file.
    pub(super) attachments: Mutex<HashMap<(String, String), StoredFile>>,
}

/// What the memory store keeps of people.
#[derive(Debug, Default)]
pub(super) struct PeopleTables {
    pub(super) people: HashMap<String, Person>,
    pub(super) passkeys: HashMap<String, StoredPasskey>,
    pub(super) invites: HashMap<String, Invite>,
    /// Passkey ceremonies: challenge → (owner, expiry, state).
    pub(super) ceremonies: HashMap<String, (String, Millis, String)>,
    /// Stateless challenges answered: challenge → expiry.
    pub(super) spent: HashMap<String, Millis>,
}

impl MemoryStore {
    /// Writes `record` and appends `audit` (a commit that may happen: the shared database's
    /// checks are its own). As in SQLite and Postgres, a chat's owner is written once (its first
    /// turn claims it): a later commit naming someone else does not take the chat.
    pub(super) fn keep(&self, record: &SessionRecord, audit: &[AuditEvent]) {
        let mut records = lock(&self.records);
        let owner = records.get(&record.id).and_then(|r| r.owner.clone());
        let mut stored = record.clone();
        if owner.is_some() {
            stored.owner = owner;
        }
        // A record loaded with its head only did not read its first entries: they stay as kept
        // (as the databases' rows do).
        if let Some(kept) = records.get(&record.id) {
            keep_unread(&mut stored.history, &kept.history);
            keep_unread(&mut stored.messages, &kept.messages);
            // Its payments too (the kept wallet's are all there).
            if let Err(e) = stored
                .wallet
                .transactions
                .fill(kept.wallet.transactions.read())
            {
                tracing::error!(error = %e, "the memory store cannot keep a wallet's payments");
            }
            if !record.resolved_approvals.is_whole() {
                // Read by id: the stored map with what the record changed (as the rows are).
                let mut whole = (*kept.resolved_approvals).clone();
                for key in record
                    .resolved_approvals
                    .changes()
                    .iter()
                    .flat_map(|c| c.iter())
                {
                    match record.resolved_approvals.get(key) {
                        Some(resolution) => whole.insert(key.clone(), resolution.clone()),
                        None => whole.remove(key),
                    };
                }
                stored.resolved_approvals = Keyed::committed(whole);
            }
        }
        records.insert(record.id.clone(), stored);
        drop(records);
        append_chained(&mut lock(&self.audit), audit);
    }
}

/// Gives `list` (a list committed with entries not read) those entries as `kept` has them.
fn keep_unread<T: Clone + serde::Serialize + serde::de::DeserializeOwned>(
    list: &mut Entries<T>,
    kept: &Entries<T>,
) {
    if list.unread() == 0 {
        return;
    }
    if let Err(e) = kept
        .bodies_from(0)
        .map_err(|e| e.to_string())
        .and_then(|bodies| list.fill(bodies).map_err(|e| e.to_string()))
    {
        tracing::error!(error = %e, "the memory store cannot keep a list's entries");
    }
}

/// `list` as a load of the head reads it: its length and its last entries.
fn head_of<T: Clone + serde::Serialize>(list: &Entries<T>) -> Result<Entries<T>, StoreError> {
    let from = list.len().saturating_sub(encode::TAIL as usize);
    let tail = list
        .bodies_from(from)
        .map_err(|e| StoreError::caused_by("cannot read the session's entries", e))?;
    Ok(Entries::on_disk(list.len(), tail))
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn load_head(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let Some(mut stored) = self.load(id).await? else {
            return Ok(None);
        };
        stored.record.history = head_of(&stored.record.history)?;
        stored.record.messages = head_of(&stored.record.messages)?;
        stored.record.resolved_approvals = Keyed::by_key();
        // Counted, not read: the wallet keeps running totals (ADR 0045, fourth amendment).
        stored.record.wallet.transactions =
            Appended::on_disk(stored.record.wallet.transactions.len());
        Ok(Some(stored))
    }

    async fn load(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let Some(record) = lock(&self.records).get(id).cloned() else {
            return Ok(None);
        };
        let paused_log = lock(&self.paused_logs)
            .get(id)
            .cloned()
            .and_then(|(turn, entries)| log_of_turn(&record, &turn, entries));
        Ok(Some(StoredSession::new(record, paused_log)))
    }

    async fn commit_paused(
        &self,
        record: &SessionRecord,
        audit: &[AuditEvent],
        log: &[TurnEntry],
    ) -> Result<(), StoreError> {
        if let Some(turn) = &record.turn {
            lock(&self.paused_logs).insert(record.id.clone(), (turn.id.clone(), log.to_vec()));
        }
        self.commit(record, audit).await
    }

    async fn commit(&self, record: &SessionRecord, audit: &[AuditEvent]) -> Result<(), StoreError> {
        // As in SQLite: a turn that is over has no paused log to keep.
        if record.turn.as_ref().is_some_and(|t| t.status.is_over()) {
            lock(&self.paused_logs).remove(&record.id);
        }
        self.keep(record, audit);
        Ok(())
    }

    async fn chat_owner(&self, id: &str) -> Result<Option<Option<String>>, StoreError> {
        Ok(lock(&self.records)
            .get(id)
            .map(|record| record.owner.clone()))
    }

    async fn approval_owner(&self, approval_id: &str) -> Result<Option<String>, StoreError> {
        Ok(lock(&self.records)
            .values()
            .find(|r| {
                r.turn
                    .as_ref()
                    .is_some_and(|t| t.pending_approvals().contains(&approval_id))
            })
            .map(|r| r.id.clone()))
    }

    async fn inbox(&self, query: &InboxQuery) -> Result<Vec<Waiting>, StoreError> {
        let mut found: Vec<Waiting> = lock(&self.records)
            .values()
            .flat_map(crate::agent::inbox::waiting_of)
            .filter(|w| query.admits(w))
            .collect();
        found.sort_by_key(Waiting::cursor);
        found.truncate(query.limit);
        Ok(found)
    }

    async fn waiting(&self, approval_id: &str) -> Result<Option<Waiting>, StoreError> {
        Ok(lock(&self.records)
            .values()
            .flat_map(crate::agent::inbox::waiting_of)
            .find(|w| w.approval_id == approval_id))
    }

    async fn waiting_counts(&self) -> Result<WaitingCounts, StoreError> {
        let records = lock(&self.records);
        Ok(crate::agent::inbox::count(
            records.values().flat_map(crate::agent::inbox::waiting_of),
        ))
    }

    async fn save_attachment(
        &self,
        chat: &str,
        sha: &str,
        media_type: &str,
        bytes: &[u8],
        _at: Millis,
    ) -> Result<(), StoreError> {
        lock(&self.attachments)
            .entry((chat.to_owned(), sha.to_owned()))
            .or_insert_with(|| StoredFile {
                media_type: media_type.to_owned(),
                bytes: bytes.to_vec(),
            });
        Ok(())
    }

    async fn attachment(&self, chat: &str, sha: &str) -> Result<Option<StoredFile>, StoreError> {
        Ok(lock(&self.attachments)
            .get(&(chat.to_owned(), sha.to_owned()))
            .cloned())
    }

    async fn list(&self) -> Result<Vec<String>, StoreError> {
        let records = lock(&self.records);
        let mut all: Vec<(&String, Millis)> = records
            .iter()
            .map(|(id, r)| (id, r.updated_at_ms))
            .collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        Ok(all.into_iter().map(|(id, _)| id.clone()).collect())
    }

    async fn unfinished(&self) -> Result<Vec<String>, StoreError> {
        let mut ids: Vec<String> = lock(&self.records)
            .values()
            .filter(|r| r.turn.as_ref().is_some_and(|t| !t.status.is_over()))
            .map(|r| r.id.clone())
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn database(&self) -> &'static str {
        "memory"
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let owners: HashMap<String, String> = lock(&self.records)
            .values()
            .map(|r| (r.id.clone(), r.owner().to_owned()))
            .collect();
        Ok(lock(&self.audit)
            .iter()
            .rev()
            .filter(|r| {
                let owner = owners
                    .get(&r.event.session_id)
                    .map(String::as_str)
                    .unwrap_or(crate::agent::people::LOCAL);
                query.matches(r, owner)
            })
            .take(query.limit())
            .cloned()
            .collect())
    }

    async fn chain_head(&self) -> Result<ChainHead, StoreError> {
        Ok(ChainHead {
            head: memory_head(&lock(&self.audit)),
            since: 0,
        })
    }

    async fn chain(&self, after: i64, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        Ok(lock(&self.audit)
            .iter()
            .filter(|r| r.seq > after)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn keep_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let mut kept = lock(&self.checkpoints);
        if let Err(at) = kept.binary_search_by_key(&checkpoint.seq, |c| c.seq) {
            kept.insert(at, checkpoint.clone());
        }
        Ok(())
    }

    async fn checkpoints(&self, after: i64, limit: usize) -> Result<Vec<Checkpoint>, StoreError> {
        Ok(lock(&self.checkpoints)
            .iter()
            .filter(|c| c.seq > after)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn last_checkpoint(&self) -> Result<Option<Checkpoint>, StoreError> {
        Ok(lock(&self.checkpoints).last().cloned())
    }

    async fn audit_secret(&self) -> Result<[u8; 32], StoreError> {
        let mut secret = lock(&self.audit_secret);
        match *secret {
            Some(s) => Ok(s),
            None => {
                let fresh = fresh_secret()?;
                *secret = Some(fresh);
                Ok(fresh)
            }
        }
    }
}

/// The head of the memory store's chain.
fn memory_head(log: &[AuditRecord]) -> crate::agent::audit::chain::Head {
    log.last()
        .and_then(|r| {
            Some(crate::agent::audit::chain::Head {
                seq: r.seq,
                hash: crate::agent::audit::chain::parse_hash(r.hash.as_deref()?)?,
            })
        })
        .unwrap_or_default()
}

/// Appends `events` to the memory store's chain.
pub(super) fn append_chained(log: &mut Vec<AuditRecord>, events: &[AuditEvent]) {
    let mut head = memory_head(log);
    for event in events {
        head = head.next(&crate::agent::audit::chain::digest_of(event));
        log.push(AuditRecord {
            seq: head.seq,
            event: event.clone(),
            hash: Some(crate::agent::audit::chain::hex(&head.hash)),
        });
    }
}

#[async_trait]
impl SignInStore for MemoryStore {
    async fn signing_secret(&self) -> Result<[u8; 32], StoreError> {
        let mut secret = lock(&self.secret);
        match *secret {
            Some(s) => Ok(s),
            None => {
                let fresh = fresh_secret()?;
                *secret = Some(fresh);
                Ok(fresh)
            }
        }
    }

    async fn record_signin(&self, signin: &SignIn) -> Result<(), StoreError> {
        lock(&self.signins).insert(signin.id.clone(), (signin.clone(), None));
        Ok(())
    }

    async fn end_signin(&self, id: &str, at: Millis) -> Result<(), StoreError> {
        if let Some((_, ended)) = lock(&self.signins).get_mut(id) {
            ended.get_or_insert(at);
        }
        Ok(())
    }

    async fn ended_signins(&self, now: Millis) -> Result<Vec<(String, Millis)>, StoreError> {
        Ok(lock(&self.signins)
            .values()
            .filter(|(s, ended)| ended.is_some() && s.expires_ms > now)
            .map(|(s, _)| (s.id.clone(), s.expires_ms))
            .collect())
    }
}

#[async_trait]
impl PeopleStore for MemoryStore {
    async fn keep_ceremony(
        &self,
        challenge: &str,
        owner: &str,
        state: &str,
        expires: Millis,
        now: Millis,
        per_owner: usize,
    ) -> Result<(), StoreError> {
        let ceremonies = &mut lock(&self.people).ceremonies;
        ceremonies.retain(|_, (_, until, _)| *until > now);
        let mut owned: Vec<(Millis, String)> = ceremonies
            .iter()
            .filter(|(_, (o, _, _))| o == owner)
            .map(|(c, (_, until, _))| (*until, c.clone()))
            .collect();
        owned.sort();
        let over = (owned.len() + 1).saturating_sub(per_owner.max(1));
        for (_, oldest) in owned.into_iter().take(over) {
            ceremonies.remove(&oldest);
        }
        ceremonies.insert(
            challenge.to_owned(),
            (owner.to_owned(), expires, state.to_owned()),
        );
        Ok(())
    }

    async fn take_ceremony(&self, challenge: &str) -> Result<Option<(Millis, String)>, StoreError> {
        Ok(lock(&self.people)
            .ceremonies
            .remove(challenge)
            .map(|(_, until, state)| (until, state)))
    }

    async fn spend_challenge(
        &self,
        challenge: &str,
        expires: Millis,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let spent = &mut lock(&self.people).spent;
        spent.retain(|_, until| *until > now);
        Ok(spent.insert(challenge.to_owned(), expires).is_none())
    }

    async fn people(&self) -> Result<Vec<Person>, StoreError> {
        Ok(lock(&self.people).people.values().cloned().collect())
    }

    async fn save_person(&self, person: &Person) -> Result<(), StoreError> {
        let mut people = lock(&self.people);
        let revoked_ms = people
            .people
            .get(&person.id)
            .and_then(|p| p.revoked_ms)
            .or(person.revoked_ms);
        people.people.insert(
            person.id.clone(),
            Person {
                revoked_ms,
                ..person.clone()
            },
        );
        Ok(())
    }

    async fn passkeys(&self) -> Result<Vec<StoredPasskey>, StoreError> {
        Ok(lock(&self.people).passkeys.values().cloned().collect())
    }

    async fn save_passkey(&self, passkey: &StoredPasskey) -> Result<(), StoreError> {
        lock(&self.people)
            .passkeys
            .insert(passkey.id.clone(), passkey.clone());
        Ok(())
    }

    async fn save_invite(&self, invite: &Invite) -> Result<(), StoreError> {
        lock(&self.people)
            .invites
            .insert(invite.digest.clone(), invite.clone());
        Ok(())
    }

    async fn invite(&self, digest: &str) -> Result<Option<Invite>, StoreError> {
        Ok(lock(&self.people).invites.get(digest).cloned())
    }

    async fn close_invites(&self, kind: InviteKind, at: Millis) -> Result<(), StoreError> {
        for invite in lock(&self.people).invites.values_mut() {
            if invite.kind == kind && invite.used_ms.is_none() {
                invite.used_ms = Some(at);
            }
        }
        Ok(())
    }

    async fn enrol(
        &self,
        digest: &str,
        person: Option<&Person>,
        passkey: &StoredPasskey,
        at: Millis,
    ) -> Result<bool, StoreError> {
        let mut people = lock(&self.people);
        match people.invites.get_mut(digest) {
            Some(invite) if invite.is_open(at) => invite.used_ms = Some(at),
            _ => return Ok(false),
        }
        if let Some(person) = person {
            people.people.insert(person.id.clone(), person.clone());
        }
        people.passkeys.insert(passkey.id.clone(), passkey.clone());
        append_chained(&mut lock(&self.audit), &[audit::enrolled(person, passkey)]);
        Ok(true)
    }
}

#[async_trait]
impl ToolListStore for MemoryStore {
    async fn keep_tool_list(
        &self,
        server: &str,
        tools: &str,
        _at: Millis,
    ) -> Result<(), StoreError> {
        lock(&self.tool_lists).insert(server.to_owned(), tools.to_owned());
        Ok(())
    }

    async fn kept_tool_list(&self, server: &str) -> Result<Option<String>, StoreError> {
        Ok(lock(&self.tool_lists).get(server).cloned())
    }
}

#[async_trait]
impl PolicyStore for MemoryStore {
    async fn save_grant(&self, grant: &Grant) -> Result<(), StoreError> {
        let mut grants = lock(&self.grants);
        match grants.iter_mut().find(|g| g.id == grant.id) {
            Some(kept) => {
                *kept = Grant {
                    used_cents: kept.used_cents,
                    uses: kept.uses,
                    ..grant.clone()
                }
            }
            None => grants.push(grant.clone()),
        }
        Ok(())
    }

    async fn grants(&self) -> Result<Vec<Grant>, StoreError> {
        Ok(lock(&self.grants).clone())
    }

    async fn append_audit(&self, events: &[AuditEvent]) -> Result<(), StoreError> {
        append_chained(&mut lock(&self.audit), events);
        Ok(())
    }

    async fn spent(&self, now: Millis) -> Result<Spent, StoreError> {
        let reservations = lock(&self.reservations);
        let records = lock(&self.records);
        Ok(reservations.spent(&records, &lock(&self.grants), now))
    }

    async fn reserve(
        &self,
        now: Millis,
        decide: &mut (dyn for<'s> FnMut(&'s Spent) -> Vec<Claim> + Send),
    ) -> Result<Reserved, StoreError> {
        reservations::reserve_in_memory(self, now, decide)
    }

    async fn release(&self, unused: &[Unused]) -> Result<(), StoreError> {
        lock(&self.reservations).release(unused, &mut lock(&self.grants));
        Ok(())
    }

    async fn keep_policy_text(
        &self,
        digest: &str,
        text: &str,
        _: Millis,
    ) -> Result<(), StoreError> {
        lock(&self.policies)
            .entry(digest.to_owned())
            .or_insert_with(|| text.to_owned());
        Ok(())
    }

    async fn policy_text(&self, digest: &str) -> Result<Option<String>, StoreError> {
        Ok(lock(&self.policies).get(digest).cloned())
    }

    async fn policy_texts(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(lock(&self.policies)
            .iter()
            .map(|(d, t)| (d.clone(), t.clone()))
            .collect())
    }
}
