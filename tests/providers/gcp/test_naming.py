"""Names Compute Engine accepts, and what its operation error codes mean."""

from __future__ import annotations

import re

import pytest

from providers.gcp import errors, naming
from provisioner.cloudprovider import NotFound

GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


@pytest.mark.parametrize(
    ("cluster", "claim"),
    [
        ("prod", "default-abcde"),
        ("Prod.EU_1", "gpu.pool.h100-xyz12"),
        ("9lives", "x" * 253),
        ("a" * 60, "default-abcde"),
    ],
    ids=["plain", "dots-and-case", "digit-start-long-claim", "long-cluster"],
)
def test_instance_names_are_valid_deterministic_and_prefixed(cluster: str, claim: str) -> None:
    name = naming.instance_name(cluster, claim)
    assert GCE_NAME.match(name), name
    assert name == naming.instance_name(cluster, claim)
    assert name.startswith(naming.instance_prefix(cluster))


def test_distinct_claims_get_distinct_names_even_when_folded() -> None:
    assert naming.instance_name("c", "a.b") != naming.instance_name("c", "a-b")
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    assert naming.instance_name("c", long_a) != naming.instance_name("c", long_b)


@pytest.mark.parametrize("value", ["default", "GPU.Pool", "x" * 100], ids=["kept", "folded", "shortened"])
def test_label_values_fit_gce_rules(value: str) -> None:
    out = naming.label_value(value)
    assert re.fullmatch(r"[-_a-z0-9]{0,63}", out)
    assert (out == value) == (value == "default")


def test_provider_ids_round_trip_and_others_are_not_found() -> None:
    pid = naming.provider_id("p", "us-central1-a", "n1")
    assert naming.parse_provider_id(pid) == ("p", "us-central1-a", "n1")
    with pytest.raises(NotFound):
        naming.parse_provider_id("aws:///us-east-1a/i-1")


@pytest.mark.parametrize(
    ("codes", "http_status", "kind"),
    [
        (["ZONE_RESOURCE_POOL_EXHAUSTED"], 0, "capacity"),
        (["ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"], 0, "capacity"),
        (["QUOTA_EXCEEDED"], 0, "quota"),
        (["RESOURCE_ALREADY_EXISTS"], 0, "exists"),
        (["RESOURCE_NOT_FOUND"], 0, "not-found"),
        ([], 429, "transient"),
        ([], 503, "transient"),
        (["INVALID_FIELD_VALUE"], 400, "fatal"),
    ],
    ids=["stockout", "stockout-details", "quota", "exists", "not-found", "429", "503", "invalid"],
)
def test_operation_errors_are_classified_by_code(codes: list[str], http_status: int, kind: str) -> None:
    failure = errors.classify_operation([(c, "msg") for c in codes], http_status=http_status)
    assert failure is not None and failure.kind == kind


def test_an_operation_without_errors_succeeded() -> None:
    assert errors.classify_operation([], http_status=200) is None
