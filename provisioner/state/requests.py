"""A pod's effective requests, as kube-scheduler counts them, parsed exactly from its spec: containers,
init containers and sidecars, pod-level `spec.resources`, overhead, and one `pods`. Malformed or negative
amounts, and extended resources (`nvidia.com/gpu`...) that are not whole numbers, are named, so a pod is
refused rather than half-counted. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioner.api import accelerators, quantities
from provisioner.api.quantities import ResourceList

_POD_LEVEL = frozenset({quantities.CPU, quantities.MEMORY})
"""Resources `spec.resources` may set for the whole pod (Kubernetes 1.32+), besides `hugepages-*`."""


def _pod_level(name: str) -> bool:
    return name in _POD_LEVEL or name.startswith("hugepages-")


def parse_amounts(amounts: Mapping[str, Any] | None, where: str, problems: list[str]) -> ResourceList:
    """Parse a resource list. An amount that is not a quantity, or is negative, is left out and named in
    `problems` (`where.name: ...`), so a pod is refused rather than half-counted."""
    out: ResourceList = {}
    for name, value in (amounts or {}).items():
        try:
            amount = quantities.to_base_units(name, value)
        except quantities.QuantityError as err:
            problems.append(f"{where}.{name}: {err}")
            continue
        if amount < 0:
            problems.append(f"{where}.{name}: {value!r} is negative; a request must be 0 or more")
            continue
        exact = quantities.parse_quantity(value) if accelerators.is_extended(name) else None
        # Not `% 1`: a Decimal past the context's precision (`1e40`) cannot be divided.
        if exact is not None and exact != exact.to_integral_value():
            # The API server refuses these at create: a device is never shared by fractions.
            problems.append(
                f"{where}.{name}: {value!r} is not a whole number; {name} is an extended resource, "
                "which Kubernetes allows only in whole units (use a MIG profile to share a GPU)"
            )
            continue
        out[name] = amount
    return out


def _parse_requests(resources: Mapping[str, Any] | None, where: str, problems: list[str]) -> ResourceList:
    """Requests of one `resources` block. A limit without a request means request = limit (Kubernetes
    defaulting, which a manifest lacks)."""
    res = resources or {}
    merged = parse_amounts(res.get("limits"), f"{where}.limits", problems)
    merged.update(parse_amounts(res.get("requests"), f"{where}.requests", problems))
    return merged


def pod_requests(spec: Mapping[str, Any], problems: list[str] | None = None) -> ResourceList:
    """Effective requests, as kube-scheduler counts them: max(sum of containers (+ restartable init
    sidecars), each init container); then pod-level `spec.resources` (cpu, memory, hugepages) replace
    that aggregate for the resources they name; then overhead, plus one `pods`.

    Amounts that cannot be used (malformed or negative) are reported in `problems` when given."""
    found: list[str] = [] if problems is None else problems
    total: ResourceList = {}
    for i, c in enumerate(spec.get("containers") or ()):
        total = quantities.add(
            total, _parse_requests(c.get("resources"), f"spec.containers[{i}].resources", found)
        )
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for i, c in enumerate(spec.get("initContainers") or ()):
        req = _parse_requests(c.get("resources"), f"spec.initContainers[{i}].resources", found)
        if c.get("restartPolicy") == "Always":
            sidecars = quantities.add(sidecars, req)
            continue
        # A plain init container runs beside the sidecars started before it.
        running = quantities.add(sidecars, req)
        for name, amount in running.items():
            init_peak[name] = max(init_peak.get(name, 0), amount)
    total = quantities.add(total, sidecars)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    pod_level = _parse_requests(spec.get("resources"), "spec.resources", found)
    for name, amount in pod_level.items():
        if _pod_level(name):
            total[name] = amount
        else:
            found.append(
                f"spec.resources.requests.{name}: pod-level resources may set only cpu, memory and hugepages"
            )
    total = quantities.add(total, parse_amounts(spec.get("overhead"), "spec.overhead", found))
    total[quantities.PODS] = total.get(quantities.PODS, 0) + 1
    return {k: v for k, v in total.items() if v}
