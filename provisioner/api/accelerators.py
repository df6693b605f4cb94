"""The one accelerator model: what a pod asks for and what a node or instance type offers, in
accelerators, across NVIDIA whole GPUs (`nvidia.com/gpu`), NVIDIA MIG slices (`nvidia.com/mig-<profile>`),
AMD GPUs (`amd.com/gpu`) and AWS Neuron (`aws.amazon.com/neuron` devices, `aws.amazon.com/neuroncore`
cores). The solver, quota, disruption, FinOps and the reports ask here, so "how many GPUs" has one answer.

Owns the resource names, which resources are Kubernetes extended resources (integers only), and the
counts: `devices` (whole accelerators), `slices` (MIG instances), `gpu_share` (GPUs' worth, a MIG slice
counting its compute fraction) and `uses_accelerators`. Other device resources a feature counts beside
GPUs (EFA interfaces for gangs: `vpc.amazonaws.com/efa`) are registered through `DEVICE_RESOURCES`'s hook
`register_device`. What a MIG layout turns GPUs into is `mig`'s. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from provisioner.api import mig

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
NEURON = "aws.amazon.com/neuron"
NEURONCORE = "aws.amazon.com/neuroncore"
MIG_PREFIX = mig.MIG_RESOURCE_PREFIX

WHOLE_DEVICES = (NVIDIA_GPU, AMD_GPU, NEURON)
"""Resources that are one whole accelerator each."""

MANUFACTURER_RESOURCE = {"nvidia": NVIDIA_GPU, "amd": AMD_GPU, "aws": NEURON}
"""A catalog's `gpu.manufacturer` -> the device plugin's resource for one device."""

DEVICE_RESOURCES: dict[str, str] = {}
"""Other device resources (name -> kind, e.g. `vpc.amazonaws.com/efa` -> `network`) a node must
advertise before it is initialized, counted per pod like accelerators are but not as GPUs. Filled
through `register_device`."""


def register_device(name: str, kind: str = "device") -> None:
    """The hook for other device resources (gangs register EFA here): they become integers-only like
    every extended resource, and `is_device` answers True for them."""
    DEVICE_RESOURCES[name] = kind


def is_extended(name: str) -> bool:
    """Kubernetes' extended resources: a domain-prefixed name outside `kubernetes.io` (and not a
    `requests.` quota name). Their requests must be whole numbers; the API server refuses others."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def is_mig(name: str) -> bool:
    return name.startswith(MIG_PREFIX)


def is_accelerator(name: str) -> bool:
    """A GPU, a MIG slice, a Neuron device or core."""
    return name in WHOLE_DEVICES or name == NEURONCORE or is_mig(name)


def is_device(name: str) -> bool:
    """An accelerator or a registered device resource: what a node's device plugins advertise."""
    return is_accelerator(name) or name in DEVICE_RESOURCES


def devices(resources: Mapping[str, int]) -> int:
    """Whole accelerators (NVIDIA and AMD GPUs, Neuron devices)."""
    # Asked of every pod and node in the binder's and the planner's loops: three lookups, no generator.
    get = resources.get
    return get(NVIDIA_GPU, 0) + get(AMD_GPU, 0) + get(NEURON, 0)


def slices(resources: Mapping[str, int]) -> int:
    """MIG instances, any profile."""
    total = 0
    for name, count in resources.items():
        if name.startswith(MIG_PREFIX):
            total += count
    return total


def mig_resources(resources: Mapping[str, int]) -> dict[str, int]:
    """Only the MIG resources, by name."""
    return {k: v for k, v in resources.items() if is_mig(k) and v}


def gpu_share(resources: Mapping[str, int]) -> Fraction:
    """GPUs' worth: whole devices, plus each MIG slice's compute fraction (a `1g.10gb` is 1/7 GPU, a
    `3g.40gb` 3/7), plus NeuronCores counted as devices of two cores (NeuronCore-v2)."""
    share = Fraction(devices(resources))
    for name, n in resources.items():
        if is_mig(name) and n:
            share += Fraction(n * mig.compute_slices(name), mig.COMPUTE_SLICES)
    cores = resources.get(NEURONCORE, 0)
    if cores and not resources.get(NEURON, 0):
        share += Fraction(cores, 2)
    return share


def gpus(resources: Mapping[str, int]) -> int:
    """Whole GPUs' worth, rounded up (a pod on one MIG slice holds part of one GPU: 1)."""
    if not resources.get(NEURONCORE) and not any(k.startswith(MIG_PREFIX) for k in resources):
        return devices(resources)  # the common case, without fractions (pool order asks it per pod)
    share = gpu_share(resources)
    return int(share) + (1 if share.denominator != 1 else 0)


def units(resources: Mapping[str, int]) -> int:
    """Accelerators as a workload sees them, one each: whole devices plus MIG instances (a MIG instance
    is one GPU to the pod using it, as the device plugin and Run:ai count it), plus NeuronCores asked
    without devices, two to a device. The unit FinOps and the reports count GPUs in: on a MIG node,
    GPU-hours are slice-hours and idle GPUs idle slices."""
    cores = resources.get(NEURONCORE, 0)
    extra = (cores + 1) // 2 if cores and not resources.get(NEURON, 0) else 0
    return devices(resources) + slices(resources) + extra


def uses_accelerators(resources: Mapping[str, int]) -> bool:
    """Asks for (or offers) any accelerator: a GPU, a slice, a Neuron device or core."""
    return any(v > 0 and is_accelerator(k) for k, v in resources.items())


def asked(resources: Mapping[str, int]) -> dict[str, int]:
    """The accelerator and device resources in a request or capacity, by name."""
    return {k: v for k, v in resources.items() if v and is_device(k)}


def describe(resources: Mapping[str, int]) -> str:
    """`8 nvidia.com/gpu`, `2 nvidia.com/mig-1g.10gb`: what a request asks in accelerators, for reasons."""
    return ", ".join(f"{v} {k}" for k, v in sorted(asked(resources).items())) or "no accelerators"


def device_resources(*, manufacturer: str, count: int, cores: int = 0) -> dict[str, int]:
    """What a node with `count` devices of this maker advertises: `nvidia.com/gpu: 8`; Neuron devices
    also advertise their cores (`aws.amazon.com/neuroncore: count * cores`)."""
    if count <= 0:
        return {}
    out = {MANUFACTURER_RESOURCE.get(manufacturer, NVIDIA_GPU): count}
    if manufacturer == "aws" and cores:
        out[NEURONCORE] = count * cores
    return out
