-- A chat's growing parts as one row per entry (issue #35, ADR 0038): a commit writes the entries
-- that changed (an append: the new ones), not the whole conversation. `sessions` keeps what does
-- not grow (the turn, the wallet's balance, the tools' state); the history, the messages and the
-- wallet's payments are rows of `session_entries`, the answered approvals rows of
-- `session_resolutions` (the same tables as SQLite's migration 0016). The rows already here move
-- over, in this migration's transaction. `json` (not `jsonb`) keeps each entry's text as it was.

CREATE TABLE session_entries (
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    -- 0: the history (the conversation as the model sees it), 1: the messages (as the person
    -- sees it), 2: the wallet's payments.
    list       SMALLINT NOT NULL,
    -- The entry's index in its list, from 0.
    position   BIGINT NOT NULL,
    -- The entry's JSON.
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, list, position)
);

CREATE TABLE session_resolutions (
    session_id  TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    approval_id TEXT NOT NULL,
    -- The ApprovalResolution's JSON.
    body        TEXT NOT NULL,
    PRIMARY KEY (session_id, approval_id)
);

INSERT INTO session_entries (session_id, list, position, body)
SELECT s.id, 0, j.position - 1, j.body::TEXT
FROM sessions s, json_array_elements(s.history::json) WITH ORDINALITY AS j (body, position);

INSERT INTO session_entries (session_id, list, position, body)
SELECT s.id, 1, j.position - 1, j.body::TEXT
FROM sessions s, json_array_elements(s.messages::json) WITH ORDINALITY AS j (body, position);

INSERT INTO session_entries (session_id, list, position, body)
SELECT s.id, 2, j.position - 1, j.body::TEXT
FROM sessions s,
     json_array_elements(COALESCE(s.wallet::json -> 'transactions', '[]'::json))
         WITH ORDINALITY AS j (body, position);

INSERT INTO session_resolutions (session_id, approval_id, body)
SELECT s.id, j.key, j.value::TEXT
FROM sessions s, json_each(s.resolved_approvals::json) AS j;

UPDATE sessions
SET wallet = (jsonb_set(wallet::jsonb, '{transactions}', '[]'::jsonb))::TEXT
WHERE wallet::jsonb ? 'transactions';

ALTER TABLE sessions DROP COLUMN history;
ALTER TABLE sessions DROP COLUMN messages;
ALTER TABLE sessions DROP COLUMN resolved_approvals;
