-- The output of a session's turn that waits for the person (ADR 0011): written with the record
-- when the turn pauses, so the paused turn can leave memory and come back exactly as it was (a
-- reconnecting client resumes it by frame count, even after a restart). `entries` is a JSON
-- array of chunks and the markers "pause" / "end". Read only while `turn_id` is the session's
-- current, unfinished turn; removed when that turn is over. A table of its own: the record's row
-- is rewritten by every commit, the log only when the turn pauses.

CREATE TABLE paused_turn_logs (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id    TEXT NOT NULL,
    entries    TEXT NOT NULL
) STRICT;
