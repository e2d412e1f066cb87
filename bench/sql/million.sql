-- The million-approval scenario's generator (bench/run --only million; issue #35, ADR 0039).
--
-- `countersign_bench_copies(chat, approval, first, last)` copies chat `chat` — one chat whose
-- turn waits for the one approval `approval`, made by a real server — as chats `<chat>-<i>` for
-- i in first..last, each waiting for approval `<approval>-<i>`: exactly the rows the store
-- writes for such a chat (its session row and, on a schema that has them, its entries and
-- answered approvals (ADR 0038), its paused turn's log, its waiting approval and, on a
-- schema that has them, its inbox entry and keys), the ids replaced wherever they occur. The
-- store's test `generated_rows_equal_what_the_store_writes` (src/agent/store/postgres/tests.rs)
-- holds this to the store. Audit rows are not copied (the audit chain's hashes are the store's to
-- make); nothing reads them for the inbox.
--
-- It works on the schema before the inbox's migration too (no `approval_keys`, no `entry`), so
-- the same scenario measures a build from before.
-- `t` with `approval` and `chat` replaced by the i-th copy's ids.
CREATE OR REPLACE FUNCTION countersign_bench_swap(
    t TEXT, chat TEXT, approval TEXT, i BIGINT
) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(replace(t, approval, approval || '-' || i), chat, chat || '-' || i)
$$;

CREATE OR REPLACE FUNCTION countersign_bench_copies(
    chat TEXT, approval TEXT, first BIGINT, last BIGINT
) RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    IF to_regclass('session_entries') IS NULL THEN
        INSERT INTO sessions (id, created_at_ms, updated_at_ms, turn_status, history, messages,
                              wallet, turn, resolved_approvals, tool_state, owner, version,
                              running_on)
        SELECT chat || '-' || i, s.created_at_ms, s.updated_at_ms, s.turn_status,
               countersign_bench_swap(s.history, chat, approval, i),
               countersign_bench_swap(s.messages, chat, approval, i),
               countersign_bench_swap(s.wallet, chat, approval, i),
               countersign_bench_swap(s.turn, chat, approval, i),
               countersign_bench_swap(s.resolved_approvals, chat, approval, i),
               countersign_bench_swap(s.tool_state, chat, approval, i),
               s.owner, s.version, s.running_on
        FROM sessions s, generate_series(first, last) AS i
        WHERE s.id = chat;
    ELSE
        -- Append-only chats (ADR 0038): the row, then its entries and answered approvals.
        INSERT INTO sessions (id, created_at_ms, updated_at_ms, turn_status, wallet, turn,
                              tool_state, owner, version, running_on)
        SELECT chat || '-' || i, s.created_at_ms, s.updated_at_ms, s.turn_status,
               countersign_bench_swap(s.wallet, chat, approval, i),
               countersign_bench_swap(s.turn, chat, approval, i),
               countersign_bench_swap(s.tool_state, chat, approval, i),
               s.owner, s.version, s.running_on
        FROM sessions s, generate_series(first, last) AS i
        WHERE s.id = chat;

        INSERT INTO session_entries (session_id, list, position, body)
        SELECT chat || '-' || i, e.list, e.position,
               countersign_bench_swap(e.body, chat, approval, i)
        FROM session_entries e, generate_series(first, last) AS i
        WHERE e.session_id = chat;

        INSERT INTO session_resolutions (session_id, approval_id, body)
        SELECT chat || '-' || i, countersign_bench_swap(r.approval_id, chat, approval, i),
               countersign_bench_swap(r.body, chat, approval, i)
        FROM session_resolutions r, generate_series(first, last) AS i
        WHERE r.session_id = chat;
    END IF;

    INSERT INTO paused_turn_logs (session_id, turn_id, entries)
    SELECT chat || '-' || i, p.turn_id,
           countersign_bench_swap(p.entries, chat, approval, i)
    FROM paused_turn_logs p, generate_series(first, last) AS i
    WHERE p.session_id = chat;

    IF to_regclass('approval_keys') IS NULL THEN
        INSERT INTO pending_approvals (approval_id, session_id, tool_call_id, tool, args,
                                       requested_at_ms, deadline_ms)
        SELECT approval || '-' || i, chat || '-' || i,
               countersign_bench_swap(a.tool_call_id, chat, approval, i), a.tool,
               countersign_bench_swap(a.args, chat, approval, i), a.requested_at_ms, a.deadline_ms
        FROM pending_approvals a, generate_series(first, last) AS i
        WHERE a.session_id = chat;
    ELSE
        INSERT INTO pending_approvals (approval_id, session_id, tool_call_id, tool, args,
                                       requested_at_ms, deadline_ms, owner, rule, entry)
        SELECT approval || '-' || i, chat || '-' || i,
               countersign_bench_swap(a.tool_call_id, chat, approval, i), a.tool,
               countersign_bench_swap(a.args, chat, approval, i), a.requested_at_ms, a.deadline_ms, a.owner, a.rule,
               countersign_bench_swap(a.entry, chat, approval, i)
        FROM pending_approvals a, generate_series(first, last) AS i
        WHERE a.session_id = chat;

        INSERT INTO approval_keys (key, requested_at_ms, approval_id, deadline_ms, session_id)
        SELECT k.key, k.requested_at_ms, approval || '-' || i,
               k.deadline_ms, chat || '-' || i
        FROM approval_keys k, generate_series(first, last) AS i
        WHERE k.session_id = chat;
    END IF;
END
$$;
