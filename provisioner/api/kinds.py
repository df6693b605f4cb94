"""The kinds the provisioner tracks: one table (`TRACKED`) of every kind the cluster state holds, with where
each lives in the Kubernetes API. The others read it: the informers watch these kinds
(`provisioner.kube.client.WATCHED`), `ClusterState` accepts exactly these, `provisioner report` loads
these from a file, and a NodeClass reference names one of the NodeClass kinds (`NODECLASS_KINDS`): those
the installed provider plug-ins bring (provisioner.api.plugins), read on first use. Pure: names only; the models of our own kinds are `provisioner.api.KINDS`, their CRDs `provisioner.api.crds`.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.api import labels, plugins


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
TEAM = Resource("Team", labels.GROUP, labels.VERSION, "teams", False)
DEPARTMENT = Resource("Department", labels.GROUP, labels.VERSION, "departments", False)
PODTEMPLATE = Resource("PodTemplate", "", "v1", "podtemplates", True)
PROVISIONING_REQUEST = Resource(
    "ProvisioningRequest", "autoscaling.x-k8s.io", "v1", "provisioningrequests", True
)


def nodeclass(kind: str) -> Resource:
    """The row of a NodeClass kind an installed provider plug-in brings (`AWSNodeClass`...)."""
    crd = plugins.NODECLASS_CRDS[kind]
    return Resource(crd.kind, labels.GROUP, labels.VERSION, crd.plural, False, nodeclass=True)


def _tracked(found: tuple[plugins.Declares, ...]) -> tuple[Resource, ...]:
    return (
        POD,
        NODE,
        NAMESPACE,
        DAEMONSET,
        PDB,
        NODECLAIM,
        NODEPOOL,
        *(nodeclass(kind.kind) for p in found for kind in p.nodeclasses),
        TEAM,
        DEPARTMENT,
        PODTEMPLATE,
        PROVISIONING_REQUEST,
    )


TRACKED: plugins.DerivedTuple[Resource] = plugins.DerivedTuple(_tracked)
"""Every kind the cluster state holds, in the order the informers list them; the NodeClass kinds are the
installed plug-ins' (read on first use)."""

BY_KIND: plugins.Derived[Resource] = plugins.Derived(lambda found: {r.kind: r for r in _tracked(found)})
"""Kind -> its row of `TRACKED`."""

NODECLASS_KINDS: plugins.Derived[Resource] = plugins.Derived(
    lambda found: {r.kind: r for r in _tracked(found) if r.nodeclass}
)
"""The NodeClass kinds (-> their rows), in table order (`AWSNodeClass`, `GCPNodeClass`)."""
