//! [`Keyed`]: a map of a record that grows with the conversation (its answered approvals),
//! aware of what changed since the last commit, and — read from the store by key — of which of
//! its keys it knows (see the parent module).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    ops::Deref,
    sync::Arc,
};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map of a record that grows with the conversation (see the module).
///
/// A map read from the store by key (`Keyed::by_key`, a chat loaded with its head only) holds
/// only the entries looked up ([`Keyed::unread_of`], [`Keyed::fill`]): a key it lacks may be on
/// disk, so a reader looks its keys up first, and its commits never replace the stored map.
#[derive(Clone)]
pub struct Keyed<K, V> {
    items: Arc<BTreeMap<K, V>>,
    /// Keys inserted or removed since the last commit.
    changed: BTreeSet<K>,
    /// Everything may have changed: the next commit writes the whole map.
    all_changed: bool,
    /// `None`: every stored entry is here. Else the keys looked up in the store so far (found
    /// or not): only those are known.
    looked_up: Option<Arc<BTreeSet<K>>>,
}

impl<K: Ord + Clone, V: Clone> Keyed<K, V> {
    /// A map whose entries are all on disk already (read from the store).
    pub fn committed(items: BTreeMap<K, V>) -> Self {
        Keyed {
            items: Arc::new(items),
            changed: BTreeSet::new(),
            all_changed: false,
            looked_up: None,
        }
    }

    /// A stored map none of whose entries was read yet: each is read by key when a reader
    /// needs it.
    pub fn by_key() -> Self {
        Keyed {
            items: Arc::new(BTreeMap::new()),
            changed: BTreeSet::new(),
            all_changed: false,
            looked_up: Some(Arc::new(BTreeSet::new())),
        }
    }

    /// Whether every stored entry is here.
    pub fn is_whole(&self) -> bool {
        self.looked_up.is_none()
    }

    /// Which of `keys` may be stored but are not known here yet (none when the map is whole):
    /// what to read before a reader asks for them.
    pub fn unread_of<'a>(&self, keys: impl IntoIterator<Item = &'a K>) -> Vec<K>
    where
        K: 'a,
    {
        let Some(looked_up) = &self.looked_up else {
            return Vec::new();
        };
        let mut unread: Vec<K> = keys
            .into_iter()
            .filter(|k| {
                !self.items.contains_key(k) && !self.changed.contains(k) && !looked_up.contains(k)
            })
            .cloned()
            .collect();
        unread.sort();
        unread.dedup();
        unread
    }

    /// Takes what the store holds for the keys `asked` (`found`, each as stored), as on disk
    /// already; a key changed here since stays as it is here. `asked: None`: every stored
    /// entry was read, and the map is whole from here on.
    pub fn fill(&mut self, asked: Option<Vec<K>>, found: BTreeMap<K, V>) {
        let items = Arc::make_mut(&mut self.items);
        for (key, value) in found {
            if !self.changed.contains(&key) && !items.contains_key(&key) {
                items.insert(key, value);
            }
        }
        match (asked, &mut self.looked_up) {
            (None, looked_up) => *looked_up = None,
            (Some(asked), Some(looked_up)) => Arc::make_mut(looked_up).extend(asked),
            (Some(_), None) => {}
        }
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.changed.insert(key.clone());
        Arc::make_mut(&mut self.items).insert(key, value)
    }

    /// Removes every entry, read or not: the map is whole (and empty), and the next commit
    /// replaces the stored one.
    pub fn clear(&mut self) {
        Arc::make_mut(&mut self.items).clear();
        self.looked_up = None;
        self.all_changed = true;
    }

    /// Removes `key`; in a map not read whole, a key not here may be stored: its removal is
    /// written all the same.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        if !self.items.contains_key(key) {
            if !self.is_whole() {
                self.changed.insert(key.clone());
            }
            return None;
        }
        self.changed.insert(key.clone());
        Arc::make_mut(&mut self.items).remove(key)
    }

    /// What changed since the last commit: `None` when anything may have (write the whole
    /// map), else the keys that changed (each now in the map, or removed from it). A map not
    /// read whole is never written whole: every entry it holds, and the keys changed.
    pub fn changes(&self) -> Option<std::borrow::Cow<'_, BTreeSet<K>>> {
        match (self.all_changed, self.is_whole()) {
            (false, _) => Some(std::borrow::Cow::Borrowed(&self.changed)),
            (true, true) => None,
            (true, false) => Some(std::borrow::Cow::Owned(
                self.items.keys().chain(&self.changed).cloned().collect(),
            )),
        }
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
            looked_up: None,
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
            looked_up: None,
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
