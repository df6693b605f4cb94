"""Which of the nodes a solve opened a pod still has to look at. Some verdicts, once true, stay true for
the rest of a solve: a hostname group holding its threshold of counted pods (counts only grow), a node too
full for a request (totals only grow, options only narrow). Such nodes go behind jumps (union-find with path
compression, one table per group and threshold, one per request vector), so the work per pod does not grow
with the nodes opened before it. Pure: no clock, no I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol, TypeVar

from provisioner.scheduling.resources import Vec, add, le
from provisioner.scheduling.variant import Variant


class Opened(Protocol):
    """What the refusals read of an opened node."""

    hostname: str
    total: Vec
    maxvec: Vec


N = TypeVar("N", bound=Opened)


Skip = tuple[dict[int, int], Callable[[Opened], bool]]
"""Jumps over opened nodes (from an index to a later one) and the test that put a node among them: a
verdict that, once true, stays true for the rest of the solve."""


def skips(v: Variant, full: dict[Vec, dict[int, int]]) -> list[Skip]:
    """What refuses the variant's pods for good: a hostname group holding `threshold` counted pods (its
    counts only grow), and a node too full for the request (totals only grow, options only narrow)."""
    out: list[Skip] = [(g.jumps.setdefault(t, {}), _holding(g.counts, t)) for g, t in v.host_blockers]
    req = v.req
    out.append((full.setdefault(req, {}), lambda n: not all(map(le, map(add, n.total, req), n.maxvec))))
    return out


def _holding(counts: Mapping[str, int], threshold: int) -> Callable[[Opened], bool]:
    return lambda n: counts.get(n.hostname, 0) >= threshold


def unblocked(nodes: Sequence[N], start: int, skips: Sequence[Skip]) -> Iterator[N]:
    """The opened nodes from `start` on that no skip refuses. The refused ones are jumped over
    (union-find with path compression), so a pod does not re-check every node filled before it."""
    i = start
    while True:
        j = i
        for jumps, refuses in skips:
            j = _skip(jumps, refuses, nodes, j)
        if j != i:
            i = j
            continue
        if i >= len(nodes):
            return
        yield nodes[i]
        i += 1


def _skip(jumps: dict[int, int], refuses: Callable[[Opened], bool], nodes: Sequence[Opened], i: int) -> int:
    """The first node at or after `i` that is not refused."""
    path = []
    end = len(nodes)
    while i < end:
        j = jumps.get(i)
        if j is None:
            if not refuses(nodes[i]):
                break
            j = i + 1
        path.append(i)
        i = j
    for p in path:
        jumps[p] = i
    return i
