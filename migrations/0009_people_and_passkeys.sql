-- People, their passkeys and one-time links (issue #23, ADR 0024). A person's roles are a JSON
-- array; a passkey is webauthn-rs' `Passkey` as JSON (public key, signature counter, backup
-- state); an invite is kept by the SHA-256 of its link's token only, so this table never holds a
-- usable link.
CREATE TABLE people (
    id         TEXT PRIMARY KEY NOT NULL,
    name       TEXT NOT NULL,
    roles      TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    invited_by TEXT,
    revoked_ms INTEGER
) STRICT, WITHOUT ROWID;

CREATE TABLE passkeys (
    id           TEXT PRIMARY KEY NOT NULL,
    person_id    TEXT NOT NULL REFERENCES people (id),
    label        TEXT NOT NULL,
    passkey      TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    last_used_ms INTEGER
) STRICT, WITHOUT ROWID;

CREATE INDEX passkeys_by_person ON passkeys (person_id);

CREATE TABLE invites (
    digest     TEXT PRIMARY KEY NOT NULL,
    kind       TEXT NOT NULL,
    person_id  TEXT,
    name       TEXT,
    roles      TEXT NOT NULL,
    created_by TEXT,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    used_ms    INTEGER
) STRICT, WITHOUT ROWID;

-- A sign-in of a person (NULL: the API key's sign-in form).
ALTER TABLE signins ADD COLUMN person_id TEXT;

-- Whose chat a session is (NULL: the one local person, as every chat before people).
ALTER TABLE sessions ADD COLUMN owner TEXT;
