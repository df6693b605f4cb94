"""The requirements algebra: intersections, emptiness, matching, and the way back to API requirements."""

from __future__ import annotations

import pytest

from provisioner.scheduling import requirements as rq


@pytest.mark.parametrize(
    ("a", "b", "value", "expected"),
    [
        (("In", ["a", "b"]), ("In", ["b", "c"]), "b", True),
        (("In", ["a", "b"]), ("In", ["b", "c"]), "a", False),
        (("In", ["a", "b"]), ("NotIn", ["a"]), "b", True),
        (("Gt", ["4"]), ("Lt", ["9"]), "8", True),
        (("Gt", ["4"]), ("Lt", ["9"]), "9", False),
        (("Exists", []), ("NotIn", ["x"]), None, False),
        (("NotIn", ["x"]), ("NotIn", ["y"]), None, True),
    ],
    ids=["in-in", "in-in-outside", "in-notin", "gt-lt", "gt-lt-bound", "exists-absent", "notin-absent"],
)
def test_intersection_matches_what_both_match(
    a: tuple[str, list[str]],
    b: tuple[str, list[str]],
    value: str | None,
    expected: bool,
) -> None:
    left, right = rq.key_req(*a), rq.key_req(*b)
    both = left.intersect(right)
    assert both.matches(value) is expected
    assert (left.matches(value) and right.matches(value)) is expected


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("In", ["a"]), ("In", ["b"])),
        (("In", ["a"]), ("NotIn", ["a"])),
        (("Exists", []), ("DoesNotExist", [])),
        (("Gt", ["4"]), ("Lt", ["5"])),
        (("In", ["x"]), ("Gt", ["1"])),
    ],
    ids=["disjoint-in", "in-notin", "exists-doesnotexist", "no-integer-between", "non-integer-gt"],
)
def test_contradictions_are_empty(a: tuple[str, list[str]], b: tuple[str, list[str]]) -> None:
    assert rq.key_req(*a).intersect(rq.key_req(*b)).empty


def test_pod_alternatives_and_the_node_selector() -> None:
    from provisioner.state.objects import SelectorRequirement

    terms = ((SelectorRequirement("zone", "In", ("a",)),), (SelectorRequirement("zone", "In", ("b",)),))
    alts = rq.pod_alternatives({"disk": "ssd"}, terms)
    assert len(alts) == 2
    assert alts[0].matches({"disk": "ssd", "zone": "a"})
    assert not alts[0].matches({"disk": "hdd", "zone": "a"})
    assert alts[1].matches({"disk": "ssd", "zone": "b"})


def test_round_trip_to_api_requirements() -> None:
    reqs = rq.Reqs.of(
        {
            "a": rq.key_req("In", ["y", "x"]),
            "b": rq.key_req("NotIn", ["z"]).intersect(rq.key_req("Gt", ["2"])),
            "c": rq.key_req("DoesNotExist"),
            "d": rq.key_req("Exists"),
        }
    )
    api = [(r.key, r.operator.value, r.values) for r in reqs.to_requirements()]
    assert api == [
        ("a", "In", ["x", "y"]),
        ("b", "NotIn", ["z"]),
        ("b", "Gt", ["2"]),
        ("c", "DoesNotExist", []),
        ("d", "Exists", []),
    ]
    again = rq.from_api(reqs.to_requirements())
    assert again == reqs


def test_single_value() -> None:
    assert rq.key_req("In", ["only"]).single == "only"
    assert rq.key_req("In", ["a", "b"]).single is None
