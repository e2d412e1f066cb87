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
//!   changed; a caller that takes the whole `&mut Vec`/`&mut BTreeMap`
//!   ([`DerefMut`](std::ops::DerefMut)) marks everything changed — slower, never wrong.
//!
//! Equality, `Debug` and serde see only the items: a record reads and compares as before.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    ops::{Deref, DerefMut},
    sync::Arc,
};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A list of a record that grows with the conversation (see the module).
#[derive(Clone)]
pub struct Entries<T> {
    items: Arc<Vec<T>>,
    /// Entries at this index and after changed since the last commit (`items.len()`: none).
    changed_from: usize,
}

impl<T: Clone> Entries<T> {
    /// A list whose entries are all on disk already (read from the store).
    pub fn committed(items: Vec<T>) -> Self {
        Entries {
            changed_from: items.len(),
            items: Arc::new(items),
        }
    }

    fn items_mut(&mut self) -> &mut Vec<T> {
        Arc::make_mut(&mut self.items)
    }

    pub fn push(&mut self, item: T) {
        self.changed_from = self.changed_from.min(self.items.len());
        self.items_mut().push(item);
    }

    pub fn extend(&mut self, items: impl IntoIterator<Item = T>) {
        self.changed_from = self.changed_from.min(self.items.len());
        self.items_mut().extend(items);
    }

    pub fn truncate(&mut self, len: usize) {
        self.changed_from = self.changed_from.min(len);
        if len < self.items.len() {
            self.items_mut().truncate(len);
        }
    }

    /// The last entry, to change.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        let last = self.items.len().checked_sub(1)?;
        self.get_mut(last)
    }

    /// Entry `index`, to change.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        if index >= self.items.len() {
            return None;
        }
        self.changed_from = self.changed_from.min(index);
        self.items_mut().get_mut(index)
    }

    /// The last entry that matches `found`, to change.
    pub fn rfind_mut(&mut self, found: impl Fn(&T) -> bool) -> Option<&mut T> {
        let index = self.items.iter().rposition(found)?;
        self.get_mut(index)
    }

    /// The entries as they are now, shared (no copy): what a reader that outlives a lock takes,
    /// such as the model's request. While it is held, a change of the list copies the list
    /// once; a reader that drops it before the list changes costs nothing.
    pub fn shared(&self) -> Arc<Vec<T>> {
        Arc::clone(&self.items)
    }

    /// Where the entries changed since the last commit start (`len()`: nothing changed).
    pub fn changed_from(&self) -> usize {
        self.changed_from.min(self.items.len())
    }

    /// Marks every entry written (after a commit took them).
    pub fn mark_committed(&mut self) {
        self.changed_from = self.items.len();
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

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Entries {
            items: Arc::new(Vec::new()),
            changed_from: 0,
        }
    }
}

/// A new list: every entry changed (none is on disk yet).
impl<T> From<Vec<T>> for Entries<T> {
    fn from(items: Vec<T>) -> Self {
        Entries {
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

impl<T> Deref for Entries<T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        &self.items
    }
}

/// The whole list, to change in any way: every entry counts as changed.
impl<T: Clone> DerefMut for Entries<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        self.changed_from = 0;
        self.items_mut()
    }
}

/// The entries, taken (copied if another copy of the list still shares them).
impl<T: Clone> IntoIterator for Entries<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        Arc::unwrap_or_clone(self.items).into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Entries<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<T: PartialEq> PartialEq for Entries<T> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<T: Eq> Eq for Entries<T> {}

impl<T: PartialEq> PartialEq<Vec<T>> for Entries<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        *self.items == *other
    }
}

impl<T: fmt::Debug> fmt::Debug for Entries<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.items.fmt(f)
    }
}

impl<T: Serialize> Serialize for Entries<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.items.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::deserialize(d).map(Entries::from)
    }
}

/// A map of a record that grows with the conversation (see the module).
#[derive(Clone)]
pub struct Keyed<K, V> {
    items: Arc<BTreeMap<K, V>>,
    /// Keys inserted or removed since the last commit.
    changed: BTreeSet<K>,
    /// Everything may have changed: the next commit writes the whole map.
    all_changed: bool,
}

impl<K: Ord + Clone, V: Clone> Keyed<K, V> {
    /// A map whose entries are all on disk already (read from the store).
    pub fn committed(items: BTreeMap<K, V>) -> Self {
        Keyed {
            items: Arc::new(items),
            changed: BTreeSet::new(),
            all_changed: false,
        }
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.changed.insert(key.clone());
        Arc::make_mut(&mut self.items).insert(key, value)
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        if !self.items.contains_key(key) {
            return None;
        }
        self.changed.insert(key.clone());
        Arc::make_mut(&mut self.items).remove(key)
    }

    /// What changed since the last commit: `None` when anything may have (write the whole
    /// map), else the keys that changed (each now in the map, or removed from it).
    pub fn changes(&self) -> Option<&BTreeSet<K>> {
        (!self.all_changed).then_some(&self.changed)
    }

    /// Marks every entry written (after a commit took them).
    pub fn mark_committed(&mut self) {
        self.changed.clear();
        self.all_changed = false;
    }

    /// Marks what `other` (a copy whose commit failed) had changed as changed again.
    pub fn mark_uncommitted(&mut self, other: &Keyed<K, V>) {
        self.all_changed |= other.all_changed;
        self.changed.extend(other.changed.iter().cloned());
    }

    /// Marks everything changed: the next commit writes the whole map.
    pub fn mark_all_changed(&mut self) {
        self.all_changed = true;
    }
}

impl<K, V> Default for Keyed<K, V> {
    fn default() -> Self {
        Keyed {
            items: Arc::new(BTreeMap::new()),
            changed: BTreeSet::new(),
            all_changed: true,
        }
    }
}

/// A new map: every entry changed (none is on disk yet).
impl<K, V> From<BTreeMap<K, V>> for Keyed<K, V> {
    fn from(items: BTreeMap<K, V>) -> Self {
        Keyed {
            items: Arc::new(items),
            changed: BTreeSet::new(),
            all_changed: true,
        }
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for Keyed<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        BTreeMap::from_iter(iter).into()
    }
}

impl<K, V> Deref for Keyed<K, V> {
    type Target = BTreeMap<K, V>;

    fn deref(&self) -> &BTreeMap<K, V> {
        &self.items
    }
}

/// The whole map, to change in any way: everything counts as changed.
impl<K: Clone, V: Clone> DerefMut for Keyed<K, V> {
    fn deref_mut(&mut self) -> &mut BTreeMap<K, V> {
        self.all_changed = true;
        Arc::make_mut(&mut self.items)
    }
}

impl<K: PartialEq, V: PartialEq> PartialEq for Keyed<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<K: PartialEq, V: PartialEq> PartialEq<BTreeMap<K, V>> for Keyed<K, V> {
    fn eq(&self, other: &BTreeMap<K, V>) -> bool {
        *self.items == *other
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for Keyed<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.items.fmt(f)
    }
}

impl<K: Serialize, V: Serialize> Serialize for Keyed<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.items.serialize(s)
    }
}

impl<'de, K: Deserialize<'de> + Ord, V: Deserialize<'de>> Deserialize<'de> for Keyed<K, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::deserialize(d).map(Keyed::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_append_changes_only_the_new_entries() {
        let mut list = Entries::committed(vec![1, 2, 3]);
        assert_eq!(
            list.changed_from(),
            3,
            "read from the store: nothing changed"
        );
        list.push(4);
        list.extend([5, 6]);
        assert_eq!(list.changed_from(), 3);
        list.mark_committed();
        assert_eq!(list.changed_from(), 6);
    }

    #[test]
    fn an_edit_or_a_removal_changes_from_there_on() {
        let mut list = Entries::committed(vec![1, 2, 3, 4]);
        *list.get_mut(1).unwrap() = 20;
        assert_eq!(list.changed_from(), 1);
        let mut list = Entries::committed(vec![1, 2, 3, 4]);
        *list.rfind_mut(|x| *x == 3).unwrap() = 30;
        assert_eq!(list.changed_from(), 2);
        list.truncate(1);
        assert_eq!(list.changed_from(), 1);
        assert_eq!(list, vec![1]);
        let mut list = Entries::committed(vec![1, 2]);
        list.retain(|x| *x == 2); // through the whole Vec
        assert_eq!(list.changed_from(), 0, "anything may have changed");
    }

    #[test]
    fn a_copy_shares_the_entries_until_one_side_changes() {
        let mut live = Entries::committed(vec![String::from("a")]);
        let copy = live.clone();
        assert!(Arc::ptr_eq(&live.items, &copy.items));
        live.push("b".into());
        assert_eq!(*copy, vec![String::from("a")], "the copy keeps what it had");
        assert_eq!(live.len(), 2);
    }

    #[test]
    fn a_failed_commit_gives_its_changes_back() {
        let mut live = Entries::committed(vec![1, 2]);
        live.push(3);
        let taken = live.clone();
        live.mark_committed();
        live.push(4);
        live.mark_uncommitted(&taken);
        assert_eq!(live.changed_from(), 2);

        let mut map = Keyed::committed(BTreeMap::from([("a", 1)]));
        map.insert("b", 2);
        let taken = map.clone();
        map.mark_committed();
        map.remove(&"a");
        map.mark_uncommitted(&taken);
        assert_eq!(map.changes().unwrap(), &BTreeSet::from(["a", "b"]));
        map.mark_committed();
        let _ = map.entry("c").or_insert(3); // through the whole map
        assert_eq!(map.changes(), None);
    }

    #[test]
    fn they_read_and_compare_as_their_items() {
        let list: Entries<u8> = serde_json::from_str("[1,2]").unwrap();
        assert_eq!(serde_json::to_string(&list).unwrap(), "[1,2]");
        assert_eq!(
            list,
            Entries::committed(vec![1, 2]),
            "marks are not compared"
        );
        assert_eq!(format!("{list:?}"), "[1, 2]");
        let map: Keyed<String, u8> = serde_json::from_str(r#"{"a":1}"#).unwrap();
        assert_eq!(serde_json::to_string(&map).unwrap(), r#"{"a":1}"#);
    }
}
