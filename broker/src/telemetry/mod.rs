//! What the broker tells its operator, the bottom layer every other names: its log lines,
//! its metrics and readiness, and the reloading of mounted files, whose failures both show.

pub mod logs;
pub mod metrics;
pub mod reloading;
