-- Attachments stored once (issue #24, ADR 0026): a chat's attached files, each kept once by the
-- SHA-256 of its bytes; the session record keeps only `/api/chats/<chat>/files/<sha>`.
CREATE TABLE attachments (
    session_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE UNIQUE INDEX attachments_by_chat ON attachments (session_id, sha256);
