"""The simulated cloud's catalog as each pool sees it: `PoolScopedTypes` wraps a CloudProvider so that
`instance_types(node_class)` answers only with the types some pool using that NodeClass could launch, in
the NodeClass's zones (what a real provider's NodeClass-scoped discovery returns). A provider wrapper for
`provisioner simulate`, not a cluster part."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.api.nodepool import NodePool
from provisioner.cloudprovider import CloudProvider, Instance, InstanceType
from provisioner.cloudprovider.wrappers import Forwarding
from provisioner.scheduling.offerings import OFFERING_KEYS
from provisioner.state.objects import SelectorRequirement


def pool_class(pool: NodePool) -> tuple[str, str]:
    ref = pool.spec.template.spec.node_class_ref
    return ref.kind, ref.name


def admits(pool: NodePool, it: InstanceType) -> bool:
    """Whether the pool's requirements on instance labels (family, type, GPU...) allow the type."""
    for req in pool.spec.template.spec.requirements:
        if req.key in OFFERING_KEYS:
            continue
        sel = SelectorRequirement(key=req.key, operator=req.operator.value, values=tuple(req.values))
        if not sel.matches(it.labels):
            return False
    return True


class PoolScopedTypes(Forwarding):
    """A CloudProvider wrapper that answers `instance_types(node_class)` with only the types some pool
    using that NodeClass could launch (by the pools' instance-level requirements: family, type, GPU...),
    offered only in the NodeClass's zones (as the scenario loader reads them), and keeps the answer until
    told the cloud's stockouts changed.

    The scheduler and the planner would reject the other types anyway; listing them costs a scan of the
    region's offerings at every evaluation of a run that evaluates hundreds of times. Every other call
    goes to the wrapped provider."""

    def __init__(
        self,
        provider: CloudProvider,
        pools: Sequence[NodePool],
        *,
        zones_for: Callable[[NodeClass], Sequence[str]] | None = None,
    ) -> None:
        super().__init__(provider)
        self._pools = list(pools)
        self._zones_for = zones_for
        """The zones a NodeClass launches in (its subnets or zone list); None: every zone."""
        self._cache: dict[tuple[str, str], list[InstanceType]] = {}

    def invalidate(self) -> None:
        """Forget the answers kept: the cloud's stockouts changed."""
        self._cache.clear()

    def instance_types(self, node_class: NodeClass) -> list[InstanceType]:
        # Kept until `invalidate`: the simulated cloud's types change only when a step changes stockouts.
        key = (node_class.kind, node_class.name)
        if key not in self._cache:
            pools = [p for p in self._pools if pool_class(p) == key]
            types = [t for t in self.provider.instance_types(node_class) if any(admits(p, t) for p in pools)]
            if self._zones_for is not None:
                zones = set(self._zones_for(node_class))
                # A type offered in none of these zones belongs to another region or cloud of the scenario.
                types = [
                    t.with_offerings(tuple(o for o in t.offerings if o.zone in zones))
                    for t in types
                    if any(o.zone in zones for o in t.offerings)
                ]
            self._cache[key] = types
        return list(self._cache[key])

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        instance = self.provider.create(claim, instance_types, node_class)
        if instance.reservation_id:
            self.invalidate()  # the reservation's free count moved
        return instance

    def delete(self, provider_id: str) -> None:
        self.provider.delete(provider_id)
        reservations = getattr(self.provider, "reservations", None)  # the fake's, not the protocol's
        if reservations is not None and reservations():
            self.invalidate()  # the instance may have given a reservation its slot back
