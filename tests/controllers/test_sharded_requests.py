"""ProvisioningRequests when replicas share the pools (`provisioner run --shards`): each request is
decided and launched by the replica its pods are routed to first, and its team quota stays the one word
of the replica holding quota admission (`provisioner.sh/quota` on the request)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from provisioner.api import labels as wk
from provisioner.api import provisioning_request as pr
from provisioner.controllers.manager import Manager
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.sharding import Sharding
from provisioner.scheduling import shards as model
from testkit.builders.pools import pools_in_distinct_shards
from testkit.controllers.world import World, gpu_pod, node_class, node_pool

SHARDS = 2


# A pool in shard 0 (the admission holder's) and one in shard 1 (the other replica's).
HOLDER_POOL, OTHER_POOL = sorted(pools_in_distinct_shards(2, SHARDS), key=lambda p: model.shard_of(p, SHARDS))


class Replicas:
    """Two managers over one state and API server: the first holds shard 0 and quota admission, the
    second shard 1."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.holder = w.new_manager(sharding=self._sharding({0}, admits=True))
        self.other = w.new_manager(sharding=self._sharding({1}, admits=False))

    def _sharding(self, held: set[int], *, admits: bool) -> Sharding:
        return Sharding(
            shards=SHARDS,
            owned_shards=lambda: frozenset(held),
            holds_admission=lambda: admits,
            clock=self.w.clock,
        )

    def step(self, now: datetime | None = None) -> bool:
        return all([m.step(now) for m in (self.holder, self.other)])


def _world(make_world: Callable[..., World]) -> tuple[World, Replicas]:
    w = make_world(settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    replicas = Replicas(w)
    w.manager = replicas  # type: ignore[assignment]  # World.tick steps both
    w.apply(node_class())
    for pool in (HOLDER_POOL, OTHER_POOL):
        w.apply(
            node_pool(
                pool, gpu_names=("h100",), capacity_types=("on-demand",), instance_types=["p5.48xlarge"]
            )
        )
    return w, replicas


def _template(pool: str, namespace: str = "default") -> dict[str, Any]:
    pod = gpu_pod("x", gpus=8, gpu_name="h100", cpu="32", memory="256Gi", node_selector={wk.NODEPOOL: pool})
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": f"worker-{pool}", "namespace": namespace},
        "template": {"metadata": {"labels": {"app": "train"}}, "spec": pod["spec"]},
    }


def _request(pool: str, *, count: int = 2, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": pr.API_VERSION,
        "kind": "ProvisioningRequest",
        "metadata": {"name": f"train-{pool}", "namespace": namespace},
        "spec": {
            "provisioningClassName": pr.BEST_EFFORT_ATOMIC_SCALE_UP,
            "podSets": [{"podTemplateRef": {"name": f"worker-{pool}"}, "count": count}],
        },
    }


def _provisioned(w: World, pool: str, namespace: str = "default") -> tuple[str, str] | None:
    """The request's Provisioned condition (status, reason), if it has one."""
    request = w.state.provisioning_requests[f"{namespace}/train-{pool}"]
    found = [c for c in request.status.conditions if c.type == pr.PROVISIONED]
    return (found[0].status.value, found[0].reason or "") if found else None


def _claims_by_pool(w: World) -> dict[str, int]:
    out: dict[str, int] = {}
    for claim in w.claims():
        out[claim.nodepool or ""] = out.get(claim.nodepool or "", 0) + 1
    return out


def test_each_replica_provisions_the_requests_of_its_own_pools(make_world: Callable[..., World]) -> None:
    w, _ = _world(make_world)
    for pool in (HOLDER_POOL, OTHER_POOL):
        w.apply(_template(pool), _request(pool))
    w.run_until(
        lambda: all(_provisioned(w, p) == ("True", "Provisioned") for p in (HOLDER_POOL, OTHER_POOL)),
        max_ticks=40,
    )
    # One gang of two 8-GPU nodes per request, each in the request's own pool: the replica that does
    # not hold quota admission launched its pool's gang too.
    assert _claims_by_pool(w) == {HOLDER_POOL: 2, OTHER_POOL: 2}
    assert len(w.fake.list()) == 4


def test_only_the_replica_its_pods_go_to_decides_a_request(make_world: Callable[..., World]) -> None:
    w, replicas = _world(make_world)
    w.apply(_template(OTHER_POOL), _request(OTHER_POOL))
    w.backend.settle()
    replicas.holder.step(w.clock.now())
    w.backend.settle()
    assert _provisioned(w, OTHER_POOL) is None, "not the holder's pool: the holder leaves it alone"
    assert w.claims() == []
    replicas.other.step(w.clock.now())
    w.backend.settle()
    assert _provisioned(w, OTHER_POOL) == ("False", "Provisioning")


def _team(gpus: int) -> dict[str, Any]:
    quota = {"nodePool": OTHER_POOL, "resources": {wk.GPU_RESOURCE: str(gpus)}, "overQuota": False}
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "Team",
        "metadata": {"name": "research"},
        "spec": {"namespaces": ["default"], "quotas": [quota]},
    }


def _step(w: World, manager: Manager) -> None:
    w.clock.advance(timedelta(seconds=1))
    w.backend.settle()
    manager.step(w.clock.now())
    w.backend.settle()


def _word(w: World, pool: str) -> str | None:
    return w.state.provisioning_requests[f"default/train-{pool}"].metadata.annotations.get(
        pr.QUOTA_ANNOTATION
    )


def test_a_request_beyond_its_teams_quota_waits_for_the_admission_holders_word_and_launches_nothing(
    make_world: Callable[..., World],
) -> None:
    w, replicas = _world(make_world)
    w.apply(_team(8), _template(OTHER_POOL), _request(OTHER_POOL, count=2))  # 16 GPUs asked, 8 allowed
    _step(w, replicas.other)
    assert _provisioned(w, OTHER_POOL) == ("False", "QuotaPending"), "no word yet: nothing booked"
    _step(w, replicas.holder)
    word = _word(w, OTHER_POOL)
    assert word is not None and word != pr.QUOTA_ADMITTED and "team research" in word
    for _ in range(10):
        w.tick()
    assert _provisioned(w, OTHER_POOL) == ("False", "QuotaExceeded")
    assert w.claims() == [] and w.fake.list() == []


def test_a_request_within_its_teams_quota_is_admitted_by_the_holder_and_launched_by_the_other(
    make_world: Callable[..., World],
) -> None:
    w, _ = _world(make_world)
    w.apply(_team(16), _template(OTHER_POOL), _request(OTHER_POOL, count=2))
    w.run_until(lambda: _provisioned(w, OTHER_POOL) == ("True", "Provisioned"), max_ticks=40)
    assert _word(w, OTHER_POOL) == pr.QUOTA_ADMITTED
    assert _claims_by_pool(w) == {OTHER_POOL: 2}


def test_a_request_naming_a_missing_template_fails_through_the_admission_holder(
    make_world: Callable[..., World],
) -> None:
    w, replicas = _world(make_world)
    w.apply(_request(OTHER_POOL))  # no PodTemplate: its pods' pools cannot be known
    _step(w, replicas.other)
    assert _provisioned(w, OTHER_POOL) is None
    _step(w, replicas.holder)
    request = w.state.provisioning_requests[f"default/train-{OTHER_POOL}"]
    failed = [c for c in request.status.conditions if c.type == pr.FAILED]
    assert [(c.status.value, c.reason) for c in failed] == [("True", "PodTemplateNotFound")]
