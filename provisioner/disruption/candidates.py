"""Which nodes the planner may touch, and facts about each one it reads.

A candidate is a node we own (it has a NodeClaim), initialized, not being deleted, in a pool that still
exists, with
- no do-not-disrupt annotation on itself, and none in force on any of its pods: on a pod the annotation
  is `true` (for ever) or a duration such as `2h` (counted from the pod's start, as Karpenter); any other
  value is ignored, and reported by `do_not_disrupt_problem` for an Event;
- no DaemonSet pod held by a PDB;
- no pod on its way that can land on it (capacity launched for pods not bound yet: pending pods, and the
  pods of nodes already being disrupted).
Whether its other pods are evictable under their PDBs is checked per command (evictions add up across
the nodes of one plan). The rules are here; `facts.candidate_blocker` applies them to a node's facts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

from provisioner.api import NodePool, accelerators, durations, quantities
from provisioner.api import labels as wk
from provisioner.api.common import ConditionStatus, condition, is_true
from provisioner.api.nodeclaim import DISRUPTING, EMPTY, INITIALIZED
from provisioner.disruption.model import BlockerKind
from provisioner.disruption.plan_time import PlanTime, aware
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Pod, tolerates_all


def reschedulable(node: StateNode) -> list[Pod]:
    """The pods that must find a new home when the node goes: not DaemonSet or static (Node-owned) pods,
    not finished ones, and not terminating ones, except a StatefulSet's, whose replacement is made only once
    it is gone (Karpenter's `IsReschedulable`)."""
    return [
        p
        for p in node.pods
        if not p.is_daemonset_pod
        and not p.is_terminal
        and p.owner_kind != "Node"
        and (not p.deleting or p.owner_kind == "StatefulSet")
    ]


def do_not_disrupt_problem(pod: Pod) -> str | None:
    """Why the pod's do-not-disrupt annotation is ignored, or None when it is absent or valid."""
    value = pod.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or value.lower() == "true":
        return None
    try:
        lasts = durations.parse_duration(value, allow_never=False)
    except durations.DurationError:
        lasts = None
    if lasts is None or lasts <= timedelta(0):
        return (
            f"{wk.DO_NOT_DISRUPT}={value!r} is neither 'true' nor a positive duration such as 30m or 2h; "
            "it is ignored"
        )
    return None


def do_not_disrupt_until(pod: Pod) -> datetime | None:
    """When a duration annotation lapses; None when it is `true`, invalid, absent, or the start unknown."""
    value = pod.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or value.lower() == "true" or do_not_disrupt_problem(pod) is not None:
        return None
    start = aware(pod.started)
    lasts = durations.parse_duration(value, allow_never=False)
    return None if start is None or lasts is None else start + lasts


def do_not_disrupt(pod: Pod, now: datetime | PlanTime) -> bool:
    """Whether the pod's annotation protects it now: `true`, or a duration not yet lapsed (a pod whose
    start is not known yet is protected, to be safe). Only an active pod is: not a finished or terminating
    one (Karpenter's `IsDisruptable`)."""
    value = pod.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or pod.is_terminal or pod.deleting or do_not_disrupt_problem(pod) is not None:
        return False
    if value.lower() == "true" or pod.started is None:
        return True
    until = do_not_disrupt_until(pod)
    clock = now if isinstance(now, PlanTime) else PlanTime(now)
    return until is not None and not clock.reached(until)


def node_annotations(node: StateNode) -> dict[str, str]:
    out: dict[str, str] = {}
    if node.claim is not None:
        out.update(node.claim.metadata.annotations)
    if node.node is not None:
        out.update(node.node.annotations)
    return out


def disrupting(node: StateNode) -> bool:
    """Already being disrupted: deleting, tainted disrupted, or its claim says Disrupting."""
    if node.deleting:
        return True
    if node.claim is not None and is_true(node.claim.status.conditions, DISRUPTING):
        return True
    return any(t.key == wk.DISRUPTED_TAINT for t in node.taints)


def awaited_by(node: StateNode, pending: Sequence[Pod]) -> Pod | None:
    """A pending pod that can land on the node now (room, taints, node selector and affinity, pool list):
    the capacity was most likely launched for it and it is not bound yet, so it must not go."""
    return next(landing(node, pending), None)


def landing(node: StateNode, pending: Sequence[Pod]) -> Iterator[Pod]:
    """The pending pods that can land on the node now, in their order (`awaited_by`)."""
    if node.node is None or node.cordoned:
        return
    free = node.available
    for pod in pending:
        if (
            pod.is_daemonset_pod
            or pod.deleting
            or pod.is_terminal
            or (pod.raw.get("spec") or {}).get("schedulingGates")
        ):
            continue
        if pod.nodepools and node.nodepool not in pod.nodepools:
            continue
        if not quantities.fits(pod.requests, free) or tolerates_all(pod.tolerations, node.taints) is not None:
            continue
        labels = node.labels
        if any(labels.get(k) != v for k, v in pod.node_selector.items()):
            continue
        if pod.required_node_terms and not any(
            all(r.matches(labels) for r in term) for term in pod.required_node_terms
        ):
            continue
        yield pod


def not_initialized(node: StateNode) -> bool:
    """A node or claim of ours still starting: pods a command moves must not count on it (Karpenter's
    "would schedule against uninitialized nodeclaim"). A node no pool owns is settled once it exists."""
    return node.claim is not None and (node.node is None or not node.initialized)


def own_blocker(node: StateNode) -> tuple[BlockerKind, str] | None:
    """What keeps the node whatever the rest of the cluster and the time: not initialized, or annotated
    do-not-disrupt itself."""
    if node.claim is None or node.node is None or not is_true(node.claim.status.conditions, INITIALIZED):
        return BlockerKind.NOT_INITIALIZED, "the node is not initialized yet"
    if node_annotations(node).get(wk.DO_NOT_DISRUPT, "").lower() == "true":
        return BlockerKind.DO_NOT_DISRUPT_NODE, f"node annotation {wk.DO_NOT_DISRUPT}=true"
    return None


def instance_type(node: StateNode) -> str:
    if node.claim is not None and node.claim.status.instance_type:
        return node.claim.status.instance_type
    return node.labels.get(wk.INSTANCE_TYPE, "")


def capacity_type(node: StateNode) -> str:
    if node.claim is not None and node.claim.status.capacity_type:
        return node.claim.status.capacity_type
    return node.labels.get(wk.CAPACITY_TYPE, "")


def zone(node: StateNode) -> str:
    if node.claim is not None and node.claim.status.zone:
        return node.claim.status.zone
    return node.labels.get(wk.ZONE, "")


def created(node: StateNode) -> datetime | None:
    if node.claim is not None and node.claim.metadata.creation_timestamp is not None:
        return aware(node.claim.metadata.creation_timestamp)
    return aware(node.node.created) if node.node is not None else None


def last_pod_event(node: StateNode) -> datetime | None:
    """When a pod last arrived on or left the node (falls back to when it was initialized or created)."""
    if node.claim is not None:
        if node.claim.status.last_pod_event_time:
            return aware(datetime.fromisoformat(node.claim.status.last_pod_event_time.replace("Z", "+00:00")))
        init = condition(node.claim.status.conditions, INITIALIZED)
        if init is not None and init.last_transition_time is not None:
            return aware(init.last_transition_time)
    return created(node)


def empty_since(node: StateNode) -> datetime | None:
    """When the node became empty: its claim's Empty condition, else its last pod event."""
    if node.claim is not None:
        cond = condition(node.claim.status.conditions, EMPTY)
        if cond is not None and cond.status == ConditionStatus.TRUE and cond.last_transition_time is not None:
            return aware(cond.last_transition_time)
    return last_pod_event(node)


def settled(since: datetime | None, pool: NodePool, clock: PlanTime) -> bool:
    """Whether `consolidateAfter` has passed since `since` (never with `Never`)."""
    wait = durations.parse_duration(pool.spec.disruption.consolidate_after)
    if wait is None:
        return False
    if since is None:
        return True
    return clock.reached(since + wait)


def is_gpu_node(node: StateNode) -> bool:
    return (
        accelerators.uses_accelerators(node.allocatable) or int(node.labels.get(wk.GPU_COUNT, "0") or 0) > 0
    )


def disruption_cost(node: StateNode) -> float:
    """Cheapest to disrupt first: fewer and lower-priority pods (Karpenter's ordering, without lifetime)."""
    cost = 0.0
    for pod in reschedulable(node):
        cost += 1.0 + max(-(2**25), min(pod.priority, 2**25)) / 2**25
    return cost
