-- Several instances on one database (issue #24, ADR 0025): a running turn belongs to the
-- instance that runs it (`running_on`, written with every commit of a running turn), and an
-- instance is alive while it keeps its row of `countersign_instances` fresh (a heartbeat each
-- second, on the database's clock). Another instance follows a turn whose owner is alive and
-- takes over one whose owner stopped answering (one of them: the take-over is a conditional
-- update). `paused_turn_logs` now also holds the log of a running or finished turn, written with
-- each commit, so instances can follow each other's turns.
ALTER TABLE sessions ADD COLUMN running_on TEXT;
CREATE TABLE countersign_instances (
    id TEXT PRIMARY KEY,
    started_at_ms BIGINT NOT NULL,
    seen_ms BIGINT NOT NULL
);
CREATE INDEX sessions_running ON sessions (running_on) WHERE turn_status = 'running';
