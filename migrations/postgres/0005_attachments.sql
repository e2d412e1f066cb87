-- Attachments stored once (SQLite's migration 11, ADR 0026): a chat's attached files, each kept
-- once by the SHA-256 of its bytes; the session record keeps only `/api/chats/<chat>/files/<sha>`.
CREATE TABLE attachments (
    session_id TEXT COLLATE "C" NOT NULL,
    sha256 TEXT COLLATE "C" NOT NULL,
    media_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    bytes BYTEA NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (session_id, sha256)
);
