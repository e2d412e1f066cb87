-- Countersign's durable store (src/agent/store/sqlite.rs). Applied in order; the applied
-- version is kept in PRAGMA user_version.
--
-- `sessions` is the source of truth: one row per chat, the record's parts as JSON. The
-- `pending_approvals`, `pending_browser_calls` and `ledger` tables are indexed views of the same
-- record, rewritten in the same transaction on every commit, so operators (and a future
-- multi-instance store) can query them without decoding JSON. `audit` is append-only.

CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY NOT NULL,
    created_at_ms      INTEGER NOT NULL,
    updated_at_ms      INTEGER NOT NULL,
    -- NULL before the first turn; otherwise the TurnStatus in snake_case.
    turn_status        TEXT,
    history            TEXT NOT NULL,
    messages           TEXT NOT NULL,
    wallet             TEXT NOT NULL,
    turn               TEXT,
    resolved_approvals TEXT NOT NULL
) STRICT;

CREATE INDEX sessions_by_update ON sessions (updated_at_ms DESC, id);
CREATE INDEX sessions_unfinished ON sessions (turn_status)
    WHERE turn_status IN ('running', 'awaiting_person');

CREATE TABLE pending_approvals (
    approval_id     TEXT PRIMARY KEY NOT NULL,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id    TEXT NOT NULL,
    tool            TEXT NOT NULL,
    args            TEXT NOT NULL,
    requested_at_ms INTEGER NOT NULL,
    deadline_ms     INTEGER NOT NULL
) STRICT;

CREATE INDEX pending_approvals_by_session ON pending_approvals (session_id);
CREATE INDEX pending_approvals_by_deadline ON pending_approvals (deadline_ms);

CREATE TABLE pending_browser_calls (
    tool_call_id TEXT PRIMARY KEY NOT NULL,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool         TEXT NOT NULL,
    args         TEXT NOT NULL,
    deadline_ms  INTEGER NOT NULL
) STRICT;

CREATE INDEX pending_browser_calls_by_session ON pending_browser_calls (session_id);

-- One row per payment; a tool call id pays at most once per session.
CREATE TABLE ledger (
    transaction_id      TEXT PRIMARY KEY NOT NULL,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id        TEXT NOT NULL,
    amount_cents        INTEGER NOT NULL,
    currency            TEXT NOT NULL,
    recipient           TEXT NOT NULL,
    description         TEXT NOT NULL,
    balance_after_cents INTEGER NOT NULL,
    at_ms               INTEGER NOT NULL,
    UNIQUE (session_id, tool_call_id)
) STRICT;

CREATE TABLE audit (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
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

CREATE INDEX audit_by_session ON audit (session_id, seq);
CREATE INDEX audit_by_tool ON audit (tool, seq);
CREATE INDEX audit_by_kind ON audit (kind, seq);
