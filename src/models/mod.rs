//! The models (server only), each behind the agent's one [`crate::agent::model::Model`] trait:
//! [`demo`] (the offline model a newcomer talks to without a key), [`replay`] (a recorded chat
//! played back) and [`providers`] (Gemini, Gemini Live and OpenAI-compatible APIs). The agent
//! knows none of them; `state.rs` picks one from the configuration.

pub mod demo;
pub mod pcm;
pub mod providers;
pub mod replay;
