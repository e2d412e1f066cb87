//! Each MCP server's last tool list in SQLite (migration 0007, ADR 0021): a server that is down
//! when Countersign starts still offers the tools its pending approvals name.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::{SqliteStore, err};
use crate::agent::store::{StoreError, ToolListStore};

#[async_trait]
impl ToolListStore for SqliteStore {
    async fn keep_tool_list(&self, server: &str, tools: &str, at: i64) -> Result<(), StoreError> {
        let (server, tools) = (server.to_owned(), tools.to_owned());
        self.with(move |conn| {
            conn.execute(
                "INSERT INTO mcp_tool_lists (server, tools, listed_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (server) DO UPDATE SET tools = excluded.tools,
                 listed_ms = excluded.listed_ms",
                params![server, tools, at],
            )
            .map_err(err("cannot keep an MCP server's tool list"))?;
            Ok(())
        })
        .await
    }

    async fn kept_tool_list(&self, server: &str) -> Result<Option<String>, StoreError> {
        let server = server.to_owned();
        self.with(move |conn| {
            conn.query_row(
                "SELECT tools FROM mcp_tool_lists WHERE server = ?1",
                [server],
                |row| row.get(0),
            )
            .optional()
            .map_err(err("cannot read an MCP server's kept tool list"))
        })
        .await
    }
}
