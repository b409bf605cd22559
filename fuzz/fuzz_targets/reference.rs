//! cargo-fuzz's entry for `reference`; the property is `resolvable_images_policy_fuzz::reference`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| resolvable_images_policy_fuzz::reference::run(data));
