-- Passkey ceremonies belong to their owner (SQLite's migration 12, issue #33): the one-time link
-- a registration is for, or the person a step-up is for; each owner keeps a few at most (their
-- oldest go first), with no shared cap an anonymous caller can fill. Sign-in ceremonies keep no
-- state: their challenge is signed by the server, and the challenges answered are recorded until
-- they expire, so that an answer is used once on every instance.
ALTER TABLE passkey_ceremonies ADD COLUMN owner TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX passkey_ceremonies_by_owner ON passkey_ceremonies (owner, expires_ms);
CREATE TABLE passkey_challenges_used (
    challenge TEXT COLLATE "C" PRIMARY KEY,
    expires_ms BIGINT NOT NULL
);
