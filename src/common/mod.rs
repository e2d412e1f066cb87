//! Helpers every layer uses, compiled by both builds: URL encoding and the app's own URLs
//! (`url`), text made safe inside HTML (`html`), and the error every server function answers
//! with (`fn_error`: the API's `{"error": {"code", "message"}}`). No domain in them; they depend
//! on nothing of ours, so `agent`, `transport`, `ui` and the browser code may all use them
//! without an arrow that runs back up (docs/architecture.md, "Layers").

pub mod fn_error;
pub mod html;
pub mod url;
