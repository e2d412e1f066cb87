-- Countersign's durable store on Postgres (src/agent/store/postgres), for several instances
-- sharing one database. Applied in order at start-up; each applied version is a row of
-- `countersign_schema`, and the store takes an advisory lock while it migrates, so instances
-- starting together migrate once.
--
-- This first migration is the schema the SQLite store reaches after its migrations 0001..0009
-- (migrations/*.sql), in one step: the same tables, columns and indexes, with BIGINT for
-- milliseconds and cents and TEXT for JSON, so a record is read back byte for byte as it was
-- written. Ids that listings sort by are `COLLATE "C"`: they sort byte-wise, as in SQLite.
--
-- `sessions` is the source of truth: one row per chat, the record's parts as JSON. The
-- `pending_approvals`, `pending_browser_calls` and `ledger` tables are indexed views of the same
-- record, written in the same transaction as every commit. `audit` is append-only.

CREATE TABLE sessions (
    id                 TEXT COLLATE "C" PRIMARY KEY,
    created_at_ms      BIGINT NOT NULL,
    updated_at_ms      BIGINT NOT NULL,
    -- NULL before the first turn; otherwise the TurnStatus in snake_case.
    turn_status        TEXT,
    history            TEXT NOT NULL,
    messages           TEXT NOT NULL,
    wallet             TEXT NOT NULL,
    turn               TEXT,
    resolved_approvals TEXT NOT NULL,
    -- What tools keep between calls (ToolContext::with_state): one JSON object, by tool name.
    tool_state         TEXT NOT NULL DEFAULT '{}',
    -- Whose chat it is (NULL: the one local person). Written once, when the row is made.
    owner              TEXT
);

CREATE INDEX sessions_by_update ON sessions (updated_at_ms DESC, id);
CREATE INDEX sessions_unfinished ON sessions (id)
    WHERE turn_status IN ('running', 'awaiting_person');

CREATE TABLE pending_approvals (
    approval_id     TEXT PRIMARY KEY,
    session_id      TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id    TEXT NOT NULL,
    tool            TEXT NOT NULL,
    args            TEXT NOT NULL,
    requested_at_ms BIGINT NOT NULL,
    deadline_ms     BIGINT NOT NULL
);

CREATE INDEX pending_approvals_by_session ON pending_approvals (session_id);

CREATE TABLE pending_browser_calls (
    tool_call_id TEXT PRIMARY KEY,
    session_id   TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool         TEXT NOT NULL,
    args         TEXT NOT NULL,
    deadline_ms  BIGINT NOT NULL
);

CREATE INDEX pending_browser_calls_by_session ON pending_browser_calls (session_id);

-- One row per payment; a tool call id pays at most once per session. A payment in another
-- currency keeps the amount as the call named it (`paid_minor`, `paid_currency`); `amount_cents`
-- and `currency` are what the wallet was debited.
CREATE TABLE ledger (
    transaction_id      TEXT PRIMARY KEY,
    session_id          TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool_call_id        TEXT NOT NULL,
    amount_cents        BIGINT NOT NULL,
    currency            TEXT NOT NULL,
    recipient           TEXT NOT NULL,
    description         TEXT NOT NULL,
    balance_after_cents BIGINT NOT NULL,
    at_ms               BIGINT NOT NULL,
    paid_minor          BIGINT,
    paid_currency       TEXT,
    UNIQUE (session_id, tool_call_id)
);

-- Running totals ("at most 50 USD a day without asking") read what the wallets paid since the
-- start of a UTC day.
CREATE INDEX ledger_by_time ON ledger (at_ms);

-- `seq` only grows and is never reused (rows are never deleted). It is taken when a row is
-- inserted, so two commits in flight at once may become visible out of `seq` order.
CREATE TABLE audit (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at_ms        BIGINT NOT NULL,
    kind         TEXT NOT NULL,
    session_id   TEXT COLLATE "C" NOT NULL,
    turn_id      TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    approval_id  TEXT,
    tool         TEXT NOT NULL,
    args_digest  TEXT NOT NULL,
    -- The whole AuditEvent as JSON (the columns above are for filtering).
    event        TEXT NOT NULL
);

CREATE INDEX audit_by_session ON audit (session_id, seq);
CREATE INDEX audit_by_tool ON audit (tool, seq);
CREATE INDEX audit_by_kind ON audit (kind, seq);

-- The output of a session's turn that waits for the person (ADR 0011): written with the record
-- when the turn pauses, removed when that turn is over. `entries` is a JSON array of chunks and
-- the markers "pause" / "end"; read only while `turn_id` is the session's current, unfinished
-- turn.
CREATE TABLE paused_turn_logs (
    session_id TEXT COLLATE "C" PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id    TEXT NOT NULL,
    entries    TEXT NOT NULL
);

-- Sign-in sessions of the edge (ADR 0016): the secret their cookies are signed with, and each
-- session issued, so that signing out (an `ended_ms`) holds across restarts and instances.
CREATE TABLE server_secrets (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE signins (
    id         TEXT PRIMARY KEY,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    ended_ms   BIGINT,
    address    TEXT,
    -- A sign-in of a person (NULL: the API key's sign-in form).
    person_id  TEXT
);

-- The last tool list of each MCP server (ADR 0021), as the server sent it (`tools/list`, JSON).
CREATE TABLE mcp_tool_lists (
    server    TEXT PRIMARY KEY,
    tools     TEXT NOT NULL,
    listed_ms BIGINT NOT NULL
);

-- Grants (ADR 0023): approvals the person asked the server to remember, as JSON (`body`,
-- protocol::grant::Grant); the columns beside it are what a listing sorts and filters on.
CREATE TABLE grants (
    id            TEXT COLLATE "C" PRIMARY KEY,
    tool          TEXT NOT NULL,
    chat          TEXT,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT,
    body          TEXT NOT NULL
);

CREATE INDEX grants_by_expiry ON grants (expires_at_ms);

-- People, their passkeys and one-time links (ADR 0024). A person's roles are a JSON array; a
-- passkey is webauthn-rs' `Passkey` as JSON; an invite is kept by the SHA-256 of its link's
-- token only, so this table never holds a usable link.
CREATE TABLE people (
    id         TEXT COLLATE "C" PRIMARY KEY,
    name       TEXT NOT NULL,
    roles      TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    invited_by TEXT,
    revoked_ms BIGINT
);

CREATE TABLE passkeys (
    id           TEXT COLLATE "C" PRIMARY KEY,
    person_id    TEXT COLLATE "C" NOT NULL REFERENCES people (id),
    label        TEXT NOT NULL,
    passkey      TEXT NOT NULL,
    created_ms   BIGINT NOT NULL,
    last_used_ms BIGINT
);

CREATE INDEX passkeys_by_person ON passkeys (person_id);

CREATE TABLE invites (
    digest     TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    person_id  TEXT,
    name       TEXT,
    roles      TEXT NOT NULL,
    created_by TEXT,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    used_ms    BIGINT
);
