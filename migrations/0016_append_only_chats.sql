-- A chat's growing parts as one row per entry (issue #35, ADR 0038): a commit writes the entries
-- that changed (an append: the new ones), not the whole conversation. `sessions` keeps what does
-- not grow (the turn, the wallet's balance, the tools' state); the history, the messages and the
-- wallet's payments are rows of `session_entries`, the answered approvals rows of
-- `session_resolutions`. The rows already here move over, in this migration's transaction.

CREATE TABLE session_entries (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    -- 0: the history (the conversation as the model sees it), 1: the messages (as the person
    -- sees it), 2: the wallet's payments.
    list       INTEGER NOT NULL,
    -- The entry's index in its list, from 0.
    position   INTEGER NOT NULL,
    -- The entry's JSON.
    body       TEXT NOT NULL,
    PRIMARY KEY (session_id, list, position)
) STRICT, WITHOUT ROWID;

CREATE TABLE session_resolutions (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    approval_id TEXT NOT NULL,
    -- The ApprovalResolution's JSON.
    body        TEXT NOT NULL,
    PRIMARY KEY (session_id, approval_id)
) STRICT, WITHOUT ROWID;

-- An entry's JSON as json_each gives it: objects and arrays as their text, anything else quoted.
INSERT INTO session_entries (session_id, list, position, body)
SELECT s.id, 0, j.key,
       CASE WHEN j.type IN ('object', 'array') THEN j.value ELSE json_quote(j.value) END
FROM sessions s, json_each(s.history) j;

INSERT INTO session_entries (session_id, list, position, body)
SELECT s.id, 1, j.key,
       CASE WHEN j.type IN ('object', 'array') THEN j.value ELSE json_quote(j.value) END
FROM sessions s, json_each(s.messages) j;

INSERT INTO session_entries (session_id, list, position, body)
SELECT s.id, 2, j.key,
       CASE WHEN j.type IN ('object', 'array') THEN j.value ELSE json_quote(j.value) END
FROM sessions s, json_each(s.wallet, '$.transactions') j;

INSERT INTO session_resolutions (session_id, approval_id, body)
SELECT s.id, j.key,
       CASE WHEN j.type IN ('object', 'array') THEN j.value ELSE json_quote(j.value) END
FROM sessions s, json_each(s.resolved_approvals) j;

UPDATE sessions SET wallet = json_set(wallet, '$.transactions', json('[]'));

ALTER TABLE sessions DROP COLUMN history;
ALTER TABLE sessions DROP COLUMN messages;
ALTER TABLE sessions DROP COLUMN resolved_approvals;
