"""`templates validate` on Teams and Departments: located errors, over-subscription (and its switch),
a namespace of two teams, references that may live in the cluster."""

from __future__ import annotations

import pytest

from provisioner.api import documents

POOL = """\
apiVersion: provisioner.sh/v1
kind: NodePool
metadata: {name: a100}
spec:
  limits: {nvidia.com/gpu: "40"}
  template:
    spec:
      nodeClassRef: {kind: AWSNodeClass, name: gpu}
"""


def team(name: str, gpus: int, *, department: str = "research", namespace: str | None = None) -> str:
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: Team
metadata: {{name: {name}}}
spec:
  department: {department}
  namespaces: [{namespace or name}]
  quotas:
    - nodePool: a100
      resources: {{nvidia.com/gpu: "{gpus}"}}
"""


def department(name: str, gpus: int) -> str:
    return f"""\
---
apiVersion: provisioner.sh/v1
kind: Department
metadata: {{name: {name}}}
spec:
  quotas:
    - nodePool: a100
      resources: {{nvidia.com/gpu: "{gpus}"}}
"""


def check(text: str, *, allow_oversubscription: bool = False) -> list[str]:
    report = documents.validate_documents(
        documents.parse_yaml_documents(text, source="t.yaml"), allow_oversubscription=allow_oversubscription
    )
    return [str(p) for p in report.sorted_problems() if "AWSNodeClass" not in str(p)]


def test_teams_within_their_department_and_pool_are_valid() -> None:
    assert check(POOL + department("research", 32) + team("vision", 16) + team("nlp", 16)) == []


def test_teams_above_their_department_are_an_error_at_the_departments_quota_line() -> None:
    problems = check(POOL + department("research", 32) + team("vision", 24) + team("nlp", 16))
    assert problems == [
        't.yaml:16: Department/research: spec.quotas[0].resources["nvidia.com/gpu"]: over-subscribed: its '
        "teams are promised 40 nvidia.com/gpu on a100 (vision 24, nlp 16) but the department holds 32 "
        "(--allow-oversubscription, or a Scenario's spec.allowOversubscription, makes this a warning)"
    ]


def test_departments_above_the_pools_limits_are_an_error_unless_allowed() -> None:
    text = POOL + department("research", 32) + department("prod", 16)
    (problem,) = check(text)
    assert problem.startswith(
        't.yaml:5: NodePool/a100: spec.limits["nvidia.com/gpu"]: over-subscribed: quotas'
    )
    assert "promise 48 nvidia.com/gpu (Department research 32, Department prod 16)" in problem
    (warning,) = check(text, allow_oversubscription=True)
    assert ": warning: over-subscribed" in warning


def test_a_namespace_claimed_by_two_teams_is_an_error() -> None:
    problems = check(
        POOL + department("research", 32) + team("vision", 8) + team("nlp", 8, namespace="vision")
    )
    assert any(
        "Team/nlp: spec.namespaces[0]: namespace 'vision' belongs to Team 'vision' already" in p
        for p in problems
    )


def test_a_team_field_typo_and_a_bad_quantity_are_located() -> None:
    text = POOL + team("vision", 8).replace("quotas:", "quota:") + team("nlp", 8).replace('"8"', '"lots"')
    problems = check(text)
    assert any(
        "Team/vision: spec.quota: unknown field 'quota' (did you mean 'quotas'?)" in p for p in problems
    )
    assert any('Team/nlp: spec.quotas[0].resources["nvidia.com/gpu"]:' in p and "lots" in p for p in problems)


def test_a_department_in_the_cluster_only_is_a_warning() -> None:
    (warning,) = check(POOL + team("vision", 8, department="elsewhere"))
    assert "warning: no Department named 'elsewhere' among the files checked" in warning


def test_two_entries_for_one_pool_are_refused() -> None:
    text = POOL + team("vision", 8).replace(
        '      resources: {nvidia.com/gpu: "8"}\n',
        '      resources: {nvidia.com/gpu: "8"}\n    - nodePool: a100\n',
    )
    assert any("spec.quotas[1].nodePool: NodePool 'a100' has a quota entry already" in p for p in check(text))


CATALOG = frozenset({"cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu"})


@pytest.mark.parametrize("field", ["resources", "borrowingLimit", "lendingLimit"])
def test_a_quota_on_a_resource_no_instance_type_offers_is_an_error_with_did_you_mean(field: str) -> None:
    entry = '      resources: {nvidia.com/gpu: "8"}\n'
    text = POOL + department("research", 32) + team("vision", 8)
    if field != "resources":
        text = text.replace(entry, entry + f'      {field}: {{nvidia.com/gpuu: "4"}}\n')
    else:
        text = text.replace("nvidia.com/gpu:", "nvidia.com/gpuu:")
    report = documents.validate_documents(
        documents.parse_yaml_documents(text, source="t.yaml"), resources=CATALOG
    )
    (problem,) = [p for p in report.errors if p.kind == "Team" and "'nvidia.com/gpu'" in p.message]
    assert problem.path == f'spec.quotas[0].{field}["nvidia.com/gpuu"]'


def test_without_the_catalogs_a_misspelt_quota_resource_is_a_warning_and_an_unknown_device_passes() -> None:
    misspelt = (
        POOL + department("research", 32) + team("vision", 8).replace("nvidia.com/gpu", "nvidia.com/gpuu")
    )
    (warning,) = check(misspelt)
    assert ": warning: " in warning and "'nvidia.com/gpu'" in warning
    device = (
        POOL + department("research", 32) + team("vision", 8).replace("nvidia.com/gpu", "example.com/fpga")
    )
    assert check(device) == []
