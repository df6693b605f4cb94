"""The kinds the provisioner tracks: one table (`TRACKED`) of every kind the cluster state holds, with where
each lives in the Kubernetes API. The others read it: the informers watch these kinds
(`provisioner.kube.client.WATCHED`), `ClusterState` accepts exactly these, `provisioner report` loads
these from a file, and a NodeClass reference names one of the NodeClass kinds (`NODECLASS_KINDS`). Pure:
names only; the models of our own kinds are `provisioner.api.KINDS`, their CRDs `provisioner.api.crds`.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.api import labels


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: where it lives and what kind its objects are."""

    kind: str
    group: str
    """The API group; empty for the core group (`v1` Pods, Nodes...)."""
    version: str
    plural: str
    namespaced: bool
    nodeclass: bool = False
    """A NodeClass kind: a NodePool's `nodeClassRef` may name it, and the state keys it by (kind, name)."""

    def path(self, *, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


POD = Resource("Pod", "", "v1", "pods", True)
NODE = Resource("Node", "", "v1", "nodes", False)
NAMESPACE = Resource("Namespace", "", "v1", "namespaces", False)
DAEMONSET = Resource("DaemonSet", "apps", "v1", "daemonsets", True)
PDB = Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True)
NODECLAIM = Resource("NodeClaim", labels.GROUP, labels.VERSION, "nodeclaims", False)
NODEPOOL = Resource("NodePool", labels.GROUP, labels.VERSION, "nodepools", False)
AWSNODECLASS = Resource("AWSNodeClass", labels.GROUP, labels.VERSION, "awsnodeclasses", False, nodeclass=True)
GCPNODECLASS = Resource("GCPNodeClass", labels.GROUP, labels.VERSION, "gcpnodeclasses", False, nodeclass=True)
TEAM = Resource("Team", labels.GROUP, labels.VERSION, "teams", False)
DEPARTMENT = Resource("Department", labels.GROUP, labels.VERSION, "departments", False)
PODTEMPLATE = Resource("PodTemplate", "", "v1", "podtemplates", True)
PROVISIONING_REQUEST = Resource(
    "ProvisioningRequest", "autoscaling.x-k8s.io", "v1", "provisioningrequests", True
)

TRACKED = (
    POD,
    NODE,
    NAMESPACE,
    DAEMONSET,
    PDB,
    NODECLAIM,
    NODEPOOL,
    AWSNODECLASS,
    GCPNODECLASS,
    TEAM,
    DEPARTMENT,
    PODTEMPLATE,
    PROVISIONING_REQUEST,
)
"""Every kind the cluster state holds, in the order the informers list them."""

BY_KIND = {r.kind: r for r in TRACKED}
"""Kind -> its row of `TRACKED`."""

NODECLASS_KINDS = tuple(r.kind for r in TRACKED if r.nodeclass)
"""The NodeClass kinds, in table order (`AWSNodeClass`, `GCPNodeClass`)."""
