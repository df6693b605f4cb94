"""User data that joins a node to the cluster, per AMI family, merged with the NodeClass's own user data.

Pure: takes the family, what the cluster is (name, API endpoint, CA bundle, service CIDR) and the
NodeClass's user data, and returns the user data text. The provider finds the cluster through EKS
DescribeCluster (or its arguments) and base64-encodes the result into the launch template.

- `AL2023`: a MIME multi-part document: the NodeClass's part first (a NodeConfig when it starts with
  `apiVersion: node.eks.aws`, else a shell script), then ours, a `NodeConfig` naming the cluster; nodeadm
  merges NodeConfigs in order.
- `AL2`: the NodeClass's script, then `/etc/eks/bootstrap.sh` with the cluster's endpoint and CA.
- `Bottlerocket`: TOML settings for the cluster, after the NodeClass's own settings.
- `Custom`: the NodeClass's user data, untouched (the image joins the cluster its own way).

Every family registers the node with the `provisioner.sh/unregistered:NoExecute` taint, Karpenter's way
of keeping pods off a node until the controller has applied its labels and taints. The user data is
the same for every node of a NodeClass, so one launch template serves all of them; labels and taints of
the claim are the controller's to apply at registration. The exception is `node_labels`, the labels a
node must carry from its first moment because a node agent acts on them before registration (the GPU
operator's MIG manager reads `nvidia.com/mig.config`): the kubelet registers with them, and the launch
template differs per set of them (its name hashes its content).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from providers.aws import aliases
from providers.aws.model import AWSNodeClass
from provisioner.api import labels as wk

BOUNDARY = "//PROVISIONER-BOUNDARY"
REGISTER_TAINT = f"{wk.UNREGISTERED_TAINT}:NoExecute"

_FAMILY_OF_ALIAS = {"al2023": "AL2023", "al2": "AL2", "bottlerocket": "Bottlerocket"}


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What a node needs to find and trust the cluster's API server."""

    name: str
    endpoint: str
    ca_bundle: str
    """Base64 of the PEM CA bundle, as EKS DescribeCluster returns it."""
    service_cidr: str | None = None
    version: str | None = None


def family_of(node_class: AWSNodeClass) -> str:
    """`spec.amiFamily`, else the family of the first alias, else `Custom`."""
    if node_class.spec.ami_family:
        return node_class.spec.ami_family
    for term in node_class.spec.ami_selector_terms:
        if term.alias:
            family, _ = aliases.parse(term.alias)
            return _FAMILY_OF_ALIAS[family]
    return "Custom"


def needs_cluster(family: str) -> bool:
    return family in ("AL2023", "AL2", "Bottlerocket")


def user_data(
    family: str,
    *,
    cluster: ClusterInfo | None,
    custom: str | None,
    node_labels: Mapping[str, str] | None = None,
) -> str | None:
    """The user data of the nodes of a NodeClass (None when there is none), registering with
    `node_labels` (a `Custom` image joins its own way and gets none)."""
    if cluster is None or not needs_cluster(family):
        return custom
    labels = dict(sorted((node_labels or {}).items()))
    if family == "AL2023":
        return _al2023(cluster, custom, labels)
    if family == "AL2":
        return _al2(cluster, custom, labels)
    return _bottlerocket(cluster, custom, labels)


def _label_flag(labels: Mapping[str, str]) -> list[str]:
    return [f"--node-labels={','.join(f'{k}={v}' for k, v in labels.items())}"] if labels else []


def _al2023(cluster: ClusterInfo, custom: str | None, labels: Mapping[str, str]) -> str:
    node_config = "\n".join(
        [
            "apiVersion: node.eks.aws/v1alpha1",
            "kind: NodeConfig",
            "spec:",
            "  cluster:",
            f"    name: {cluster.name}",
            f"    apiServerEndpoint: {cluster.endpoint}",
            f"    certificateAuthority: {cluster.ca_bundle}",
            *([f"    cidr: {cluster.service_cidr}"] if cluster.service_cidr else []),
            "  kubelet:",
            "    flags:",
            f"      - --register-with-taints={REGISTER_TAINT}",
            *[f"      - {flag}" for flag in _label_flag(labels)],
            "",
        ]
    )
    parts = []
    if custom:
        kind = (
            "application/node.eks.aws"
            if custom.lstrip().startswith("apiVersion: node.eks.aws")
            else ('text/x-shellscript; charset="us-ascii"')
        )
        parts.append((kind, custom))
    parts.append(("application/node.eks.aws", node_config))
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n"), ""]
    lines.append(f"--{BOUNDARY}--")
    return "\n".join(lines) + "\n"


def _al2(cluster: ClusterInfo, custom: str | None, labels: Mapping[str, str]) -> str:
    script = custom.rstrip("\n") + "\n" if custom else "#!/bin/bash\nset -o errexit\n"
    if not script.startswith("#!"):
        script = "#!/bin/bash\n" + script
    extra = " ".join([f"--register-with-taints={REGISTER_TAINT}", *_label_flag(labels)])
    return (
        script
        + f"/etc/eks/bootstrap.sh '{cluster.name}' --apiserver-endpoint '{cluster.endpoint}' "
        + f"--b64-cluster-ca '{cluster.ca_bundle}' --kubelet-extra-args '{extra}'\n"
    )


def _bottlerocket(cluster: ClusterInfo, custom: str | None, labels: Mapping[str, str]) -> str:
    ours = "\n".join(
        [
            "[settings.kubernetes]",
            f'cluster-name = "{cluster.name}"',
            f'api-server = "{cluster.endpoint}"',
            f'cluster-certificate = "{cluster.ca_bundle}"',
            "",
            "[settings.kubernetes.node-taints]",
            f'"{wk.UNREGISTERED_TAINT}" = [":NoExecute"]',
            "",
            *(
                ["[settings.kubernetes.node-labels]", *(f'"{k}" = "{v}"' for k, v in labels.items()), ""]
                if labels
                else []
            ),
        ]
    )
    return (custom.rstrip("\n") + "\n\n" if custom else "") + ours
