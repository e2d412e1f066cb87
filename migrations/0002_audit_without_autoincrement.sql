-- The audit sequence without AUTOINCREMENT. Audit rows are never deleted, so plain rowids
-- already only grow; AUTOINCREMENT cost one more page write (sqlite_sequence) on every append,
-- on the path of every approval. `seq` values are kept.

CREATE TABLE audit_v2 (
    seq          INTEGER PRIMARY KEY,
    at_ms        INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    turn_id      TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    approval_id  TEXT,
    tool         TEXT NOT NULL,
    args_digest  TEXT NOT NULL,
    -- The whole AuditEvent as JSON (the columns above are for filtering).
    event        TEXT NOT NULL
) STRICT;

INSERT INTO audit_v2 (seq, at_ms, kind, session_id, turn_id, tool_call_id, approval_id, tool,
                      args_digest, event)
    SELECT seq, at_ms, kind, session_id, turn_id, tool_call_id, approval_id, tool, args_digest,
           event
    FROM audit;

DROP TABLE audit;
ALTER TABLE audit_v2 RENAME TO audit;

CREATE INDEX audit_by_session ON audit (session_id, seq);
CREATE INDEX audit_by_tool ON audit (tool, seq);
CREATE INDEX audit_by_kind ON audit (kind, seq);
