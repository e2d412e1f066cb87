-- The inbox from the database (ADR 0039; SQLite's migration 0015): each waiting approval
-- carries what the inbox page shows (`entry`, the `Waiting` as JSON) and whose chat it is and
-- which rule asks (for `/metrics`), and is found by its keys (`approval_keys`: who asked, the
-- role it wants or every person, whether someone signed it), oldest first, a page at a time, so
-- no instance keeps the deployment's approvals in memory. Rows written before this migration
-- have no entry: the store lists their sessions (`unindexed`) and the runtime commits them again
-- once at start-up.
ALTER TABLE pending_approvals ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE pending_approvals ADD COLUMN rule TEXT;
ALTER TABLE pending_approvals ADD COLUMN entry TEXT;

CREATE INDEX pending_approvals_by_tool ON pending_approvals (tool, rule);
CREATE INDEX pending_approvals_unindexed ON pending_approvals (session_id) WHERE entry IS NULL;

-- One row per key of a waiting approval, written and cleared with its session's views. A page of
-- one key is a range of the primary key after the last page's (requested_at_ms, approval_id);
-- the deadline rides along in the index so expired ones are skipped without the table.
CREATE TABLE approval_keys (
    key             TEXT COLLATE "C" NOT NULL,
    requested_at_ms BIGINT NOT NULL,
    approval_id     TEXT COLLATE "C" NOT NULL,
    deadline_ms     BIGINT NOT NULL,
    session_id      TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (key, requested_at_ms, approval_id) INCLUDE (deadline_ms)
);

CREATE INDEX approval_keys_by_session ON approval_keys (session_id);
