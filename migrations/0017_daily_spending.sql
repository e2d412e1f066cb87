-- The day's spending as running totals (issue #35 item 1): a reservation read the day's total by
-- summing the ledger's payments of the day, a cost that grew with every payment. The ledger keeps
-- each chat's total per UTC day (days since 1970-01-01) here, moved by triggers on every way a
-- ledger row comes or goes (a chat removed takes its rows with it), so the total is a sum over
-- the chats that paid that day, not over their payments. One row per chat and day: commits of
-- different chats never touch the same row.
CREATE TABLE daily_spending (
    day        INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    cents      INTEGER NOT NULL,
    PRIMARY KEY (day, session_id)
) STRICT, WITHOUT ROWID;

INSERT INTO daily_spending (day, session_id, cents)
SELECT (at_ms - ((at_ms % 86400000) + 86400000) % 86400000) / 86400000, session_id,
       SUM(amount_cents)
FROM ledger
GROUP BY 1, 2;

CREATE TRIGGER ledger_adds_to_its_day AFTER INSERT ON ledger
BEGIN
    INSERT INTO daily_spending (day, session_id, cents)
    VALUES ((NEW.at_ms - ((NEW.at_ms % 86400000) + 86400000) % 86400000) / 86400000,
            NEW.session_id, NEW.amount_cents)
    ON CONFLICT (day, session_id) DO UPDATE SET cents = cents + excluded.cents;
END;

CREATE TRIGGER ledger_leaves_its_day AFTER DELETE ON ledger
BEGIN
    UPDATE daily_spending SET cents = cents - OLD.amount_cents
    WHERE day = (OLD.at_ms - ((OLD.at_ms % 86400000) + 86400000) % 86400000) / 86400000
      AND session_id = OLD.session_id;
END;

CREATE TRIGGER ledger_moves_in_its_day AFTER UPDATE OF at_ms, amount_cents, session_id ON ledger
BEGIN
    UPDATE daily_spending SET cents = cents - OLD.amount_cents
    WHERE day = (OLD.at_ms - ((OLD.at_ms % 86400000) + 86400000) % 86400000) / 86400000
      AND session_id = OLD.session_id;
    INSERT INTO daily_spending (day, session_id, cents)
    VALUES ((NEW.at_ms - ((NEW.at_ms % 86400000) + 86400000) % 86400000) / 86400000,
            NEW.session_id, NEW.amount_cents)
    ON CONFLICT (day, session_id) DO UPDATE SET cents = cents + excluded.cents;
END;
