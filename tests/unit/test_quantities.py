from decimal import Decimal

import pytest

from provisioner.api import quantities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Decimal("0.1")),
        ("4Gi", Decimal(4 * 2**30)),
        ("1.5", Decimal("1.5")),
        ("2e3", Decimal(2000)),
        ("1k", Decimal(1000)),
    ],
    ids=["milli", "gibi", "decimal", "exponent", "kilo"],
)
def test_quantities_parse_exactly(text: str | int | float, expected: Decimal) -> None:
    assert quantities.parse_quantity(text) == expected


def test_cpu_is_counted_in_millicores_rounding_up() -> None:
    assert quantities.to_base_units("cpu", "1.5") == 1500
    assert quantities.to_base_units("cpu", "0.5m") == 1


@pytest.mark.parametrize("bad", ["", "1.2.3", "4GB", "abc", "--1"])
def test_non_quantities_are_refused_with_examples(bad: str) -> None:
    with pytest.raises(quantities.QuantityError, match="not a Kubernetes quantity"):
        quantities.parse_quantity(bad)


def test_format_is_the_inverse_of_parse() -> None:
    for resource, text in [("cpu", "1500m"), ("cpu", "2"), ("memory", "4Gi"), ("memory", "512Mi")]:
        assert quantities.format_quantity(resource, quantities.to_base_units(resource, text)) == text


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan"), Decimal("Infinity")])
def test_non_finite_numbers_are_refused_as_quantities(bad: float | Decimal) -> None:
    # A JSON number too large for a float (a Node's allocatable of 1e999) arrives as infinity: it is a
    # bad quantity (ValueError, which the state turns into "malformed Node"), not an OverflowError.
    with pytest.raises(quantities.QuantityError, match="finite"):
        quantities.to_base_units("cpu", bad)


def test_a_node_with_infinite_allocatable_is_refused_as_malformed() -> None:
    from provisioner.state.cluster import ClusterState

    state = ClusterState()
    with pytest.raises(ValueError, match="finite"):
        state.upsert("Node", {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": float("inf")}}})
    assert "n" not in state.nodes
