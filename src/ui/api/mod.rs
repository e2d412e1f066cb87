//! The data the pages load besides the chat stream, and the calls that load it: in the browser
//! they fetch the JSON endpoints (`GET /api/app`, `/api/chats/{id}`, `/api/audit`); on the server
//! (rendering a page) the same calls read the runtime directly. Plain endpoints rather than Leptos
//! server functions: the pages need three reads, and server functions' client side (form
//! encoding, their own fetch and stream handling) was ~7 KB of the wasm bundle.

pub use crate::protocol::page::*;

mod client;
pub use client::PageClient;

#[cfg(feature = "ssr")]
mod server;
#[cfg(feature = "ssr")]
pub use server::*;

#[cfg(feature = "hydrate")]
mod web;
#[cfg(feature = "hydrate")]
pub use web::*;
