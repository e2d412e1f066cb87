//! What the server keeps in Postgres besides sessions, people and the policy's state: the
//! sign-in secret and sign-ins, MCP servers' tool lists.

use async_trait::async_trait;

use super::{PostgresStore, err};
use crate::agent::{
    clock::Millis,
    store::{SignIn, SignInStore, StoreError, StoreNews, ToolListStore},
};

/// How long an expired sign-in stays recorded (for the record; it verifies no more), in ms.
const EXPIRED_SIGNINS_KEPT_MS: i64 = 30 * 24 * 3600 * 1000;

#[async_trait]
impl ToolListStore for PostgresStore {
    async fn keep_tool_list(
        &self,
        server: &str,
        tools: &str,
        at: Millis,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO mcp_tool_lists (server, tools, listed_ms) VALUES ($1, $2, $3)
             ON CONFLICT (server) DO UPDATE SET tools = EXCLUDED.tools,
                 listed_ms = EXCLUDED.listed_ms",
            &[&server, &tools, &at],
            "cannot keep an MCP server's tool list",
        )
        .await?;
        Ok(())
    }

    async fn kept_tool_list(&self, server: &str) -> Result<Option<String>, StoreError> {
        let context = "cannot read an MCP server's kept tool list";
        self.row(
            "SELECT tools FROM mcp_tool_lists WHERE server = $1",
            &[&server],
            context,
        )
        .await?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(err(context))
    }
}

impl PostgresStore {
    /// The server's secret `name` (`what` names it in errors): every instance offers 32 fresh
    /// random bytes, and the first stored is everyone's, for good. The sign-in secret, the audit
    /// key's seed.
    pub(super) async fn server_secret(
        &self,
        name: &'static str,
        what: &'static str,
    ) -> Result<[u8; 32], StoreError> {
        let fresh = crate::agent::store::fresh_secret()?;
        let offered: &[u8] = &fresh;
        let storing = format!("cannot store the {what}");
        self.execute(
            "INSERT INTO server_secrets (name, value) VALUES ($1, $2)
             ON CONFLICT (name) DO NOTHING",
            &[&name, &offered],
            &storing,
        )
        .await?;
        let reading = format!("cannot read the {what}");
        let value: Vec<u8> = self
            .row(
                "SELECT value FROM server_secrets WHERE name = $1",
                &[&name],
                &reading,
            )
            .await?
            .ok_or_else(|| StoreError::new(format!("the {what} is missing")))?
            .try_get(0)
            .map_err(err(&reading))?;
        value
            .try_into()
            .map_err(|_| StoreError::new(format!("the stored {what} is not 32 bytes")))
    }
}

#[async_trait]
impl SignInStore for PostgresStore {
    async fn signing_secret(&self) -> Result<[u8; 32], StoreError> {
        self.server_secret("signin", "sign-in secret").await
    }

    async fn record_signin(&self, signin: &SignIn) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO signins (id, created_ms, expires_ms, address, person_id)
             VALUES ($1, $2, $3, $4, $5)",
            &[
                &signin.id,
                &signin.created_ms,
                &signin.expires_ms,
                &signin.address,
                &signin.person,
            ],
            "cannot record a sign-in",
        )
        .await?;
        // Sessions long expired are of no use to anyone.
        let horizon = signin.created_ms - EXPIRED_SIGNINS_KEPT_MS;
        self.execute(
            "DELETE FROM signins WHERE expires_ms < $1",
            &[&horizon],
            "cannot forget expired sign-ins",
        )
        .await?;
        Ok(())
    }

    async fn end_signin(&self, id: &str, at: Millis) -> Result<(), StoreError> {
        self.execute(
            "UPDATE signins SET ended_ms = $2 WHERE id = $1 AND ended_ms IS NULL",
            &[&id, &at],
            "cannot end a sign-in",
        )
        .await?;
        self.tell(StoreNews::SignIns).await;
        Ok(())
    }

    async fn ended_signins(&self, now: Millis) -> Result<Vec<(String, Millis)>, StoreError> {
        let context = "cannot list ended sign-ins";
        self.rows(
            "SELECT id, expires_ms FROM signins WHERE ended_ms IS NOT NULL AND expires_ms > $1",
            &[&now],
            context,
        )
        .await?
        .iter()
        .map(|row| -> Result<(String, Millis), tokio_postgres::Error> {
            Ok((row.try_get(0)?, row.try_get(1)?))
        })
        .collect::<Result<_, _>>()
        .map_err(err(context))
    }
}
