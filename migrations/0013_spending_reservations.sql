-- Budgets and daily limits exact (issue #33): what a call about to run takes from the day's
-- spending and from a grant's budget is kept here before it runs, one row per (chat, call), so a
-- retry or a restart never counts it twice. The day's total is the ledger's payments of the day
-- plus the reservations of the day whose payment has no ledger row yet.
--
-- A grant's use moves out of its JSON body into columns of its own, changed only by a
-- conditional update that never passes its budget (`max_cents`); the body's copy is ignored.
ALTER TABLE grants ADD COLUMN max_cents INTEGER;
ALTER TABLE grants ADD COLUMN used_cents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN uses INTEGER NOT NULL DEFAULT 0;
UPDATE grants SET
    max_cents = json_extract(body, '$.maxCents'),
    used_cents = COALESCE(json_extract(body, '$.usedCents'), 0),
    uses = COALESCE(json_extract(body, '$.uses'), 0);

CREATE TABLE spending_reservations (
    session_id   TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    -- The UTC day it counts for (days since 1970-01-01) and what it will pay, wallet cents.
    day          INTEGER NOT NULL,
    cents        INTEGER NOT NULL,
    -- The grant whose budget it took `cents` of (and one use), if a grant let it run.
    grant_id     TEXT,
    at_ms        INTEGER NOT NULL,
    PRIMARY KEY (session_id, tool_call_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX spending_reservations_by_day ON spending_reservations (day);
