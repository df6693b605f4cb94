"""Network topology of EC2 instances as node labels: DescribeInstanceTopology's network nodes, top layer
first, as `topology.k8s.aws/network-node-layer-1..3` (the labels EKS gives nodes), so Kueue's
topology-aware scheduling and pod affinity can pack a gang under one spine.

EC2 answers only for the accelerated and HPC types (`supported`), and only once an instance runs; an
account without `ec2:DescribeInstanceTopology` gets no labels and a log line, never a failed read. The
provider keeps each answer (an instance does not move) and asks only for instances it has none for.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from providers.aws import errors
from providers.aws.sdk import SDK
from provisioner.cloudprovider import Instance

log = logging.getLogger("providers.aws")

LABELS = tuple(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3))
SUPPORTED_FAMILIES = frozenset(
    {
        "p3dn",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "p6-b200",
        "trn1",
        "trn1n",
        "trn2",
        "hpc6a",
        "hpc6id",
        "hpc7a",
        "hpc7g",
    }
)
"""Families DescribeInstanceTopology reports network nodes for."""
BATCH = 100
"""Instance ids per call (the API's limit)."""


def supported(instance_type: str) -> bool:
    return instance_type.split(".", 1)[0] in SUPPORTED_FAMILIES


def labels_of(network_nodes: Sequence[str]) -> dict[str, str]:
    """The node labels of an instance's network nodes (EC2 lists them top layer first)."""
    return {label: node for label, node in zip(LABELS, network_nodes, strict=False) if node}


def fetch(sdk: SDK, instance_ids: Sequence[str]) -> dict[str, dict[str, str]]:
    """Instance id -> its topology labels, for those EC2 reports on; {} when the call is refused."""
    out: dict[str, dict[str, str]] = {}
    for start in range(0, len(instance_ids), BATCH):
        batch = list(instance_ids[start : start + BATCH])
        try:
            answer = sdk.ec2.describe_instance_topology(InstanceIds=batch)
        except Exception as err:
            log.info(
                "no network topology for %d instances: %s",
                len(batch),
                errors.translate(err, operation="DescribeInstanceTopology"),
            )
            return out
        for item in answer.get("Instances") or []:
            labels = labels_of(item.get("NetworkNodes") or [])
            if labels and item.get("InstanceId"):
                out[str(item["InstanceId"])] = labels
    return out


class Known:
    """The topology labels EC2 reported, by instance id (an instance does not move)."""

    def __init__(self) -> None:
        self._labels: dict[str, dict[str, str]] = {}

    def labelled(self, sdk: SDK, instances: list[Instance]) -> list[Instance]:
        """The instances with their labels, asking EC2 only about running instances of supported types
        it has not answered for yet."""
        unknown = [
            iid
            for i in instances
            if i.state == "running" and supported(i.instance_type)
            for iid in [i.provider_id.rsplit("/", 1)[-1]]
            if iid not in self._labels
        ]
        if unknown:
            self._labels.update(fetch(sdk, unknown))
        out = []
        for i in instances:
            known = self._labels.get(i.provider_id.rsplit("/", 1)[-1])
            out.append(replace(i, labels={**i.labels, **known}) if known else i)
        return out
