-- Grants (issue #22, ADR 0023): approvals the person asked the server to remember. The grant is
-- kept as JSON (`body`, protocol::grant::Grant); the columns beside it are what a listing sorts
-- and filters on.
CREATE TABLE grants (
    id            TEXT PRIMARY KEY NOT NULL,
    tool          TEXT NOT NULL,
    chat          TEXT,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    revoked_at_ms INTEGER,
    body          TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX grants_by_expiry ON grants (expires_at_ms);

-- Running totals ("at most 50 USD a day without asking") read what the wallets paid since the
-- start of a UTC day.
CREATE INDEX ledger_by_time ON ledger (at_ms);

-- A payment in another currency keeps the amount as the call named it (the ledger's
-- `amount_cents` and `currency` are what the wallet was debited).
ALTER TABLE ledger ADD COLUMN paid_minor INTEGER;
ALTER TABLE ledger ADD COLUMN paid_currency TEXT;
