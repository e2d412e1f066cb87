//! The browser side (hydrate only): web-sys transports and the tools the browser runs.
//!
//! * [`fetch`]: SSE mode — `POST /api/chat` with `fetch`, the body read as a stream and decoded
//!   by `protocol`'s incremental decoder.
//! * [`socket`]: BIDI mode — the WebSocket, with reconnect and resume.
//! * [`geo`]: `get_location` through the Geolocation API.
//! * [`audio`]: `change_bgm` through Web Audio.
//! * [`voice`]: BIDI's microphone and the agent's speech through Web Audio.
//! * [`files`]: image attachments read as `data:` URLs.
//! * [`dom`]: storage, downloads, clipboard, timers.

pub mod audio;
pub mod dom;
pub mod fetch;
pub mod files;
pub mod geo;
pub mod passkey;
pub mod socket;
pub mod voice;
