"""Hostile values for property-based tests of input (objects from the API, scenario files): malformed
quantities, huge and negative numbers, wrong types, deep nesting, large lists; and `paths`, the places in
a document one can be put."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

QUANTITIES = [
    "-1",
    "-5Gi",
    "1e999",
    "99999999999999999999999999999Ei",
    "NaN",
    "Infinity",
    "0x10",
    "1.5.5",
    "",
    " ",
    "1Qi",
    "1e-999",
    "١٢",  # Arabic-Indic digits: str.isdigit() says yes, int() says yes, Kubernetes says no
]


def examples(default: int) -> int:
    """`max_examples` of a fuzzing test: its own, unless PROVISIONER_FUZZ_EXAMPLES says how many (the
    reliability campaign's short run, bench/chaos.py --quick, sets it to stay short)."""
    return int(os.environ.get("PROVISIONER_FUZZ_EXAMPLES") or default)


def _deep(depth: int) -> Any:
    out: Any = "x"
    for _ in range(depth):
        out = {"a": out}
    return out


HOSTILE = st.one_of(
    st.sampled_from(QUANTITIES),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.text(max_size=30),
    # Built afresh per example: a mutation must not leak into the next one.
    st.builds(lambda: _deep(300)),
    st.builds(lambda: ["x"] * 5000),
    st.builds(lambda: [{"key": "k"} for _ in range(2000)]),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
    st.lists(st.integers(), max_size=3),
)


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document a value could be replaced."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return out
    for k, v in items:
        if prefix == () and k in ("apiVersion", "kind", "metadata"):
            out.extend(paths(v, (*prefix, k)) if k == "metadata" else [])
            continue
        if prefix == ("metadata",) and k in ("name", "namespace"):
            continue  # the API server guarantees these
        out.append((*prefix, k))
        out.extend(paths(v, (*prefix, k)))
    return out


@st.composite
def hostile_objects(
    draw: st.DrawFn, bases: Mapping[str, Callable[[], dict[str, Any]]]
) -> tuple[str, dict[str, Any]]:
    """A kind of `bases` and its good document with one to three places made hostile: a value replaced,
    or an unknown field added beside it."""
    kind = draw(st.sampled_from(sorted(bases)))
    doc = bases[kind]()
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(paths(doc)))
        parent: Any = doc
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(HOSTILE)  # an unknown field
        else:
            parent[path[-1]] = draw(HOSTILE)
    return kind, doc
