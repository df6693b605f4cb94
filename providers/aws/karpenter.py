"""Karpenter's AWS provider (`karpenter.k8s.aws`), as `provisioner templates import-karpenter` converts it:
a `karpenter.k8s.aws/v1` EC2NodeClass becomes an AWSNodeClass (`KARPENTER`, declared by the aws plug-in).

Field names already match; what cannot be carried over (kubelet settings, selectors and fields we lack,
AMI families we do not know, tags under the prefixes the controller sets) is dropped with a warning
naming the field. Also declares Karpenter's EC2 labels and ours, and the labels read off EC2 type names
(providers.aws.karpenter_names). The NodePool side and the report are provisioner.api.karpenter's. Pure.
"""

from __future__ import annotations

from typing import Any

from providers.aws import karpenter_names
from provisioner.api import labels
from provisioner.api.karpenter_providers import Converting, KarpenterProvider, NameDerived, domains
from provisioner.api.yamldoc import FieldPath

_AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Ubuntu", "Windows2022", "Custom")

LABELS = {
    "karpenter.k8s.aws/instance-family": labels.INSTANCE_FAMILY,
    "karpenter.k8s.aws/instance-cpu": labels.INSTANCE_CPU,
    "karpenter.k8s.aws/instance-memory": labels.INSTANCE_MEMORY,
    "karpenter.k8s.aws/instance-gpu-name": labels.GPU_NAME,
    "karpenter.k8s.aws/instance-gpu-count": labels.GPU_COUNT,
    "karpenter.k8s.aws/instance-gpu-memory": labels.GPU_MEMORY,
    "karpenter.k8s.aws/instance-gpu-manufacturer": labels.GPU_MANUFACTURER,
}
"""Karpenter's EC2 labels and the ones they become here."""

# Karpenter's AWS labels with no equivalent here, and what to use instead.
HINTS = {
    karpenter_names.CATEGORY: f"narrow with {labels.INSTANCE_FAMILY} or {labels.INSTANCE_TYPE}",
    karpenter_names.GENERATION: f"narrow with {labels.INSTANCE_FAMILY} or {labels.INSTANCE_TYPE}",
    karpenter_names.SIZE: f"narrow with {labels.INSTANCE_TYPE} or {labels.INSTANCE_CPU}",
}


def ec2nodeclass(converter: Converting, data: dict[str, Any]) -> dict[str, Any]:
    """An EC2NodeClass's spec as an AWSNodeClass's."""
    converter.copy(
        data, (), ("apiVersion", "kind", "metadata", "spec", "status"), why="not an EC2NodeClass field"
    )
    converter.status(data)
    path: FieldPath = ("spec",)
    spec = converter.copy(
        data.get("spec"),
        path,
        (
            "subnetSelectorTerms",
            "securityGroupSelectorTerms",
            "amiSelectorTerms",
            "amiFamily",
            "role",
            "instanceProfile",
            "blockDeviceMappings",
            "userData",
            "tags",
            "metadataOptions",
            "associatePublicIPAddress",
            "detailedMonitoring",
            "kubelet",
        ),
        why="a Karpenter-only EC2NodeClass field",
    )
    kubelet = spec.pop("kubelet", None)
    if isinstance(kubelet, dict):
        for key in kubelet:
            converter.dropped(
                (*path, "kubelet", key),
                "kubelet settings are not configurable here yet; pass the flag through userData",
            )
    elif kubelet is not None:
        converter.dropped((*path, "kubelet"), "kubelet settings are not configurable here yet")
    for terms, allowed in (
        ("subnetSelectorTerms", ("id", "tags")),
        ("securityGroupSelectorTerms", ("id", "name", "tags")),
        ("amiSelectorTerms", ("id", "name", "tags", "owner", "alias")),
    ):
        if isinstance(spec.get(terms), list):
            spec[terms] = [
                converter.copy(t, (*path, terms, i), allowed, why="this selector is not supported here")
                if isinstance(t, dict)
                else t
                for i, t in enumerate(spec[terms])
            ]
            spec[terms] = [t for t in spec[terms] if t != {}]
    family = spec.get("amiFamily")
    if family is not None and family not in _AMI_FAMILIES:
        converter.dropped(
            (*path, "amiFamily"),
            f"AMI family {family!r} is not supported here (known: {', '.join(_AMI_FAMILIES)}); "
            "the family now comes from the AMI alias, else Custom",
        )
        del spec["amiFamily"]
    if isinstance(spec.get("tags"), dict):
        tags = {}
        for key, value in spec["tags"].items():
            if key.startswith((*domains(), "kubernetes.io/cluster", f"{labels.GROUP}/")):
                converter.dropped((*path, "tags", key), "tags under this prefix are set by the controller")
            else:
                tags[key] = value
        spec["tags"] = tags
    if isinstance(spec.get("blockDeviceMappings"), list):
        for i, bdm in enumerate(spec["blockDeviceMappings"]):
            if not isinstance(bdm, dict):
                continue
            bpath: FieldPath = (*path, "blockDeviceMappings", i)
            clean = converter.copy(bdm, bpath, ("deviceName", "ebs", "rootVolume"), why="not supported here")
            if isinstance(clean.get("ebs"), dict):
                clean["ebs"] = converter.copy(
                    clean["ebs"],
                    (*bpath, "ebs"),
                    (
                        "volumeSize",
                        "volumeType",
                        "iops",
                        "throughput",
                        "encrypted",
                        "kmsKeyID",
                        "deleteOnTermination",
                        "snapshotID",
                    ),
                    why="not an EBS setting here",
                )
            spec["blockDeviceMappings"][i] = clean
    if isinstance(spec.get("metadataOptions"), dict):
        spec["metadataOptions"] = converter.copy(
            spec["metadataOptions"],
            (*path, "metadataOptions"),
            ("httpEndpoint", "httpProtocolIPv6", "httpPutResponseHopLimit", "httpTokens"),
            why="not a metadata option here",
        )
    return spec


KARPENTER = KarpenterProvider(
    api_version="karpenter.k8s.aws/v1",
    nodeclass="EC2NodeClass",
    into="AWSNodeClass",
    convert=ec2nodeclass,
    labels=LABELS,
    hints=HINTS,
    name_derived=NameDerived(
        keys=karpenter_names.NAME_DERIVED,
        catalog="aws",
        rewrite=karpenter_names.rewrite,
        caveat="types added to AWS later are not included",
    ),
    shown=("karpenter.k8s.aws/instance-*", "provisioner.sh/instance-* and gpu-*"),
    notes=(
        "EC2 user data and the AMI are used as given: kubelet flags, max pods and reserved resources set "
        "there are not known to the scheduler, which assumes the catalog's pods per node and overhead",
    ),
)
"""What the aws plug-in brings to `templates import-karpenter` (`ProviderPlugin.karpenter`)."""
