-- Several instances on one database (issue #24, ADR 0025): every commit of a session expects the
-- version its instance last read or wrote and makes the next one, so a commit of a record that
-- another instance changed meanwhile is refused (and the instance reads the record again) instead
-- of overwriting it. Rows from before start at 0.
ALTER TABLE sessions ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
