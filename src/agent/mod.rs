//! The agent runtime (server only): models, tools, the approval gate, sessions and the turn
//! loop. Transport-agnostic: it consumes person input and produces `protocol` chunks.
//!
//! Read in this order: [`model`] (what a model is) → [`history`] (what it sees) → [`tools`] (what
//! it can call) → [`gate`] (who must countersign) → [`session`] (where state lives) → [`store`]
//! (where it is kept, with the audit log) → [`runner`] (the turn loop) → [`demo`] (the offline
//! model).

pub mod chunk_log;
pub mod clock;
pub mod demo;
pub mod followers;
pub mod gate;
pub mod history;
pub mod model;
pub mod providers;
pub mod replay;
pub mod runner;
/// Tool-argument validation lives in `protocol` (the browser checks edits with it too).
pub use crate::protocol::schema;
pub mod session;
pub mod store;
pub mod tools;

pub use gate::{ApprovalDecision, BrowserResult, InputError, PersonInput};
pub use runner::{Runtime, RuntimeSettings, TextTiming, TurnError, TurnStarted, UserTurn};
pub use session::{Session, SessionRecord, SessionStore, TurnEntry, TurnLog, TurnStatus};
