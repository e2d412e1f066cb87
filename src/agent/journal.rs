//! The parts of a chat's record that grow with the conversation (its history, its messages, its
//! wallet's payments, its answered approvals), kept so that a commit costs what changed, not what
//! exists (ADR 0038).
//!
//! [`Entries`] is a list and [`Keyed`] a map with two properties a plain `Vec`/`BTreeMap` lacks:
//!
//! - **a copy is cheap**: the items sit behind an [`Arc`], so the copy of the record a commit
//!   takes (`Session::to_commit`) shares them; the live record copies them only if it changes
//!   while a copy is still held (copy-on-write);
//! - **they know what changed** since the last commit: a list the index of its first changed
//!   entry (everything from there is written again; an append changes only the new entries), a
//!   map the keys that changed. Every way to change them goes through a method that says what it
//!   changed; a caller that takes the whole list (`all_mut`) marks everything changed — slower,
//!   never wrong. A map has no `&mut BTreeMap`: one read by key does not hold every entry, so
//!   only its methods change it.
//!
//! Equality, `Debug` and serde see only the items: a record reads and compares as before.

use std::{borrow::Cow, fmt, sync::Arc};

use serde::{
    Deserialize, Deserializer, Serialize, Serializer, de::DeserializeOwned, ser::SerializeSeq,
};

mod keyed;
pub use keyed::Keyed;

/// A list of a record that grows with the conversation (see the module).
///
/// A list read from the store starts **undecoded** (ADR 0045): its entries are kept as the JSON
/// each was stored as, and an entry is decoded only when a reader asks for it. So loading a chat
/// costs no decoding, and what a person's answer touches (the list's length, an appended entry,
/// the turn's own message at the end) decodes only those entries; a reader of the whole list
/// (the model's step, the page) decodes it once, and the list keeps it decoded. An entry that
/// does not decode is an error the reader gets ([`UnreadableEntry`]), never a panic: there is no
/// `Deref` to a `Vec`, every whole-list read says it may fail.
///
/// A list loaded with its chat's head only (ADR 0045, amendment: what an answer loads) starts
/// with its first entries **not read** from the store at all ([`Entries::on_disk`]): only their
/// number is known, and the last ones. A reader that reaches one gets [`EntryFault::NotRead`]
/// until the runtime reads them ([`Entries::fill`]); changing one is refused the same way, so a
/// commit never has to write an entry it did not read (those rows stay as they are).
#[derive(Clone)]
pub struct Entries<T> {
    /// The list's first `unread` entries are in the store, not read yet.
    unread: usize,
    /// The `stored_len` entries after them, as the store keeps them (each one's JSON), not
    /// decoded yet.
    stored: Arc<Vec<String>>,
    stored_len: usize,
    /// The entries after them, decoded.
    items: Arc<Vec<T>>,
    /// Entries at this index and after changed since the last commit (`len()`: none).
    changed_from: usize,
}

/// A stored entry of a list that a reader cannot have.
#[derive(Debug, thiserror::Error)]
#[error("stored entry {index} {source}")]
pub struct UnreadableEntry {
    /// Its index in its list.
    pub index: usize,
    #[source]
    pub source: EntryFault,
}

/// Why a stored entry cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum EntryFault {
    /// Its JSON does not decode.
    #[error("does not decode: {0}")]
    Decode(#[source] serde_json::Error),
    /// The list was loaded with its chat's head only and this entry is still in the store
    /// ([`Entries::fill`] it first).
    #[error("is not read from the store yet")]
    NotRead,
}

impl UnreadableEntry {
    /// Whether the entry only needs reading from the store (it may be fine).
    pub fn not_read(&self) -> bool {
        matches!(self.source, EntryFault::NotRead)
    }
}

fn decode_entry<T: DeserializeOwned>(index: usize, body: &str) -> Result<T, UnreadableEntry> {
    serde_json::from_str(body).map_err(|e| UnreadableEntry {
        index,
        source: EntryFault::Decode(e),
    })
}

fn not_read(index: usize) -> UnreadableEntry {
    UnreadableEntry {
        index,
        source: EntryFault::NotRead,
    }
}

impl<T> Entries<T> {
    /// How many entries the list has (none is decoded to count them).
    pub fn len(&self) -> usize {
        self.unread + self.stored_len + self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole list, if it is decoded already (a list made here, or one a reader decoded).
    pub fn as_decoded(&self) -> Option<&[T]> {
        (self.unread == 0 && self.stored_len == 0).then_some(self.items.as_slice())
    }

    /// How many of its entries are still undecoded (as the store kept them, or not read yet).
    pub fn undecoded(&self) -> usize {
        self.unread + self.stored_len
    }

    /// How many of its first entries are still in the store, not read ([`Entries::on_disk`]).
    pub fn unread(&self) -> usize {
        self.unread
    }

    /// Where the entries changed since the last commit start (`len()`: nothing changed). Never
    /// before an entry not read: nothing can change one, and the store has it as it is.
    pub fn changed_from(&self) -> usize {
        self.changed_from.min(self.len()).max(self.unread)
    }

    /// Marks every entry written (after a commit took them).
    pub fn mark_committed(&mut self) {
        self.changed_from = self.len();
    }

    /// Marks the entries `other` (a copy whose commit failed) had changed as changed again.
    pub fn mark_uncommitted(&mut self, other: &Entries<T>) {
        self.changed_from = self.changed_from.min(other.changed_from);
    }

    /// Marks every entry changed: the next commit writes them all.
    pub fn mark_all_changed(&mut self) {
        self.changed_from = 0;
    }
}

impl<T: Clone> Entries<T> {
    /// A list whose entries are all on disk already (read from the store), decoded.
    pub fn committed(items: Vec<T>) -> Self {
        Entries {
            changed_from: items.len(),
            unread: 0,
            stored: Arc::default(),
            stored_len: 0,
            items: Arc::new(items),
        }
    }

    /// A list read from the store as its entries' JSON (`bodies`, in order), decoded only when
    /// read (see the type).
    pub fn stored(bodies: Vec<String>) -> Self {
        Self::on_disk(bodies.len(), bodies)
    }

    /// A list of `len` entries in the store of which only the last ones were read (`tail`, each
    /// one's JSON): the first `len - tail.len()` are not read until [`Entries::fill`].
    pub fn on_disk(len: usize, tail: Vec<String>) -> Self {
        let tail_len = tail.len().min(len);
        Entries {
            changed_from: len,
            unread: len - tail_len,
            stored_len: tail_len,
            stored: Arc::new(tail),
            items: Arc::default(),
        }
    }

    /// Gives the list its entries not read yet: `bodies` are the store's first entries, as
    /// read after the list was loaded (at least [`Entries::unread`] of them; the rest, if any,
    /// are ignored: the list was shortened since). Nothing counts as changed.
    pub fn fill(&mut self, bodies: Vec<String>) -> Result<(), MissingEntries> {
        if bodies.len() < self.unread {
            return Err(MissingEntries {
                expected: self.unread,
                found: bodies.len(),
            });
        }
        if self.unread == 0 {
            return Ok(());
        }
        let mut all = bodies;
        all.truncate(self.unread);
        all.extend(self.stored[..self.stored_len].iter().cloned());
        self.stored_len = all.len();
        self.stored = Arc::new(all);
        self.unread = 0;
        Ok(())
    }

    fn items_mut(&mut self) -> &mut Vec<T> {
        Arc::make_mut(&mut self.items)
    }

    pub fn push(&mut self, item: T) {
        self.changed_from = self.changed_from.min(self.len());
        self.items_mut().push(item);
    }

    pub fn extend(&mut self, items: impl IntoIterator<Item = T>) {
        self.changed_from = self.changed_from.min(self.len());
        self.items_mut().extend(items);
    }

    pub fn truncate(&mut self, len: usize) {
        self.changed_from = self.changed_from.min(len);
        let decoded_from = self.unread + self.stored_len;
        if len <= decoded_from {
            if len <= self.unread {
                self.unread = len;
                self.stored_len = 0;
            } else {
                self.stored_len = len - self.unread;
            }
            if !self.items.is_empty() {
                self.items = Arc::default();
            }
        } else if len < self.len() {
            let keep = len - decoded_from;
            self.items_mut().truncate(keep);
        }
    }

    /// The last entry, to change (decoding it if it is still as stored).
    pub fn last_mut(&mut self) -> Result<Option<&mut T>, UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        match self.len().checked_sub(1) {
            Some(last) => self.get_mut(last),
            None => Ok(None),
        }
    }

    /// Entry `index`, to change (decoding it and the stored entries after it).
    pub fn get_mut(&mut self, index: usize) -> Result<Option<&mut T>, UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        if index >= self.len() {
            return Ok(None);
        }
        self.decode_from(index)?;
        self.changed_from = self.changed_from.min(index);
        let at = index - self.unread - self.stored_len;
        Ok(self.items_mut().get_mut(at))
    }

    /// The last entry that matches `found`, to change. Stored entries are decoded from the end
    /// only as far as the search goes.
    pub fn rfind_mut(
        &mut self,
        found: impl Fn(&T) -> bool,
    ) -> Result<Option<&mut T>, UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        let decoded_from = self.unread + self.stored_len;
        let mut index = self
            .items
            .iter()
            .rposition(&found)
            .map(|at| decoded_from + at);
        if index.is_none() {
            let mut decoded = Vec::new();
            for at in (0..self.stored_len).rev() {
                let entry: T = decode_entry(self.unread + at, &self.stored[at])?;
                let hit = found(&entry);
                decoded.push(entry);
                if hit {
                    index = Some(self.unread + at);
                    break;
                }
            }
            let from = decoded_from - decoded.len();
            decoded.reverse();
            self.prepend(from, decoded);
            if index.is_none() && self.unread > 0 {
                // The entry searched for may be one not read yet.
                return Err(not_read(self.unread - 1));
            }
        }
        match index {
            Some(index) => self.get_mut(index),
            None => Ok(None),
        }
    }

    /// Decodes the stored entries from `index` on (see [`Entries::decoded`]).
    fn decode_from(&mut self, index: usize) -> Result<(), UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        if index < self.unread {
            return Err(not_read(index));
        }
        let decoded_from = self.unread + self.stored_len;
        if index >= decoded_from {
            return Ok(());
        }
        let decoded = (index..decoded_from)
            .map(|at| decode_entry(at, &self.stored[at - self.unread]))
            .collect::<Result<Vec<T>, _>>()?;
        self.prepend(index, decoded);
        Ok(())
    }

    /// Puts `decoded` (the stored entries from index `from` to the first decoded one, decoded)
    /// before the decoded entries.
    fn prepend(&mut self, from: usize, mut decoded: Vec<T>) {
        if decoded.is_empty() {
            return;
        }
        decoded.extend(self.items.iter().cloned());
        self.items = Arc::new(decoded);
        self.stored_len = from - self.unread;
        if self.stored_len == 0 {
            self.stored = Arc::default();
        }
    }

    /// The whole list, decoded (once: it stays decoded): what a reader of every entry takes.
    pub fn decoded(&mut self) -> Result<&[T], UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        self.decode_from(0)?;
        Ok(&self.items)
    }

    /// The entries as they are now, decoded and shared (no copy): what a reader that outlives a
    /// lock takes, such as the model's request. While it is held, a change of the list copies
    /// the list once; a reader that drops it before the list changes costs nothing.
    pub fn shared(&mut self) -> Result<Arc<Vec<T>>, UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        self.decode_from(0)?;
        Ok(Arc::clone(&self.items))
    }

    /// A copy of the whole list, decoded (the list itself is left as it is).
    pub fn to_vec(&self) -> Result<Vec<T>, UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        self.iter()
            .map(|entry| entry.map(Cow::into_owned))
            .collect()
    }

    /// The whole list, decoded, to change in any way: every entry counts as changed.
    pub fn all_mut(&mut self) -> Result<&mut Vec<T>, UnreadableEntry>
    where
        T: DeserializeOwned,
    {
        self.decode_from(0)?;
        self.changed_from = 0;
        Ok(self.items_mut())
    }

    /// Each entry in order, read without changing the list: a stored one is decoded for the
    /// reader (and not kept), so a reader of a few entries from either end decodes only those.
    pub fn iter(&self) -> Iter<'_, T>
    where
        T: DeserializeOwned,
    {
        Iter {
            list: self,
            front: 0,
            back: self.len(),
        }
    }

    /// The entries from `from` on, as the store keeps them: a stored one as it was read, a
    /// decoded one encoded (what a commit writes, ADR 0038).
    pub fn bodies_from(&self, from: usize) -> Result<Vec<String>, UnreadableEntry>
    where
        T: Serialize,
    {
        if from < self.unread {
            return Err(not_read(from));
        }
        let decoded_from = self.unread + self.stored_len;
        let stored = self.stored[..self.stored_len]
            .iter()
            .skip(from - self.unread)
            .map(|body| Ok(body.clone()));
        let decoded = self
            .items
            .iter()
            .enumerate()
            .skip(from.saturating_sub(decoded_from))
            .map(|(at, item)| {
                serde_json::to_string(item).map_err(|e| UnreadableEntry {
                    index: decoded_from + at,
                    source: EntryFault::Decode(e),
                })
            });
        stored.chain(decoded).collect()
    }
}

impl<T> Entries<T> {
    /// Entry `index` as the store keeps it, if it is held so (read, not decoded).
    fn stored_at(&self, index: usize) -> Option<&str> {
        index
            .checked_sub(self.unread)
            .filter(|at| *at < self.stored_len)
            .map(|at| self.stored[at].as_str())
    }
}

/// The store had fewer entries of a list than the list expected ([`Entries::fill`]): it was
/// shortened or removed since the list was loaded.
#[derive(Debug, thiserror::Error)]
#[error("the store has {found} of the {expected} entries expected")]
pub struct MissingEntries {
    pub expected: usize,
    pub found: usize,
}

/// An entry read by [`Entries::iter`]: borrowed if decoded, decoded for the reader if stored.
pub type Entry<'a, T> = Result<Cow<'a, T>, UnreadableEntry>;

/// The entries of an [`Entries`], in order (see [`Entries::iter`]).
pub struct Iter<'a, T: Clone> {
    list: &'a Entries<T>,
    front: usize,
    back: usize,
}

impl<'a, T: Clone + DeserializeOwned> Iter<'a, T> {
    fn at(&self, index: usize) -> Entry<'a, T> {
        let list = self.list;
        if index < list.unread {
            return Err(not_read(index));
        }
        match index.checked_sub(list.unread + list.stored_len) {
            Some(at) => Ok(Cow::Borrowed(&list.items[at])),
            None => decode_entry(index, &list.stored[index - list.unread]).map(Cow::Owned),
        }
    }
}

impl<'a, T: Clone + DeserializeOwned> Iterator for Iter<'a, T> {
    type Item = Entry<'a, T>;

    fn next(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.at(self.front - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.back - self.front;
        (left, Some(left))
    }
}

impl<T: Clone + DeserializeOwned> DoubleEndedIterator for Iter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.at(self.back)
        })
    }
}

impl<T: Clone + DeserializeOwned> ExactSizeIterator for Iter<'_, T> {}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries {
            unread: 0,
            stored: Arc::default(),
            stored_len: 0,
            items: Arc::new(Vec::new()),
            changed_from: 0,
        }
    }
}

/// A new list: every entry changed (none is on disk yet).
impl<T> From<Vec<T>> for Entries<T> {
    fn from(items: Vec<T>) -> Self {
        Entries {
            unread: 0,
            stored: Arc::default(),
            stored_len: 0,
            items: Arc::new(items),
            changed_from: 0,
        }
    }
}

impl<T> FromIterator<T> for Entries<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Vec::from_iter(iter).into()
    }
}

/// Two lists are equal when their entries are; a stored entry is compared as its text when both
/// are stored, else decoded (one that does not decode equals nothing).
impl<T: PartialEq + Clone + DeserializeOwned> PartialEq for Entries<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && (0..self.len()).all(|i| {
                if let (Some(a), Some(b)) = (self.stored_at(i), other.stored_at(i))
                    && a == b
                {
                    return true;
                }
                matches!(
                    (self.iter().nth(i), other.iter().nth(i)),
                    (Some(Ok(a)), Some(Ok(b))) if a == b
                )
            })
    }
}

impl<T: Eq + Clone + DeserializeOwned> Eq for Entries<T> {}

impl<T: PartialEq + Clone + DeserializeOwned> PartialEq<Vec<T>> for Entries<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other)
                .all(|(a, b)| a.is_ok_and(|a| *a == *b))
    }
}

impl<T: fmt::Debug + Clone + DeserializeOwned> fmt::Debug for Entries<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for entry in self.iter() {
            match entry {
                Ok(entry) => list.entry(&entry),
                Err(e) => list.entry(&format_args!("<{e}>")),
            };
        }
        list.finish()
    }
}

/// The entries (a stored one decoded for it; one that does not decode is an error).
impl<T: Serialize + Clone + DeserializeOwned> Serialize for Entries<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for entry in self.iter() {
            seq.serialize_element(&*entry.map_err(serde::ser::Error::custom)?)?;
        }
        seq.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::deserialize(d).map(Entries::from)
    }
}

/// A list only ever appended to, whose earlier entries a record need not read: a wallet's
/// payments (ADR 0045, fourth amendment). It is loaded whole ([`Appended::committed`]) or as
/// its length only ([`Appended::on_disk`]: what a load of the chat's head reads, since the
/// wallet keeps the facts a decision needs of its payments as running totals). The entries
/// appended since it was loaded are always decoded and at hand ([`Appended::read`]); the whole
/// list only if it was loaded whole ([`Appended::whole`]). There is no `Deref` to a slice: a
/// reader says which of the two it means.
#[derive(Clone)]
pub struct Appended<T>(Entries<T>);

impl<T> Default for Appended<T> {
    fn default() -> Self {
        Appended(Entries::default())
    }
}

impl<T: PartialEq> PartialEq for Appended<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0.unread == other.0.unread && self.0.items == other.0.items
    }
}

impl<T: Eq> Eq for Appended<T> {}

impl<T: Clone> Appended<T> {
    /// A list whose entries are all on disk already (read from the store).
    pub fn committed(items: Vec<T>) -> Self {
        Appended(Entries::committed(items))
    }

    /// A list of `len` entries on disk, none of them read.
    pub fn on_disk(len: usize) -> Self {
        Appended(Entries::on_disk(len, Vec::new()))
    }

    pub fn push(&mut self, item: T) {
        self.0.push(item);
    }

    /// How many entries it has, read or not.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries read: every one if the list was loaded whole, else those appended since
    /// it was loaded.
    pub fn read(&self) -> &[T] {
        // Built from decoded entries only: `stored_len` is 0.
        &self.0.items
    }

    /// The whole list, if it was loaded whole (or made here).
    pub fn whole(&self) -> Option<&[T]> {
        self.0.as_decoded()
    }

    /// The list, to be committed (see [`Entries::bodies_from`]) or marked.
    pub fn entries(&self) -> &Entries<T> {
        &self.0
    }

    /// The list's marks, to change (a commit took it, or failed).
    pub fn entries_mut(&mut self) -> &mut Entries<T> {
        &mut self.0
    }

    /// Gives a list loaded as its length the entries it did not read, as `earlier` (the list
    /// whole, as a store keeps it) has them.
    pub fn fill(&mut self, earlier: &[T]) -> Result<(), MissingEntries> {
        let unread = self.0.unread;
        if unread == 0 {
            return Ok(());
        }
        let Some(earlier) = earlier.get(..unread) else {
            return Err(MissingEntries {
                expected: unread,
                found: earlier.len(),
            });
        };
        let mut all = earlier.to_vec();
        all.extend(self.0.items.iter().cloned());
        self.0.items = Arc::new(all);
        self.0.unread = 0;
        Ok(())
    }

    /// The entries from index `from` on (what a commit writes), if all of them are read.
    pub fn since(&self, from: usize) -> Option<&[T]> {
        from.checked_sub(self.0.unread)
            .and_then(|at| self.0.items.get(at..))
    }
}

impl<T> From<Vec<T>> for Appended<T> {
    fn from(items: Vec<T>) -> Self {
        Appended(Entries::from(items))
    }
}

impl<T: fmt::Debug> fmt::Debug for Appended<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.unread > 0 {
            write!(f, "[{} not read] ", self.0.unread)?;
        }
        self.0.items.fmt(f)
    }
}

/// Only a list read whole can be written out whole: one loaded as its length is an error.
impl<T: Serialize> Serialize for Appended<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.unread > 0 {
            return Err(serde::ser::Error::custom(not_read(0)));
        }
        self.0.items.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Appended<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::deserialize(d).map(Appended::from)
    }
}

#[cfg(test)]
mod tests;
