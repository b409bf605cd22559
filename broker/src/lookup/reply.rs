//! The broker's HTTP reply, apart from the service that builds most of them, so that the
//! server and the refusals (`unanswerable`) can name it without reaching the service. (The
//! policy's `answer` is its admission response; this is only status, headers and body.)

use serde_json::json;

/// An HTTP reply, independent of the server library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Headers beyond `Content-Length`.
    pub headers: Vec<(&'static str, String)>,
    /// The body (dropped by the server for `HEAD`).
    pub body: Vec<u8>,
}

impl Reply {
    /// A JSON body with its content type.
    pub fn json(status: u16, body: serde_json::Value) -> Self {
        Reply {
            status,
            headers: vec![("Content-Type", "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    /// An OCI error envelope with one error.
    pub fn error(status: u16, code: &str, message: &str) -> Self {
        Reply::json(
            status,
            json!({"errors": [{"code": code, "message": message, "detail": null}]}),
        )
    }
}
