-- Passkey ceremonies in progress (SQLite's migration 10): the WebAuthn state between the options
-- a browser gets and the answer it sends back, under its challenge, so the answer may reach
-- another instance than the options came from. Taken once (DELETE … RETURNING).
CREATE TABLE passkey_ceremonies (
    challenge TEXT COLLATE "C" PRIMARY KEY,
    expires_ms BIGINT NOT NULL,
    state TEXT NOT NULL
);
