"""Every Kubernetes object in the README is one an API server accepts: core and workload objects pass
the strict test API server's validation (testkit/controllers/kube_rules.py, from the Kubernetes API
documentation), and the provisioner's own kinds pass their CRD schemas, CEL rules included. A real
v1.36 server refused the README's pods (`spec.containers[0].image: Required value`)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from testkit.controllers import kube_rules
from testkit.controllers.crd_schema import Invalid
from tests.e2e.test_readme import BLOCKS

NOT_SERVED = {"Scenario"}
"""File-only documents (`provisioner simulate` reads them; no API server serves them)."""


def manifests() -> list[Any]:
    out = []
    for line, text in BLOCKS:
        for doc in yaml.safe_load_all(text):
            if isinstance(doc, dict) and doc.get("kind") and doc["kind"] not in NOT_SERVED:
                name = (doc.get("metadata") or {}).get("name")
                out.append(pytest.param(doc, id=f"README.md:{line}:{doc['kind']}/{name}"))
    return out


MANIFESTS = manifests()


def test_the_readme_has_manifests_of_every_kind_a_user_applies() -> None:
    kinds = {p.values[0]["kind"] for p in MANIFESTS}
    assert {"Pod", "Deployment", "Job", "NodePool", "AWSNodeClass", "Team", "Department"} <= kinds


@pytest.mark.parametrize("doc", MANIFESTS)
def test_every_readme_manifest_is_a_valid_kubernetes_object(doc: dict[str, Any]) -> None:
    kind = doc["kind"]
    try:
        stored = kube_rules.on_create(kind, doc)
    except Invalid as err:
        pytest.fail(f"{kind}: {err}")
    assert kube_rules.problems_on_create(kind, stored) == []


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("image"), "image: Required value"),
        (lambda d: d["spec"].pop("selector"), "spec.selector: Required value"),
    ],
)
def test_the_check_refuses_what_a_real_server_refused(change: Any, says: str) -> None:
    deployment = next(p.values[0] for p in MANIFESTS if p.values[0]["kind"] == "Deployment")
    bad = yaml.safe_load(yaml.safe_dump(deployment))
    change(bad)
    assert any(says in p for p in kube_rules.problems_on_create("Deployment", bad))
