-- The audit log as a hash chain (issue #38, ADR 0029). Each record's `hash` is SHA-256 over the
-- previous record's hash, its `seq` and its event; the records already here are chained when
-- this migration runs (by the server, in the migration's transaction), and `audit_chain.since`
-- says where they end: the chain vouches for them from the upgrade on.
--
-- `audit_chain` is also the chain's head: every transaction that appends audit records locks
-- its one row, numbers its records after the head and moves the head, so records are numbered
-- in commit order across instances, without gaps or forks (`seq` is no longer an identity).
ALTER TABLE audit ADD COLUMN hash TEXT;
ALTER TABLE audit ALTER COLUMN seq DROP IDENTITY IF EXISTS;

CREATE TABLE audit_chain (
    id    BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id),
    since BIGINT NOT NULL,
    seq   BIGINT NOT NULL,
    hash  TEXT NOT NULL
);

-- The chain's head as the server signed it (Ed25519), every so many records and at shutdown.
CREATE TABLE audit_checkpoints (
    seq       BIGINT PRIMARY KEY,
    hash      TEXT NOT NULL,
    since     BIGINT NOT NULL,
    at_ms     BIGINT NOT NULL,
    key       TEXT NOT NULL,
    signature TEXT NOT NULL
);

-- The text of each policy file whose rules decided an audited call, by its SHA-256.
CREATE TABLE audit_policies (
    digest   TEXT COLLATE "C" PRIMARY KEY,
    text     TEXT NOT NULL,
    first_ms BIGINT NOT NULL
);
