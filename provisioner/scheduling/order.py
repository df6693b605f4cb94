"""The order the solver places a batch's shapes in, as far as pods constrain each other: the pods a
required affinity follows before their followers, the owners of a required anti-affinity before the pods
they repel, except pods pinned to one domain of the term's key, which go before a repeller free to go
elsewhere. Size and choice order the rest (`solver`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from provisioner.scheduling.shapes import Shape
from provisioner.scheduling.topology import Topology
from provisioner.scheduling.variant import Group
from provisioner.state.objects import Pod


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
