-- Fewer B-trees for a commit to touch. An approval's commit rewrites the session row and its
-- views in one transaction with one fsync (ADR 0007); every B-tree it changes is one more page
-- in the WAL and on that fsync (bench/: 21 pages per approval before this migration).
--
-- - `pending_approvals`, `pending_browser_calls` and `ledger` are keyed by their text ids
--   WITHOUT ROWID: the row lives in its key's B-tree instead of a rowid table plus an index on
--   the key. Their rows are small (well under the ~1 KiB that a WITHOUT ROWID row keeps in its
--   page).
-- - `pending_approvals_by_deadline` goes: nothing reads approvals by deadline (the runtime keeps
--   each deadline as a timer; ADR 0010).
-- - `sessions_unfinished` indexes the unfinished sessions by id: a turn going from
--   `awaiting_person` to `running` rewrites its entry in place instead of moving it.

CREATE TABLE pending_approvals_v2 (
    approval_id     TEXT PRIMARY KEY NOT NULL,
    session_id      TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id    TEXT NOT NULL,
    tool            TEXT NOT NULL,
    args            TEXT NOT NULL,
    requested_at_ms INTEGER NOT NULL,
    deadline_ms     INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO pending_approvals_v2
    SELECT approval_id, session_id, tool_call_id, tool, args, requested_at_ms, deadline_ms
    FROM pending_approvals;
DROP TABLE pending_approvals;
ALTER TABLE pending_approvals_v2 RENAME TO pending_approvals;
CREATE INDEX pending_approvals_by_session ON pending_approvals (session_id);

CREATE TABLE pending_browser_calls_v2 (
    tool_call_id TEXT PRIMARY KEY NOT NULL,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool         TEXT NOT NULL,
    args         TEXT NOT NULL,
    deadline_ms  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO pending_browser_calls_v2
    SELECT tool_call_id, session_id, tool, args, deadline_ms FROM pending_browser_calls;
DROP TABLE pending_browser_calls;
ALTER TABLE pending_browser_calls_v2 RENAME TO pending_browser_calls;
CREATE INDEX pending_browser_calls_by_session ON pending_browser_calls (session_id);

-- One row per payment; a tool call id pays at most once per session.
CREATE TABLE ledger_v2 (
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
) STRICT, WITHOUT ROWID;

INSERT INTO ledger_v2
    SELECT transaction_id, session_id, tool_call_id, amount_cents, currency, recipient,
           description, balance_after_cents, at_ms
    FROM ledger;
DROP TABLE ledger;
ALTER TABLE ledger_v2 RENAME TO ledger;

DROP INDEX sessions_unfinished;
CREATE INDEX sessions_unfinished ON sessions (id)
    WHERE turn_status IN ('running', 'awaiting_person');
