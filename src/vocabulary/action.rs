//! What operators choose for a kind of failure: the one word the settings, the failure table
//! and the answer share, kept apart so that each can name it without reaching the others.

use serde::Deserialize;

/// What to do with an image that failed in a given way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Refuse the request, naming the image and the reason.
    Reject,
    /// Accept, with a Kubernetes warning that `kubectl` prints.
    Warn,
    /// Accept silently (the reason is still kept in an audit annotation).
    Allow,
}
