-- Passkey ceremonies in progress (issue #24): the WebAuthn state between the options a browser
-- gets and the answer it sends back, under the ceremony's challenge, so the answer may reach
-- another instance than the options came from (and survives a restart). Taken once.
CREATE TABLE passkey_ceremonies (
    challenge TEXT PRIMARY KEY,
    expires_ms INTEGER NOT NULL,
    state TEXT NOT NULL
);
