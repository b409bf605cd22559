//! cargo-fuzz's entry for `keyring`; the property is `resolvable_images_policy_fuzz::keyring`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| resolvable_images_policy_fuzz::keyring::run(data));
