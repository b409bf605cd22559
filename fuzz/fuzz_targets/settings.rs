//! cargo-fuzz's entry for `settings`; the property is `resolvable_images_policy_fuzz::settings`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| resolvable_images_policy_fuzz::settings::run(data));
