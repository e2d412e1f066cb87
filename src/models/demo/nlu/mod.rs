//! Natural-language understanding and reply writing for the offline demo model.
//!
//! The demo model stands in for an LLM when no provider is configured. It must be honest about
//! that: it understands a fixed grammar, asks when an argument is missing instead of guessing,
//! and says plainly when it did not understand. Everything here is pure and deterministic (no
//! I/O, clock or randomness), so scenario tests can assert its exact words.
//!
//! How the runner uses it, one turn:
//!
//! 1. [`understand`] the user's text into a [`Plan`]: steps of [`Intent`]s. Intents of one
//!    step are parallel tool calls; steps run one after another.
//! 2. If the plan is empty, answer [`not_understood`]. Intents without a tool (greeting,
//!    capabilities, `/lorem`, clarifying questions) are answered with [`direct`]. A plan that
//!    needs a clarification holds nothing else, so nothing runs before the person answers.
//! 3. Otherwise emit each step's [`Intent::tool_call`]s, wait for their results (approvals,
//!    browser executions), then the next step.
//! 4. After the last step, write [`summary`] from the [`ToolOutcome`]s, using the arguments the
//!    tools were actually executed with.
//!
//! Layout:
//! - `lexicon` — every word the model knows (triggers, cities, currencies, numbers, particles,
//!   sequence markers, error patterns), as tables extended one line at a time.
//! - `intent` — the grammar: normalize → steps → tokens → fragments → slots.
//! - `reply` — the model's sentences in English and Japanese.
//! - `grammar` — what the model can hear: a JSGF grammar of the lexicon for the recogniser.

mod grammar;
mod intent;
mod lexicon;
mod reply;

pub use grammar::{spoken_grammar, spoken_words, written};
pub use intent::understand;
pub use intent::{Clarification, IntendedCall, Intent, Lang, Plan};
pub use lexicon::{CHANGE_BGM, GET_LOCATION, GET_WEATHER, PROCESS_PAYMENT};
pub use reply::ToolOutcome;
pub use reply::{
    awaiting_countersignature, capabilities, clarify, direct, greeting, lorem, not_understood,
    still_awaiting_countersignature, summary,
};
