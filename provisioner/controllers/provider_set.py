"""The clouds a controller launches on: which CloudProvider serves a NodeClass kind (`--cloud aws,gcp`
serves both), the NodeClass a reference names, and the instance types each pool can launch now."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime

from provisioner.api import NodeClaim, NodePool
from provisioner.api.kinds import NODECLASS_KINDS
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider import CloudProvider, CloudProviderError, InstanceType
from provisioner.cloudprovider.types import for_template
from provisioner.cloudprovider.unavailable import UnavailableOfferings
from provisioner.state import Snapshot

log = logging.getLogger(__name__)


class ProviderSet:
    """NodeClass kind -> the CloudProvider that launches it."""

    def __init__(self, by_kind: Mapping[str, CloudProvider]) -> None:
        self.by_kind = dict(by_kind)

    @classmethod
    def every_kind(cls, provider: CloudProvider) -> ProviderSet:
        """One provider for every NodeClass kind the installed plug-ins bring (the simulator's cloud)."""
        return cls(dict.fromkeys(NODECLASS_KINDS, provider))

    def for_kind(self, kind: str) -> CloudProvider | None:
        return self.by_kind.get(kind)

    def for_claim(self, claim: NodeClaim) -> CloudProvider | None:
        return self.by_kind.get(claim.spec.node_class_ref.kind)

    def unique(self) -> list[CloudProvider]:
        seen: list[CloudProvider] = []
        for p in self.by_kind.values():
            if all(p is not q for q in seen):
                seen.append(p)
        return seen

    def kinds_of(self, provider: CloudProvider) -> set[str]:
        return {k for k, p in self.by_kind.items() if p is provider}

    def unavailable_offerings(self, now: datetime) -> frozenset[str]:
        """Every offering a provider's unavailable-offerings cache holds back at `now`, as text. It
        changes when a stockout or quota entry is added or runs out, which is when a solve of the same
        pods can come out differently."""
        out: set[str] = set()
        for p in self.unique():
            cache = getattr(p, "cache", None)
            if isinstance(cache, UnavailableOfferings):
                out.update(
                    f"unavailable:{p.name}:{k.instance_type}/{k.zone}/{k.capacity_type}"
                    for k in cache.entries(now=now)
                )
        return frozenset(out)


def node_class_of(snap: Snapshot, kind: str, name: str) -> NodeClass | None:
    """The NodeClass a reference names, as the snapshot holds it."""
    return snap.nodeclasses.get((kind, name))


def pool_instance_types(
    providers: ProviderSet, snap: Snapshot, pools: Iterable[NodePool]
) -> dict[str, list[InstanceType]]:
    """Pool name -> the types its NodeClass can launch now, as the pool's nodes offer them (MIG-partitioned
    by the pool's layout: `types.for_template`). A pool whose cloud or NodeClass is missing, or
    whose cloud cannot answer, gets none (its pods get a reason; the other pools go on)."""
    out: dict[str, list[InstanceType]] = {}
    for pool in pools:
        ref = pool.spec.template.spec.node_class_ref
        provider = providers.for_kind(ref.kind)
        node_class = node_class_of(snap, ref.kind, ref.name)
        out[pool.name] = []
        if provider is None or node_class is None:
            continue
        try:
            # A pool whose template names a MIG layout launches nodes that offer its slices, not GPUs.
            out[pool.name] = for_template(
                pool.spec.template.metadata.labels, provider.instance_types(node_class)
            )
        except CloudProviderError as err:
            log.warning("pool %s: cannot list instance types: %s", pool.name, err)
    return out
