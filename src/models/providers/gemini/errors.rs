//! Errors (§B.5): an HTTP error or an error body as a typed model error, with the retry delay
//! the API asks for.

use super::wire::ErrorBody;
use super::*;

/// The `error` object of a body: `{"error": {...}}` or, on some endpoints, `[{"error": {...}}]`.
pub(super) fn error_in(value: &Value) -> Option<ErrorBody> {
    let value = match value {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let error = value.get("error")?;
    Some(
        serde_json::from_value(error.clone()).unwrap_or_else(|_| ErrorBody {
            message: Some(error.to_string()),
            ..ErrorBody::default()
        }),
    )
}

pub(super) fn map_http_error(
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: &str,
) -> ModelError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    match parsed.as_ref().and_then(error_in) {
        Some(error) => error_from_body(&error, Some(status.as_u16()), Some(headers)),
        None => {
            let message = if body.trim().is_empty() {
                status.canonical_reason().unwrap_or("no message").to_owned()
            } else {
                http::short_message(body)
            };
            if status.as_u16() == 429 {
                ModelError::RateLimited {
                    retry_after: http::retry_after_header(headers),
                    message,
                }
            } else {
                ModelError::Provider {
                    status: status.as_u16(),
                    message,
                }
            }
        }
    }
}

/// An error object → [`ModelError`]. The HTTP status wins over the object's `code`; a mid-stream
/// error without a usable code counts as a server error (500).
pub(super) fn error_from_body(
    error: &ErrorBody,
    http_status: Option<u16>,
    headers: Option<&reqwest::header::HeaderMap>,
) -> ModelError {
    let status = http_status
        .or_else(|| error.code.and_then(|c| u16::try_from(c).ok()))
        .filter(|s| (100..=599).contains(s))
        .unwrap_or(500);
    let text = error.message.as_deref().unwrap_or("no message");
    let message = http::short_message(&match &error.status {
        Some(code) => format!("{code}: {text}"),
        None => text.to_owned(),
    });
    if status == 429 {
        ModelError::RateLimited {
            retry_after: retry_delay(&error.details)
                .or_else(|| headers.and_then(http::retry_after_header)),
            message,
        }
    } else {
        ModelError::Provider { status, message }
    }
}

/// `google.rpc.RetryInfo.retryDelay` (`"34.4s"`) from an error's details.
fn retry_delay(details: &[Value]) -> Option<std::time::Duration> {
    details.iter().find_map(|detail| {
        let delay = detail.get("retryDelay")?.as_str()?;
        let seconds: f64 = delay.trim().strip_suffix('s')?.parse().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| std::time::Duration::from_secs_f64(seconds))
    })
}
