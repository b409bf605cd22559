//! cargo-fuzz's entry for `json_extent`; the property is `resolvable_images_policy_fuzz::json_extent`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| resolvable_images_policy_fuzz::json_extent::run(data));
