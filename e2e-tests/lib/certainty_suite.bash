# shellcheck shell=bash
# The hooks the certainty suites (45-48) share: the scenario's registries for the file, a
# built host and a session path for each test, every registry stopped at the end. Load it at
# the top of a suite file, after `bats_require_minimum_version`:
#
#   load lib/certainty_suite
#
# It loads lib/common and lib/certainty, and defines `setup_file`, `setup` and
# `teardown_file`. A suite that needs more redefines a hook after the load and calls the
# shared part first (`certainty_setup_file`, `certainty_setup`).

# shellcheck source=e2e-tests/lib/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
# shellcheck source=e2e-tests/lib/certainty.bash
source "$E2E_DIR/lib/certainty.bash"

# certainty_setup_file: the scenario's registries; returns 1 when no host is built (the
# suite's own setup_file then stops, and each test skips or fails in `setup`).
certainty_setup_file() {
  scenario_setup_file
  host_ready
}

# certainty_setup: skip (or fail in CI) without a host; SESSION names the test's session file.
certainty_setup() {
  require_host
  SESSION="$BATS_TEST_TMPDIR/session.yml"
}

setup_file() { certainty_setup_file || true; }
setup() { certainty_setup; }
teardown_file() { scenario_teardown_file; }
