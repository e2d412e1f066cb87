-- The overdue sweep (every instance, every second, on a database instances share: ADR 0025)
-- asks for the turns whose deadline passed: a range of an index, not a scan of every waiting
-- approval. With 1,000,000 waiting (bench §9) three scans a second of the whole table were the
-- approvals' p99 and most of Postgres's CPU per decision.
CREATE INDEX pending_approvals_by_deadline ON pending_approvals (deadline_ms);
CREATE INDEX pending_browser_calls_by_deadline ON pending_browser_calls (deadline_ms);
