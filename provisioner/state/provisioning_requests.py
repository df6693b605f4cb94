"""The pods a ProvisioningRequest books capacity for, as the scheduler sees them.

A request names PodTemplates and counts; its capacity is sized by solving pods made of those templates
(as Cluster Autoscaler does with its fake pods). They are one gang (a Kueue pod group of their own:
`kueue.x-k8s.io/pod-group-name: provisioningrequest.NAME`), placed whole or not at all, and marked with
the label `provisioner.sh/provisioning-request` so nothing mistakes them for pods of the cluster. Real pods
that consume the request (annotation `autoscaling.x-k8s.io/consume-provisioning-request` or Cluster
Autoscaler's older `cluster-autoscaler.kubernetes.io/...`) take their place one for one.

Pure: a request, the PodTemplates and the cluster's pods in, pods out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from provisioner.api import labels as wk
from provisioner.api.provisioning_request import CONSUME_ANNOTATIONS, ProvisioningRequest
from provisioner.state.objects import Pod

GROUP_PREFIX = "provisioningrequest."
"""The pod group name of a request's pods: `provisioningrequest.NAME`."""


def gang_name(request: ProvisioningRequest) -> str:
    """The gang the request's pods form (`namespace/provisioningrequest.NAME`), as `scheduling.gangs` names it."""
    return f"{request.namespace}/{GROUP_PREFIX}{request.name}"


def consumes(pod: Pod) -> str | None:
    """The request (name, in the pod's namespace) whose capacity the pod consumes, if any."""
    if not pod.annotations:
        return None
    for key in CONSUME_ANNOTATIONS:
        name = pod.annotations.get(key)
        if name:
            return name
    return None


def consumers(request: ProvisioningRequest, pods: Iterable[Pod]) -> list[Pod]:
    """The live pods consuming the request."""
    return [
        p
        for p in pods
        if p.namespace == request.namespace and not p.is_terminal and consumes(p) == request.name
    ]


def missing_templates(request: ProvisioningRequest, templates: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Names of the PodTemplates the request names that do not exist."""
    return [
        ps.pod_template_ref.name
        for ps in request.spec.pod_sets
        if f"{request.namespace}/{ps.pod_template_ref.name}" not in templates
    ]


def request_pods(
    request: ProvisioningRequest, templates: Mapping[str, Mapping[str, Any]], *, consumed: int = 0
) -> list[Pod]:
    """The pods the request still books capacity for: every pod of its pod sets, less `consumed` (real
    pods running on or waiting for the capacity), one gang. Pod sets whose template is missing are left
    out (`missing_templates` says which)."""
    total = request.total
    keep = max(0, total - consumed)
    group = f"{GROUP_PREFIX}{request.name}"
    out: list[Pod] = []
    for i, ps in enumerate(request.spec.pod_sets):
        template = templates.get(f"{request.namespace}/{ps.pod_template_ref.name}")
        if template is None:
            continue
        body = template.get("template") or {}
        meta = body.get("metadata") or {}
        labels = {
            **(meta.get("labels") or {}),
            wk.KUEUE_POD_GROUP_NAME: group,
            wk.PROVISIONING_REQUEST: request.name,
        }
        annotations = {
            k: v for k, v in (meta.get("annotations") or {}).items() if k not in CONSUME_ANNOTATIONS
        }
        # The gang is what is still booked: the consumers are pods of their own (group).
        annotations[wk.KUEUE_POD_GROUP_TOTAL_COUNT] = str(keep)
        for j in range(ps.count):
            if len(out) >= keep:
                return out
            out.append(
                Pod.from_dict(
                    {
                        "metadata": {
                            "name": f"{request.name}-{i}-{j}",
                            "namespace": request.namespace,
                            "labels": labels,
                            "annotations": annotations,
                        },
                        "spec": body.get("spec") or {},
                        "status": {
                            "phase": "Pending",
                            "conditions": [
                                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                            ],
                        },
                    }
                )
            )
    return out


def is_booking_pod(pod: Pod) -> bool:
    """One of the pods made for a request (not a pod of the cluster)."""
    return bool(pod.labels) and wk.PROVISIONING_REQUEST in pod.labels
