#!/usr/bin/env python3
"""The manifests of deploy/ are what a cluster accepts (`make lint`).

Every document of every deploy/*.yaml is checked, strictly (a field the API does not define is
an error, as `kubectl apply --validate=strict` refuses it):

- Kubernetes' own kinds with kubernetes-validate (PyPI), against the schemas of every
  Kubernetes minor in SUPPORTED (docs/broker.md, "Installing"); a minor newer than the newest
  schemas the installed kubernetes-validate ships is checked against those newest ones, and
  says so.
- Kubewarden's kinds (PolicyServer, ClusterAdmissionPolicy), for which kubernetes-validate has
  no schema, against KUBEWARDEN below: the fields of their spec as Kubewarden 1.36 defines
  them (api/policies/v1/*_types.go in kubewarden/kubewarden-controller), each with its type,
  the required ones required, any other refused. Nested Kubernetes types (rules, affinity,
  ...) are checked for their type only.
- A key written twice in one mapping, which YAML loaders silently resolve to the last value.
- The shipped install as a whole (check_install, when the files hold the policy): every lookup
  through the broker (`lookupBroker.use: all`), `failurePolicy: Ignore`, time-outs that nest
  (timeBudgetMs + a HEAD then a GET at the broker's --lookup-timeout-ms + MARGIN_MS <=
  timeoutEvalSeconds <= timeoutSeconds), and the PolicyServer's egress exactly the broker, DNS,
  the API server and the module's registry (a network plugin enforces it; the manifest is what
  can be checked here).
- Least privilege: no Role or ClusterRole grants `create` on `serviceaccounts/token` without
  `resourceNames` (minting tokens of any ServiceAccount; docs/broker.md writes the grant per
  namespace, naming its ServiceAccounts).
- deploy/Dockerfile's image runs an init as PID 1 (tini, copied from the build stage) that
  starts the broker, so that the orphans of killed plugins are reaped.

Run with the Python of the lint virtual environment (.ci/setup makes .venv-lint/):
    .venv-lint/bin/python scripts/lint-deploy.py [FILE...]
Prints one line per problem and exits 1 when there is any.
"""

import json
import pathlib
import sys

import jsonschema
import kubernetes_validate
import yaml

# The oldest: ValidatingAdmissionPolicy v1 (deploy/policy-server.yaml) is GA since 1.30. The
# newest: the newest that the pinned kubernetes-validate (.ci/setup) has schemas for; later
# minors are checked against it (see check_kubernetes).
SUPPORTED = [f"1.{minor}" for minor in range(30, 38)]

STRING = {"type": "string"}
STRINGS = {"type": "array", "items": STRING}
OBJECT = {"type": "object"}
ARRAY = {"type": "array"}
INTEGER = {"type": "integer"}
BOOLEAN = {"type": "boolean"}
STRING_MAP = {"type": "object", "additionalProperties": STRING}

METADATA = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": STRING, "namespace": STRING, "labels": STRING_MAP,
                   "annotations": STRING_MAP},
}


def kind_schema(spec_properties: dict, required: list) -> dict:
    """A Kubewarden kind: apiVersion, kind, metadata and a spec of exactly these fields."""
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "policies.kubewarden.io/v1"},
            "kind": STRING,
            "metadata": METADATA,
            "spec": {"type": "object", "required": required, "additionalProperties": False,
                     "properties": spec_properties},
        },
    }


CONTEXT_AWARE = {
    "type": "array",
    "items": {"type": "object", "required": ["apiVersion", "kind"], "additionalProperties": False,
              "properties": {"apiVersion": STRING, "kind": STRING}},
}
POLICY_SPEC = {
    "policyServer": STRING, "mode": {"enum": ["protect", "monitor"]}, "module": STRING,
    "settings": OBJECT, "rules": ARRAY, "failurePolicy": {"enum": ["Ignore", "Fail"]},
    "mutating": BOOLEAN, "backgroundAudit": BOOLEAN, "matchPolicy": {"enum": ["Exact", "Equivalent"]},
    "matchConditions": ARRAY, "objectSelector": OBJECT, "sideEffects": STRING,
    "timeoutSeconds": INTEGER, "timeoutEvalSeconds": INTEGER, "message": STRING,
    # ClusterAdmissionPolicy only
    "namespaceSelector": OBJECT, "contextAwareResources": CONTEXT_AWARE,
    "allowInsideAdmissionControllerNamespace": BOOLEAN,
}
POLICY_SERVER_SPEC = {
    "image": STRING, "replicas": INTEGER, "minAvailable": {"type": ["integer", "string"]},
    "maxUnavailable": {"type": ["integer", "string"]}, "annotations": STRING_MAP,
    "labels": STRING_MAP, "env": ARRAY, "serviceAccountName": STRING, "imagePullSecret": STRING,
    "insecureSources": STRINGS, "sourceAuthorities": {"type": "object", "additionalProperties": STRINGS},
    "verificationConfig": STRING, "sigstoreTrustConfig": STRING,
    "securityContexts": {"type": "object", "additionalProperties": False,
                         "properties": {"container": OBJECT, "pod": OBJECT}},
    "affinity": OBJECT, "limits": OBJECT, "requests": OBJECT, "tolerations": ARRAY,
    "priorityClassName": STRING, "namespacedPoliciesCapabilities": STRINGS,
    "webhookPort": INTEGER, "readinessProbePort": INTEGER, "metricsPort": INTEGER,
}
KUBEWARDEN = {
    "PolicyServer": kind_schema(POLICY_SERVER_SPEC, ["image", "replicas"]),
    "ClusterAdmissionPolicy": kind_schema(POLICY_SPEC, ["module", "rules", "mutating"]),
}


# What the evaluation time-out keeps beyond the policy's budget and one brokered lookup: the
# policy's own work, the broker's connection and the policy server's (docs/broker.md,
# "Installing", step 2).
MARGIN_MS = 500
POLICY_SERVER_LABEL = {"kubewarden/policy-server": "resolvable-images"}
BROKER_LABEL = {"app.kubernetes.io/name": "resolvable-images-broker"}
DNS_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}


def _ports(rule: dict) -> set:
    return {(p.get("protocol", "TCP"), p.get("port")) for p in rule.get("ports") or []}


def _ip_blocks(rule: dict) -> list:
    """The CIDRs of a rule whose every peer is an ipBlock without exceptions, else None."""
    peers = rule.get("to") or []
    if not peers or any(set(peer) != {"ipBlock"} or set(peer["ipBlock"]) != {"cidr"} for peer in peers):
        return None
    return [peer["ipBlock"]["cidr"] for peer in peers]


def egress_problems(rules: list) -> list:
    """The PolicyServer's egress must be exactly: the broker on 8443, DNS on UDP and TCP 53,
    the API server (ipBlocks, 443 and 6443) and the module's registry (ipBlocks, 443), no
    range wider than a /8."""
    expected = {
        "the broker": lambda r: r.get("to") == [{"podSelector": {"matchLabels": BROKER_LABEL}}]
        and _ports(r) == {("TCP", 8443)},
        "DNS": lambda r: r.get("to") == [DNS_PEER] and _ports(r) == {("UDP", 53), ("TCP", 53)},
        "the API server": lambda r: _ip_blocks(r) is not None
        and _ports(r) == {("TCP", 443), ("TCP", 6443)},
        "the module's registry": lambda r: _ip_blocks(r) is not None and _ports(r) == {("TCP", 443)},
    }
    found, unmatched = [], list(rules)
    for what, matches in expected.items():
        hits = [r for r in unmatched if matches(r)]
        if len(hits) != 1:
            found.append(f"egress: {len(hits)} rules for {what}, expected 1")
        unmatched = [r for r in unmatched if r not in hits[:1]]
    found += [f"egress: a rule to none of the allowed destinations: {r}" for r in unmatched]
    for rule in rules:
        for cidr in _ip_blocks(rule) or []:
            prefix = int(cidr.rsplit("/", 1)[1]) if "/" in cidr else 0
            if prefix < 8:
                found.append(f"egress: {cidr} is wider than a /8")
    return found


def _broker_lookup_timeout_ms(docs: list):
    for doc in docs:
        if doc.get("kind") != "Deployment" or doc["metadata"].get("name") != "resolvable-images-broker":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            for arg in container.get("args") or []:
                if str(arg).startswith("--lookup-timeout-ms="):
                    return int(str(arg).split("=", 1)[1])
    return None


def check_install(docs: list) -> list:
    """The shipped install across the files (policy-server.yaml and broker.yaml): `use: all`,
    failurePolicy Ignore, nested time-outs and the PolicyServer's egress; nothing to check
    when the files hold no ClusterAdmissionPolicy with lookupBroker."""
    policies = [d for d in docs if d.get("kind") == "ClusterAdmissionPolicy"
                and "lookupBroker" in ((d.get("spec") or {}).get("settings") or {})]
    if not policies:
        return []
    found = []
    lookup = _broker_lookup_timeout_ms(docs)
    if lookup is None:
        found.append("the broker's Deployment sets no --lookup-timeout-ms=N")
    for policy in policies:
        spec = policy["spec"]
        name = f"ClusterAdmissionPolicy/{policy['metadata']['name']}"
        settings = spec["settings"]
        if settings["lookupBroker"].get("use") != "all":
            found.append(f"{name}: lookupBroker.use is not `all`: anonymous lookups would leave the policy server")
        if spec.get("failurePolicy") != "Ignore":
            found.append(f"{name}: failurePolicy is not Ignore")
        budget, evaluation, webhook = (settings.get("timeBudgetMs"), spec.get("timeoutEvalSeconds"),
                                       spec.get("timeoutSeconds"))
        if None in (budget, evaluation, webhook):
            found.append(f"{name}: timeBudgetMs, timeoutEvalSeconds and timeoutSeconds must be written")
        elif lookup is not None:
            need = budget + 2 * lookup + MARGIN_MS
            if need > evaluation * 1000:
                found.append(f"{name}: timeBudgetMs {budget} + 2 x --lookup-timeout-ms {lookup} + "
                             f"{MARGIN_MS} = {need} ms exceeds timeoutEvalSeconds {evaluation}")
            if evaluation > webhook:
                found.append(f"{name}: timeoutEvalSeconds {evaluation} exceeds timeoutSeconds {webhook}")
    egress = [d for d in docs if d.get("kind") == "NetworkPolicy"
              and (d["spec"].get("podSelector") or {}).get("matchLabels") == POLICY_SERVER_LABEL
              and "Egress" in (d["spec"].get("policyTypes") or [])]
    if len(egress) != 1:
        found.append(f"{len(egress)} egress NetworkPolicies for the PolicyServer's pods, expected 1")
    for policy in egress:
        found += [f"NetworkPolicy/{policy['metadata']['name']}: {p}"
                  for p in egress_problems(policy["spec"].get("egress") or [])]
    return found


class UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key written twice in one mapping."""


def _unique_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key!r} is written twice", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def documents(path: pathlib.Path) -> list:
    """The documents of a YAML file, empty ones left out."""
    with path.open(encoding="utf-8") as f:
        return [doc for doc in yaml.load_all(f, Loader=UniqueKeyLoader) if doc is not None]


def newest_schemas() -> str:
    """The newest Kubernetes minor the installed kubernetes-validate has schemas for."""
    return kubernetes_validate.utils.major_minor(kubernetes_validate.utils.latest_version())


def _minor(version: str) -> tuple:
    return tuple(int(part) for part in version.split("."))


def check_kubernetes(doc: dict, versions: list) -> list:
    """kubernetes-validate, strict, for each version; the problems, each naming its version."""
    newest = newest_schemas()
    found = []
    for version in versions:
        against = newest if _minor(version) > _minor(newest) else version
        try:
            kubernetes_validate.validate(doc, against, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path) or "(top)"
            found.append(f"Kubernetes {version}: {path}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError:
            found.append(f"Kubernetes {version}: no such kind {doc.get('apiVersion')}/{doc.get('kind')}")
    return found


def check_kubewarden(doc: dict) -> list:
    """The Kubewarden kinds against KUBEWARDEN; the problems."""
    schema = KUBEWARDEN.get(doc.get("kind"))
    if schema is None:
        return [f"no structural schema for the Kubewarden kind {doc.get('kind')!r} (add it to KUBEWARDEN)"]
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(str(p) for p in e.path) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.path))]


def check_privileges(doc: dict) -> list:
    """A Role or ClusterRole that lets its holder mint tokens of any ServiceAccount."""
    if doc.get("apiVersion") != "rbac.authorization.k8s.io/v1" or doc.get("kind") not in ("Role", "ClusterRole"):
        return []
    found = []
    for number, rule in enumerate(doc.get("rules") or []):
        resources = rule.get("resources") or []
        verbs = rule.get("verbs") or []
        token = any(r in ("serviceaccounts/token", "*", "*/*") for r in resources)
        if token and any(v in ("create", "*") for v in verbs) and not rule.get("resourceNames"):
            found.append(f"rules.{number}: create on serviceaccounts/token without resourceNames "
                         "(tokens of any ServiceAccount; name the ones that need it)")
    return found


def check_dockerfile(path: pathlib.Path) -> list:
    """The image's last stage starts tini, copied from the build stage, which starts the
    broker: the problems."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    last = max((i for i, line in enumerate(lines) if line.upper().startswith("FROM ")), default=0)
    stage = lines[last:]
    entrypoints = [line for line in stage if line.upper().startswith("ENTRYPOINT ")]
    if not entrypoints:
        return [f"{path}: the image has no ENTRYPOINT"]
    try:
        command = json.loads(entrypoints[-1].split(None, 1)[1])
    except ValueError:
        return [f"{path}: the ENTRYPOINT is not the exec (JSON) form"]
    found = []
    if not (len(command) >= 3 and command[0].endswith("/tini") and command[1] == "--"
            and command[2].endswith("/resolvable-images-broker")):
        found.append(f"{path}: the ENTRYPOINT {command} is not tini -- the broker: nothing reaps "
                     "the orphans of killed plugins")
    elif not any(line.startswith("COPY --from=") and line.split()[-1] == command[0] for line in stage):
        found.append(f"{path}: {command[0]} is not copied into the image from the build stage")
    return found


def check_file(path: pathlib.Path, versions: list) -> list:
    """Every problem of one manifest file, each prefixed with the file and the object."""
    try:
        docs = documents(path)
    except yaml.YAMLError as e:
        return [f"{path}: not YAML a cluster accepts: {e}"]
    found = []
    for number, doc in enumerate(docs, 1):
        if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
            found.append(f"{path}: document {number}: not a Kubernetes object (apiVersion and kind)")
            continue
        name = f"{doc['kind']}/{(doc.get('metadata') or {}).get('name', '?')}"
        if str(doc["apiVersion"]).startswith("policies.kubewarden.io/"):
            problems = check_kubewarden(doc)
        else:
            problems = check_kubernetes(doc, versions) + check_privileges(doc)
        found += [f"{path}: {name}: {p}" for p in problems]
    return found


def main(argv: list) -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    files = [pathlib.Path(a) for a in argv] or sorted((root / "deploy").glob("*.yaml"))
    newest = newest_schemas()
    beyond = [v for v in SUPPORTED if _minor(v) > _minor(newest)]
    if beyond:
        print(f"lint-deploy: kubernetes-validate has schemas up to {newest}: "
              f"{', '.join(beyond)} checked against {newest}'s", file=sys.stderr)
    found, docs = [], []
    for path in files:
        found += check_file(path, SUPPORTED)
        try:
            docs += [d for d in documents(path) if isinstance(d, dict) and "kind" in d]
        except yaml.YAMLError:
            pass  # reported by check_file
    found += [f"the install: {p}" for p in check_install(docs)]
    if not argv:
        found += check_dockerfile(root / "deploy" / "Dockerfile")
    for line in found:
        print(line)
    if found:
        return 1
    print(f"lint-deploy: {len(files)} files valid, strictly, for Kubernetes "
          f"{SUPPORTED[0]} to {SUPPORTED[-1]}; Kubewarden kinds structurally")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
