-- The day's spending as running totals (SQLite's migration 17, issue #35 item 1): a reservation
-- read the day's total by summing the ledger's payments of the day, a cost that grew with every
-- payment. The ledger keeps each chat's total per UTC day (days since 1970-01-01) here, moved by
-- a trigger on every way a ledger row comes, changes or goes (a chat removed takes its rows with
-- it), so the total is a sum over the chats that paid that day, not over their payments. One row
-- per chat and day: commits of different chats, on any instance, never wait for the same row.
CREATE TABLE daily_spending (
    day        BIGINT NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    cents      BIGINT NOT NULL,
    PRIMARY KEY (day, session_id)
);

INSERT INTO daily_spending (day, session_id, cents)
SELECT (at_ms - ((at_ms % 86400000) + 86400000) % 86400000) / 86400000, session_id, SUM(amount_cents)
FROM ledger
GROUP BY 1, 2;

CREATE FUNCTION ledger_moves_daily_spending() RETURNS trigger AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE daily_spending SET cents = cents - OLD.amount_cents
        WHERE day = (OLD.at_ms - ((OLD.at_ms % 86400000) + 86400000) % 86400000) / 86400000 AND session_id = OLD.session_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO daily_spending (day, session_id, cents)
        VALUES ((NEW.at_ms - ((NEW.at_ms % 86400000) + 86400000) % 86400000) / 86400000, NEW.session_id, NEW.amount_cents)
        ON CONFLICT (day, session_id)
        DO UPDATE SET cents = daily_spending.cents + EXCLUDED.cents;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_moves_daily_spending
AFTER INSERT OR DELETE OR UPDATE OF at_ms, amount_cents, session_id ON ledger
FOR EACH ROW EXECUTE FUNCTION ledger_moves_daily_spending();
