-- The inbox from the database (ADR 0039): each waiting approval carries what the inbox page
-- shows (`entry`, the `Waiting` as JSON) and whose chat it is and which rule asks (for
-- `/metrics`), and is found by its keys (`approval_keys`: who asked, the role it wants or every
-- person, whether someone signed it), oldest first, a page at a time. Rows written before this
-- migration have no entry: the store lists their sessions (`unindexed`) and the runtime commits
-- them again once at start-up.
ALTER TABLE pending_approvals ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE pending_approvals ADD COLUMN rule TEXT;
ALTER TABLE pending_approvals ADD COLUMN entry TEXT;

CREATE INDEX pending_approvals_by_tool ON pending_approvals (tool, rule);

-- One row per key of a waiting approval, written and cleared with its session's views. A page of
-- one key is a range of the primary key after the last page's (requested_at_ms, approval_id).
CREATE TABLE approval_keys (
    key             TEXT NOT NULL,
    requested_at_ms INTEGER NOT NULL,
    approval_id     TEXT NOT NULL,
    deadline_ms     INTEGER NOT NULL,
    session_id      TEXT NOT NULL,
    PRIMARY KEY (key, requested_at_ms, approval_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX approval_keys_by_session ON approval_keys (session_id);
