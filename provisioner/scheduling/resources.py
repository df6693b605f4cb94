"""Resource vectors for one solve: the dimensions (cpu, memory, pods, then every other resource the pods,
daemonsets and pool limits name), turning a resource list into a tuple of integers over them, the
element-wise checks the solver runs in its hot loops, and formatting amounts for reasons.

A pod's requests are summed by `Pod.requests`; a node's by `StateNode.requested` (memoised there). This
module only indexes them."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence

from provisioner.api import NodePool, quantities
from provisioner.state.objects import DaemonSet, Pod

Vec = tuple[int, ...]
"""Amounts per dimension of a `Dims`, in base units (millicores, bytes, counts)."""

add = operator.add
sub = operator.sub
le = operator.le


def fits(req: Vec, alloc: Vec) -> bool:
    """Whether every amount of `req` is at most the same amount of `alloc`."""
    return all(map(le, req, alloc))


def plus(a: Vec, b: Vec) -> Vec:
    return tuple(map(add, a, b))


def minus(a: Vec, b: Vec) -> Vec:
    return tuple(map(sub, a, b))


def fmt(resource: str, amount: int) -> str:
    """An amount as Kubernetes writes it (`500m`, `4Gi`)."""
    return quantities.format_quantity(resource, amount)


class Dims:
    """The dimensions of one solve's vectors: cpu, memory and pods first, then the rest by name."""

    __slots__ = ("index", "names", "zero")

    def __init__(self, names: Iterable[str]) -> None:
        head = [quantities.CPU, quantities.MEMORY, quantities.PODS]
        self.names: list[str] = head + sorted(set(names) - set(head))
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.zero: Vec = (0,) * len(self.names)

    @classmethod
    def of(
        cls,
        pods: Iterable[Pod],
        *,
        daemonsets: Iterable[DaemonSet],
        pools: Iterable[NodePool],
    ) -> Dims:
        """Every resource the pods and daemonsets request or the pools limit (`nodes` is not one)."""
        names: set[str] = set()
        for pod in pods:
            names.update(pod.requests)
        for ds in daemonsets:
            names.update(ds.pod.requests)
        for pool in pools:
            names.update(n for n in pool.spec.limits_base_units() if n != "nodes")
        return cls(names)

    def __len__(self) -> int:
        return len(self.names)

    def vec(self, resources: Mapping[str, int]) -> Vec:
        """The resource list as a vector; resources outside the dimensions are dropped (nothing asks
        for them in this solve)."""
        idx = self.index
        out = [0] * len(self.names)
        for name, amount in resources.items():
            i = idx.get(name)
            if i is not None:
                out[i] = amount
        return tuple(out)

    def describe(self, vec: Sequence[int], *, skip_zero: bool = True) -> str:
        """`cpu 2, memory 4Gi`: the amounts in plain words."""
        return ", ".join(
            f"{n} {fmt(n, a)}" for n, a in zip(self.names, vec, strict=True) if a or not skip_zero
        )
