#!/usr/bin/env python3
"""Tests of scripts/lint-deploy.py: deploy/ passes; what a cluster would refuse fails.

Run with the lint virtual environment's Python (`make lint` does):
    .venv-lint/bin/python scripts/test_lint_deploy.py
"""

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


if __name__ == "__main__":
    unittest.main()
