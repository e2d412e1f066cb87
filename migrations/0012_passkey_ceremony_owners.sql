-- Passkey ceremonies belong to their owner (issue #33): the one-time link a registration is for,
-- or the person a step-up is for. Each owner keeps a few at most (their oldest go first), so
-- nobody's ceremonies crowd out another's; there is no shared cap an anonymous caller can fill.
-- Sign-in ceremonies keep no state at all: their challenge is signed by the server, and the
-- challenges answered are recorded, until they expire, so that an answer is used once on every
-- instance.
ALTER TABLE passkey_ceremonies ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX passkey_ceremonies_by_owner ON passkey_ceremonies (owner, expires_ms);
CREATE TABLE passkey_challenges_used (
    challenge TEXT PRIMARY KEY,
    expires_ms INTEGER NOT NULL
);
