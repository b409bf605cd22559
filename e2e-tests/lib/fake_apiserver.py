#!/usr/bin/env python3
"""A read-only Kubernetes API server serving the test host's cluster fixture directory.

kwctl reads Kubernetes objects from the API server named by KUBECONFIG; the test host reads
them from a directory (`test-host run --cluster-dir DIR`). This server answers kwctl from
the same directory, so both hosts see the same cluster. It serves what kwctl (kube-rs) asks
for, and nothing more:

- discovery: GET /api, /api/v1, /apis, /apis/GROUP/VERSION, /version;
- GET of one object (namespaced or cluster-scoped), or a 404 `Status` when it is absent;
- LIST (all namespaces or one), with equality label and field selectors, carrying
  metadata.resourceVersion;
- WATCH (`?watch=true`): answered with no event and held open until the client goes away,
  as kube-rs' reflector expects (it reconnects at once when a watch closes);
- TokenRequest (POST /api/v1/namespaces/NS/serviceaccounts/NAME/token), for the broker's
  credential provider plugins: a fake token of an existing ServiceAccount, an unsigned JWT
  whose `aud` claim holds the audiences asked for and whose `sub` names the ServiceAccount,
  unique per request (a `jti`). Stricter than a real API server, it refuses a request whose
  `spec.boundObjectRef` is missing, so that a broker minting unbound tokens fails its tests;
  the bound object is checked as the real one checks it (a Pod or Secret of the
  ServiceAccount's namespace, a Pod only when it runs as that ServiceAccount, or a Node; its
  UID when given) and named in the token's claims. Each request is logged with its namespace,
  name, audiences and bound object (never the token) in a `TokenRequest` line, for the tests
  to assert on.

The directory is the one named in the file given by --dir-file, read again on every request,
so one server follows the cluster a test hands to the host (lib/policy.bash writes the file
before each kwctl run). Files: *.yaml, *.yml (several documents, `kind: List` allowed) and
*.json. An object without metadata.namespace is in `default`, as for the test host.

YAML is read by a small parser of the block subset the fixtures use (mappings, sequences,
plain and quoted scalars, comments, `---`), so that only python3's standard library is needed;
anything else (flow collections other than [] and {}, block scalars, anchors) is refused
with the file and line.

Loopback only. Usage: fake_apiserver.py --dir-file FILE --port-file FILE
"""

import argparse
import base64
import json
import os
import re
import select
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# Kinds the policy may ask for, with their resource names and scope; kinds found in the
# directory are added (plural: lowercase kind + "s").
WELL_KNOWN = {
    ("", "v1"): {
        "ServiceAccount": ("serviceaccounts", True),
        "Secret": ("secrets", True),
        "Node": ("nodes", False),
        "Namespace": ("namespaces", False),
        "Pod": ("pods", True),
        "ConfigMap": ("configmaps", True),
    },
}
CLUSTER_SCOPED = {"Node", "Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding",
                  "StorageClass", "CustomResourceDefinition", "PriorityClass", "RuntimeClass"}
RESOURCE_VERSION = "1"


class YamlError(Exception):
    pass


def _scalar(text, where):
    text = text.strip()
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text == "[]":
        return []
    if text == "{}":
        return {}
    if text[0] == '"':
        try:
            return json.loads(text)
        except ValueError as e:
            raise YamlError(f"{where}: bad double-quoted scalar: {e}") from None
    if text[0] == "'":
        if len(text) < 2 or text[-1] != "'":
            raise YamlError(f"{where}: unterminated single-quoted scalar")
        return text[1:-1].replace("''", "'")
    if text[0] in "[{|>&*!":
        raise YamlError(f"{where}: unsupported YAML ({text[:20]!r})")
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text)
    if re.fullmatch(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?", text):
        return float(text)
    return text


def _strip_comment(line):
    """The line without a trailing comment (a # at the start or after a space, outside quotes)."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _split_key(content):
    """(key, rest) when content is `key: rest` or `key:`, else None."""
    m = re.match(r'^("(?:[^"\\]|\\.)*"|\'[^\']*\'|[^\s"\'#][^:#]*?)\s*:(?:\s+(.*)|)$', content)
    if not m:
        return None
    key = m.group(1)
    if key[0] in "\"'":
        key = _scalar(key, "key")
    return key, (m.group(2) or "")


def _parse_block(lines, i, indent, where):
    """Parses the block starting at lines[i] (indented `indent`); returns (value, next i)."""
    _, _, content = lines[i]
    if content == "-" or content.startswith("- "):
        return _parse_seq(lines, i, indent, where)
    return _parse_map(lines, i, indent, where)


def _parse_value_after(lines, i, indent, rest, where):
    """The value of a `key:` or `- ` whose inline text is `rest`, and the next line index."""
    lineno = lines[i - 1][0]
    if rest:
        return _scalar(rest, f"{where}:{lineno}"), i
    if i < len(lines):
        n_indent = lines[i][1]
        n_content = lines[i][2]
        if n_indent > indent:
            return _parse_block(lines, i, n_indent, where)
        if n_indent == indent and (n_content == "-" or n_content.startswith("- ")):
            return _parse_seq(lines, i, indent, where)
    return None, i


def _parse_map(lines, i, indent, where):
    result = {}
    while i < len(lines) and lines[i][1] == indent:
        lineno, _, content = lines[i]
        if content == "-" or content.startswith("- "):
            break
        kv = _split_key(content)
        if kv is None:
            raise YamlError(f"{where}:{lineno}: expected `key: value`, got {content!r}")
        key, rest = kv
        value, i = _parse_value_after(lines, i + 1, indent, rest, where)
        result[key] = value
    if i < len(lines) and lines[i][1] > indent:
        raise YamlError(f"{where}:{lines[i][0]}: unexpected indentation")
    return result, i


def _parse_seq(lines, i, indent, where):
    result = []
    while i < len(lines) and lines[i][1] == indent:
        lineno, _, content = lines[i]
        if not (content == "-" or content.startswith("- ")):
            break
        item = content[1:].strip()
        if item and _split_key(item) is not None:
            # `- key: value` opens a mapping whose keys are indented like `key`.
            inner = indent + (len(content) - len(content[1:].lstrip()))
            lines[i] = (lineno, inner, item)
            value, i = _parse_map(lines, i, inner, where)
        else:
            value, i = _parse_value_after(lines, i + 1, indent, item, where)
        result.append(value)
    return result, i


def parse_yaml_documents(text, where):
    docs, current = [], []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if raw.startswith("---") and raw[3:].strip() in ("", ):
            docs.append(current)
            current = []
            continue
        if raw.startswith("..."):
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError(f"{where}:{lineno}: tab in indentation")
        line = _strip_comment(raw)
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        current.append((lineno, indent, line.strip()))
    docs.append(current)
    values = []
    for lines in docs:
        if not lines:
            continue
        value, i = _parse_block(lines, 0, lines[0][1], where)
        if i != len(lines):
            raise YamlError(f"{where}:{lines[i][0]}: could not read from here")
        values.append(value)
    return values


def load_objects(directory):
    objects = []
    if not directory or not os.path.isdir(directory):
        return objects
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if name.endswith(".json"):
            docs = [json.loads(text)]
        elif name.endswith((".yaml", ".yml")):
            docs = parse_yaml_documents(text, path)
        else:
            continue
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") == "List" or (doc.get("kind", "").endswith("List") and "items" in doc):
                objects.extend(o for o in doc.get("items") or [] if isinstance(o, dict))
            else:
                objects.append(doc)
    for o in objects:
        meta = o.setdefault("metadata", {}) or {}
        o["metadata"] = meta
        if o.get("kind") not in CLUSTER_SCOPED:
            meta.setdefault("namespace", "default")
        meta.setdefault("resourceVersion", RESOURCE_VERSION)
    return objects


def split_api_version(api_version):
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


def resources_of(objects):
    """{(group, version): {kind: (plural, namespaced)}}: the well-known kinds and the directory's."""
    table = {gv: dict(kinds) for gv, kinds in WELL_KNOWN.items()}
    for o in objects:
        gv = split_api_version(o.get("apiVersion", ""))
        kind = o.get("kind")
        if not kind:
            continue
        kinds = table.setdefault(gv, {})
        kinds.setdefault(kind, (kind.lower() + "s", kind not in CLUSTER_SCOPED))
    return table


def dig(obj, dotted):
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def selector_matches(selector, get):
    """Equality selectors: a=b, a==b, a!=b, a (exists), !a (absent)."""
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if get(term[1:].strip()) is not None:
                return False
        elif get(term) is None:
            return False
    return True


def status(code, reason, message, details=None):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details or {}, "code": code}


def _b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def fake_token(namespace, name, account, audiences, now, seconds, bound):
    """An unsigned JWT (alg none) for the ServiceAccount, naming the object it is bound to
    (`bound`: kind, name, uid) as the real claims do: nothing verifies it, the tests read its
    claims."""
    header = {"alg": "none", "typ": "JWT"}
    claims = {"aud": audiences, "sub": f"system:serviceaccount:{namespace}:{name}",
              "iat": now, "exp": now + seconds, "jti": str(uuid.uuid4()),
              "kubernetes.io": {"namespace": namespace, "serviceaccount": {
                  "name": name, "uid": account["metadata"].get("uid", "")},
                  bound[0].lower(): {"name": bound[1], "uid": bound[2]}}}
    return ".".join([_b64url(json.dumps(header).encode()), _b64url(json.dumps(claims).encode()), ""])


def bound_object(objects, namespace, account, ref):
    """The object a TokenRequest of ServiceAccount `namespace/account` binds its token to, as
    (kind, name, uid), and None; or None and the refusal (code, reason, message). Refuses what
    the real API server refuses, and, unlike it, a request bound to nothing."""
    kind, name = ref.get("kind"), ref.get("name")
    if not kind or not name:
        return None, (400, "BadRequest", "this fake API server mints only bound tokens: "
                                         "spec.boundObjectRef is missing")
    if kind not in ("Pod", "Secret", "Node"):
        return None, (400, "BadRequest", f"cannot bind token to object of type {kind}")
    found = next((o for o in objects if o.get("kind") == kind and o["metadata"].get("name") == name
                  and (kind == "Node" or o["metadata"].get("namespace", "default") == namespace)), None)
    if found is None:
        return None, (404, "NotFound", f'{kind.lower()}s "{name}" not found')
    if kind == "Pod" and (found.get("spec") or {}).get("serviceAccountName") != account:
        return None, (400, "BadRequest", f'cannot bind token for serviceaccount "{account}" '
                                         "to pod running with different serviceaccount name.")
    uid = found["metadata"].get("uid", "")
    if ref.get("uid") and ref["uid"] != uid:
        return None, (409, "Conflict", "the UID in the bound object reference does not match")
    return (kind, name, uid), None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "e2e-fake-apiserver"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))
        sys.stderr.flush()

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        try:
            with open(self.server.dir_file, encoding="utf-8") as f:
                directory = f.read().strip()
        except OSError:
            directory = ""
        try:
            objects = load_objects(directory)
        except (YamlError, ValueError, OSError) as e:
            self.send_json(500, status(500, "InternalError", f"cluster directory {directory}: {e}"))
            return
        table = resources_of(objects)

        if parts == ["version"]:
            self.send_json(200, {"major": "1", "minor": "31", "gitVersion": "v1.31.0-e2e",
                                 "platform": "linux/amd64"})
            return
        if parts == ["api"]:
            self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                 "serverAddressByClientCIDRs": []})
            return
        if parts == ["apis"]:
            groups = {}
            for group, version in table:
                if group:
                    groups.setdefault(group, []).append(version)
            self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                for g, vs in sorted(groups.items())]})
            return

        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        kinds = table.get((group, version))
        if kinds is None:
            self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        group_version = f"{group}/{version}" if group else version

        if not rest:
            self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                                 "resources": [{"name": plural, "singularName": kind.lower(),
                                                "namespaced": namespaced, "kind": kind,
                                                "verbs": ["get", "list", "watch"]}
                                               for kind, (plural, namespaced) in sorted(kinds.items())]})
            return

        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
        kind = next((k for k, (p, _) in kinds.items() if p == plural), None)
        if kind is None or len(rest) > 2:
            self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        matching = [o for o in objects
                    if o.get("kind") == kind and split_api_version(o.get("apiVersion", "")) == (group, version)
                    and (namespace is None or o["metadata"].get("namespace") == namespace)]

        if name is not None:
            found = [o for o in matching if o["metadata"].get("name") == name]
            if found:
                self.send_json(200, found[0])
            else:
                self.send_json(404, status(404, "NotFound", f'{plural} "{name}" not found',
                                           {"name": name, "kind": plural}))
            return

        if query.get("watch") in ("true", "1"):
            self.hold_watch(query)
            return
        items = [o for o in matching
                 if selector_matches(query.get("labelSelector"),
                                     lambda k, o=o: (o["metadata"].get("labels") or {}).get(k))
                 and selector_matches(query.get("fieldSelector"), lambda k, o=o: dig(o, k))]
        self.send_json(200, {"kind": f"{kind}List", "apiVersion": group_version,
                             "metadata": {"resourceVersion": RESOURCE_VERSION}, "items": items})

    def do_POST(self):  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not (len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"]
                and parts[4] == "serviceaccounts" and parts[6] == "token"):
            self.send_json(405, status(405, "MethodNotAllowed", "this fake API server is read-only"))
            return
        namespace, name = parts[3], parts[5]
        try:
            body = json.loads(raw or b"{}")
        except ValueError as e:
            self.send_json(400, status(400, "BadRequest", f"TokenRequest: {e}"))
            return
        spec = (body.get("spec") or {}) if isinstance(body, dict) else {}
        spec = spec if isinstance(spec, dict) else {}
        audiences = spec.get("audiences") or []
        try:
            with open(self.server.dir_file, encoding="utf-8") as f:
                objects = load_objects(f.read().strip())
        except (YamlError, ValueError, OSError) as e:
            self.send_json(500, status(500, "InternalError", f"cluster directory: {e}"))
            return
        account = next((o for o in objects if o.get("kind") == "ServiceAccount"
                        and o["metadata"].get("namespace") == namespace
                        and o["metadata"].get("name") == name), None)
        ref = spec.get("boundObjectRef")
        ref = ref if isinstance(ref, dict) else {}
        sys.stderr.write(f"TokenRequest {namespace}/{name} audiences={json.dumps(audiences)} "
                         f"bound={ref.get('kind', '-')}/{ref.get('name', '-')} "
                         f"found={account is not None}\n")
        sys.stderr.flush()
        if account is None:
            self.send_json(404, status(404, "NotFound", f'serviceaccounts "{name}" not found',
                                       {"name": name, "kind": "serviceaccounts"}))
            return
        bound, refusal = bound_object(objects, namespace, name, ref)
        if refusal is not None:
            self.send_json(refusal[0], status(*refusal))
            return
        seconds = spec.get("expirationSeconds") or 3600
        now = int(time.time())
        self.send_json(201, {
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
            "status": {"token": fake_token(namespace, name, account, audiences, now, seconds, bound),
                       "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                            time.gmtime(now + seconds))}})

    def hold_watch(self, query):
        """No change will ever happen: answer 200 and keep the stream open, sending nothing,
        until the client closes it, the server stops, or timeoutSeconds pass."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            timeout = float(query.get("timeoutSeconds", "300"))
        except ValueError:
            timeout = 300.0
        waited = 0.0
        while waited < timeout and not self.server.stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.5)
            waited += 0.5
            if readable:
                try:
                    if not self.connection.recv(1024):
                        return  # the client went away
                except OSError:
                    return
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        self.close_connection = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir-file", required=True, help="file holding the cluster directory's path")
    parser.add_argument("--port-file", required=True, help="where to write the port, once listening")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.dir_file = args.dir_file
    server.stopping = threading.Event()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping.set()


if __name__ == "__main__":
    main()
