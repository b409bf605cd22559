#!/usr/bin/env bats
# The policy as Kubewarden distributes it: annotated with its metadata, pushed to a registry
# as a wasm artifact, pulled and run from there; and a host that refuses the OCI capability.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  scenario_setup_file
  host_ready || return 0
  # Annotate (again: the section is replaced) and push once for the whole file, with the
  # host of this run. push.out is the digest the push reports.
  ANNOTATED="$BATS_FILE_TMPDIR/annotated-policy.wasm"
  POLICY_REF="$REG_ANON/policies/resolvable-images:v0.1.0"
  if on_kwctl; then
    kwctl_exec annotate --metadata-path "$REPO_ROOT/policy-metadata.yml" \
      --usage-path "$REPO_ROOT/README.md" --output-path "$ANNOTATED" "$POLICY_WASM" 2>"$BATS_FILE_TMPDIR/annotate.err"
    kwctl_exec push --sources-path "$E2E_SOURCES" --output json "$ANNOTATED" "registry://$POLICY_REF" \
      2>"$BATS_FILE_TMPDIR/push.err" | jq -r '.immutable_ref | sub("^.*@"; "")' >"$BATS_FILE_TMPDIR/push.out"
  else
    "$POLICY_HOST" annotate --metadata-path "$REPO_ROOT/policy-metadata.yml" \
      --usage-path "$REPO_ROOT/README.md" --output-path "$ANNOTATED" "$POLICY_WASM"
    "$POLICY_HOST" push --sources-path "$E2E_SOURCES" "$ANNOTATED" "registry://$POLICY_REF" \
      >"$BATS_FILE_TMPDIR/push.out" 2>"$BATS_FILE_TMPDIR/push.err"
  fi
  export ANNOTATED POLICY_REF
}
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

@test "push prints the digest the registry serves for the policy" {
  run -0 cat "$BATS_FILE_TMPDIR/push.out"
  [[ "$output" =~ ^sha256:[0-9a-f]{64}$ ]]
  [ "$output" = "$(remote_digest anon policies/resolvable-images:v0.1.0)" ]
}

@test "the pushed artifact is a Kubewarden wasm artifact with the metadata annotations" {
  run -0 skopeo inspect --raw --tls-verify=false "docker://$POLICY_REF"
  [ "$(jq -r .config.mediaType <<<"$output")" = application/vnd.wasm.config.v1+json ]
  [ "$(jq -r '.layers | map(.mediaType) | join(",")' <<<"$output")" = application/vnd.wasm.content.layer.v1+wasm ]
  [ "$(jq -r '.annotations["io.kubewarden.policy.title"]' <<<"$output")" = resolvable-images ]
}

@test "the policy runs from registry:// and decides like the local module" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  POLICY_WASM="registry://$POLICY_REF" run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "Deployment team-a/web" "container \"app\"" "$REG_ANON/team/app:9.9.9" "not found on registry $REG_ANON"
  remote=$(response_summary "$output")
  run -0 --separate-stderr policy_run "$req"
  [ "$(response_summary "$output")" = "$remote" ] || _fail_with "the local module answered differently from: $remote"
}

@test "a host that does not grant oci/v1/manifest_digest: admitted with a warning, never rejected" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --host-capabilities 'kubernetes/*'
  assert_allowed
  assert_warning_contains "container \"app\"" "lookup refused by the policy host" "actions.hostRefused"
}
