"""deploy/kubernetes/provisioner.yaml: the chart rendered once for clusters installed without Helm.

Placeholders an operator replaces (README "Production"): CLUSTER_NAME, AWS_REGION, QUEUE_URL,
REGISTRY (the image built from the Dockerfile), the IRSA role ARN (111122223333 is AWS's documentation
account) and CA_BUNDLE (the webhook's CA). The webhook's Secret is left out: the operator makes the
certificate (a chart render would mint a new random one each time). Helm's own labels are dropped.
Regenerate with `.venv/bin/python -m tests.chart.manifests`; tests/chart/test_manifests.py fails when
the committed file differs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "provisioner"
OUT = ROOT / "deploy" / "kubernetes" / "provisioner.yaml"
VALUES: dict[str, Any] = {
    "clusterName": "CLUSTER_NAME",
    "image": {"repository": "REGISTRY/provisioner"},
    "aws": {
        "region": "AWS_REGION",
        "roleArn": "arn:aws:iam::111122223333:role/provisioner",
        "interruptionQueue": "QUEUE_URL",
    },
}
ORDER = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
]
HEADER = """\
# The provisioner for a cluster installed without Helm: ServiceAccount, RBAC, Deployment, Service, PDB and
# the pod admission webhook, rendered from charts/provisioner (see README "Production"). Replace
# CLUSTER_NAME, AWS_REGION, QUEUE_URL, REGISTRY, the role ARN and CA_BUNDLE, and create the Secret
# provisioner-webhook-tls first. The CRDs come from `provisioner crds`.
"""


def render() -> str:
    import helm_python as helm

    files = helm.Chart.load(str(CHART)).render(values=VALUES, name="provisioner", namespace="kube-system")
    docs: list[dict[str, Any]] = []
    for path in sorted(files):
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(files[path]) if d)
    kept = [d for d in docs if not (d["kind"] == "Secret" and d["metadata"]["name"].endswith("-webhook-tls"))]
    # Apply order: what the Deployment needs (identity, permissions) before it.
    kept.sort(
        key=lambda d: (ORDER.index(d["kind"]) if d["kind"] in ORDER else len(ORDER), d["metadata"]["name"])
    )
    for doc in kept:
        _strip_helm(doc)
        for hook in doc.get("webhooks", ()):
            hook["clientConfig"]["caBundle"] = "CA_BUNDLE"
    return HEADER + "---\n".join(yaml.safe_dump(d, sort_keys=False, width=120) for d in kept)


def _strip_helm(node: Any) -> None:
    if isinstance(node, dict):
        labels = node.get("labels")
        if isinstance(labels, dict):
            for key in [
                k for k in labels if k == "app.kubernetes.io/managed-by" or re.match(r"helm\.sh/", k)
            ]:
                del labels[key]
        for value in node.values():
            _strip_helm(value)
    elif isinstance(node, list):
        for value in node:
            _strip_helm(value)


if __name__ == "__main__":
    OUT.write_text(render())
    print(f"wrote {OUT}")
