//! The shared vocabulary: the words every layer may name, and nothing that calls the host or
//! reads the settings. What a request is made of ([`object`], the pod specs and images of a
//! [`workload`], where its pods may land: [`scheduling`]), what an image is
//! ([`reference`](mod@reference), [`platform`]), why it will not pull ([`failure`]) and what
//! to do about it ([`action`]); and three small shapes: the error every settings sub-parser
//! returns ([`field_error`]), operators' globs ([`globs`]) and bounded quotes ([`text`]).

pub mod action;
pub mod failure;
pub mod field_error;
pub mod globs;
pub mod object;
pub mod platform;
pub mod reference;
pub mod scheduling;
pub mod text;
pub mod workload;

#[cfg(test)]
pub(crate) mod fixtures;
