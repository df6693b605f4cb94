"""Builders for what the scheduler chooses between: instance types and their offerings (`cpu_types()`,
`gpu_types()`), NodePools and their manifests, AWSNodeClasses, and requirement entries (`req`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from providers.aws.model import AWSNodeClass
from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.cloudprovider.types import GPU, InstanceType, Offering, instance_labels
from provisioner.scheduling.shards import shard_of
from testkit.builders.common import GIB, MIB, ZONES


def offerings(
    *,
    od_price: float,
    spot_price: float | None = None,
    zones: Sequence[str] = ZONES,
    unavailable: Iterable[tuple[str, str]] = (),
) -> tuple[Offering, ...]:
    """Spot (if priced) and on-demand in each zone; `unavailable` lists (zone, capacity type) stockouts."""
    gone = set(unavailable)
    out: list[Offering] = []
    for z in zones:
        if spot_price is not None:
            out.append(Offering(z, wk.CAPACITY_TYPE_SPOT, spot_price, (z, wk.CAPACITY_TYPE_SPOT) not in gone))
        out.append(
            Offering(z, wk.CAPACITY_TYPE_ON_DEMAND, od_price, (z, wk.CAPACITY_TYPE_ON_DEMAND) not in gone)
        )
    return tuple(out)


def instance_type(
    name: str = "m.large",
    *,
    cpu: int = 4,
    memory_gib: int = 16,
    pods: int = 110,
    gpus: int = 0,
    gpu_name: str = "a100",
    gpu_memory_mib: int = 40960,
    price: float | None = None,
    spot_price: float | None = None,
    zones: Sequence[str] = ZONES,
    unavailable: Iterable[tuple[str, str]] = (),
    overhead_cpu_m: int = 100,
    overhead_memory_mib: int = 100,
    offers: tuple[Offering, ...] | None = None,
    extra: Mapping[str, int] | None = None,
) -> InstanceType:
    gpu = GPU(gpu_name, gpus, gpu_memory_mib) if gpus else None
    capacity = {"cpu": cpu * 1000, "memory": memory_gib * GIB, "pods": pods}
    if gpus:
        capacity[wk.GPU_RESOURCE] = gpus
    capacity.update(extra or {})
    od = price if price is not None else 0.05 * cpu + 0.005 * memory_gib + 2.0 * gpus
    return InstanceType(
        name=name,
        capacity=capacity,
        overhead={"cpu": overhead_cpu_m, "memory": overhead_memory_mib * MIB},
        offerings=offers
        if offers is not None
        else offerings(od_price=od, spot_price=spot_price, zones=zones, unavailable=unavailable),
        labels=instance_labels(name=name, vcpu=cpu, memory_mib=memory_gib * 1024, gpu=gpu),
        gpu=gpu,
    )


def cpu_types() -> list[InstanceType]:
    return [
        instance_type("m.large", cpu=2, memory_gib=8, spot_price=0.04),
        instance_type("m.xlarge", cpu=4, memory_gib=16, spot_price=0.08),
        instance_type("m.2xlarge", cpu=8, memory_gib=32, spot_price=0.16),
        instance_type("m.4xlarge", cpu=16, memory_gib=64, spot_price=0.32),
    ]


def gpu_types() -> list[InstanceType]:
    return [
        instance_type("g.l4x1", cpu=8, memory_gib=32, gpus=1, gpu_name="l4", gpu_memory_mib=24576, price=0.8),
        instance_type(
            "g.l4x4", cpu=48, memory_gib=192, gpus=4, gpu_name="l4", gpu_memory_mib=24576, price=4.6
        ),
        instance_type("p.a100x8", cpu=96, memory_gib=1152, gpus=8, gpu_name="a100", price=32.0),
        instance_type(
            "p.h100x8", cpu=192, memory_gib=2048, gpus=8, gpu_name="h100", gpu_memory_mib=81920, price=55.0
        ),
    ]


def node_pool_manifest(
    name: str = "default",
    *,
    weight: int | None = None,
    requirements: Sequence[Mapping[str, Any]] = (),
    taints: Sequence[Mapping[str, Any]] = (),
    startup_taints: Sequence[Mapping[str, Any]] = (),
    limits: Mapping[str, str | int] | None = None,
    labels: Mapping[str, str] | None = None,
    expire_after: str | None = None,
    termination_grace_period: str | None = None,
    disruption: Mapping[str, Any] | None = None,
    node_class_ref: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A NodePool as the API holds it; `node_class_ref` default: AWSNodeClass `default`."""
    template_spec: dict[str, Any] = {
        "nodeClassRef": dict(node_class_ref or {"kind": "AWSNodeClass", "name": "default"}),
        "requirements": [dict(r) for r in requirements],
        "taints": [dict(t) for t in taints],
        "startupTaints": [dict(t) for t in startup_taints],
    }
    if expire_after is not None:
        template_spec["expireAfter"] = expire_after
    if termination_grace_period is not None:
        template_spec["terminationGracePeriod"] = termination_grace_period
    spec: dict[str, Any] = {"template": {"metadata": {"labels": dict(labels or {})}, "spec": template_spec}}
    if disruption is not None:
        spec["disruption"] = dict(disruption)
    if limits:
        spec["limits"] = dict(limits)
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "provisioner.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def node_pool(name: str = "default", **kw: Any) -> NodePool:
    """`node_pool_manifest` as the model."""
    return NodePool.model_validate(node_pool_manifest(name, **kw))


def aws_node_class_manifest(name: str = "default", **spec: Any) -> dict[str, Any]:
    """An AWSNodeClass selecting subnets and security groups by a discovery tag; `spec` overrides spec
    fields (camelCase). Any NodeClass will do for the fake cloud, which serves the AWS catalog."""
    fields: dict[str, Any] = {
        "subnetSelectorTerms": [{"tags": {"provisioner.sh/discovery": "sim"}}],
        "securityGroupSelectorTerms": [{"tags": {"provisioner.sh/discovery": "sim"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "provisioner-node",
    }
    fields.update(spec)
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "AWSNodeClass",
        "metadata": {"name": name},
        "spec": fields,
    }


def aws_node_class(name: str = "default", **spec: Any) -> AWSNodeClass:
    return AWSNodeClass.model_validate(aws_node_class_manifest(name, **spec))


def req(key: str, operator: str, *values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = [str(v) for v in values]
    return out


def pools_in_distinct_shards(n: int, shards: int) -> list[str]:
    """`n` pool names (`pool-<i>`, first found first), each in a shard of its own among `shards`."""
    out: list[str] = []
    for i in range(1000):
        name = f"pool-{i}"
        if shard_of(name, shards) not in {shard_of(p, shards) for p in out}:
            out.append(name)
        if len(out) == n:
            return out
    raise AssertionError(f"no {n} pools in distinct shards of {shards}")
