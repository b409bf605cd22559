#!/usr/bin/env bash
# measure-lookups.sh [STOCK_POLICY_SERVER] [PATCHED_POLICY_SERVER]
#
# Measures the stock and the patched policy-server side by side, in one run, on what the
# upstream/oci-lookups series must achieve, that one registry that never answers no longer
# stalls every OCI lookup of the server (see upstream/oci-lookups/README.md, "Measured"):
#   - with one silent registry (accepts connections, never answers) in use by M concurrent
#     requests, requests for a healthy registry keep their warm latency (p50 within 1.5x of the
#     same server's baseline);
#   - the M requests all answer within the evaluation time-out + 1 s, with the policy's own
#     answer (allowed, with a warning), never a 500, and within one time-out of each other;
#   - more silent requests than workers (F, each naming its own image) do not stall a policy
#     that makes no host call: every accept-all request answers, allowed, within the
#     evaluation time-out;
#   - a cold lookup through a proxy adding DELAY_MS per HTTP request, to a registry already
#     seen, takes at most 0.75x the stock server's time (its client and connection reused).
# Every check is one the stock server fails; both columns are judged.
# Each server runs the project's policy (settings: no pull secrets) with --workers WORKERS and
# --policy-timeout EVAL_TIMEOUT, in a scratch directory, against a real docker-registry, a
# black hole and e2e-tests/lib/fault_proxy.py (all on 127.0.0.1). The load driver is
# measure_lookups.py. Prints a table and the verdicts; exit status 0 when the patched server
# meets all three.
#
# Defaults: STOCK /work/shared/tools/policy-server, PATCHED /work/build/out/policy-server
# (upstream/build.sh). Environment: POLICY_WASM (default the repository's release build, else
# /work/main's), ACCEPT_ALL_WASM (default target/bench/accept-all.wasm, else the release build),
# M=2, WORKERS=M+2, F=WORKERS+2, C=2 healthy clients, H=40 healthy requests per phase, K=5
# cold lookups, DELAY_MS=50, EVAL_TIMEOUT=2, WINDOW=20 (s, longest healthy phase next to the
# silent registry), CLIENT_TIMEOUT=15 (s), KWCTL (annotates the policy; default
# /work/shared/tools/kwctl), KEEP_WORK=1 keeps the scratch directory.
# Needs docker-registry, skopeo, jq, curl, python3.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
STOCK=${1:-/work/shared/tools/policy-server}
PATCHED=${2:-/work/build/out/policy-server}
M=${M:-2}
WORKERS=${WORKERS:-$((M + 2))}
F=${F:-$((WORKERS + 2))}
EVAL_TIMEOUT=${EVAL_TIMEOUT:-2}
DELAY_MS=${DELAY_MS:-50}
export M F C="${C:-2}" H="${H:-40}" K="${K:-5}" DELAY_MS WINDOW="${WINDOW:-20}" CLIENT_TIMEOUT="${CLIENT_TIMEOUT:-15}"
if [[ -z "${POLICY_WASM:-}" ]]; then
  POLICY_WASM=$repo/target/wasm32-wasip1/release/resolvable_images_policy.wasm
  [[ -f "$POLICY_WASM" ]] || POLICY_WASM=/work/main/target/wasm32-wasip1/release/resolvable_images_policy.wasm
fi
export POLICY_WASM
if [[ -z "${ACCEPT_ALL_WASM:-}" ]]; then
  ACCEPT_ALL_WASM=$repo/target/bench/accept-all.wasm
  [[ -f "$ACCEPT_ALL_WASM" ]] || ACCEPT_ALL_WASM=$repo/target/wasm32-wasip1/release/accept_all.wasm
fi

for tool in docker-registry skopeo jq curl python3; do
  command -v "$tool" >/dev/null || { echo "measure-lookups.sh: $tool is missing" >&2; exit 2; }
done
KWCTL=${KWCTL:-/work/shared/tools/kwctl}
for bin in "$STOCK" "$PATCHED" "$KWCTL"; do
  [[ -x "$bin" ]] || { echo "measure-lookups.sh: no $bin" >&2; exit 2; }
done
[[ -f "$POLICY_WASM" ]] || { echo "measure-lookups.sh: no policy at $POLICY_WASM (make policy.wasm)" >&2; exit 2; }
[[ -f "$ACCEPT_ALL_WASM" ]] || { echo "measure-lookups.sh: no accept-all at $ACCEPT_ALL_WASM (cargo build -p accept-all --target wasm32-wasip1 --release)" >&2; exit 2; }

E2E_WORK=$(mktemp -d "${TMPDIR:-/tmp}/measure-lookups.XXXXXX")
export E2E_WORK
# shellcheck source=e2e-tests/lib/common.bash
source "$repo/e2e-tests/lib/common.bash"
unset RUST_BACKTRACE

pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  registry_stop_all || true
  if [[ "${KEEP_WORK:-}" == 1 ]]; then
    echo "scratch directory kept: $E2E_WORK"
  else
    rm -rf "$E2E_WORK"
  fi
}
trap cleanup EXIT

# --- registries -------------------------------------------------------------------------
registry_start anon
image=$(build_image measured)
for tag in healthy v0 $(seq -f 'v%g' 1 "$K"); do
  push_image "$image" anon "team/app:$tag" >/dev/null
done
blackhole_start silent
python3 "$repo/e2e-tests/lib/fault_proxy.py" --mode delay --upstream "$REG_ANON" \
  --delay-ms "$DELAY_MS" --port-file "$E2E_WORK/proxy.port" 2>"$E2E_WORK/proxy.log" &
pids+=($!)
wait_until 5 test -s "$E2E_WORK/proxy.port"
REG_DELAYED=127.0.0.1:$(cat "$E2E_WORK/proxy.port")
SOURCES=$(write_sources_yaml measure --insecure "$REG_ANON" --insecure "$REG_SILENT" --insecure "$REG_DELAYED")
echo "registries: healthy $REG_ANON, silent $REG_SILENT, healthy behind a $DELAY_MS ms proxy $REG_DELAYED"

# policy-server needs the metadata in the module (kwctl annotate)
HOME="$E2E_WORK/kwctl-home" "$KWCTL" annotate -m "$repo/policy-metadata.yml" -u "$repo/README.md" \
  -o "$E2E_WORK/annotated-policy.wasm" "$POLICY_WASM" 2>"$E2E_WORK/annotate.log"
HOME="$E2E_WORK/kwctl-home" "$KWCTL" annotate -m "$repo/bench/baseline-metadata.yml" \
  -o "$E2E_WORK/accept-all.wasm" "$ACCEPT_ALL_WASM" 2>>"$E2E_WORK/annotate.log"
jq -n --arg wasm "$E2E_WORK/annotated-policy.wasm" --arg accept "$E2E_WORK/accept-all.wasm" '{images: {
  module: ("file://" + $wasm),
  settings: {pullSecrets: {consult: false}},
  hostCapabilities: ["oci/v1/manifest_digest", "oci/v1/oci_manifest", "oci/v1/oci_manifest_config"]
}, accept: {module: ("file://" + $accept), settings: {}}}' >"$E2E_WORK/policies.yml"

# --- one server ---------------------------------------------------------------------------
# measure NAME BINARY: starts BINARY, runs the load driver, stops it; results in NAME.json.
measure() {
  local name=$1 bin=$2 port ready dir pid
  dir=$E2E_WORK/$name
  mkdir -p "$dir/home" "$dir/policies" "$dir/sigstore"
  port=$(free_port)
  ready=$(free_port)
  echo
  echo "== $name: $bin ($("$bin" --version 2>/dev/null | head -n1)), $WORKERS workers, policy time-out ${EVAL_TIMEOUT}s"
  env -u KUBECONFIG HOME="$dir/home" "$bin" --policies "$E2E_WORK/policies.yml" \
    --addr 127.0.0.1 --port "$port" --readiness-probe-port "$ready" --workers "$WORKERS" \
    --policy-timeout "$EVAL_TIMEOUT" --sources-path "$SOURCES" \
    --ignore-kubernetes-connection-failure --sigstore-cache-dir "$dir/sigstore" \
    --policies-download-dir "$dir/policies" --log-no-color >"$dir/server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_until 60 curl -sf --noproxy '*' -o /dev/null "http://127.0.0.1:$ready/readiness" || {
    echo "$name did not become ready:" >&2
    tail -n 20 "$dir/server.log" >&2
    return 1
  }
  python3 "$here/measure_lookups.py" "http://127.0.0.1:$port/validate/images" \
    "http://127.0.0.1:$port/validate/accept" \
    "$FIXTURES_DIR/pod-create.json" "$REG_ANON/team/app:healthy" "$REG_SILENT" "$REG_DELAYED" \
    "$E2E_WORK/$name.json"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

measure stock "$STOCK"
measure patched "$PATCHED"

# --- verdicts -----------------------------------------------------------------------------
echo
python3 - "$E2E_WORK/stock.json" "$E2E_WORK/patched.json" "$EVAL_TIMEOUT" <<'PY'
import json, sys
stock, patched = (json.load(open(p)) for p in sys.argv[1:3])
timeout = float(sys.argv[3])

def p50(r, phase):
    h = r[phase]["healthy"]
    return h["p50_ms"] if h else None

def fmt(v, unit=""):
    return "-" if v is None else f"{v}{unit}"

print(f"{'':44} {'stock':>14} {'patched':>14}")
def counts(r, phase):
    p = r[phase]
    return f"{(p['healthy'] or {}).get('n', 0)}/{p['healthy_failed']}/{p['healthy_not_sent']}"

rows = [
    ("healthy p50, baseline", lambda r: fmt(p50(r, "baseline"), " ms")),
    ("healthy p50, next to the silent registry", lambda r: fmt(p50(r, "silent"), " ms")),
    ("healthy answered / failed / not sent", lambda r: counts(r, "silent")),
    ("silent requests: slowest answer", lambda r: fmt(max(s["elapsed_s"] for s in r["silent"]["requests"]), " s")),
    ("silent requests: spread of their ends", lambda r: fmt(r["silent"]["spread_s"], " s")),
    ("silent requests: answers", lambda r: ",".join(
        s.get("error") or ("500" if s.get("code") == 500 else ("warn" if s.get("allowed") and s.get("warnings") else ("deny" if s.get("allowed") is False else "allow")))
        for s in r["silent"]["requests"])),
    ("cold lookup via proxy, median", lambda r: fmt(r["cold"]["median_proxy_ms"], " ms")),
    ("  delayed round trips, median", lambda r: fmt(r["cold"]["median_delayed_round_trips"])),
    ("accept-all next to the flood: p50 / max", lambda r: "-" if not r["flood"]["healthy"] else f"{r['flood']['healthy']['p50_ms']}/{r['flood']['healthy']['max_ms']} ms"),
    ("accept-all answered / failed / not sent", lambda r: counts(r, "flood")),
]
for label, f in rows:
    print(f"{label:44} {f(stock):>14} {f(patched):>14}")

def judge(r):
    checks = []
    base, busy = p50(r, "baseline"), p50(r, "silent")
    checks.append(("healthy p50 next to the silent registry within 1.5x of the baseline",
                   base is not None and busy is not None and busy <= 1.5 * base
                   and r["silent"]["healthy_failed"] == 0 and r["silent"]["healthy_not_sent"] == 0))
    reqs = r["silent"]["requests"]
    checks.append((f"the {len(reqs)} silent requests answer within {timeout:g} s + 1 s, within {timeout:g} s of each other",
                   all("error" not in s and s["elapsed_s"] <= timeout + 1 for s in reqs)
                   and r["silent"]["spread_s"] <= timeout))
    checks.append(("... with the policy's warning (allowed, warnings), never a 500",
                   all(s.get("http") == 200 and s.get("allowed") is True and s.get("warnings") and s.get("code") != 500 for s in reqs)))
    flood = r["flood"]
    accept = flood["healthy"]
    checks.append((f"{len(flood['requests'])} silent requests (more than the workers): every accept-all request answers within {timeout:g} s",
                   accept is not None and flood["healthy_failed"] == 0 and flood["healthy_not_sent"] == 0
                   and accept["max_ms"] <= timeout * 1000))
    checks.append(("cold lookup through the proxy: at most 0.75x the stock server's median",
                   r["cold"]["median_proxy_ms"] <= 0.75 * stock["cold"]["median_proxy_ms"]))
    return checks

print()
ok = True
for (label, passed), (_, stock_passed) in zip(judge(patched), judge(stock)):
    ok &= bool(passed) and not stock_passed
    print(f"{'PASS' if passed else 'FAIL'} / stock {'passes' if stock_passed else 'fails'}  {label}")
sys.exit(0 if ok else 1)
PY
