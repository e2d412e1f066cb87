//! [`super`]'s unit tests.

use std::collections::{BTreeMap, BTreeSet};

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
    *list.get_mut(1).unwrap().unwrap() = 20;
    assert_eq!(list.changed_from(), 1);
    let mut list = Entries::committed(vec![1, 2, 3, 4]);
    *list.rfind_mut(|x| *x == 3).unwrap().unwrap() = 30;
    assert_eq!(list.changed_from(), 2);
    list.truncate(1);
    assert_eq!(list.changed_from(), 1);
    assert_eq!(list, vec![1]);
    let mut list = Entries::committed(vec![1, 2]);
    list.all_mut().unwrap().retain(|x| *x == 2); // through the whole Vec
    assert_eq!(list.changed_from(), 0, "anything may have changed");
}

#[test]
fn a_copy_shares_the_entries_until_one_side_changes() {
    let mut live = Entries::committed(vec![String::from("a")]);
    let copy = live.clone();
    assert!(Arc::ptr_eq(&live.items, &copy.items));
    live.push("b".into());
    assert_eq!(copy, vec![String::from("a")], "the copy keeps what it had");
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
    assert_eq!(*map.changes().unwrap(), BTreeSet::from(["a", "b"]));
    map.mark_committed();
    map.mark_all_changed(); // after a failed commit
    assert_eq!(map.changes(), None);
}

/// A map read by key (a chat loaded with its head, ADR 0045): only the keys looked up are
/// known; a key changed here is never overwritten by what the store had; a removal of a key
/// not read is written; and it never claims to be the whole map when written.
#[test]
fn a_map_read_by_key_knows_only_what_was_looked_up() {
    let mut map: Keyed<&str, u8> = Keyed::by_key();
    assert!(!map.is_whole());
    assert_eq!(map.unread_of(&["a", "b", "a"]), ["a", "b"]);
    map.insert("b", 20);
    assert_eq!(map.unread_of(&["a", "b"]), ["a"], "a key set here is known");
    map.fill(
        Some(vec!["a", "b", "z"]),
        BTreeMap::from([("a", 1), ("b", 2)]),
    );
    assert_eq!(
        (map.get("a"), map.get("b"), map.get("z")),
        (Some(&1), Some(&20), None)
    );
    assert!(
        map.unread_of(&["a", "b", "z"]).is_empty(),
        "z: not answered"
    );
    assert_eq!(map.unread_of(&["c"]), ["c"]);
    map.remove(&"c");
    assert_eq!(*map.changes().unwrap(), BTreeSet::from(["b", "c"]));
    map.mark_all_changed();
    assert_eq!(
        *map.changes().unwrap(),
        BTreeSet::from(["a", "b", "c"]),
        "what it holds and what changed, never the whole map"
    );
    map.fill(None, BTreeMap::from([("a", 9), ("d", 4)]));
    assert!(map.is_whole());
    assert_eq!((map.get("a"), map.get("d")), (Some(&1), Some(&4)));
    assert!(
        map.unread_of(&["e"]).is_empty(),
        "a whole map knows every key"
    );
}

/// A list read from the store decodes only the entries a reader touches (ADR 0045): the
/// unreadable first entry here is never decoded by what an answer does (count, append, the
/// last entries), and a reader of the whole list gets an error naming it, not a panic.
#[test]
fn a_stored_list_decodes_only_what_is_read() {
    let mut list: Entries<u32> = Entries::stored(vec!["oops".into(), "2".into(), "3".into()]);
    assert_eq!(
        (list.len(), list.undecoded(), list.changed_from()),
        (3, 3, 3)
    );
    list.push(4);
    assert_eq!(*list.last_mut().unwrap().unwrap(), 4);
    assert_eq!(list.undecoded(), 3, "the appended entry is the last one");
    *list.get_mut(2).unwrap().unwrap() = 30;
    assert_eq!((list.undecoded(), list.changed_from()), (2, 2));
    *list.rfind_mut(|x| *x == 2).unwrap().unwrap() = 20;
    assert_eq!((list.undecoded(), list.changed_from()), (1, 1));
    assert_eq!(
        list.iter()
            .rev()
            .take(3)
            .map(|x| *x.unwrap())
            .collect::<Vec<_>>(),
        [4, 30, 20]
    );
    assert_eq!(
        list.bodies_from(0).unwrap(),
        ["oops", "20", "30", "4"],
        "a stored entry is written back as it was read"
    );
    assert_eq!(list.decoded().unwrap_err().index, 0);
    assert!(
        list.rfind_mut(|x| *x == 1).is_err(),
        "the search reached it"
    );
    list.truncate(1);
    assert_eq!((list.len(), list.undecoded()), (1, 1));
    list.truncate(0);
    assert_eq!(list.decoded().unwrap(), [] as [u32; 0]);

    let mut read: Entries<u32> = Entries::stored(vec!["1".into(), "2".into()]);
    assert_eq!(
        read,
        Entries::committed(vec![1, 2]),
        "a stored list reads as its items"
    );
    assert_eq!(format!("{read:?}"), "[1, 2]");
    assert_eq!(serde_json::to_string(&read).unwrap(), "[1,2]");
    let shared = read.shared().unwrap();
    assert_eq!(*shared, [1, 2]);
    assert_eq!(read.undecoded(), 0, "decoded once, and kept");
    assert!(Arc::ptr_eq(&shared, &read.shared().unwrap()));
}

/// A list loaded with its chat's head only (ADR 0045, amendment): what an answer does works
/// on its last entries, anything that reaches an entry not read is told so (never a wrong
/// answer, never a write of an entry it did not read), and a fill makes it whole.
#[test]
fn a_list_not_read_works_on_its_tail_and_fills() {
    let mut list: Entries<u32> = Entries::on_disk(4, vec!["4".into()]);
    assert_eq!((list.len(), list.unread(), list.changed_from()), (4, 3, 4));
    *list.last_mut().unwrap().unwrap() = 40;
    list.push(5);
    assert_eq!(list.changed_from(), 3);
    assert_eq!(list.bodies_from(3).unwrap(), ["40", "5"]);
    assert!(list.bodies_from(2).unwrap_err().not_read());
    assert!(list.get_mut(1).unwrap_err().not_read());
    assert!(list.rfind_mut(|x| *x == 1).unwrap_err().not_read());
    assert!(list.decoded().unwrap_err().not_read());
    assert!(list.iter().next().unwrap().unwrap_err().not_read());
    assert_eq!(
        list.iter()
            .rev()
            .take(2)
            .map(|x| *x.unwrap())
            .collect::<Vec<_>>(),
        [5, 40]
    );
    list.mark_all_changed();
    assert_eq!(
        list.changed_from(),
        3,
        "the store has the entries not read as they are"
    );
    list.mark_committed();

    assert!(list.fill(vec!["1".into()]).is_err(), "fewer than expected");
    list.fill(vec!["1".into(), "2".into(), "3".into(), "9".into()])
        .unwrap();
    assert_eq!(list.unread(), 0);
    assert_eq!(list.changed_from(), 5, "a fill changes nothing");
    assert_eq!(list.decoded().unwrap(), [1, 2, 3, 40, 5]);

    let mut short: Entries<u32> = Entries::on_disk(3, vec!["3".into()]);
    short.truncate(1);
    assert_eq!(
        (short.len(), short.unread(), short.changed_from()),
        (1, 1, 1)
    );
    short.push(7);
    short.fill(vec!["1".into(), "2".into()]).unwrap();
    assert_eq!(short.decoded().unwrap(), [1, 7]);
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

/// ADR 0045's fourth amendment: a list loaded as its length holds only what was appended since;
/// a commit writes those after the ones not read; it is never written out whole, and a store
/// that keeps the list whole can give it the rest.
#[test]
fn an_appended_list_loaded_as_its_length_holds_only_what_came_since() {
    let mut list: Appended<u32> = Appended::on_disk(3);
    assert_eq!((list.len(), list.read(), list.whole()), (3, &[][..], None));
    list.push(7);
    assert_eq!((list.len(), list.read()), (4, &[7][..]));
    let from = list.entries().changed_from();
    assert_eq!(from, 3, "only the new entry changed");
    assert_eq!(list.since(from), Some(&[7][..]));
    assert_eq!(list.since(1), None, "nothing before the entries read");
    assert!(
        serde_json::to_string(&list).is_err(),
        "never written out whole"
    );
    assert_ne!(
        list,
        Appended::from(vec![7]),
        "a list not read is not the one read"
    );

    assert!(
        list.fill(&[1, 2]).is_err(),
        "fewer entries than were not read"
    );
    list.fill(&[1, 2, 3, 99]).unwrap();
    assert_eq!(list.whole(), Some(&[1, 2, 3, 7][..]));
    assert_eq!(serde_json::to_string(&list).unwrap(), "[1,2,3,7]");

    let whole = Appended::committed(vec![1, 2]);
    assert_eq!(
        (whole.whole(), whole.read()),
        (Some(&[1, 2][..]), &[1, 2][..])
    );
}
