//! The scenario tests, compiled into one test binary (ADR 0051): every file beside this one is
//! a module of it, so the server crate and its dependencies are linked once, the shared helpers
//! in `common/` compiled once, and libtest runs every scenario of every file side by side.
//! Run one file's tests with `cargo test --no-default-features --features ssr --test scenarios
//! <file>::` (e.g. `removal::`).

mod common;

mod ai_ws;
mod attachments;
mod body_memory;
mod chunk_log_replay;
mod edge;
mod hostile_inputs;
mod leptos_toml;
mod limits;
mod live_text;
mod mcp;
mod mcp_http;
mod ops;
mod own_tool;
mod people;
mod policy;
mod postgres;
mod receipts;
mod removal;
mod restart;
mod runtime_scenarios;
mod seed_dialect;
mod seed_sessions;
mod sse_api;
mod voice;
mod ws_api;
