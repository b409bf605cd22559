# shellcheck shell=bash
# Local registries for the e2e tests: Debian's `docker-registry` (distribution 2.8) on
# 127.0.0.1, in three flavours, each with its own storage under $E2E_WORK/registries/NAME:
#   anon  plain HTTP, anonymous pull and push          -> REG_ANON=127.0.0.1:PORT
#   auth  plain HTTP, htpasswd Basic auth (bcrypt)      -> REG_AUTH, REG_AUTH_USER, REG_AUTH_PASSWORD
#   tls   HTTPS with a CA generated here, anonymous     -> REG_TLS, REG_TLS_CA (PEM), REG_TLS_CERT_DIR
# Start them from bats `setup_file` and stop them from `teardown_file` (registry_stop_all).

REG_AUTH_USER="${REG_AUTH_USER:-e2e-robot-5k2q}"
REG_AUTH_PASSWORD="${REG_AUTH_PASSWORD:-e2e-Passw0rd-7h3x}"

# free_port: an unused loopback port. With python3 the kernel picks it (bind to port 0);
# without, random ports are probed until one refuses connections. Either way the port may be
# taken before the registry binds it, which registry_start handles by retrying.
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local port attempt
  for attempt in {1..50}; do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      printf '%s\n' "$port"
      return
    fi
  done
  echo "free_port: no free port found" >&2
  return 1
}

# registry_answers HOST:PORT SCHEME [CA]: true once /v2/ answers 200 (anonymous) or 401
# (auth), i.e. the registry is serving.
registry_answers() {
  local addr=$1 scheme=$2 ca=${3:-} code
  local -a tls=()
  [[ -n "$ca" ]] && tls=(--cacert "$ca")
  code=$(curl -s --noproxy '*' --max-time 2 "${tls[@]}" -o /dev/null -w '%{http_code}' \
    "$scheme://$addr/v2/") || true
  [[ "$code" == 200 || "$code" == 401 ]]
}

# generate_tls_ca DIR: a self-signed CA and a server certificate for 127.0.0.1 and localhost
# signed by it, written as DIR/ca.pem, DIR/server.pem, DIR/server.key; DIR/certs.d/ca.crt is
# the CA in the layout skopeo's --cert-dir expects. rustls rejects certificates without SAN
# or a CA used as a leaf, so both extensions are explicit.
generate_tls_ca() {
  local dir=$1
  mkdir -p "$dir/certs.d"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 2 \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -subj "/CN=resolvable-images e2e CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -sha256 \
    -keyout "$dir/server.key" -out "$dir/server.csr" -subj "/CN=localhost" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost" >"$dir/server.ext"
  openssl x509 -req -sha256 -days 2 -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
  cp "$dir/ca.pem" "$dir/certs.d/ca.crt"
}

# write_registry_config DIR PORT FLAVOUR: the registry's config.yml; storage in DIR/data.
write_registry_config() {
  local dir=$1 port=$2 flavour=$3
  {
    printf '%s\n' "version: 0.1" \
      "log:" "  level: error" "  accesslog:" "    disabled: true" \
      "storage:" "  filesystem:" "    rootdirectory: $dir/data" "  delete:" "    enabled: true" \
      "http:" "  addr: 127.0.0.1:$port" "  secret: e2e-not-a-secret"
    if [[ "$flavour" == tls ]]; then
      printf '%s\n' "  tls:" "    certificate: $dir/tls/server.pem" "    key: $dir/tls/server.key"
    fi
    if [[ "$flavour" == auth ]]; then
      printf '%s\n' "auth:" "  htpasswd:" "    realm: e2e-realm" "    path: $dir/htpasswd"
    fi
  } >"$dir/config.yml"
}

# registry_start FLAVOUR [NAME]: starts a registry (anon|auth|tls) named NAME (default the
# flavour), waits until it serves, and exports REG_<NAME>=127.0.0.1:PORT (plus the CA or the
# credentials). Retries on another port if the chosen one was taken meanwhile.
registry_start() {
  local flavour=$1 name=${2:-$1} work dir port pid attempt scheme=http ca=""
  work=$(e2e_workdir)
  dir="$work/registries/$name"
  mkdir -p "$dir/data"
  case "$flavour" in
    anon) ;;
    auth) htpasswd -Bbn "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" >"$dir/htpasswd" ;;
    tls) generate_tls_ca "$dir/tls"; scheme=https; ca="$dir/tls/ca.pem" ;;
    *) echo "registry_start: unknown flavour '$flavour'" >&2; return 1 ;;
  esac
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    write_registry_config "$dir" "$port" "$flavour"
    # 3>&- : bats waits for every process holding its fd 3; the registry must not keep it.
    docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 3>&- &
    pid=$!
    echo "$pid" >"$dir/pid"
    wait_until 15 registry_serving_or_dead "$pid" "127.0.0.1:$port" "$scheme" "$ca" || true
    if kill -0 "$pid" 2>/dev/null && registry_answers "127.0.0.1:$port" "$scheme" "$ca" &&
      owns_port "$pid" "$port"; then
      break
    fi
    registry_kill "$pid"
    echo "registry_start: $name did not start on port $port (attempt $attempt):" >&2
    tail -n 5 "$dir/registry.log" >&2
    [[ $attempt == 5 ]] && return 1
  done
  local var
  var="REG_$(tr '[:lower:]-' '[:upper:]_' <<<"$name")"
  printf -v "$var" '%s' "127.0.0.1:$port"
  export "${var?}"
  case "$flavour" in
    auth) export REG_AUTH_USER REG_AUTH_PASSWORD ;;
    tls)
      printf -v "${var}_CA" '%s' "$ca"; export "${var}_CA"
      printf -v "${var}_CERT_DIR" '%s' "$dir/tls/certs.d"; export "${var}_CERT_DIR" ;;
  esac
}

# owns_port PID PORT: whether process PID holds the listening socket on 127.0.0.1:PORT. Suites
# run side by side: a registry that lost its port to another suite's exits, but the other's
# answers there first, and pushes would go to it.
owns_port() {
  python3 - "$1" "$2" <<'EOF'
import os, sys
pid, port = sys.argv[1], int(sys.argv[2])
listening = set()
with open("/proc/net/tcp") as table:
    next(table)
    for row in table:
        fields = row.split()
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
            listening.add(f"socket:[{fields[9]}]")
try:
    fds = os.listdir(f"/proc/{pid}/fd")
except OSError:
    sys.exit(1)
for fd in fds:
    try:
        if os.readlink(f"/proc/{pid}/fd/{fd}") in listening:
            sys.exit(0)
    except OSError:
        pass
sys.exit(1)
EOF
}

# registry_serving_or_dead PID ADDR SCHEME CA: the condition to stop polling a starting
# registry: it answers, or its process died (e.g. the port was taken), so a failed start is
# noticed at once rather than at the timeout.
registry_serving_or_dead() {
  local pid=$1 addr=$2 scheme=$3 ca=$4
  registry_gone "$pid" || registry_answers "$addr" "$scheme" "$ca"
}

# registry_kill PID...: stops registry processes and waits until each is gone (SIGKILL after
# 5 s). All are signalled first, so a suite's teardown waits for the slowest, not their sum.
registry_kill() {
  local pid
  kill "$@" 2>/dev/null || true
  for pid in "$@"; do
    if ! wait_until 5 registry_gone "$pid"; then
      kill -9 "$pid" 2>/dev/null || true
      wait_until 2 registry_gone "$pid" || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}

# registry_gone PID: the process has exited. A zombie counts as gone: it holds no port or file,
# and one started in a command substitution is reparented to PID 1, which may reap it seconds
# later.
registry_gone() {
  local stat
  kill -0 "$1" 2>/dev/null || return 0
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  [[ "${stat%% *}" == Z ]]
}

# registry_stop NAME: stops the registry started as NAME; its storage stays until the work
# dir is removed.
registry_stop() {
  local dir
  dir="$(e2e_workdir)/registries/$1"
  [[ -f "$dir/pid" ]] || return 0
  registry_kill "$(cat "$dir/pid")"
  rm -f "$dir/pid"
}

# registry_stop_all: stops every registry of this run (bats teardown_file, script traps).
registry_stop_all() {
  local work pidfile
  local -a pids=()
  work=$(e2e_workdir)
  for pidfile in "$work"/registries/*/pid; do
    [[ -e "$pidfile" ]] && pids+=("$(cat "$pidfile")")
  done
  ((${#pids[@]})) && registry_kill "${pids[@]}"
  rm -f "$work"/registries/*/pid
}

# registry_pids: PIDs of the registries of this run that are still alive (should be none
# after registry_stop_all).
registry_pids() {
  local work pidfile
  work=$(e2e_workdir)
  for pidfile in "$work"/registries/*/pid; do
    [[ -e "$pidfile" ]] && ! registry_gone "$(cat "$pidfile")" && cat "$pidfile"
  done
  return 0
}

# unused_port: a loopback port where nothing listens, for "registry down" scenarios.
unused_port() { free_port; }

# blackhole_start [NAME]: a "registry" that accepts connections and never answers, as a hung
# or firewalled registry does; exports REG_BLACKHOLE (or REG_<NAME>). Needs python3. Stopped
# by registry_stop / registry_stop_all like the real ones.
blackhole_start() {
  local name=${1:-blackhole} dir port pid var
  dir="$(e2e_workdir)/registries/$name"
  mkdir -p "$dir"
  port=$(free_port)
  python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
held = []
while True:
    conn, _ = s.accept()
    held.append(conn)  # keep it open, say nothing
' "$port" >"$dir/blackhole.log" 2>&1 3>&- &
  pid=$!
  echo "$pid" >"$dir/pid"
  wait_until 5 port_listening "$port" || { registry_kill "$pid"; echo "blackhole_start: no listener" >&2; return 1; }
  var="REG_$(tr '[:lower:]-' '[:upper:]_' <<<"$name")"
  printf -v "$var" '%s' "127.0.0.1:$port"
  export "${var?}"
}

# port_listening PORT: something accepts connections on 127.0.0.1:PORT.
port_listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# apiserver_serve DIR: makes the fake Kubernetes API server (lib/fake_apiserver.py, python3)
# serve the cluster directory DIR (a --cluster-dir of the test host), for kwctl; starts it on
# first use, one per bats file, kept with the registries (registry_stop_all stops it). Prints
# the path of a kubeconfig naming it. The server reads DIR's path from a file on every
# request, so the next call simply points it at another directory.
apiserver_serve() {
  local dir port
  dir="$(e2e_workdir)/registries/apiserver"
  mkdir -p "$dir"
  (cd "$1" && pwd) >"$dir/cluster-dir" || return 1
  if ! { [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; }; then
    rm -f "$dir/port"
    # 3>&- : bats waits for every process holding its fd 3; the server must not keep it.
    python3 "$E2E_DIR/lib/fake_apiserver.py" --dir-file "$dir/cluster-dir" --port-file "$dir/port" \
      >"$dir/apiserver.log" 2>&1 3>&- &
    echo $! >"$dir/pid"
    wait_until 10 test -s "$dir/port" || { cat "$dir/apiserver.log" >&2; return 1; }
    port=$(cat "$dir/port")
    printf '%s\n' "apiVersion: v1" "kind: Config" \
      "clusters:" "- name: e2e" "  cluster:" "    server: http://127.0.0.1:$port" \
      "users:" "- name: e2e" "  user: {}" \
      "contexts:" "- name: e2e" "  context:" "    cluster: e2e" "    user: e2e" \
      "current-context: e2e" >"$dir/kubeconfig"
  fi
  printf '%s\n' "$dir/kubeconfig"
}
