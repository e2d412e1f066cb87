//! The models a runtime asks, and what every request to them carries: the model of typed turns,
//! the BIDI model when it has its own (Gemini Live), and the instruction.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::agent::{
    Transport,
    history::{self, HistoryItem},
    model::{Model, ModelRequest, Usage},
    tools::ToolRegistry,
};

/// The runtime's models ([`super::Runtime::models`]).
pub struct Models {
    /// The model of every turn but the BIDI ones when `live` is set.
    text: Arc<dyn Model>,
    /// The model of BIDI turns and of voice when it differs from `text` (Gemini Live).
    live: Option<Arc<dyn Model>>,
    /// The settings' own instruction for every model; `None`: written from the tools at each
    /// step (the tool list changes when an MCP server's does).
    system_prompt: Option<String>,
    /// The tools every request declares (the runtime's).
    tools: Arc<ToolRegistry>,
}

impl Models {
    pub(super) fn new(
        text: Arc<dyn Model>,
        live: Option<Arc<dyn Model>>,
        system_prompt: Option<String>,
        tools: Arc<ToolRegistry>,
    ) -> Self {
        Models {
            text,
            live,
            system_prompt,
            tools,
        }
    }

    /// The model that answers turns started on `transport` (`bidi` may have its own).
    pub fn answering(&self, transport: Transport) -> &Arc<dyn Model> {
        match &self.live {
            Some(live) if transport == Transport::Bidi => live,
            _ => &self.text,
        }
    }

    /// The model that takes voice: the BIDI model (Gemini Live when configured).
    pub fn voice(&self) -> &Arc<dyn Model> {
        self.answering(Transport::Bidi)
    }

    /// What a turn's `finish` carries: the model that answered (`model`, its label for people;
    /// `modelVersion`, its id for clients that show it, like the seed's frontend) and the turn's
    /// token usage.
    pub fn finish_metadata(&self, transport: Transport, usage: Usage) -> Value {
        let model = self.answering(transport);
        json!({
            "model": model.label(),
            "modelVersion": model.model_version(),
            "usage": usage,
        })
    }

    /// The model(s) in use, as the banner and the UI name them.
    pub fn label(&self) -> String {
        match &self.live {
            Some(live) => format!("{} · BIDI: {}", self.text.label(), live.label()),
            None => self.text.label(),
        }
    }

    /// A step's request for chat `session_id` with its `history`: the instruction and the tools
    /// as they are now.
    pub(crate) fn request(&self, session_id: &str, history: Arc<Vec<HistoryItem>>) -> ModelRequest {
        // A chat that began with a client's copy of earlier messages (ADR 0020) tells the model
        // what that is; other chats' instruction stays as it was.
        let prompt = self
            .system_prompt
            .clone()
            .unwrap_or_else(|| self.tools.system_prompt());
        let system = match (history::has_context(&history), prompt.is_empty()) {
            (true, false) => format!("{prompt}\n\n{}", history::CONTEXT_NOTE),
            (true, true) => history::CONTEXT_NOTE.to_owned(),
            (false, _) => prompt,
        };
        ModelRequest {
            session_id: session_id.to_owned(),
            system,
            history,
            tools: self.tools.declarations(),
        }
    }
}
