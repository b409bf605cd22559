//! cargo-fuzz's entry for `docker_config`; the property is `resolvable_images_policy_fuzz::docker_config`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| resolvable_images_policy_fuzz::docker_config::run(data));
