//! A lookup's path from the seal to the answer: the service that opens the name and runs the
//! kubelet's credential loop, the gates that bound its waiting, why it got no definitive
//! answer (cause) or none at all (unanswerable), and the HTTP reply it ends in.

pub mod cause;
pub mod gates;
pub mod reply;
pub mod service;
pub mod unanswerable;
