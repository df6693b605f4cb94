"""GPU node health as Run:ai shows it: why a GPU node cannot run GPU work, in the words an operator of
the NVIDIA GPU operator knows.

Reads a node's GPU feature discovery labels (`nvidia.com/gpu.present`, `nvidia.com/gpu.product`,
`nvidia.com/mig.config` and `nvidia.com/mig.config.state`), its allocatable accelerators against what its
instance type has (`provisioner.sh/gpu-count`, or the slices its MIG layout makes), and the GPU operator's
DaemonSet pods on it (the container toolkit, the DCGM exporter), when the operator runs in the cluster.
Returns reasons; `report nodes` shows them beside the kubelet's. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from provisioner.api import accelerators, mig
from provisioner.api import labels as wk
from provisioner.state.objects import DaemonSet
from provisioner.state.snapshot import StateNode

GPU_PRESENT = "nvidia.com/gpu.present"
GPU_PRODUCT = "nvidia.com/gpu.product"

TOOLKIT = "nvidia-container-toolkit-daemonset"
DCGM_EXPORTER = "nvidia-dcgm-exporter"
OPERATOR_DAEMONSETS = {
    TOOLKIT: "Missing Nvidia Container Toolkit",
    DCGM_EXPORTER: "Missing Nvidia DCGM Exporter",
}
"""The GPU operator's DaemonSets whose pod each NVIDIA GPU node needs, and Run:ai's words when it is not
running there."""


_PLUGIN = {"nvidia": "GPU", "amd": "AMD GPU", "aws": "Neuron"}
"""Whose device plugin a node of each maker waits for, in its reason."""


def operator_daemonsets(daemonsets: Iterable[DaemonSet]) -> frozenset[str]:
    """Which of the GPU operator's DaemonSets the cluster has (none: the operator is not installed, and
    nothing can be said about its pods)."""
    return frozenset(ds.name for ds in daemonsets if ds.name in OPERATOR_DAEMONSETS)


def expected_units(node: StateNode) -> int:
    """Accelerators the node should advertise (`accelerators.units`): its type's GPU count, or the slices
    its MIG layout makes of them."""
    labels = node.labels
    try:
        count = int(labels.get(wk.GPU_COUNT, "0") or 0)
        memory = int(labels.get(wk.GPU_MEMORY, "0") or 0)
    except ValueError:
        return 0
    layout = mig.layout_of(labels)
    if count > 0 and layout is not None and labels.get(wk.GPU_MANUFACTURER, "nvidia") == "nvidia":
        made = mig.layout_resources(
            gpu_name=labels.get(wk.GPU_NAME, ""), memory_mib=memory, gpu_count=count, layout=layout
        )
        if not isinstance(made, str):
            return accelerators.units(made)
    return count


def gpu_reasons(node: StateNode, operator: Sequence[str] | frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Why the GPU node is not fit for GPU work (empty: it is, or it has no GPUs). `operator`: the GPU
    operator's DaemonSets in the cluster (`operator_daemonsets`)."""
    if node.node is None:
        return ()
    expected = expected_units(node)
    if expected <= 0:
        return ()
    labels = node.labels
    nvidia = labels.get(wk.GPU_MANUFACTURER, "nvidia") == "nvidia"
    reasons: list[str] = []
    running = {p.owner_name for p in node.pods if p.is_daemonset_pod and p.phase == "Running"}
    if nvidia:
        for ds in sorted(operator):
            if ds not in running:
                reasons.append(OPERATOR_DAEMONSETS[ds])
        if operator and labels.get(GPU_PRESENT) not in (None, "true"):
            reasons.append(f"GPU feature discovery found no GPU ({GPU_PRESENT}={labels.get(GPU_PRESENT)})")
        product = labels.get(GPU_PRODUCT)
        name = labels.get(wk.GPU_NAME, "")
        if product and name and name not in product.lower():
            reasons.append(f"GPU product {product} is not the {name} its instance type has")
    layout = mig.layout_of(labels)
    state = labels.get(mig.MIG_STATE_LABEL, "")
    if layout is not None and state == "failed":
        reasons.append(f"MIG layout {layout} failed")
        return tuple(reasons)
    if layout is not None and state in ("", "pending", "rebooting"):
        reasons.append(f"MIG layout {layout} pending")
        return tuple(reasons)
    have = accelerators.units(node.node.allocatable)
    if have <= 0:
        maker = labels.get(wk.GPU_MANUFACTURER, "nvidia")
        reasons.append(f"{_PLUGIN.get(maker, 'GPU')} device plugin missing")
    elif have < expected:
        what = "MIG slices" if layout is not None else "GPUs"
        reasons.append(f"{what} fewer than the instance type has ({have} of {expected} allocatable)")
    return tuple(reasons)
