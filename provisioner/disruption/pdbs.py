"""How many pods each PodDisruptionBudget still lets us evict.

`status.disruptionsAllowed` is used when the API server filled it; a manifest or a scenario has none, so
then the number is computed the way the disruption controller of Kubernetes does, from the pods in the
snapshot: minAvailable/maxUnavailable (a count or a percent, rounded up) against the matching pods that
are healthy (bound, running, not deleting).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from provisioner.state.objects import Pod, PodDisruptionBudget


def _scaled(value: str, total: int) -> int:
    text = value.strip()
    if text.endswith("%"):
        return math.ceil(total * int(text[:-1]) / 100)
    return int(text)


def _healthy(pod: Pod) -> bool:
    return pod.node_name is not None and not pod.deleting and pod.phase in ("Running", "Pending")


def allowed_disruptions(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> int:
    """Evictions the budget allows now (never negative)."""
    if pdb.disruptions_allowed is not None:
        return max(0, pdb.disruptions_allowed)
    return _allowed(pdb, [p for p in pods if not p.is_terminal and pdb.matches(p)])


def _allowed(pdb: PodDisruptionBudget, matching: list[Pod]) -> int:
    """Evictions the budget allows, from the non-terminal pods it selects."""
    expected = len(matching)
    healthy = sum(1 for p in matching if _healthy(p))
    if pdb.max_unavailable is not None:
        allowed = _scaled(pdb.max_unavailable, expected) - (expected - healthy)
    elif pdb.min_available is not None:
        allowed = healthy - _scaled(pdb.min_available, expected)
    else:
        # Neither field: Kubernetes wants nothing kept available.
        allowed = healthy
    return max(0, allowed)


class PDBLedger:
    """The evictions each PDB still allows during one plan; commands spend them as they are accepted."""

    def __init__(self, pdbs: Iterable[PodDisruptionBudget], pods: Iterable[Pod]) -> None:
        self._pdbs = list(pdbs)
        self._by_namespace: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in self._pdbs:
            self._by_namespace.setdefault(pdb.namespace, []).append(pdb)
        self.remaining: dict[str, int] = {}
        self._of: dict[tuple[str, frozenset[tuple[str, str]]], list[PodDisruptionBudget]] = {}
        """(namespace, labels) -> the PDBs selecting pods with them."""
        # Pods repeat a few label sets per namespace (a Deployment's replicas): match each set once. Only
        # the namespaces of PDBs whose status does not say what they allow are counted.
        counted = {pdb.namespace for pdb in self._pdbs if pdb.disruptions_allowed is None}
        by_labels: dict[str, dict[frozenset[tuple[str, str]], list[Pod]]] = {}
        for pod in pods if counted else ():
            if pod.namespace not in counted or pod.is_terminal:
                continue
            sets = by_labels.setdefault(pod.namespace, {})
            sets.setdefault(frozenset(pod.labels.items()), []).append(pod)
        for pdb in self._pdbs:
            if pdb.disruptions_allowed is not None:
                self.remaining[self.key(pdb)] = max(0, pdb.disruptions_allowed)
                continue
            selector = pdb.selector
            matching = [
                pod
                for group in by_labels.get(pdb.namespace, {}).values()
                if selector is not None and selector.matches(group[0].labels)
                for pod in group
            ]
            self.remaining[self.key(pdb)] = _allowed(pdb, matching)

    @staticmethod
    def key(pdb: PodDisruptionBudget) -> str:
        return f"{pdb.namespace}/{pdb.name}"

    def budgets_of(self, pod: Pod) -> list[PodDisruptionBudget]:
        key = (pod.namespace, frozenset(pod.labels.items()))
        found = self._of.get(key)
        if found is None:
            found = self._of[key] = [p for p in self._by_namespace.get(pod.namespace, ()) if p.matches(pod)]
        return found

    def blocker(self, pods: Iterable[Pod], *, spent: Mapping[str, int] | None = None) -> str | None:
        """Why evicting these pods together would break a PDB, or None when it would not."""
        need: dict[str, int] = dict(spent or {})
        for pod in pods:
            budgets = self.budgets_of(pod)
            if len(budgets) > 1:
                names = ", ".join(self.key(b) for b in budgets)
                return (
                    f"pod {pod.key} is selected by more than one PDB ({names}); the eviction API refuses it"
                )
            for pdb in budgets:
                k = self.key(pdb)
                need[k] = need.get(k, 0) + 1
                if need[k] > self.remaining[k]:
                    return (
                        f"PDB {k} allows {self.remaining[k]} more eviction(s); evicting pod {pod.key} "
                        "would exceed it"
                    )
        return None

    def spend(self, pods: Iterable[Pod]) -> None:
        for pod in pods:
            for pdb in self.budgets_of(pod):
                self.remaining[self.key(pdb)] -= 1
