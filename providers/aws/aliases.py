"""AMI aliases (`al2023@latest`, `al2@v20240807`, `bottlerocket@latest`) to the public SSM parameters
that hold the EKS-optimized AMI ids, per architecture and variant.

Pure: `parameters(alias, kubernetes_version)` returns {image key: parameter name}; the provider reads
them with SSM GetParameters. Image keys are `amd64`, `arm64` and `amd64/nvidia` (`arm64/nvidia`): NVIDIA
GPU types boot the accelerated variant, which ships the driver and container toolkit, as Karpenter does.
The parameter paths are AWS's published ones (EKS User Guide, "Retrieve recommended AMI IDs").
"""

from __future__ import annotations

import re

FAMILIES = ("al2023", "al2", "bottlerocket")

_EC2_ARCH = {"amd64": "x86_64", "arm64": "arm64"}
_ALIAS = re.compile(r"^(?P<family>[a-z0-9]+)@(?P<version>latest|v?[0-9][0-9A-Za-z.\-]*)$")


class AliasError(ValueError):
    """An alias we cannot resolve; the message says what is allowed."""


def parse(alias: str) -> tuple[str, str]:
    """(family, version) of `family@version`."""
    m = _ALIAS.match(alias.strip().lower())
    if not m or m.group("family") not in FAMILIES:
        raise AliasError(
            f"alias {alias!r} is not one of {', '.join(f + '@latest' for f in FAMILIES)} "
            "(or a pinned version such as al2023@v20240807)"
        )
    return m.group("family"), m.group("version")


def parameters(alias: str, kubernetes_version: str) -> dict[str, str]:
    """Image key -> SSM parameter name holding that image's AMI id."""
    family, version = parse(alias)
    k = kubernetes_version
    latest = version == "latest"
    out: dict[str, str] = {}
    if family == "al2023":
        for arch, ec2_arch in _EC2_ARCH.items():
            for variant, key in (("standard", arch), ("nvidia", f"{arch}/nvidia")):
                base = f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{ec2_arch}/{variant}"
                out[key] = (
                    f"{base}/recommended/image_id"
                    if latest
                    else f"{base}/amazon-eks-node-al2023-{ec2_arch}-{variant}-{k}-{version}/image_id"
                )
    elif family == "al2":
        for key, suffix, node in (
            ("amd64", "", "node"),
            ("arm64", "-arm64", "arm64-node"),
            ("amd64/nvidia", "-gpu", "gpu-node"),
        ):
            base = f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2{suffix}"
            out[key] = (
                f"{base}/recommended/image_id"
                if latest
                else f"{base}/amazon-eks-{node}-{k}-{version}/image_id"
            )
    else:
        for arch, ec2_arch in _EC2_ARCH.items():
            for flavour, key in (("", arch), ("-nvidia", f"{arch}/nvidia")):
                out[key] = f"/aws/service/bottlerocket/aws-k8s-{k}{flavour}/{ec2_arch}/{version}/image_id"
    return out
