//! What the broker trusts, read from mounted Secrets and read again while it runs: the caller
//! credential only the policy server holds, the keys names are sealed with, and why either
//! (or any option) keeps the broker from starting.

pub mod caller;
pub mod error;
pub mod keys;
