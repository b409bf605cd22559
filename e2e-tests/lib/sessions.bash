# shellcheck shell=bash
# Reading recorded host capability sessions (kwctl's format, written by
# --record-host-capabilities-interactions on either host): which requests the policy made, in
# which order. Scenarios use them to check what was asked (which mirror, a config read by
# digest, one Node list), not only what was decided.

# session_requests FILE: one line per exchange of a recorded session (kwctl format),
# "Kind<TAB>image" for OCI requests, "Kind" for the others, in the order the policy asked.
session_requests() {
  awk '
    /^  request: \|/ { inreq = 1; next }
    inreq && /^    !/ { kind = substr($1, 2); next }
    inreq && /^    image: / { printf "%s\t%s\n", kind, $2; kind = ""; inreq = 0; next }
    inreq && /^  response:/ { if (kind != "") print kind; kind = ""; inreq = 0 }
  ' "$1"
}

# assert_session_asked FILE KIND IMAGE: the recorded session FILE has a KIND request
# (OciManifestDigest, OciManifest, OciManifestAndConfig) for exactly IMAGE.
assert_session_asked() {
  session_requests "$1" | grep -qxF "$2	$3" ||
    { printf 'session %s has no %s request for %s; it asked:\n' "$1" "$2" "$3" >&2; session_requests "$1" >&2; return 1; }
}

# assert_session_never_mentions FILE TEXT: no request of the recorded session FILE
# contains TEXT (e.g. a registry the policy must not have asked).
assert_session_never_mentions() {
  ! session_requests "$1" | grep -qF "$2" ||
    { printf 'session %s mentions %s:\n' "$1" "$2" >&2; session_requests "$1" >&2; return 1; }
}
