#!/usr/bin/env python3
"""A registry that answers per user: what one credential sees, another may not.

Debian's docker-registry gives every authenticated user the same view. Registries that hide
what a caller may not read (Artifactory, per-project visibility in Harbor, GitLab, Quay...)
answer per user: one pull secret gets the manifest, another gets a 404 or a 401. This fake
does that, so the e2e tests can check the kubelet's rule (kuberuntime_image.go, PullImage):
every matching credential is tried in order, any error moves on, the first success wins.

Usage (the e2e helper `per_user_registry_start` in lib/per_user_registry.bash does this):

  python3 per_user_registry.py --config CONFIG.json --port-file PORT \
      [--digests-file DIGESTS.json] [--log-file REQUESTS.log]

CONFIG.json:

  {
    "images": ["team/app:v1", "team/app:v2"],        # what exists: repository:tag
    "users": {
      "alice": {"password": "pw-a", "sees": ["team/app"]},   # a repository: every tag
      "bob":   {"password": "pw-b", "sees": ["team/app:v2"], "otherwise": 404},
      "carol": {"password": "pw-c", "otherwise": 401},
      "dave":  {"password": "pw-d", "otherwise": 500},
      "erin":  {"password": "pw-e", "otherwise": "hang"}
    },
    "anonymous": {"sees": [], "otherwise": 401}       # optional; this is the default
  }

A user's optional "tags" says what its tag listings get instead of the tags it sees: a status
(403, 401, ...: the refusal below) or "hang"; its "extra_tags" are listed after them as
they are, valid tag names or not (a registry that lists what a reference cannot name).

A manifest request (HEAD or GET /v2/REPO/manifests/TAG-OR-DIGEST) or a blob request is
answered, for the caller (HTTP Basic user, or anonymous without an Authorization header):
  - wrong password or unknown user: 401 UNAUTHORIZED with a Basic challenge;
  - the caller sees the image (its repository, or repository:tag; a digest is seen when a
    tag the caller sees has it): 200 with a real OCI image manifest (linux/amd64, one layer),
    Docker-Content-Digest and the blobs behind it;
  - the caller sees the repository but the tag does not exist: 404 MANIFEST_UNKNOWN;
  - otherwise the caller's "otherwise" (default 404): 404 NAME_UNKNOWN (the repository is
    hidden), 401 UNAUTHORIZED (with the challenge), 403 DENIED, 429 TOOMANYREQUESTS,
    5xx UNAVAILABLE (JSON errors), "hang" (the request is read, never answered).
  Anonymous callers default to 401 with `WWW-Authenticate: Basic realm="per-user-registry"`,
  as a private registry's first answer, so clients then send their credentials.
  GET /v2/REPO/tags/list lists the tags the caller sees (or the refusal above).
  GET /v2/ answers 200 to a known user with the right password, 401 otherwise.

--port-file gets the port (the kernel picks it) once the server listens; --digests-file the
digest of each image ({"team/app:v1": "sha256:..."}) before that. Every request is logged,
one line each, to --log-file (default stderr), as "USER METHOD PATH -> STATUS [CODE]", USER
being the user name, "anonymous", "unknown" (no such user) or "wrong-password:USER" (never a
password), so tests can check who was asked, in
which order. Listens on 127.0.0.1 only; serves until SIGTERM. Standard library only.
"""

import argparse
import base64
import binascii
import gzip
import hashlib
import io
import json
import os
import re
import signal
import sys
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
CHALLENGE = 'Basic realm="per-user-registry"'
PATH_RE = re.compile(r"^/v2/(?P<repo>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")
TAGS_RE = re.compile(r"^/v2/(?P<repo>.+)/tags/list$")


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def build_image(name):
    """A real, small OCI image for `name` (repository:tag): its manifest and blobs, with
    digests. Deterministic, and different for every name, so each tag has its own digest."""
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        content = f"per-user-registry image {name}\n".encode()
        info = tarfile.TarInfo("etc/image-name")
        info.size = len(content)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(content))
    diff = tar_bytes.getvalue()
    layer = gzip.compress(diff, mtime=0)
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": ["/bin/true"]},
        "rootfs": {"type": "layers", "diff_ids": [sha256(diff)]},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": sha256(layer), "size": len(layer)}],
    }, sort_keys=True).encode()
    return {
        "manifest": manifest,
        "digest": sha256(manifest),
        "blobs": {sha256(config): config, sha256(layer): layer},
    }


class Registry:
    """The configuration and the images, read once at start."""

    def __init__(self, config):
        self.users = config.get("users", {})
        self.anonymous = config.get("anonymous", {"sees": [], "otherwise": 401})
        self.images = {}  # "repo:tag" -> image
        for name in config.get("images", []):
            if ":" not in name:
                raise SystemExit(f"per_user_registry: image {name!r} needs a :tag")
            self.images[name] = build_image(name)
        for user, rules in self.users.items():
            if not isinstance(rules.get("password"), str):
                raise SystemExit(f"per_user_registry: user {user!r} needs a password")
            self.check_rules(user, rules)
        self.check_rules("anonymous", self.anonymous)

    @staticmethod
    def check_rules(who, rules):
        for key in ("otherwise", "tags"):
            value = rules.get(key, 404)
            if value != "hang" and value not in (401, 403, 404, 429) and not (
                    isinstance(value, int) and 500 <= value <= 599):
                raise SystemExit(f"per_user_registry: {who}: unknown {key!r} {value!r}")

    def caller(self, header):
        """(name, rules) of the caller; rules None when the credentials are wrong."""
        if not header:
            return "anonymous", self.anonymous
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "basic":
            return "unknown", None
        try:
            user, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return "unknown", None
        rules = self.users.get(user)
        if rules is None or rules["password"] != password:
            return (f"wrong-password:{user}" if rules is not None else "unknown"), None
        return user, rules

    def sees(self, rules, repo, tag):
        """Whether these rules let the caller see repo (tag None) or repo:tag."""
        for seen in rules.get("sees", []):
            if seen == repo or (tag is not None and seen == f"{repo}:{tag}"):
                return True
        return False

    def tags(self, rules, repo):
        """(status, body, headers, error code) of a tag listing: the tags the caller sees."""
        visible = sorted(name.split(":", 1)[1] for name in self.images
                         if name.split(":", 1)[0] == repo
                         and self.sees(rules, repo, name.split(":", 1)[1]))
        if visible or self.sees(rules, repo, None):
            if "tags" in rules:
                return refusal(rules["tags"])
            listed = visible + list(rules.get("extra_tags", []))
            return 200, json.dumps({"name": repo, "tags": listed}).encode(), [], None
        return refusal(rules.get("otherwise", 404))

    def lookup(self, rules, repo, kind, ref):
        """(status, body, headers, error code) of a manifest or blob request."""
        tags = {name.split(":", 1)[1]: image for name, image in self.images.items()
                if name.split(":", 1)[0] == repo}
        visible = {tag: image for tag, image in tags.items() if self.sees(rules, repo, tag)}
        repo_visible = self.sees(rules, repo, None) or bool(visible)
        if kind == "manifests":
            image = None
            if ref.startswith("sha256:"):
                image = next((i for i in visible.values() if i["digest"] == ref), None)
            else:
                image = visible.get(ref)
            if image is not None:
                return 200, image["manifest"], [
                    ("Content-Type", OCI_MANIFEST), ("Docker-Content-Digest", image["digest"])], None
        else:
            for image in visible.values():
                if ref in image["blobs"]:
                    return 200, image["blobs"][ref], [
                        ("Content-Type", "application/octet-stream"), ("Docker-Content-Digest", ref)], None
        if repo_visible:
            # distribution's own words for each
            code, message = (("MANIFEST_UNKNOWN", "manifest unknown") if kind == "manifests"
                             else ("BLOB_UNKNOWN", "blob unknown to registry"))
            return 404, error_body(code, message), [], code
        return refusal(rules.get("otherwise", 404))


def error_body(code, message):
    return json.dumps({"errors": [{"code": code, "message": message}]}).encode()


def refusal(otherwise):
    """The answer for what the caller may not see."""
    if otherwise == "hang":
        return "hang", b"", [], None
    codes = {404: "NAME_UNKNOWN", 401: "UNAUTHORIZED", 403: "DENIED", 429: "TOOMANYREQUESTS"}
    code = codes.get(otherwise, "UNAVAILABLE")
    headers = [("WWW-Authenticate", CHALLENGE)] if otherwise == 401 else []
    messages = {"NAME_UNKNOWN": "repository name not known to registry",
                "UNAUTHORIZED": "authentication required", "DENIED": "requested access to the resource is denied",
                "TOOMANYREQUESTS": "too many requests", "UNAVAILABLE": "service unavailable"}
    return otherwise, error_body(code, messages[code]), headers, code


def handler(registry, log):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "per-user-registry"

        def log_message(self, fmt, *fargs):  # requests are logged by reply()
            pass

        def answer(self, status, body, headers):
            self.send_response(status)
            if not any(name == "Content-Type" for name, _ in headers):
                headers = headers + [("Content-Type", "application/json")]
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def reply(self):
            who, rules = registry.caller(self.headers.get("Authorization"))
            path = self.path.split("?", 1)[0]
            if rules is None:
                status, body, headers, code = refusal(401)
            elif path in ("/v2/", "/v2"):
                if who == "anonymous" and registry.anonymous.get("otherwise", 401) == 401:
                    status, body, headers, code = refusal(401)
                else:
                    status, body, headers, code = 200, b"{}", [], None
            elif self.command not in ("GET", "HEAD"):
                status, body, headers, code = 405, error_body("UNSUPPORTED", "read-only"), [], "UNSUPPORTED"
            else:
                match = PATH_RE.match(path)
                tags = TAGS_RE.match(path)
                if tags is not None:
                    status, body, headers, code = registry.tags(rules, tags["repo"])
                elif match is None:
                    status, body, headers, code = 404, error_body("NAME_UNKNOWN", "no such path"), [], "NAME_UNKNOWN"
                else:
                    status, body, headers, code = registry.lookup(
                        rules, match["repo"], match["kind"], match["ref"])
            log(f"{who} {self.command} {path} -> {status}{' ' + code if code else ''}")
            if status == "hang":
                # Read nothing more, say nothing, keep the connection until the client leaves.
                self.close_connection = True
                while True:
                    time.sleep(3600)
            self.answer(status, body, headers)

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = reply

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the users and images (JSON)")
    parser.add_argument("--port-file", required=True, help="where to write the chosen port")
    parser.add_argument("--digests-file", help="where to write each image's digest (JSON)")
    parser.add_argument("--log-file", help="one line per request (default: stderr)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    with open(args.config) as f:
        registry = Registry(json.load(f))

    lock = threading.Lock()
    out = open(args.log_file, "a") if args.log_file else sys.stderr

    def log(line):
        with lock:
            print(line, file=out, flush=True)

    if args.digests_file:
        tmp = args.digests_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({name: image["digest"] for name, image in registry.images.items()}, f, indent=1)
        os.replace(tmp, args.digests_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(registry, log))
    server.daemon_threads = True
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{server.server_address[1]}\n")
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
