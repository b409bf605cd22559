//! The specification of the lookup broker's reference encoding (`r4`), byte for byte.
//!
//! The contract between the policy, which rewrites a lookup into a reference on the broker's
//! host, and the broker (`broker/`), which decodes it. One implementation serves both:
//! `crates/broker-reference` (std only, compiled into the policy's wasm and into the broker).
//!
//! # Layout
//!
//! ```text
//! BROKER_HOST/r4/<seal>/<expires>/<namespace>/<credentials>/<registry>/<repository>[:<tag>][@<digest>]
//!
//! <seal>         32 lowercase hex digits: the first 128 bits of BLAKE3's keyed hash of the message
//!                below, keyed with BLAKE3's derive_key(KEY_CONTEXT, secret), the secret being the
//!                Secret's data.key (lookupBroker.keySecret) without trailing newlines, at least
//!                32 bytes, and KEY_CONTEXT "resolvable-images-policy lookup broker r4 seal key"
//! <expires>      Unix seconds (decimal, no leading zero) from which the broker refuses the name
//! <namespace>    the admission request's namespace, verbatim (a DNS-1123 label)
//! <credentials>  n                          no pull secrets: one anonymous lookup
//!                s.<secret>[__<secret>...]  these pull secrets of the namespace, in the pod's order
//!                a.<serviceaccount>         the pull secrets the ServiceAccount lists (pod templates
//!                                           that name none of their own)
//! <registry>     d.<host>[_<port>]          a lowercase DNS name or IPv4 address, port kept as written
//!                x.<hex>                    anything else (IPv6 `[::1]:5000`, uppercase hosts): the
//!                                           lowercase hex of the registry text
//! <repository>   the image's repository after normalisation (`library/busybox`), verbatim
//! tag, digest    the image's own, verbatim
//! ```
//!
//! The **message** the seal is the keyed hash of is the reference as the policy writes it, with the
//! seal left out and only the tag *or* the digest that the manifest URL will carry:
//!
//! ```text
//! BROKER_HOST/r4/<expires>/<namespace>/<credentials>/<registry>/<repository>:<tag>     (no digest)
//! BROKER_HOST/r4/<expires>/<namespace>/<credentials>/<registry>/<repository>@<digest>  (a digest)
//! ```
//!
//! A reference with both a tag and a digest is asked by its digest: the policy server's client
//! writes the digest in `/v2/<name>/manifests/<reference>` when there is one
//! ([oci-client, `to_v2_manifest_url`](https://github.com/oras-project/rust-oci-client/blob/main/src/client.rs)),
//! and so does the test host (`crates/registry-client`, `manifest_url`). `BROKER_HOST` is written
//! as hosts are compared (`registry_key`: lowercase, no trailing dot, no `:443`).
//!
//! Examples, with the key `0123456789abcdef0123456789abcdef`, the broker host
//! `broker.kw.svc:8443` and the expiry `1767225900` (2026-01-01T00:05:00Z; `<seal>` stands for
//! the seal of the rest):
//!
//! | lookup | brokered reference |
//! |---|---|
//! | `registry.example:5000/app/web:v1` in `team-a`, secrets `regcred`, `backup.cred` | `broker.kw.svc:8443/r4/e1fda409a977e3be7258871d63178dcd/1767225900/team-a/s.regcred__backup.cred/d.registry.example_5000/app/web:v1` |
//! | `busybox:1.36` in `default`, template with ServiceAccount `builder` | `broker.kw.svc:8443/r4/<seal>/1767225900/default/a.builder/d.docker.io/library/busybox:1.36` |
//! | `[::1]:5000/a:1@sha256:…` in `ns`, no secrets (sealed for the digest) | `broker.kw.svc:8443/r4/<seal>/1767225900/ns/n/x.5b3a3a315d3a35303030/a:1@sha256:…` |
//!
//! The seal of the first, as any tool computes it (`e2e-tests/lib/broker.bash`'s `broker_seal`
//! does this to forge requests; `b3sum --keyed` reads the 32-byte key on its standard input):
//!
//! ```console
//! $ key=$(printf '%s' 0123456789abcdef0123456789abcdef |
//!     b3sum --derive-key 'resolvable-images-policy lookup broker r4 seal key' --no-names)
//! $ printf '%s' broker.kw.svc:8443/r4/1767225900/team-a/s.regcred__backup.cred/d.registry.example_5000/app/web:v1 >message
//! $ printf "$(printf '%s' "$key" | sed 's/../\\x&/g')" | b3sum --keyed --no-names message | cut -c1-32
//! e1fda409a977e3be7258871d63178dcd
//! ```
//!
//! # The expiry
//!
//! The policy writes `expires` = its clock rounded up to the next multiple of 300 s, plus 300 s
//! (`broker_reference::expiry`): a seal lives from 300 s to just under 600 s. Why rounded:
//!
//! - **The policy server's cache still works.** It caches successful lookups per reference
//!   (60 s, `docs/design/rfc-resolve-images.md`). An expiry that followed the
//!   clock to the second would make every admission request's references new, and every lookup
//!   a miss that reaches the broker and the registry. Rounded, every request within one 5-minute
//!   window writes the same references; a window's change costs one miss per image.
//! - **A lookup never outlives its seal.** At least 300 s are left when the reference is written,
//!   against a policy time budget of seconds.
//! - **Clocks may differ.** The broker accepts an expiry at most 660 s ahead of its own clock
//!   (the longest lifetime and 60 s of skew): a name that claims more is refused, so even a
//!   holder of the key cannot write a lasting one. A broker clock ahead of the policy server's
//!   shortens the lifetime by as much; a difference beyond a minute makes lookups "not checked"
//!   warnings (the broker answers 401), never denials, and the broker logs `expired`.
//!
//! The clock: the policy reads the wall clock once per admission request that has a brokered
//! lookup (`Host::unix_time`, Rust's `SystemTime`, which a `wasm32-wasip1` guest reads with
//! WASI's `clock_time_get` on the realtime clock; the wasmtime WASI context of the policy server
//! and kwctl answers it with the host's system clock, as wasmtime's default clocks do
//! ([wasi-common `clocks_ctx`](https://github.com/bytecodealliance/wasmtime/blob/main/crates/wasi-common/src/sync/clocks.rs)),
//! and so does the test host, `crates/test-host/src/runtime/wasi.rs`). The end-to-end suite on the real policy server
//! depends on it: a guest clock that did not run would write expired seals, and every brokered
//! lookup there would fail. The functions that compute and check an expiry take the time as a
//! parameter, and are tested at fixed instants.
//!
//! # Why it is valid, unambiguous and injective
//!
//! - **Valid for the policy server's parser**: every component is `[a-z0-9]+` joined by `.`,
//!   `_`, `__` or `-` runs. Namespaces, Secret and ServiceAccount names are DNS-1123 names
//!   (`[a-z0-9-.]`, starting and ending alphanumeric); `__` cannot occur in them, so it separates
//!   secret names; a port is digits after `_`; hex is `[0-9a-f]`. The tag and digest are the
//!   image's own. The whole name, broker host included, is at most 255 characters (the stricter
//!   reading of distribution's limit); longer lookups are not brokered (below).
//! - **Unambiguous**: the first four components have fixed meanings; the repository is the rest
//!   (it may contain `/`, the other fields cannot), so a repository that imitates the encoding
//!   stays a repository.
//! - **Injective**: the decoder re-encodes what it decoded and accepts the name only if it gets
//!   the same text back (no `x.` form for a host the `d.` form can write, no `s.` with an empty
//!   name, no other version). Two different lookups therefore never share a reference, nor an
//!   entry of the policy server's cache (keyed by reference).
//! - **Sealed**: the decoder checks the seal (in constant time, for every key and every
//!   `--own-host` name the broker holds, and the tag or digest of the request's URL) before it
//!   reads anything else of the name, and the expiry right after, against its own clock; so an
//!   unsealed, foreign or expired name costs the broker no Secret read and no registry request.
//!   The seal covers every component and the one tag or digest asked: a name copied from a log
//!   or a cache is good for that tag or digest, on that broker, for minutes. BLAKE3's keyed
//!   mode is a PRF, so its first 128 bits are a MAC of 128-bit strength against forgery; the seal
//!   and the expiry cost 47 of the 255 characters. BLAKE3, not HMAC-SHA256 (`r3`): the policy
//!   seals every image of every request in a fresh instance, and the keyed hash of a name costs
//!   its wasm about a third of the HMAC's (docs/performance.md).
//! - **No other version**: `r3` names (this layout under HMAC-SHA256), `r2` names (sealed without
//!   the tag, the host or an expiry) and `r1` names are refused as not encoded; the project is
//!   pre-1.0, and a broker that accepted two seals would be as strong as the weaker.
//!
//! # Refusals
//!
//! The encoder refuses (and the policy then does what it does without the broker): a broker host
//! that is not a lowercase `host[:port]`, a namespace
//! that is not a DNS label, a pull secret or ServiceAccount name that is not a DNS subdomain (no
//! such object can exist; the kubelet skips it the same way), a registry with characters outside
//! `[A-Za-z0-9.-:[]%]`, a repository that is not lowercase path components, a bad tag or digest,
//! and a name over 255 characters. The decoder refuses everything the encoder would not write;
//! its error texts never quote the name.
//!
//! # Security: whose secrets
//!
//! - The policy fills `<namespace>` from the admission request (`request.namespace`), never from
//!   the image, and the credentials from the pod spec it is judging.
//! - The caller must present the broker's Basic credential, which only the policy server holds
//!   (its `imagePullSecret` entry for `BROKER_HOST`), and the name must be sealed with a key the
//!   broker holds. The policy server sends the caller credential for *every* lookup on the
//!   broker's host, whichever module asks; the seal is what only this policy can write, since
//!   only it is granted the key Secret (docs/broker.md, "Threat model"). Another policy, a second
//!   instance of this policy without `lookupBroker`, or a Pod author's image looked up as written
//!   reaches the broker with a name it cannot seal, and gets 401; so does a name the policy
//!   sealed, asked for another tag or digest, after its expiry, or of another broker.
//! - An image that *is* an encoded reference (`BROKER_HOST/r4/<seal>/<expires>/kube-system/s.admin/...`)
//!   names the broker's host. The policy sends no reference on the broker's host (compared
//!   without regard to case, a trailing dot or the port 443) to the policy server unless it wrote that very
//!   reference for the request being judged (a guard around every OCI host call: lookups,
//!   platforms, node images), so such an image is reported as not checked and never reaches the
//!   broker through this policy. Other spellings of the broker's address (`localhost:PORT`, its
//!   IP) pass the guard and are brokered as lookups *on* that host, which the broker refuses (it
//!   never forwards to itself nor to loopback, link-local or metadata addresses). The e2e suite
//!   `e2e-tests/94-broker.bats` tries these references.
//! - The broker answers per reference; the policy server caches successes per reference, and the
//!   namespace is part of the reference, so one namespace's answer never serves another's.
