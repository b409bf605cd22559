#!/usr/bin/env bats
# Admission requests only from the API server (docs/broker.md, "Threat model"): the real
# policy-server started with client CAs as Kubewarden's controller starts it once
# deploy/policy-server.yaml's ConfigMap is named in the chart's mTLS.configMapName: HTTPS, and
# KUBEWARDEN_CLIENT_CA_FILE (the same argument as --client-ca-file) listing Kubewarden's own
# root CA and the client CA of the ConfigMap, comma-separated. Certificates made here with
# openssl. Skips, saying so, without a policy-server: the project's test host has no server
# mode to carry the same check.

bats_require_minimum_version 1.5.0

# cert NAME CA_NAME [SUBJECT_ALT_NAME]: a P-256 key and a certificate for NAME in $CERTS,
# issued by CA_NAME (itself when CA_NAME is NAME, making a CA); a server certificate when a
# SAN is given, else a client certificate.
cert() {
  local name=$1 ca=$2 san=${3:-} dir=$CERTS
  local -a ext
  if [[ "$name" == "$ca" ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=$name" -keyout "$dir/$name.key" -out "$dir/$name.crt" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
    return
  fi
  if [[ -n "$san" ]]; then
    ext=(-addext "subjectAltName=$san" -addext extendedKeyUsage=serverAuth)
  else
    ext=(-addext extendedKeyUsage=clientAuth)
  fi
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" "${ext[@]}" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" \
    -CAcreateserial -days 2 -copy_extensions copy -out "$dir/$name.crt" 2>/dev/null
}

setup_file() {
  load lib/common
  load lib/policy_server
  [[ -z "$(ps_skip_reason)" && -f "$POLICY_WASM" ]] && ! on_kwctl || return 0
  CERTS="$BATS_FILE_TMPDIR/certs"
  export CERTS
  mkdir -p "$CERTS"
  cert serving-ca serving-ca
  cert server serving-ca "IP:127.0.0.1"
  # deploy/policy-server.yaml's ConfigMap: the CA of the API server's webhook client certificate
  cert apiserver-client-ca apiserver-client-ca
  cert apiserver apiserver-client-ca
  # Kubewarden's root CA, which the controller lists too (the audit scanner's client certificate)
  cert kubewarden-root-ca kubewarden-root-ca
  cert audit-scanner kubewarden-root-ca
  # a certificate from a CA the policy server was not given
  cert other-ca other-ca
  cert intruder other-ca
  jq -n --arg m "file://$POLICY_WASM" \
    '{"clusterwide-resolvable-images": {module: $m, policyMode: "protect", allowedToMutate: false, settings: {}}}' \
    >"$BATS_FILE_TMPDIR/policies.yml"
  KUBEWARDEN_CLIENT_CA_FILE="$CERTS/kubewarden-root-ca.crt,$CERTS/apiserver-client-ca.crt"
  ps_start mtls "$BATS_FILE_TMPDIR/policies.yml" --cert-file "$CERTS/server.crt" \
    --key-file "$CERTS/server.key" --client-ca-file "$KUBEWARDEN_CLIENT_CA_FILE"
}

teardown_file() {
  load lib/common
  load lib/policy_server
  ps_teardown_file
}

setup() {
  load lib/common
  load lib/policy_server
  local why
  why=$(ps_skip_reason)
  [[ -z "$why" ]] || skip "$why (the test host has no server mode to check mutual TLS on)"
  require_policy_server
  ps_use mtls
  REQUEST=$(request_with_images configmap-create.json)
}

# post [CURL_ARG...]: POSTs $REQUEST over HTTPS to the policy, trusting the serving CA; prints
# curl's stderr and the HTTP status (000 when there was none) and the body on stdout.
post() {
  curl -sS --noproxy '*' --max-time 10 --cacert "$CERTS/serving-ca.crt" -o "$BATS_TEST_TMPDIR/body" \
    -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$REQUEST" "$@" \
    "https://$PS_ADDR/validate/clusterwide-resolvable-images" 2>&1
}

# assert_answered: the last post got 200 with the AdmissionReview answering $REQUEST.
assert_answered() {
  [[ "$output" == 200 ]] || _fail_with "expected HTTP 200"
  jq -e --arg uid "$(jq -r .request.uid "$REQUEST")" '.response.uid == $uid and .response.allowed' \
    "$BATS_TEST_TMPDIR/body" >/dev/null || _fail_with "not an AdmissionReview answering the request: $(cat "$BATS_TEST_TMPDIR/body")"
}

@test "mTLS: a request without a client certificate is refused in the TLS handshake" {
  run -56 post
  [[ "$output" == *"alert certificate required"* && "$output" == *000 ]] || _fail_with "expected the server's certificate-required alert and no HTTP status"
}

@test "mTLS: a client certificate from a CA the server was not given is refused" {
  run ! post --cert "$CERTS/intruder.crt" --key "$CERTS/intruder.key"
  [[ "$output" == *"alert"* && "$output" == *000 ]] || _fail_with "expected a TLS alert and no HTTP status"
  [[ "$output" == *"unknown ca"* || "$output" == *"bad certificate"* ]] || _fail_with "expected the certificate refused"
}

@test "mTLS: the API server's client certificate (deploy/'s client CA) is answered" {
  run -0 post --cert "$CERTS/apiserver.crt" --key "$CERTS/apiserver.key"
  assert_answered
}

@test "mTLS: a certificate from Kubewarden's root CA, as the audit scanner holds, is answered too" {
  run -0 post --cert "$CERTS/audit-scanner.crt" --key "$CERTS/audit-scanner.key"
  assert_answered
}
