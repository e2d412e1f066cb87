-- The last tool list of each MCP server (ADR 0021), as the server sent it (`tools/list`, JSON):
-- a server that is down when Countersign starts still offers the tools its pending approvals
-- name, and calling one says the server is down rather than that the tool does not exist.

CREATE TABLE mcp_tool_lists (
    server    TEXT PRIMARY KEY NOT NULL,
    tools     TEXT NOT NULL,
    listed_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
