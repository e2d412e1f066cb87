//! The audit log as a hash chain (ADR 0029): every record carries
//! `SHA-256("countersign audit chain v1\0" ‖ previous hash ‖ seq (8 bytes, big-endian) ‖
//! SHA-256(the event in canonical JSON))`, the first record's previous hash being 32 zero bytes.
//! Editing, deleting or reordering a record changes every hash after it; a signed checkpoint of
//! a later hash ([`super::checkpoint`]) then no longer matches.
//!
//! Pure: the stores call [`Head::extend`] inside the transaction that appends, the server and
//! `countersign audit verify` call [`Walk`] over records read back.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::agent::store::{AuditEvent, AuditRecord, audit::canonical};

/// What a chain hash covers first.
const DOMAIN: &[u8] = b"countersign audit chain v1\0";

/// A SHA-256 value.
pub type Hash = [u8; 32];

/// The hash before the first record.
pub const ZERO: Hash = [0; 32];

/// SHA-256 of an event's canonical JSON (`event`: the record without `seq` and `hash`).
pub fn event_digest(event: &Value) -> Hash {
    Sha256::digest(canonical(event)).into()
}

/// [`event_digest`] of an event as the server builds it.
pub fn digest_of(event: &AuditEvent) -> Hash {
    event_digest(&serde_json::to_value(event).unwrap_or_default())
}

/// The chain's hash at `seq`, after `prev`, for an event whose digest is `digest`.
pub fn link(prev: &Hash, seq: i64, digest: &Hash) -> Hash {
    let mut hash = Sha256::new();
    hash.update(DOMAIN);
    hash.update(prev);
    hash.update(seq.to_be_bytes());
    hash.update(digest);
    hash.finalize().into()
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 bytes from 64 hex digits.
pub fn parse_hash(text: &str) -> Option<Hash> {
    let bytes = parse_hex(text)?;
    bytes.try_into().ok()
}

/// Bytes from hex (either case).
pub fn parse_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// The last record of a chain: its `seq` and hash (`seq` 0 and [`ZERO`]: none yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub seq: i64,
    pub hash: Hash,
}

impl Default for Head {
    fn default() -> Self {
        Head { seq: 0, hash: ZERO }
    }
}

impl Head {
    /// The head after appending an event whose digest is `digest`: the next `seq`, its hash.
    pub fn next(&self, digest: &Hash) -> Head {
        let seq = self.seq + 1;
        Head {
            seq,
            hash: link(&self.hash, seq, digest),
        }
    }
}

/// The chain's head and where it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChainHead {
    pub head: Head,
    /// The last record that existed before the chain did (0: the chain holds the whole log).
    /// Those records were chained when the server was upgraded: the chain vouches for them
    /// only from then on (ADR 0029).
    pub since: i64,
}

/// A record of the chain the walk could not link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub seq: i64,
    pub problem: String,
}

/// Walks records oldest first, recomputing each hash from the one before.
#[derive(Debug, Clone)]
pub struct Walk {
    head: Head,
    /// Records up to here may have gaps between their numbers (the log before the chain, on a
    /// database whose sequence skipped numbers).
    since: i64,
}

impl Walk {
    /// A walk from the chain's start.
    pub fn from_start(since: i64) -> Walk {
        Walk {
            head: Head::default(),
            since,
        }
    }

    /// A walk from a record known to be at `head` (a verified checkpoint).
    pub fn from(head: Head, since: i64) -> Walk {
        Walk { head, since }
    }

    pub fn head(&self) -> Head {
        self.head
    }

    /// Takes the next record (`event`: its JSON without `seq` and `hash`): its recomputed hash,
    /// or what is wrong with its place or its hash.
    pub fn step(&mut self, seq: i64, event: &Value, stored: Option<&str>) -> Result<Head, Broken> {
        let expected = self.head.seq + 1;
        let gap_allowed = seq <= self.since;
        if seq != expected && !(gap_allowed && seq > self.head.seq) {
            return Err(Broken {
                seq,
                problem: if seq <= self.head.seq {
                    format!(
                        "it comes after #{}: records are out of order",
                        self.head.seq
                    )
                } else {
                    format!(
                        "#{} to #{} are missing: records were deleted",
                        expected,
                        seq - 1
                    )
                },
            });
        }
        let next = Head {
            seq,
            hash: link(&self.head.hash, seq, &event_digest(event)),
        };
        match stored.map(|s| parse_hash(s).ok_or(s)) {
            None => {
                return Err(Broken {
                    seq,
                    problem: "it has no chain hash".into(),
                });
            }
            Some(Err(_)) => {
                return Err(Broken {
                    seq,
                    problem: "its chain hash is not 64 hex digits".into(),
                });
            }
            Some(Ok(hash)) if hash != next.hash => {
                return Err(Broken {
                    seq,
                    problem: "its hash does not match its contents and the record before it: \
                              it was changed, or one before it was"
                        .into(),
                });
            }
            Some(Ok(_)) => {}
        }
        self.head = next;
        Ok(next)
    }

    /// [`Walk::step`] for a record as the server reads it.
    pub fn record(&mut self, record: &AuditRecord) -> Result<Head, Broken> {
        let event = serde_json::to_value(&record.event).unwrap_or_default();
        self.step(record.seq, &event, record.hash.as_deref())
    }
}

/// The event of a record's JSON object (`{"seq", …event, "hash"}`): the object without `seq`
/// and `hash`.
pub fn event_of_line(line: &Value) -> Value {
    let mut event = line.clone();
    if let Some(map) = event.as_object_mut() {
        map.remove("seq");
        map.remove("hash");
    }
    event
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::agent::store::{AuditKind, audit::sample};

    fn chained(events: &[AuditEvent]) -> Vec<AuditRecord> {
        let mut head = Head::default();
        events
            .iter()
            .map(|e| {
                head = head.next(&digest_of(e));
                AuditRecord {
                    seq: head.seq,
                    event: e.clone(),
                    hash: Some(hex(&head.hash)),
                }
            })
            .collect()
    }

    fn walk(records: &[AuditRecord]) -> Result<Head, Broken> {
        let mut walk = Walk::from_start(0);
        let mut head = Head::default();
        for r in records {
            head = walk.record(r)?;
        }
        Ok(head)
    }

    fn events() -> Vec<AuditEvent> {
        (1..=4)
            .map(|i| sample("c", AuditKind::Requested, json!({"amount": i})))
            .collect()
    }

    #[test]
    fn a_chain_walks_and_any_change_breaks_it_where_it_was_made() {
        let records = chained(&events());
        assert_eq!(walk(&records).unwrap().seq, 4);

        let mut edited = records.clone();
        edited[1].event.args = json!({"amount": 99});
        assert_eq!(walk(&edited).unwrap_err().seq, 2);

        let mut deleted = records.clone();
        deleted.remove(2);
        let e = walk(&deleted).unwrap_err();
        assert_eq!((e.seq, e.problem.contains("deleted")), (4, true));

        let mut reordered = records.clone();
        reordered.swap(1, 2);
        let e = walk(&reordered).unwrap_err();
        assert!(e.problem.contains("out of order") || e.seq == 3, "{e:?}");

        // Renumbering the swapped records does not help: their hashes cover their place.
        let mut renumbered = reordered.clone();
        renumbered[1].seq = 2;
        renumbered[2].seq = 3;
        assert_eq!(walk(&renumbered).unwrap_err().seq, 2);
    }

    #[test]
    fn a_record_read_back_from_its_json_hashes_as_written() {
        let mut event = sample(
            "c",
            AuditKind::Executed,
            json!({"amount": 2.5, "note": "é"}),
        );
        event.outcome = Some(json!({"ok": {"balance": 97.5}}));
        event.facts = Some(json!({"policy": "x", "spent_today_cents": 0}));
        let records = chained(std::slice::from_ref(&event));
        let line = serde_json::to_string(&records[0]).unwrap();
        let back: Value = serde_json::from_str(&line).unwrap();
        let mut walk = Walk::from_start(0);
        let head = walk
            .step(1, &event_of_line(&back), back["hash"].as_str())
            .unwrap();
        assert_eq!(Some(hex(&head.hash)), records[0].hash);
    }

    #[test]
    fn records_before_the_chain_may_skip_numbers_and_later_ones_may_not() {
        let mut records = chained(&events());
        // Rechain with numbers 1, 3 (before the chain), then 4, 6.
        let mut head = Head::default();
        for (record, seq) in records.iter_mut().zip([1, 3, 4, 6]) {
            head = Head {
                seq,
                hash: link(&head.hash, seq, &digest_of(&record.event)),
            };
            record.seq = seq;
            record.hash = Some(hex(&head.hash));
        }
        let mut walk = Walk::from_start(3);
        for r in &records[..3] {
            walk.record(r).unwrap();
        }
        assert!(walk.record(&records[3]).unwrap_err().problem.contains("#5"));
        assert_eq!(parse_hash(&hex(&ZERO)), Some(ZERO));
        assert_eq!(parse_hash("zz"), None);
    }
}
