"""The batch signature (`ProvisioningController._signature`), made at every pass while pods arrive, reuses
its claims' part while the snapshot's nodes are the same: it must still be, at every pass, the pods' keys,
the live claims and the offerings held back, as written out in full."""

from __future__ import annotations

from datetime import timedelta

from provisioner.controllers.provisioning import pods_needing_capacity
from provisioner.controllers.settings import ControllerSettings
from provisioner.state.cluster import Snapshot
from testkit.controllers.backends import MemoryBackend
from testkit.controllers.world import World, gpu_pod, node_class, node_pool


def _in_full(w: World, snap: Snapshot) -> frozenset[str]:
    pods = pods_needing_capacity(snap)
    claims = {f"claim:{n.claim.name}" for n in snap.nodes if n.claim is not None and not n.deleting}
    return frozenset(
        {p.key for p in pods} | claims | w.manager.providers.unavailable_offerings(w.clock.now())
    )


def test_the_signature_follows_pods_and_claims_as_they_come_and_go() -> None:
    w = World(
        MemoryBackend, settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(seconds=1))
    )
    w.apply(node_class(), node_pool("gpu"))
    provisioning = w.manager.provisioning
    seen: list[frozenset[str]] = []
    for i in range(6):
        w.apply(gpu_pod(f"p{i}"))
        w.binder.sync()
        if i == 3:
            (claim, *_) = w.claims()
            w.backend.cluster.delete_nodeclaim(claim.name)  # a claim goes: the signature must drop it
        snap = w.state.snapshot()
        signature = provisioning._signature(snap, pods_needing_capacity(snap), w.clock.now())
        assert signature == _in_full(w, snap)
        seen.append(signature)
        for _ in range(2):  # the window opens, then closes idle: its claims are written between the passes
            w.clock.advance(1.1)
            w.manager.step(w.clock.now())
    assert any(key.startswith("claim:") for key in seen[-1]), "claims in flight were in the signature"
    assert len(set(seen)) == len(seen)
