//! The registries a lookup reaches, without the lookup: where the broker may send a request,
//! and the tag listings and ranking that name the tags a 404 suggests.

pub mod destinations;
pub mod nearest_tags;
pub mod tag_lists;
