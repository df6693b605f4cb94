"""The parts of pods and nodes the scheduler matches on, as small frozen values: label selectors and their
requirements, tolerations and taints (and whether a pod tolerates a node's), topology spread constraints,
pod (anti-)affinity terms, preferred node terms and host ports. Pure; `state.objects` parses pods and
nodes into them (and re-exports them, where the rest of the code has always imported them from).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One `matchExpressions` / node selector term requirement."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SelectorRequirement:
        return cls(key=d["key"], operator=d["operator"], values=tuple(str(v) for v in d.get("values") or ()))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies the requirement (Gt/Lt compare integers)."""
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt") and present:
            try:
                have, bound = int(labels[self.key]), int(self.values[0])
            except (ValueError, IndexError):
                return False
            return have > bound if self.operator == "Gt" else have < bound
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector. An empty selector matches everything; a missing one (None) nothing."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LabelSelector | None:
        if d is None:
            return None
        return cls(
            match_labels=tuple(sorted((d.get("matchLabels") or {}).items())),
            match_expressions=tuple(
                SelectorRequirement.from_dict(e) for e in d.get("matchExpressions") or ()
            ),
        )

    def matches(self, labels: Mapping[str, str]) -> bool:
        # Loops, not all() over generators: the solver matches every shape against every group.
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        return not self.match_expressions or all(e.matches(labels) for e in self.match_expressions)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Toleration:
        return cls(
            key=d.get("key"),
            operator=d.get("operator") or "Equal",
            value=d.get("value"),
            effect=d.get("effect"),
            toleration_seconds=d.get("tolerationSeconds"),
        )

    def tolerates(self, taint: TaintValue) -> bool:
        """Kubernetes' rule: empty effect matches all effects; empty key with Exists matches all taints."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key is None or self.key == "":
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return (self.value or "") == (taint.value or "")


@dataclass(frozen=True, slots=True)
class TaintValue:
    key: str
    effect: str
    value: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TaintValue:
        return cls(key=d["key"], effect=d["effect"], value=d.get("value"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "effect": self.effect}
        if self.value is not None:
            out["value"] = self.value
        return out


PREFER_NO_SCHEDULE = "PreferNoSchedule"


def tolerates_all(
    tolerations: tuple[Toleration, ...], taints: tuple[TaintValue, ...] | list[TaintValue]
) -> TaintValue | None:
    """The first NoSchedule/NoExecute taint not tolerated, or None when all are (PreferNoSchedule never blocks)."""
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True, slots=True)
class TopologySpread:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopologySpread:
        return cls(
            max_skew=int(d.get("maxSkew", 1)),
            topology_key=d["topologyKey"],
            when_unsatisfiable=d.get("whenUnsatisfiable", "DoNotSchedule"),
            label_selector=LabelSelector.from_dict(d.get("labelSelector")),
            min_domains=d.get("minDomains"),
            node_affinity_policy=d.get("nodeAffinityPolicy") or "Honor",
            node_taints_policy=d.get("nodeTaintsPolicy") or "Ignore",
            match_label_keys=tuple(d.get("matchLabelKeys") or ()),
        )


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    label_selector: LabelSelector | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    weight: int = 0
    """0 for required terms; 1-100 for preferred ones."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], weight: int = 0) -> PodAffinityTerm:
        return cls(
            label_selector=LabelSelector.from_dict(d.get("labelSelector")),
            topology_key=d["topologyKey"],
            namespaces=tuple(d.get("namespaces") or ()),
            namespace_selector=LabelSelector.from_dict(d.get("namespaceSelector")),
            weight=weight,
        )


_ANY_ADDRESS = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True, slots=True)
class HostPort:
    """A port a container binds on its node (`hostPort`): two pods may not hold the same one."""

    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        """Same port and protocol, on the same address or either on every address (kube-scheduler's
        rule)."""
        return (
            self.port == other.port
            and self.protocol == other.protocol
            and (self.ip == other.ip or self.ip in _ANY_ADDRESS or other.ip in _ANY_ADDRESS)
        )


def host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports of a pod's containers (protocol TCP and address 0.0.0.0 unless given)."""
    return tuple(
        HostPort(
            port=int(p["hostPort"]), protocol=p.get("protocol") or "TCP", ip=p.get("hostIP") or "0.0.0.0"
        )
        for c in spec.get("containers") or ()
        for p in c.get("ports") or ()
        if p.get("hostPort")
    )


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    weight: int
    requirements: tuple[SelectorRequirement, ...]
