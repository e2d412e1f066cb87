-- The audit log as a hash chain (issue #38, ADR 0029). Each record's `hash` is SHA-256 over the
-- previous record's hash, its `seq` and its event; the records already here are chained when
-- this migration runs (by the server, right after this script, in the same transaction), and
-- `audit_chain.since` says where they end: the chain vouches for them from the upgrade on.
ALTER TABLE audit ADD COLUMN hash TEXT;

CREATE TABLE audit_chain (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    since INTEGER NOT NULL
) STRICT;

-- The chain's head as the server signed it (Ed25519), every so many records and at shutdown.
CREATE TABLE audit_checkpoints (
    seq       INTEGER PRIMARY KEY,
    hash      TEXT NOT NULL,
    since     INTEGER NOT NULL,
    at_ms     INTEGER NOT NULL,
    key       TEXT NOT NULL,
    signature TEXT NOT NULL
) STRICT;

-- The text of each policy file whose rules decided an audited call, by its SHA-256: a
-- receipt's verifier evaluates the rule again.
CREATE TABLE audit_policies (
    digest   TEXT PRIMARY KEY NOT NULL,
    text     TEXT NOT NULL,
    first_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
