"""EC2 instance type shapes: from a DescribeInstanceTypes entry to an `InstanceType` without offerings.

Owns the reading of EC2's shape fields: GPUs (EC2's `H100`, `A10G`... to the lowercase labels every cloud
shares, memory per GPU in MiB) and Neuron devices (NeuronInfo, with their cores), the pod limit (the VPC
CNI's ENI formula, capped as EKS recommends) and the architecture. Capacity, labels and overhead come from
the catalog's shared constructor so AWS types look like every other cloud's to the scheduler. Offerings
and prices are added by the provider; nothing here performs I/O.
"""

from __future__ import annotations

from typing import Any

from provisioner.cloudprovider import GPU, InstanceType, catalog

GIB = 2**30

ROOT_VOLUME_GIB = 20
"""Root volume assumed for ephemeral-storage (the EKS AMIs' 20 GiB)."""

ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}
"""EC2 architectures to `kubernetes.io/arch`; others (i386, x86_64_mac) cannot be Linux nodes here."""


def gpu_of(info: dict[str, Any]) -> GPU | None:
    """The accelerators of a DescribeInstanceTypes entry: the first GPU model listed (GpuInfo), its count,
    memory per GPU; else its Neuron devices (NeuronInfo: Trainium, Inferentia) with their cores."""
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if not gpus:
        return neuron_of(info)
    first, count = _first_model(gpus)
    if count <= 0:
        return None
    return GPU(
        name=catalog.gpu_label_name(str(first.get("Name", ""))),
        count=count,
        memory_mib=int((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        manufacturer=str(first.get("Manufacturer", "nvidia")).lower(),
    )


def _first_model(devices: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """The first device model listed and how many devices of that model the type has."""
    first = devices[0]
    return first, sum(int(d.get("Count", 0)) for d in devices if d.get("Name") == first.get("Name"))


def neuron_of(info: dict[str, Any]) -> GPU | None:
    """The Neuron devices of a DescribeInstanceTypes entry (`aws.amazon.com/neuron` and, per core,
    `aws.amazon.com/neuroncore`), or None."""
    devices = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if not devices:
        return None
    first, count = _first_model(devices)
    if count <= 0:
        return None
    return GPU(
        name=catalog.gpu_label_name(str(first.get("Name", ""))),
        count=count,
        memory_mib=int((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        manufacturer="aws",
        cores=int((first.get("CoreInfo") or {}).get("Count", 0)),
    )


def max_pods(info: dict[str, Any], *, vcpu: int) -> int:
    """Pods the node may run: ENIs * (IPv4 addresses per ENI - 1) + 2, the VPC CNI's limit, capped at
    110 below 30 vCPU and 250 above, as the EKS max-pods calculator recommends."""
    network = info.get("NetworkInfo") or {}
    enis = int(network.get("MaximumNetworkInterfaces") or 0)
    ips = int(network.get("Ipv4AddressesPerInterface") or 0)
    cap = 110 if vcpu < 30 else 250
    if enis <= 0 or ips <= 1:
        return cap
    return min(enis * (ips - 1) + 2, cap)


def architecture(info: dict[str, Any]) -> str | None:
    """The Kubernetes arch of the type, or None when it cannot be a Linux node."""
    for arch in (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []:
        if arch in ARCHITECTURES:
            return ARCHITECTURES[arch]
    return None


def from_description(info: dict[str, Any], *, region: str) -> InstanceType | None:
    """The shape of one DescribeInstanceTypes entry (no offerings), or None when it cannot be a node."""
    name = info.get("InstanceType")
    arch = architecture(info)
    if not name or arch is None:
        return None
    vcpu = int((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 0)
    memory_mib = int((info.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
    if vcpu <= 0 or memory_mib <= 0:
        return None
    return catalog.make_instance_type(
        name=str(name),
        vcpu=vcpu,
        memory_mib=memory_mib,
        max_pods=max_pods(info, vcpu=vcpu),
        offerings=(),
        region=region,
        arch=arch,
        gpu=gpu_of(info),
        ephemeral_storage=ROOT_VOLUME_GIB * GIB,
        overhead_formula="eks",
    )
