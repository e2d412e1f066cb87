//! The HTTP error of every API route: a status and `{"error": {"code", "message"}}`.
//!
//! The message is written for the person or the client developer; internals are logged, never
//! sent.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::json;

use super::edge::limits::TooMany;
use crate::agent::{InputError, TurnError, store::StoreError};

/// An API error: status, stable code, human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// When to try again (a rate limit's `Retry-After`, in whole seconds).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// A chat that is someone else's: said as if it did not exist (a person learns nothing of
    /// other people's chats).
    pub fn not_your_chat() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "chat_not_found",
            "there is no chat with this id that is yours",
        )
    }

    /// A request body that could not be read (`status` is the one axum's rejection gives):
    /// too large (413), trickled in too slowly (408), or broken (400).
    pub fn from_body_rejection(
        status: StatusCode,
        rejection: &(dyn std::error::Error + 'static),
    ) -> Self {
        use crate::transport::edge::connections::is_too_slow;
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the request body is larger than this server accepts (COUNTERSIGN_MAX_BODY_BYTES)",
            )
        } else if is_too_slow(rejection) {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_too_slow",
                "the request body arrived too slowly; send it again",
            )
        } else {
            ApiError::bad_request("unreadable_body", "the request body could not be read")
        }
    }
}

impl From<StoreError> for ApiError {
    /// The store's details are logged (with the errors underneath), never sent.
    fn from(e: StoreError) -> Self {
        tracing::error!(error = &e as &dyn std::error::Error, "session store failed");
        ApiError::store_unavailable()
    }
}

impl ApiError {
    /// The session store failed: what the client is told, whatever the cause.
    fn store_unavailable() -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_unavailable",
            "The conversation could not be loaded or saved. Try again.",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = self.status.as_u16(), code = self.code, message = %self.message, "request failed");
        } else {
            tracing::warn!(status = self.status.as_u16(), code = self.code, message = %self.message, "request rejected");
        }
        let mut response = (
            self.status,
            Json(json!({"error": {"code": self.code, "message": self.message}})),
        )
            .into_response();
        if let Some(secs) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}

impl From<ApiError> for crate::common::fn_error::FnError {
    /// The same refusal from a server function (logged as a route's is).
    fn from(e: ApiError) -> Self {
        if e.status.is_server_error() {
            tracing::error!(status = e.status.as_u16(), code = e.code, message = %e.message, "server function failed");
        } else {
            tracing::warn!(status = e.status.as_u16(), code = e.code, message = %e.message, "server function refused");
        }
        crate::common::fn_error::FnError::new(e.status.as_u16(), e.code, e.message)
    }
}

impl From<TooMany> for ApiError {
    /// A 429 with the wait in the message and in `Retry-After`.
    fn from(limited: TooMany) -> Self {
        let secs = limited.wait.as_secs_f64().ceil().max(1.0) as u64;
        ApiError {
            retry_after: Some(secs),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests {}; retry in {secs} s", limited.what),
            )
        }
    }
}

impl From<InputError> for ApiError {
    fn from(e: InputError) -> Self {
        let status = match &e {
            InputError::UnknownApproval { .. } | InputError::UnknownToolCall { .. } => {
                StatusCode::NOT_FOUND
            }
            InputError::ApprovalOfOtherChat { .. }
            | InputError::NotAnApprover { .. }
            | InputError::StepUpRefused { .. } => StatusCode::FORBIDDEN,
            InputError::StepUpRequired { .. } | InputError::StepUpMismatch { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            InputError::AlreadySigned { .. } => StatusCode::CONFLICT,
            InputError::InvalidEdit { .. }
            | InputError::NotABrowserTool { .. }
            | InputError::EditForbidden { .. }
            | InputError::GrantRefused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            InputError::NoActiveTurn
            | InputError::ApprovalAlreadyAnswered { .. }
            | InputError::ApprovalExpired { .. }
            | InputError::ApprovalWithdrawn { .. }
            | InputError::ApprovalDismissed { .. }
            | InputError::ApprovalSuperseded { .. }
            | InputError::NotApprovedYet { .. }
            | InputError::CallWasDenied { .. }
            | InputError::ResultAlreadyReceived { .. }
            | InputError::StaleMessage { .. }
            | InputError::AnsweredElsewhere
            | InputError::RunningElsewhere => StatusCode::CONFLICT,
            InputError::NotRecorded { .. } => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError::new(status, e.code(), e.to_string())
    }
}

impl From<TurnError> for ApiError {
    fn from(e: TurnError) -> Self {
        match e {
            TurnError::Busy => ApiError::conflict("turn_in_progress", e.to_string()),
            TurnError::EmptyMessage => ApiError::bad_request("empty_message", e.to_string()),
            TurnError::NotYourChat => ApiError::not_your_chat(),
            TurnError::Attachment(inner) => {
                let status = match inner {
                    crate::agent::attachments::AttachmentError::TooLarge { .. } => {
                        StatusCode::PAYLOAD_TOO_LARGE
                    }
                    _ => StatusCode::UNPROCESSABLE_ENTITY,
                };
                ApiError::new(status, inner.code(), inner.to_string())
            }
            TurnError::CannotAskAgain { .. } => {
                ApiError::conflict("cannot_ask_again", e.to_string())
            }
            TurnError::Store(inner) => {
                tracing::error!(error = %inner, "session store failed");
                ApiError::store_unavailable()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn a_store_failure_tells_the_client_nothing_of_its_cause() {
        let cause = std::io::Error::other("/var/lib/secret.db: disk I/O error");
        let direct = ApiError::from(StoreError::caused_by("cannot commit", cause));
        let through_a_turn = ApiError::from(TurnError::from(StoreError::new("cannot load")));
        for e in [direct, through_a_turn] {
            assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(e.code, "store_unavailable");
            assert_eq!(
                e.message,
                "The conversation could not be loaded or saved. Try again."
            );
        }
    }

    #[tokio::test]
    async fn errors_render_as_json_with_code_and_message() {
        let response = ApiError::from(InputError::UnknownApproval {
            approval_id: "apv-x".into(),
        })
        .into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["error"]["code"], "unknown_approval");
        assert!(json["error"]["message"].as_str().unwrap().contains("apv-x"));
    }

    #[test]
    fn input_errors_map_to_fitting_statuses() {
        let forbidden = ApiError::from(InputError::ApprovalOfOtherChat {
            approval_id: "a".into(),
        });
        assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
        let conflict = ApiError::from(InputError::ApprovalAlreadyAnswered {
            approval_id: "a".into(),
        });
        assert_eq!(conflict.status, StatusCode::CONFLICT);
        let busy = ApiError::from(TurnError::Busy);
        assert_eq!(
            (busy.status, busy.code),
            (StatusCode::CONFLICT, "turn_in_progress")
        );
    }
}
