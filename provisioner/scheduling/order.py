"""The order the solver places a batch's pods in (`placing_order`). First as far as pods constrain each
other (`depths`): the pods a required affinity follows before their followers, the owners of a required
anti-affinity before the pods they repel, except pods pinned to one domain of the term's key, which go
before a repeller free to go elsewhere. Then priority, size (GPUs, cpu, memory) and choice (the GPU models
and pools a pod accepts: the most constrained first) order the rest. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provisioner.api import accelerators, quantities
from provisioner.api import labels as wk
from provisioner.scheduling.fit import labels_missing, untolerated
from provisioner.scheduling.resources import Dims
from provisioner.scheduling.shapes import Shape
from provisioner.scheduling.topology import Topology
from provisioner.scheduling.variant import Group
from provisioner.state.objects import Pod


def placing_order(
    pod_shapes: Sequence[tuple[Pod, Shape]],
    firsts: Sequence[tuple[Shape, Pod]],
    *,
    topology: Topology,
    dims: Dims,
) -> list[tuple[Pod, Shape]]:
    """The batch's (pod, shape) pairs in the order they are placed; `firsts` holds each shape once with
    its first pod."""
    accel = _accelerator_dims(dims)
    cpu, mem = dims.index[quantities.CPU], dims.index[quantities.MEMORY]
    depth = depths(firsts, topology)
    choice: dict[int, tuple[int, int]] = {id(shape): _choice(shape, accel) for shape, _ in firsts}

    def order(item: tuple[Pod, Shape]) -> tuple[int, int, int, int, int, int, int, str]:
        pod, shape = item
        r = shape.variants[0].req
        pools, models = choice[id(shape)]
        gpus = sum(r[d] for d in accel)
        # Fewer GPU models first among pods of equal GPU count; the pool count only breaks ties
        # below size, so a flexible large pod still opens its heavier pool before small ones fill
        # a lighter pool's node it would then join.
        return (depth[id(shape)], -pod.priority, -gpus, models, -r[cpu], -r[mem], pools, pod.key)

    return sorted(pod_shapes, key=order)


def _accelerator_dims(dims: Dims) -> list[int]:
    """The solve's dimensions that are accelerators (`accelerators.is_accelerator`: GPUs of any maker,
    MIG slices, Neuron)."""
    return [i for i, name in enumerate(dims.names) if accelerators.is_accelerator(name)]


def _choice(shape: Shape, accel: Sequence[int]) -> tuple[int, int]:
    """How much choice a shape has, read from requirements and taints only (no instance type is
    scanned): the pools that may take it, and for a GPU pod the GPU models it accepts. The most
    constrained go first, so a pod pinned to one model is not left without room by pods that could
    have used another."""
    v = shape.variants[-1]
    gpu = any(v.req[d] > 0 for d in accel)
    pools = 0
    models: set[str] = set()
    any_model = False
    for pool in v.pools:
        if untolerated(v, pool.taints) is not None:
            continue
        usable = False
        for alt in v.alts:
            merged = pool.reqs.intersect(alt)
            if merged.conflict() is not None or labels_missing(alt, pool) is not None:
                continue
            usable = True
            if gpu:
                allowed = merged.get(wk.GPU_NAME).allowed
                if allowed is None:
                    any_model = True
                else:
                    models |= allowed
        pools += usable
    return pools, (len(wk.GPU_NAMES) + 1 if any_model else len(models))


def depths(firsts: Sequence[tuple[Shape, Pod]], topology: Topology) -> dict[int, int]:
    """Per shape, how many shapes must be placed before it: the pods its required affinity follows, and
    the pods whose required anti-affinity selects it (their owners go first, so the selected pods keep
    out of their domains), unless the selected pods are pinned to one domain of the term's key and the
    owner is not: then they go first and the owner takes a domain they left (or waits), so a pod that
    repels others never strands pods that have nowhere else to go. Shapes in a cycle share a depth."""
    index = {id(shape): i for i, (shape, _) in enumerate(firsts)}
    before: dict[int, set[int]] = {}
    matched: dict[int, list[int]] = {}

    def members(g: Group) -> list[int]:
        found = matched.get(id(g))
        if found is None:
            found = matched[id(g)] = [i for i, (_, pod) in enumerate(firsts) if g.matches(pod)]
        return found

    for i, (shape, pod) in enumerate(firsts):
        for g, _ in shape.variants[-1].affinity:
            before.setdefault(i, set()).update(j for j in members(g) if j != i)
        for t in pod.anti_affinity_required:
            free = not _pinned(shape, t.topology_key)
            for j in members(topology.owner(pod, t)):
                if j == i:
                    continue
                if free and _pinned(firsts[j][0], t.topology_key):
                    # The repelled pods cannot go elsewhere, the repeller can: they go first, and it
                    # takes a domain they left free (or waits), instead of taking one of theirs.
                    before.setdefault(i, set()).add(j)
                else:
                    before.setdefault(j, set()).add(i)
    comp = _components(before)
    # Longest chain of components before each one (the graph between components has no cycle).
    depth: dict[int, int] = {}
    changed = True
    while changed:
        changed = False
        for i in sorted(before):
            d = max((depth.get(j, 0) + 1 for j in before[i] if comp[j] != comp[i]), default=0)
            d = max(d, max((depth.get(j, 0) for j in before if comp[j] == comp[i]), default=0))
            if d > depth.get(i, 0):
                depth[i] = d
                changed = True
    return {id(shape): depth.get(index[id(shape)], 0) for shape, _ in firsts}


def _pinned(shape: Shape, key: str) -> bool:
    """Whether the shape's own required constraints fix its domain of `key` (a node selector or required
    node affinity on one zone, say): it has no other domain to go to."""
    alts = shape.variants[-1].alts
    return bool(alts) and all(alt.get(key).single is not None for alt in alts)


def _components(before: Mapping[int, set[int]]) -> dict[int, int]:
    """Strongly connected components of the "placed before" graph (Kosaraju, iteratively): node ->
    component id. Shapes that must each go before the other (mutual anti-affinity) share one."""
    nodes = sorted(set(before) | {j for js in before.values() for j in js})
    after: dict[int, list[int]] = {}
    for i, js in before.items():
        for j in js:
            after.setdefault(j, []).append(i)
    seen: set[int] = set()
    finished: list[int] = []
    for root in nodes:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(sorted(before.get(root, ()))))]
        while stack:
            node, it = stack[-1]
            nxt = next((j for j in it if j not in seen), None)
            if nxt is None:
                stack.pop()
                finished.append(node)
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(before.get(nxt, ())))))
    comp: dict[int, int] = {}
    for root in reversed(finished):
        if root in comp:
            continue
        comp[root] = root
        todo = [root]
        while todo:
            node = todo.pop()
            for j in after.get(node, ()):
                if j not in comp:
                    comp[j] = root
                    todo.append(j)
    return comp
