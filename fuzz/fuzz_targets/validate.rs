//! cargo-fuzz's entry for `validate`; the property is `resolvable_images_policy_fuzz::validate`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| resolvable_images_policy_fuzz::validate::run(data));
