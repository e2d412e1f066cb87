-- Sign-in sessions of the edge (ADR 0016): the secret their cookies are signed with, and each
-- session issued, so that signing out (an `ended_ms`) holds across restarts. A session's cookie
-- carries its id and expiry under an HMAC; the key itself is stored nowhere.

CREATE TABLE server_secrets (
    name  TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE signins (
    id         TEXT PRIMARY KEY NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    ended_ms   INTEGER,
    address    TEXT
) STRICT, WITHOUT ROWID;
