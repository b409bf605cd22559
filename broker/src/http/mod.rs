//! The HTTP side: the listeners, connections and routes, and the TLS certificate they serve.

pub mod server;
pub mod tls;
