"""What a re-solve is shown (`SolverView`): the shelves find what one walk over every target, in order of
free CPU, finds, as pods move and nodes go during a plan."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.api import labels as wk
from provisioner.api import quantities
from provisioner.disruption import candidates as cand
from provisioner.disruption.view import SolverView, fits
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Pod, TaintValue, tolerates_all
from tests.unit.disruption.builders import instance_type, node_pool, pod, snapshot, state_node

GPU_TAINT = TaintValue(key=wk.GPU_RESOURCE, value="true", effect="NoSchedule")
TOLERATE_GPU = [{"key": wk.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
TYPES = {
    "cpu": instance_type("c.large", cpu=8, memory_gib=16, price=0.3),
    "mem": instance_type("m.large", cpu=4, memory_gib=32, price=0.3),
    "gpu": instance_type("g.large", cpu=8, memory_gib=32, gpus=2, price=1.0),
}


class Reference:
    """The picture as one list, most free CPU first, re-placed as main's view did it: a target whose free
    CPU changed goes before every target already holding its new free CPU."""

    def __init__(self, nodes: Sequence[StateNode]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.free = {n.name: dict(n.available) for n in nodes}
        self.order = sorted(self.free, key=lambda name: -self.free[name].get(quantities.CPU, 0))
        self.moved: dict[str, int] = {}

    def key(self, name: str) -> int:
        return -self.free[name].get(quantities.CPU, 0)

    def move(self, name: str, p: Pod) -> None:
        if name in self.free:
            self.moved.setdefault(name, self.key(name))
            self.free[name] = quantities.subtract(self.free[name], p.requests)

    def drop(self, gone: set[str]) -> None:
        moved, self.moved = self.moved, {}
        changed = [n for n in self.order if n in moved and n not in gone and moved[n] != self.key(n)]
        self.order = [n for n in self.order if n not in gone and n not in changed]
        for name in gone:
            self.free.pop(name, None)
        for name in reversed(changed):
            at = bisect.bisect_left([self.key(n) for n in self.order], self.key(name))
            self.order.insert(at, name)

    def usable(self, p: Pod, name: str) -> bool:
        n = self.nodes[name]
        return (
            all(n.labels.get(k) == v for k, v in p.node_selector.items())
            and (not p.nodepools or n.nodepool in p.nodepools)
            and tolerates_all(p.tolerations, n.taints) is None
        )

    def shown(self, pods: Sequence[Pod], *, excluded: set[str], per_pod: int) -> set[str]:
        keep: set[str] = set()
        for p in pods:
            cpu = p.requests.get(quantities.CPU, 0)
            found = 0
            for name in reversed(self.order):
                if self.free[name].get(quantities.CPU, 0) < cpu or name in excluded:
                    continue
                if fits(p.requests, self.free[name]) and self.usable(p, name):
                    keep.add(name)
                    found += 1
                    if found >= per_pod:
                        break
        return keep

    def fit_elsewhere(self, node: StateNode) -> bool:
        used: dict[str, Mapping[str, int]] = {}
        for p in sorted(cand.reschedulable(node), key=lambda p: -p.requests.get(quantities.CPU, 0)):
            cpu = p.requests.get(quantities.CPU, 0)
            for name in self.order:
                if self.free[name].get(quantities.CPU, 0) < cpu:
                    return False
                free = used.get(name, self.free[name])
                if name != node.name and fits(p.requests, free) and self.usable(p, name):
                    used[name] = quantities.subtract(free, p.requests)
                    break
            else:
                return False
        return True


POD = st.fixed_dictionaries(
    {
        # Whole CPUs, so many targets share their free CPU (their order among equals matters), and
        # none: a GPU-only pod takes a node's GPUs and leaves its CPU (it changes shelf, not place).
        "cpu": st.sampled_from(["0", "1", "2", "3"]),
        "memory": st.sampled_from(["1Gi", "6Gi"]),
        "gpus": st.sampled_from([0, 0, 1, 2]),
        "zone": st.sampled_from([None, None, "zone-a", "zone-b"]),
    }
)


def _pod(name: str, spec: dict[str, object]) -> Pod:
    gpus = int(str(spec["gpus"]))
    return pod(
        name,
        cpu=str(spec["cpu"]),
        memory=str(spec["memory"]),
        gpus=gpus,
        tolerations=TOLERATE_GPU if gpus else [],
        node_selector={wk.ZONE: str(spec["zone"])} if spec["zone"] else None,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(list(TYPES)), min_size=2, max_size=12),
    loads=st.lists(st.lists(POD, max_size=2), min_size=12, max_size=12),
    steps=st.lists(
        st.tuples(st.integers(0, 11), st.integers(0, 11), POD, st.booleans()), min_size=1, max_size=12
    ),
    per_pod=st.sampled_from([1, 2, 3]),
)
def test_the_shelves_find_what_one_walk_over_every_target_finds(
    kinds: list[str],
    loads: list[list[dict[str, object]]],
    steps: list[tuple[int, int, dict[str, object], bool]],
    per_pod: int,
) -> None:
    nodes = []
    for i, kind in enumerate(kinds):
        pods = [_pod(f"n{i}-{j}", spec) for j, spec in enumerate(loads[i])]
        sn = state_node(f"n{i}", it=TYPES[kind], pods=pods, pool="gpu" if kind == "gpu" else "default")
        if kind == "gpu":
            assert sn.node is not None
            tainted = dataclasses.replace(sn.node, taints=(*sn.node.taints, GPU_TAINT))
            sn = dataclasses.replace(sn, node=tainted)
        nodes.append(sn)
    snap = snapshot(nodes, pools=[node_pool(), node_pool("gpu")])
    plan_nodes = {n.name: n for n in snap.nodes}
    view = SolverView(snap, nodes=plan_nodes, pools=snap.nodepools, nodes_per_pod=per_pod)
    reference = Reference(snap.nodes)
    removed: set[str] = set()
    for k, (source, dest, spec, remove) in enumerate(steps):
        src = f"n{source % len(nodes)}"
        if src in removed:
            continue
        node = plan_nodes[src]
        moving = [dataclasses.replace(p, node_name=None) for p in cand.reschedulable(node)]
        shown = view.for_pods(moving, removed=removed, excluded={src})
        expected = reference.shown(moving, excluded={src}, per_pod=per_pod)
        assert {n.name for n in shown.nodes} == expected
        assert view.pods_fit_elsewhere(node, removed=removed) == reference.fit_elsewhere(node)
        # The plan moves a pod onto another node, and may take the source node away.
        target = f"n{dest % len(nodes)}"
        arriving = _pod(f"moved-{k}", spec)
        if target not in removed and target != src:
            view.moved(target, arriving)
            reference.move(target, arriving)
        gone = {src} if remove else set()
        removed |= gone
        view.drop(gone)
        reference.drop(gone)
