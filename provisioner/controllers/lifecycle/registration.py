"""The registration step: a launched NodeClaim whose Node appeared (same provider id) is tied to it
(Karpenter's `lifecycle/registration.go`).

The Node gets the claim's labels (its pool's, `provisioner.sh/nodeclaim`, `provisioner.sh/registered`)
and annotations (less the planned offering), its taints and start-up taints, and loses the unregistered
taint; the claim gets `nodeName` and `Registered=True`. The labels only the cloud knows once the instance
runs (AWS `topology.k8s.aws/network-node-layer-*`, GCP `gce-topology-*`) are asked for then and copied to
the Node and the claim, so Kueue topology-aware scheduling can pack by them. A Node that never appears
is the liveness step's.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.api.nodeclaim import REGISTERED
from provisioner.cloudprovider import CloudProviderError
from provisioner.clusterapi import guarded, node_rv
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.lifecycle.step import Pass, Step, log, step_condition


@dataclass(kw_only=True, eq=False)
class Registration(Step):
    def reconcile(self, claim: NodeClaim, p: Pass) -> bool:
        node, now = p.node_of(claim), p.now
        if not claim.status.provider_id or condition_status(claim, REGISTERED) == "True" or node is None:
            return False
        labels = dict(claim.metadata.labels)
        cloud = self._cloud_labels(claim)
        if cloud:
            labels.update(cloud)
            self.cluster.patch_nodeclaim(claim.name, {"metadata": {"labels": cloud}})
        labels.update({wk.NODECLAIM: claim.name, wk.REGISTERED: "true"})
        taints = [t.to_dict() for t in node.taints if t.key != wk.UNREGISTERED_TAINT]
        have = {(t["key"], t["effect"]) for t in taints}
        for t in [*claim.spec.taints, *claim.spec.startup_taints]:
            d = t.model_dump(by_alias=True, exclude_none=True, mode="json")
            if (d["key"], d["effect"]) not in have:
                taints.append(d)
                have.add((d["key"], d["effect"]))
        annotations = dict(claim.metadata.annotations)
        annotations.pop(wk.PLANNED_OFFERING, None)
        self.cluster.patch_node(
            node.name,
            guarded(
                node_rv(node),
                {"metadata": {"labels": labels, "annotations": annotations}, "spec": {"taints": taints}},
            ),
        )
        conditions = step_condition(
            claim.status.conditions, REGISTERED, True, reason="Registered", message=node.name, now=now
        )
        self.cluster.patch_nodeclaim_status(claim.name, {"nodeName": node.name, "conditions": conditions})
        log.info("NodeClaim %s registered as Node %s", claim.name, node.name)
        return False

    def _cloud_labels(self, claim: NodeClaim) -> dict[str, str]:
        """The labels the cloud reports for the running instance (network topology) that the claim does
        not carry yet; {} when it reports none or cannot answer now (the Node registers without them)."""
        provider = self.providers.for_claim(claim)
        if provider is None or not claim.status.provider_id:
            return {}
        try:
            instance = provider.get(claim.status.provider_id)
        except CloudProviderError as err:
            log.info("NodeClaim %s: no cloud labels at registration: %s", claim.name, err)
            return {}
        have = claim.metadata.labels
        return {k: v for k, v in instance.labels.items() if have.get(k) != v}
