//! The error of every server function (`POST /api/fn/…`): the API's own
//! `{"error": {"code", "message"}}` with a fitting status (`transport::error`), so a script and
//! the page read a refusal the same way whichever route gave it. A refusal made on the server
//! sets its status on the response being answered ([`FnError::new`]); what the framework itself
//! refuses — a body that is not the function's arguments — is a 400 `invalid_arguments`.

use leptos::server_fn::{
    codec::JsonEncoding,
    error::{FromServerFnError, ServerFnErrorErr},
};
use serde::{Deserialize, Serialize};

/// A server function's refusal: a stable code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(from = "Wire", into = "Wire")]
#[error("{message}")]
pub struct FnError {
    pub code: String,
    pub message: String,
}

/// `{"error": {"code", "message"}}`.
#[derive(Serialize, Deserialize)]
struct Wire {
    error: WireError,
}

#[derive(Serialize, Deserialize)]
struct WireError {
    code: String,
    message: String,
}

impl From<Wire> for FnError {
    fn from(wire: Wire) -> Self {
        FnError {
            code: wire.error.code,
            message: wire.error.message,
        }
    }
}

impl From<FnError> for Wire {
    fn from(error: FnError) -> Self {
        Wire {
            error: WireError {
                code: error.code,
                message: error.message,
            },
        }
    }
}

impl FnError {
    /// A refusal answered with `status` (on the server: the browser's copy has no response).
    #[cfg_attr(not(feature = "ssr"), allow(unused_variables))]
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
        // On the server, the response of the server function being answered gets `status`.
        #[cfg(feature = "ssr")]
        if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>()
            && let Ok(status) = axum::http::StatusCode::from_u16(status)
        {
            response.set_status(status);
        }
        FnError {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl FromServerFnError for FnError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(error: ServerFnErrorErr) -> Self {
        match error {
            // On the server: the body is not the function's arguments (not JSON, the wrong
            // shape or types, nested deeper than JSON is read).
            ServerFnErrorErr::Args(why)
            | ServerFnErrorErr::MissingArg(why)
            | ServerFnErrorErr::Deserialization(why) => FnError::new(
                400,
                "invalid_arguments",
                format!("the JSON cannot be read: {why}"),
            ),
            // In the browser: the server could not be reached.
            ServerFnErrorErr::Request(why) => FnError::new(
                503,
                "unreachable",
                format!("the server cannot be reached: {why}"),
            ),
            other => FnError::new(500, "server_error", other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_the_apis_error_on_the_wire() {
        let error = FnError {
            code: "grant_not_found".into(),
            message: "no such grant".into(),
        };
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"error": {"code": "grant_not_found", "message": "no such grant"}})
        );
        assert_eq!(serde_json::from_value::<FnError>(json).unwrap(), error);
        assert_eq!(error.to_string(), "no such grant");
        let framework = FnError::from_server_fn_error(ServerFnErrorErr::Args("bad".into()));
        assert_eq!(framework.code, "invalid_arguments");
        assert!(framework.message.contains("bad"));
    }
}
