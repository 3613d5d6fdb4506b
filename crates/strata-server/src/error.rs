//! Errors as a client sees them: an HTTP status and a JSON body with a kind and a message.
//! Engine errors keep their kind; a server-side failure (5xx) is logged in full and answered
//! with a reference only, so no path or internal detail leaks.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::{AtomicU64, Ordering};
use strata_core::ErrorKind;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable word a client can branch on: `invalid_argument`, `not_found`, ...
    pub kind: &'static str,
    pub message: String,
}

static INCIDENT: AtomicU64 = AtomicU64::new(1);

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, kind, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    pub fn startup(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "startup", message)
    }

    /// A server-side failure: logged with a reference number, answered with the number.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        let n = INCIDENT.fetch_add(1, Ordering::Relaxed);
        crate::log!("strata serve: error #{n}: {detail}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the server could not answer (error #{n} in its log)"),
        )
    }

    pub fn body_json(&self) -> String {
        serde_json::json!({"error": {"kind": self.kind, "message": self.message}}).to_string()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ApiError {}

impl From<strata_core::Error> for ApiError {
    fn from(e: strata_core::Error) -> Self {
        match e.kind() {
            ErrorKind::InvalidArgument => ApiError::bad_request(e.to_string()),
            ErrorKind::NotFound => ApiError::not_found(e.to_string()),
            ErrorKind::Compatibility => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "compatibility", e.to_string()),
            ErrorKind::Conflict => ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string()),
            ErrorKind::Corruption | ErrorKind::Io => ApiError::internal(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, [("content-type", "application/json")], self.body_json()).into_response()
    }
}
