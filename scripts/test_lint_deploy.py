#!/usr/bin/env python3
"""Tests of scripts/lint-deploy.py: deploy/ passes; what a cluster would refuse fails.

Run with the lint virtual environment's Python (`make lint` does):
    .venv-lint/bin/python scripts/test_lint_deploy.py
"""

import copy
import importlib.util
import pathlib
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
SPEC = importlib.util.spec_from_file_location("lint_deploy", HERE / "lint-deploy.py")
lint = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(lint)

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: s
spec:
  ports:
    - port: 8443
"""
POLICY_SERVER = """\
apiVersion: policies.kubewarden.io/v1
kind: PolicyServer
metadata:
  name: p
spec:
  image: ghcr.io/kubewarden/policy-server:v1.36.0
  replicas: 1
  namespacedPoliciesCapabilities: []
"""


def problems(text: str, versions=None) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "m.yaml"
        path.write_text(text, encoding="utf-8")
        return lint.check_file(path, versions or ["1.30", "1.37"])


TOKEN_ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: {kind}
metadata:
  name: tokens
rules:
  - apiGroups: [""]
    resources: ["serviceaccounts/token"]
    verbs: ["create"]
"""


def dockerfile_problems(text: str) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "Dockerfile"
        path.write_text(text, encoding="utf-8")
        return lint.check_dockerfile(path)


class LintDeploy(unittest.TestCase):
    def test_the_shipped_manifests_pass(self):
        for path in sorted((HERE.parent / "deploy").glob("*.yaml")):
            self.assertEqual(lint.check_file(path, lint.SUPPORTED), [], path)

    def test_the_shipped_image_starts_tini_then_the_broker(self):
        self.assertEqual(lint.check_dockerfile(HERE.parent / "deploy" / "Dockerfile"), [])

    def test_an_image_without_an_init_fails(self):
        base = "FROM rust AS build\nRUN cp /usr/bin/tini-static /tini\nFROM distroless\n"
        broker = '"/usr/local/bin/resolvable-images-broker"'
        found = dockerfile_problems(base + f"ENTRYPOINT [{broker}]\n")
        self.assertEqual(len(found), 1, found)
        self.assertIn("nothing reaps", found[0])
        # tini named but never copied into the last stage
        found = dockerfile_problems(base + f'ENTRYPOINT ["/usr/bin/tini", "--", {broker}]\n')
        self.assertIn("is not copied", found[0])
        copied = base + "COPY --from=build /tini /usr/bin/tini\n"
        self.assertEqual(dockerfile_problems(copied + f'ENTRYPOINT ["/usr/bin/tini", "--", {broker}]\n'), [])

    def test_minting_tokens_of_any_service_account_fails(self):
        for kind in ("ClusterRole", "Role"):
            found = problems(TOKEN_ROLE.format(kind=kind))
            self.assertEqual(len(found), 1, found)
            self.assertIn("without resourceNames", found[0])
        named = TOKEN_ROLE.format(kind="Role") + '    resourceNames: ["builder"]\n'
        self.assertEqual(problems(named), [])

    def test_a_valid_service_passes(self):
        self.assertEqual(problems(SERVICE), [])

    def test_an_unknown_field_deep_in_a_kubernetes_kind_fails_for_each_version(self):
        found = problems(SERVICE + "      bogusField: 1\n")
        self.assertEqual(len(found), 2, found)
        self.assertIn("Kubernetes 1.30: spec.ports.0", found[0])
        self.assertIn("bogusField", found[0])
        self.assertIn("Kubernetes 1.37", found[1])

    def test_a_misspelt_networkpolicy_field_fails(self):
        text = ("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: n}\n"
                "spec:\n  podSelector: {}\n  policyType: [Egress]\n")
        found = problems(text)
        self.assertTrue(found and all("policyType" in p for p in found), found)

    def test_a_kind_kubernetes_does_not_have_fails(self):
        found = problems("apiVersion: v1\nkind: Servise\nmetadata: {name: s}\n")
        self.assertTrue(found and "no such kind v1/Servise" in found[0], found)

    def test_a_minor_newer_than_the_schemas_is_checked_against_the_newest(self):
        self.assertEqual(problems(SERVICE, ["1.99"]), [])
        self.assertEqual(len(problems(SERVICE + "      bogusField: 1\n", ["1.99"])), 1)

    def test_a_valid_policy_server_passes(self):
        self.assertEqual(problems(POLICY_SERVER), [])

    def test_an_unknown_policy_server_field_fails(self):
        found = problems(POLICY_SERVER + "  namespacedPolicyCapabilities: []\n")
        self.assertEqual(len(found), 1, found)
        self.assertIn("namespacedPolicyCapabilities", found[0])

    def test_a_policy_server_without_its_image_fails(self):
        found = problems(POLICY_SERVER.replace("  image: ghcr.io/kubewarden/policy-server:v1.36.0\n", ""))
        self.assertTrue(found and "'image' is a required property" in found[0], found)

    def test_a_policy_field_of_the_wrong_type_fails(self):
        text = ("apiVersion: policies.kubewarden.io/v1\nkind: ClusterAdmissionPolicy\n"
                "metadata: {name: c}\nspec:\n  module: registry://x/y:v1\n  rules: []\n"
                "  mutating: 'no'\n")
        found = problems(text)
        self.assertTrue(found and "spec.mutating" in found[0], found)

    def test_a_kubewarden_kind_without_a_schema_fails(self):
        found = problems("apiVersion: policies.kubewarden.io/v1\nkind: AdmissionPolicyGroup\n"
                         "metadata: {name: g}\nspec: {}\n")
        self.assertTrue(found and "no structural schema" in found[0], found)

    def test_a_key_written_twice_fails(self):
        found = problems(SERVICE.replace("  name: s\n", "  name: s\n  name: t\n"))
        self.assertTrue(found and "'name' is written twice" in found[0], found)


def shipped() -> list:
    """Every document of deploy/*.yaml."""
    return [d for path in sorted((HERE.parent / "deploy").glob("*.yaml")) for d in lint.documents(path)]


def edited(change) -> list:
    """The shipped documents after `change(kind_name -> doc)` edited a copy."""
    docs = copy.deepcopy(shipped())
    change({f"{d['kind']}/{d['metadata']['name']}": d for d in docs})
    return docs


POLICY = "ClusterAdmissionPolicy/resolvable-images"
EGRESS = "NetworkPolicy/policy-server-resolvable-images-egress"
BROKER = "Deployment/resolvable-images-broker"


class Install(unittest.TestCase):
    def test_the_shipped_install_passes(self):
        self.assertEqual(lint.check_install(shipped()), [])

    def test_every_lookup_goes_through_the_broker(self):
        def change(d):
            d[POLICY]["spec"]["settings"]["lookupBroker"]["use"] = "credentialed"
        found = lint.check_install(edited(change))
        self.assertTrue(any("lookupBroker.use is not `all`" in p for p in found), found)

    def test_the_evaluation_time_out_holds_the_budget_and_a_brokered_head_then_get(self):
        def change(d):
            d[POLICY]["spec"]["settings"]["timeBudgetMs"] = 2500
        found = lint.check_install(edited(change))
        self.assertTrue(any("2500 + 2 x --lookup-timeout-ms 1400 + 500 = 5800 ms exceeds timeoutEvalSeconds 5" in p
                            for p in found), found)

        def slower_broker(d):
            args = d[BROKER]["spec"]["template"]["spec"]["containers"][0]["args"]
            args[:] = ["--lookup-timeout-ms=2000" if a.startswith("--lookup-timeout-ms=") else a for a in args]
        found = lint.check_install(edited(slower_broker))
        self.assertTrue(any("exceeds timeoutEvalSeconds" in p for p in found), found)

    def test_the_evaluation_time_out_fits_in_the_webhooks(self):
        def change(d):
            d[POLICY]["spec"]["timeoutSeconds"] = 4
        found = lint.check_install(edited(change))
        self.assertTrue(any("timeoutEvalSeconds 5 exceeds timeoutSeconds 4" in p for p in found), found)

    def test_unwritten_time_outs_and_fail_closed_are_refused(self):
        def change(d):
            del d[POLICY]["spec"]["timeoutEvalSeconds"]
            d[POLICY]["spec"]["failurePolicy"] = "Fail"
        found = lint.check_install(edited(change))
        self.assertTrue(any("must be written" in p for p in found), found)
        self.assertTrue(any("failurePolicy is not Ignore" in p for p in found), found)

    def test_egress_to_anything_else_is_refused(self):
        def wide(d):
            d[EGRESS]["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]})
        found = lint.check_install(edited(wide))
        self.assertTrue(any("2 rules for the module's registry" in p for p in found), found)
        self.assertTrue(any("0.0.0.0/0 is wider than a /8" in p for p in found), found)

        def any_pod(d):
            d[EGRESS]["spec"]["egress"].append({"to": [{"podSelector": {}}]})
        found = lint.check_install(edited(any_pod))
        self.assertTrue(any("a rule to none of the allowed destinations" in p for p in found), found)

        def except_private(d):
            d[EGRESS]["spec"]["egress"][3]["to"][0]["ipBlock"]["except"] = ["10.0.0.0/8"]
        found = lint.check_install(edited(except_private))
        self.assertTrue(any("0 rules for the module's registry" in p for p in found), found)

    def test_egress_missing_a_destination_is_refused(self):
        for index, what in [(0, "the broker"), (1, "DNS"), (2, "the API server")]:
            def change(d):
                del d[EGRESS]["spec"]["egress"][index]
            found = lint.check_install(edited(change))
            self.assertTrue(any(f"0 rules for {what}" in p for p in found), (what, found))

    def test_dns_needs_udp_and_tcp(self):
        def change(d):
            d[EGRESS]["spec"]["egress"][1]["ports"] = [{"port": 53, "protocol": "UDP"}]
        found = lint.check_install(edited(change))
        self.assertTrue(any("0 rules for DNS" in p for p in found), found)

    def test_without_an_egress_policy_the_install_fails(self):
        docs = [d for d in shipped() if f"{d['kind']}/{d['metadata']['name']}" != EGRESS]
        found = lint.check_install(docs)
        self.assertTrue(any("0 egress NetworkPolicies" in p for p in found), found)

    def test_files_without_the_policy_have_no_install_to_check(self):
        self.assertEqual(lint.check_install(lint.documents(HERE.parent / "deploy" / "broker.yaml")), [])


if __name__ == "__main__":
    unittest.main()
