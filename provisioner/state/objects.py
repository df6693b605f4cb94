"""Kubernetes objects as the decision code sees them: pods, nodes, daemonsets and PDBs, parsed once
from their JSON (camelCase dicts, as the API server or a manifest gives them) into small frozen values.

Parsing is lenient about fields we do not use and exact about the ones we do (quantities as integers).
Only what scheduling, disruption and reporting read is kept; `raw` keeps the original for writers.

About 490 lines: one parser per kind, `Pod` most of it (a new version of a pod takes the parse of what it
shares with the last one: issue 16). The values pods are made of (selectors, tolerations, taints, spread
and affinity terms) are `state.terms`'; the request arithmetic `state.requests`'; the text checks that make
hostile input a located error (issues 11 and 15) `state.textchecks`'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import lru_cache
from typing import Any

from provisioner.api import accelerators, quantities
from provisioner.api import labels as wk
from provisioner.api.quantities import ResourceList
from provisioner.state import textchecks
from provisioner.state.requests import pod_requests
from provisioner.state.terms import PREFER_NO_SCHEDULE as PREFER_NO_SCHEDULE
from provisioner.state.terms import HostPort as HostPort
from provisioner.state.terms import LabelSelector as LabelSelector
from provisioner.state.terms import PodAffinityTerm as PodAffinityTerm
from provisioner.state.terms import PreferredNodeTerm as PreferredNodeTerm
from provisioner.state.terms import SelectorRequirement as SelectorRequirement
from provisioner.state.terms import TaintValue as TaintValue
from provisioner.state.terms import Toleration as Toleration
from provisioner.state.terms import TopologySpread as TopologySpread
from provisioner.state.terms import host_ports as host_ports
from provisioner.state.terms import tolerates_all as tolerates_all


def _parse_time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    if type(value) is str:
        return _time_of(value)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


@lru_cache(maxsize=1024)
def _time_of(text: str) -> datetime:
    """A timestamp's datetime, remembered: the pods written in one moment share its text, and so one
    (immutable) datetime rather than one each. A bad text raises every time (errors are not cached)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _own(mapping: Any) -> dict[Any, Any]:
    """A JSON map to keep: the document's own dict, shared (a stored document is never changed in place),
    else a dict made of it as before (None or empty: a new empty one)."""
    return mapping if type(mapping) is dict else dict(mapping or {})


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    """A pod as the decision code sees it. Identity is `key` (namespace/name)."""

    namespace: str
    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_name: str | None = None
    phase: str = "Pending"
    priority: int = 0
    requests: ResourceList = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_node_terms: tuple[tuple[SelectorRequirement, ...], ...] = ()
    """Required node affinity: OR of terms, each an AND of requirements. Empty: no constraint."""
    preferred_node_terms: tuple[PreferredNodeTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread: tuple[TopologySpread, ...] = ()
    affinity_required: tuple[PodAffinityTerm, ...] = ()
    affinity_preferred: tuple[PodAffinityTerm, ...] = ()
    anti_affinity_required: tuple[PodAffinityTerm, ...] = ()
    anti_affinity_preferred: tuple[PodAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    owner_kind: str | None = None
    owner_name: str | None = None
    unschedulable: bool = False
    """PodScheduled=False with reason Unschedulable: the signal that provisioning is needed."""
    deleting: bool = False
    created: datetime | None = None
    scheduling_gates: tuple[str, ...] = ()
    """Names in `spec.schedulingGates`: kube-scheduler binds the pod only once none is left."""
    started: datetime | None = None
    """`status.startTime`: when the kubelet accepted the pod (a do-not-disrupt duration counts from it)."""
    invalid: str = ""
    """Why the pod cannot be scheduled as written (malformed or negative requests), empty when it can.
    Such a pod is refused with this reason; its unusable amounts are left out of `requests`."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    is_terminal: bool = field(init=False, repr=False, compare=False)
    """Phase Succeeded or Failed."""
    is_daemonset_pod: bool = field(init=False, repr=False, compare=False)
    """Owned by a DaemonSet."""
    nodepools: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The pod's ordered pool list (annotation `provisioner.sh/nodepools`), empty if none."""
    gated: bool = field(init=False, repr=False, compare=False)
    """Waiting for admission (our scheduling gate is on it)."""
    _key: str | None = field(default=None, init=False, repr=False, compare=False)
    """`key`, made on first use and shared with the pod's next versions: every index keyed by pod holds
    the one string, not one each."""

    @property
    def key(self) -> str:
        key = self._key
        if key is None:
            key = f"{self.namespace}/{self.name}"
            object.__setattr__(self, "_key", key)
        return key

    @property
    def preemptible(self) -> bool:
        """Labelled `provisioner.sh/preemptible: "true"`: may run over its team's quota."""
        return self.labels.get(wk.PREEMPTIBLE, "").lower() == "true"

    def conditions_with(self, condition: dict[str, Any]) -> list[dict[str, Any]]:
        """The pod's status conditions with `condition` in place of the one of its type: a merge patch
        replaces the list whole, so a writer of one condition must send the others back. The conditions
        are the document's own (and `condition` itself), shared, not copied: documents are never changed
        in place, and a condition written to many pods is then kept once."""
        current = (self.raw.get("status") or {}).get("conditions") or ()
        return [c for c in current if c.get("type") != condition["type"]] + [condition]

    def unbound(self) -> Pod:
        """This pod with no node (`node_name` None), every other field the same objects: what a re-solve
        places again. A copy of the slots, not `dataclasses.replace`, which parses nothing but runs
        `__init__` and `__post_init__` again (a disruption plan unbinds every pod it re-solves)."""
        copy = object.__new__(Pod)
        put = object.__setattr__
        for name in _POD_SLOTS:
            put(copy, name, getattr(self, name))
        put(copy, "node_name", None)
        return copy

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pod) and other.key == self.key

    def __post_init__(self) -> None:
        # Read in the solver's and the planner's innermost loops (millions of times a large run): plain
        # attributes, worked out once, not properties.
        put = object.__setattr__
        put(self, "is_terminal", self.phase in ("Succeeded", "Failed"))
        put(self, "is_daemonset_pod", self.owner_kind == "DaemonSet")
        put(self, "gated", wk.ADMISSION_GATE in self.scheduling_gates)
        text = self.annotations.get(wk.NODEPOOLS) if self.annotations else None
        # Not text: the pod is refused by its checks (`textchecks`), which name the field.
        put(
            self,
            "nodepools",
            tuple(p.strip() for p in text.split(",") if p.strip()) if isinstance(text, str) else (),
        )

    @property
    def gpus(self) -> int:
        """Whole GPUs' worth of accelerators it asks for, any maker, a MIG slice counting as part of one
        (`accelerators.gpus`)."""
        return accelerators.gpus(self.requests)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, like: Iterable[Pod] = ()) -> Pod:
        """Parse and check a pod's JSON. `like`: pods parsed before (this pod's last version, a pod of
        the same template) whose parts are taken instead of parsed again where `d` holds the very same
        objects: the spec (all of it but `nodeName`), and the metadata mapping. A stored document is never
        changed in place (the ClusterState's contract), so the same objects parse the same; a pod given
        again as its own document is parsed in full, in case it was."""
        meta = d.get("metadata") or {}
        spec = d.get("spec") or {}
        status = d.get("status") or {}
        spec_from = meta_from = None
        for other in like:
            if other.raw is d:
                continue
            if spec_from is None and _same_spec(spec, other.raw.get("spec")):
                spec_from = other
            if meta_from is None and other.raw.get("metadata") is meta:
                meta_from = other
        if spec_from is not None:
            return cls._with_spec_of(spec_from, d, meta=meta, spec=spec, status=status, meta_from=meta_from)
        affinity = spec.get("affinity") or {}
        node_aff = affinity.get("nodeAffinity") or {}
        required = (node_aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms"
        ) or ()
        preferred = node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        pod_aff = affinity.get("podAffinity") or {}
        pod_anti = affinity.get("podAntiAffinity") or {}
        owner = _owner(meta)
        problems: list[str] = []
        requests = pod_requests(spec, problems)
        unschedulable = _unschedulable(status)
        pod = cls(
            namespace=meta.get("namespace") or "default",
            name=meta["name"],
            uid=meta.get("uid") or "",
            labels=_own(meta.get("labels")),
            annotations=_own(meta.get("annotations")),
            node_name=spec.get("nodeName"),
            phase=status.get("phase") or "Pending",
            priority=int(spec.get("priority") or 0),
            requests=requests,
            # A null value is the empty string, as the API server decodes it into a map of strings.
            node_selector={k: "" if v is None else v for k, v in (spec.get("nodeSelector") or {}).items()},
            required_node_terms=tuple(
                tuple(SelectorRequirement.from_dict(e) for e in term.get("matchExpressions") or ())
                for term in required
            ),
            preferred_node_terms=tuple(
                PreferredNodeTerm(
                    weight=int(p.get("weight", 1)),
                    requirements=tuple(
                        SelectorRequirement.from_dict(e)
                        for e in (p.get("preference") or {}).get("matchExpressions") or ()
                    ),
                )
                for p in preferred
            ),
            tolerations=tuple(Toleration.from_dict(t) for t in spec.get("tolerations") or ()),
            topology_spread=tuple(
                TopologySpread.from_dict(t) for t in spec.get("topologySpreadConstraints") or ()
            ),
            affinity_required=tuple(
                PodAffinityTerm.from_dict(t)
                for t in pod_aff.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
            ),
            affinity_preferred=tuple(
                PodAffinityTerm.from_dict(t["podAffinityTerm"], int(t.get("weight", 1)))
                for t in pod_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
            ),
            anti_affinity_required=tuple(
                PodAffinityTerm.from_dict(t)
                for t in pod_anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
            ),
            anti_affinity_preferred=tuple(
                PodAffinityTerm.from_dict(t["podAffinityTerm"], int(t.get("weight", 1)))
                for t in pod_anti.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
            ),
            host_ports=host_ports(spec),
            owner_kind=owner.get("kind") if owner else None,
            owner_name=owner.get("name") if owner else None,
            unschedulable=unschedulable,
            deleting=meta.get("deletionTimestamp") is not None,
            created=_parse_time(meta.get("creationTimestamp")),
            scheduling_gates=tuple(
                str(g.get("name")) for g in spec.get("schedulingGates") or () if isinstance(g, Mapping)
            ),
            started=_parse_time(status.get("startTime")),
            invalid="; ".join(problems),
            raw=d,
        )
        textchecks.check_pod(pod)
        return pod

    @classmethod
    def _with_spec_of(
        cls,
        spec_from: Pod,
        d: Mapping[str, Any],
        *,
        meta: Mapping[str, Any],
        spec: Mapping[str, Any],
        status: Mapping[str, Any],
        meta_from: Pod | None,
    ) -> Pod:
        """`from_dict` taking the spec's parse from `spec_from` (and the metadata's from `meta_from`):
        the rest is read in `from_dict`'s order, so a bad field is named as a full parse names it (the
        parts taken passed that parse before)."""
        owner = _owner(meta) if meta_from is None else None
        unschedulable = _unschedulable(status)
        labels: Mapping[str, str]
        annotations: Mapping[str, str]
        if meta_from is None:
            namespace = meta.get("namespace") or "default"
            name = meta["name"]
            uid = meta.get("uid") or ""
            labels = _own(meta.get("labels"))
            annotations = _own(meta.get("annotations"))
        else:
            namespace, name, uid = meta_from.namespace, meta_from.name, meta_from.uid
            labels, annotations = meta_from.labels, meta_from.annotations
        node_name = spec.get("nodeName")
        phase = status.get("phase") or "Pending"
        if meta_from is None:
            owner_kind = owner.get("kind") if owner else None
            owner_name = owner.get("name") if owner else None
            deleting = meta.get("deletionTimestamp") is not None
            created = _parse_time(meta.get("creationTimestamp"))
        else:
            owner_kind, owner_name = meta_from.owner_kind, meta_from.owner_name
            deleting, created = meta_from.deleting, meta_from.created
        s = spec_from
        pod = cls(
            namespace=namespace,
            name=name,
            uid=uid,
            labels=labels,
            annotations=annotations,
            node_name=node_name,
            phase=phase,
            priority=s.priority,
            requests=s.requests,
            node_selector=s.node_selector,
            required_node_terms=s.required_node_terms,
            preferred_node_terms=s.preferred_node_terms,
            tolerations=s.tolerations,
            topology_spread=s.topology_spread,
            affinity_required=s.affinity_required,
            affinity_preferred=s.affinity_preferred,
            anti_affinity_required=s.anti_affinity_required,
            anti_affinity_preferred=s.anti_affinity_preferred,
            host_ports=s.host_ports,
            owner_kind=owner_kind,
            owner_name=owner_name,
            unschedulable=unschedulable,
            deleting=deleting,
            created=created,
            scheduling_gates=s.scheduling_gates,
            started=_parse_time(status.get("startTime")),
            invalid=s.invalid,
            raw=d,
        )
        if meta_from is not None:
            object.__setattr__(pod, "_key", meta_from.key)
        textchecks.check_pod(pod, metadata=meta_from is None, spec=False)
        return pod


_POD_SLOTS: tuple[str, ...] = tuple(f.name for f in fields(Pod))
"""Every field of a Pod, those `__post_init__` works out included (`Pod.unbound` copies them all)."""


def _owner(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller owner reference, else the first one."""
    owners = meta.get("ownerReferences") or ()
    return next((o for o in owners if o.get("controller")), owners[0] if owners else None)


def _unschedulable(status: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or ()
    )


_NO_KEY = object()


def _same_spec(spec: Any, other: Any) -> bool:
    """Whether two pod specs hold the very same objects under every key but `nodeName` (a merge patch
    that binds a pod copies the spec's top level and shares the rest)."""
    if type(spec) is not dict or type(other) is not dict:
        return False
    if spec is other:
        return True
    count = 0
    for key, value in spec.items():
        if key != "nodeName":
            if other.get(key, _NO_KEY) is not value:
                return False
            count += 1
    return count == len(other) - ("nodeName" in other)


def spec_key(spec: Any) -> tuple[tuple[str, int], ...] | None:
    """A pod spec's objects (key and identity, `nodeName` left out), to find an earlier pod parsed from
    the same ones: valid while that pod (which keeps them alive) is held. None for a spec that is not a
    dict."""
    if type(spec) is not dict:
        return None
    return tuple([(k, id(v)) for k, v in spec.items() if k != "nodeName"])


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """A Kubernetes Node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[TaintValue, ...] = ()
    capacity: ResourceList = field(default_factory=dict)
    allocatable: ResourceList = field(default_factory=dict)
    provider_id: str | None = None
    unschedulable: bool = False
    """Cordoned (`spec.unschedulable`)."""
    conditions: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Condition type -> (status, reason)."""
    created: datetime | None = None
    deleting: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and other.name == self.name

    @property
    def ready(self) -> bool:
        return self.conditions.get("Ready", ("Unknown", ""))[0] == "True"

    @property
    def nodepool(self) -> str | None:
        return self.labels.get(wk.NODEPOOL)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Node:
        meta = d.get("metadata") or {}
        spec = d.get("spec") or {}
        status = d.get("status") or {}
        node = cls(
            name=meta["name"],
            labels=_own(meta.get("labels")),
            annotations=_own(meta.get("annotations")),
            taints=tuple(TaintValue.from_dict(t) for t in spec.get("taints") or ()),
            capacity=quantities.parse_resource_list(status.get("capacity")),
            allocatable=quantities.parse_resource_list(status.get("allocatable") or status.get("capacity")),
            provider_id=spec.get("providerID"),
            unschedulable=bool(spec.get("unschedulable")),
            conditions={
                c["type"]: (c.get("status", "Unknown"), c.get("reason", ""))
                for c in status.get("conditions") or ()
            },
            created=_parse_time(meta.get("creationTimestamp")),
            deleting=meta.get("deletionTimestamp") is not None,
            raw=d,
        )
        textchecks.check_node(node)
        return node


@dataclass(frozen=True, slots=True)
class DaemonSet:
    """A DaemonSet: its pod template decides on which nodes it runs and what it takes from each."""

    namespace: str
    name: str
    pod: Pod
    """The template as a pod (requests, tolerations, node selector and affinity)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DaemonSet:
        meta = d.get("metadata") or {}
        template = (d.get("spec") or {}).get("template") or {}
        pod_doc = {
            "metadata": {
                **(template.get("metadata") or {}),
                "name": meta["name"],
                "namespace": meta.get("namespace"),
            },
            "spec": template.get("spec") or {},
        }
        pod_doc["metadata"]["ownerReferences"] = [
            {"kind": "DaemonSet", "name": meta["name"], "controller": True}
        ]
        return cls(
            namespace=meta.get("namespace") or "default", name=meta["name"], pod=Pod.from_dict(pod_doc)
        )


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None
    min_available: str | None = None
    max_unavailable: str | None = None
    disruptions_allowed: int | None = None
    """From status, when the API server computed it; None in manifests (computed by the caller)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PodDisruptionBudget:
        meta = d.get("metadata") or {}
        spec = d.get("spec") or {}
        status = d.get("status") or {}

        def text(v: Any) -> str | None:
            return None if v is None else str(v)

        return cls(
            namespace=meta.get("namespace") or "default",
            name=meta["name"],
            selector=LabelSelector.from_dict(spec.get("selector")),
            min_available=text(spec.get("minAvailable")),
            max_unavailable=text(spec.get("maxUnavailable")),
            disruptions_allowed=status.get("disruptionsAllowed"),
        )

    def matches(self, pod: Pod) -> bool:
        return (
            pod.namespace == self.namespace
            and self.selector is not None
            and self.selector.matches(pod.labels)
        )
