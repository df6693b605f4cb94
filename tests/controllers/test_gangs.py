"""Gangs through the controllers: a Kueue pod group's nodes launch as one group (`create_group`), all in
one zone, or none; in a shortage nothing is billed and every member is told why; when capacity returns
the whole gang launches together."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.api import provisioning_request as pr
from provisioner.api.common import Condition
from provisioner.cloudprovider import Instance
from provisioner.clusterapi.port import ClusterError
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.lifecycle import gang_launch
from provisioner.finops.ledger import Ledger
from provisioner.finops.recorder import LedgerRecorder
from testkit.builders import node_claim
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from testkit.typed import present

P5 = "p5.48xlarge"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f")


def _gang(count: int = 4, *, total: int | None = None, group: str = "llama") -> list[dict[str, Any]]:
    return [
        gpu_pod(
            f"{group}-{i}",
            gpus=8,
            gpu_name="h100",
            cpu="32",
            memory="256Gi",
            labels={"app": "train", wk.KUEUE_POD_GROUP_NAME: group},
            annotations={wk.KUEUE_POD_GROUP_TOTAL_COUNT: str(total or count)},
        )
        for i in range(count)
    ]


def _h100_world(make_world: Callable[..., World]) -> World:
    w = make_world()
    w.apply(
        node_class(),
        node_pool("h100", gpu_names=("h100",), capacity_types=("on-demand",), instance_types=[P5]),
    )
    return w


def _launched(w: World) -> list[NodeClaim]:
    return [c for c in w.claims() if condition_status(c, "Launched") == "True"]


def test_a_gang_launches_as_one_group_in_one_zone_and_every_member_runs(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.apply(*_gang(4))
    w.run_until(w.all_bound, max_ticks=40)
    claims = w.claims()
    assert len(claims) == 4
    assert {c.status.zone for c in claims} == {"us-east-1a"}
    assert {c.metadata.annotations[wk.GANG] for c in claims} == {"default/llama"}
    assert {c.status.instance_type for c in claims} == {P5}
    group_calls = [c for c in w.fake.calls if c[0] == "create_group"]
    assert len(group_calls) == 1, "one group launch, not one create per member"


def test_in_a_shortage_no_member_is_launched_and_each_says_why_then_all_launch_when_capacity_returns(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    # Room for 3 of the 4 nodes in one zone, none anywhere else: a one-at-a-time launch would bill 3.
    w.fake.set_capacity(instance_type=P5, capacity_type="on-demand", count=0)
    w.fake.set_capacity(instance_type=P5, zone="us-east-1a", capacity_type="on-demand", count=3)
    billed: list[Instance] = []
    w.apply(*_gang(4))
    for _ in range(60):
        w.tick()
        billed.extend(w.fake.list())
    assert billed == [], "nothing was ever running for the gang"
    events = [e for e in w.events("FailedProvisioning") if e["involvedObject"]["name"].startswith("llama-")]
    assert {e["involvedObject"]["name"] for e in events} == {f"llama-{i}" for i in range(4)}
    assert all("gang default/llama needs all 4 pods placed together" in e["message"] for e in events)
    failed = [e for e in w.events("InsufficientCapacity") if e["involvedObject"]["kind"] == "NodePool"]
    assert failed and "no offering could launch all 4 of its nodes at once" in failed[0]["message"]

    w.fake.set_capacity(instance_type=P5, zone="us-east-1b", capacity_type="on-demand", count=4)
    w.run_until(w.all_bound, max_ticks=60, seconds=15)
    launched = _launched(w)
    assert len(launched) == 4
    assert {c.status.zone for c in launched} == {"us-east-1b"}


def test_a_gang_missing_pods_launches_nothing_until_all_exist(make_world: Callable[..., World]) -> None:
    w = _h100_world(make_world)
    pods = _gang(4)
    w.apply(*pods[:3])
    for _ in range(10):
        w.tick()
    assert w.claims() == []
    w.apply(pods[3])
    w.run_until(w.all_bound, max_ticks=40)
    assert len(w.claims()) == 4


def test_a_group_short_of_its_claims_past_a_batch_window_launches_nothing_and_is_deleted(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    # The scheduler wrote a group of 2, but one claim never arrived (its write failed).
    claim = node_claim("h100-lonely", [P5], zones=["us-east-1a"], nodepool="h100")
    claim.metadata.annotations.update({wk.GANG: "default/llama", wk.GANG_SIZE: "2"})
    claim.metadata.finalizers = [wk.TERMINATION_FINALIZER]
    w.apply(claim.to_dict())
    for _ in range(int(w.settings.batch_max / timedelta(seconds=1)) + 3):
        w.tick()
        assert w.fake.list() == []
    assert [c for c in w.claims() if c.metadata.deletion_timestamp is None] == []
    assert w.events("GangIncomplete")


# ProvisioningRequests ------------------------------------------------------------------------------------


def _template(name: str = "worker") -> dict[str, Any]:
    pod = _gang(1)[0]
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": {"metadata": {"labels": {"app": "train"}}, "spec": pod["spec"]},
    }


def _request(
    name: str = "llama", *, klass: str = pr.BEST_EFFORT_ATOMIC_SCALE_UP, count: int = 4
) -> dict[str, Any]:
    return {
        "apiVersion": pr.API_VERSION,
        "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "provisioningClassName": klass,
            "podSets": [{"podTemplateRef": {"name": "worker"}, "count": count}],
        },
    }


def _condition(w: World, type_: str, name: str = "llama") -> Condition | None:
    request = w.state.provisioning_requests[f"default/{name}"]
    return next((c for c in request.status.conditions if c.type == type_), None)


def _is(w: World, type_: str, status: str, name: str = "llama") -> bool:
    c = _condition(w, type_, name)
    return c is not None and c.status.value == status


def test_an_atomic_provisioning_request_launches_all_its_nodes_in_one_zone_then_says_provisioned(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.apply(_template(), _request())
    w.run_until(lambda: _is(w, "Provisioned", "True"), max_ticks=40)
    assert _is(w, "Accepted", "True")
    claims = w.claims()
    assert len(claims) == 4 and {c.status.zone for c in claims} == {"us-east-1a"}
    assert {c.metadata.annotations[wk.GANG] for c in claims} == {"default/provisioningrequest.llama"}
    # The real pods consume the booking: they land on its nodes, and nothing more is launched.
    consumers = [
        {**p, "metadata": {**p["metadata"], "annotations": {pr.CONSUME_ANNOTATIONS[1]: "llama"}}}
        for p in _gang(4)
    ]
    w.apply(*consumers)
    w.run_until(w.all_bound, max_ticks=40)
    assert len(w.claims()) == 4
    assert not _is(w, "BookingExpired", "True")


def test_an_atomic_provisioning_request_in_a_shortage_launches_nothing_and_says_why(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.fake.set_capacity(instance_type=P5, capacity_type="on-demand", count=0)
    w.fake.set_capacity(instance_type=P5, zone="us-east-1a", capacity_type="on-demand", count=3)
    w.apply(_template(), _request())
    for _ in range(40):
        w.tick()
        assert w.fake.list() == []
    provisioned = _condition(w, "Provisioned")
    assert provisioned is not None and provisioned.status.value == "False"
    assert provisioned.reason == "CapacityIsNotFound"
    assert "needs all 4 pods placed together" in provisioned.message


def test_check_capacity_launches_nothing_and_says_whether_the_capacity_is_there(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.apply(_template(), _request("check", klass=pr.CHECK_CAPACITY, count=2))
    w.run_until(lambda: _condition(w, "Provisioned", "check") is not None, max_ticks=10)
    for _ in range(5):
        w.tick()
    assert w.claims() == []
    provisioned = present(_condition(w, "Provisioned", "check"))
    assert (provisioned.status.value, provisioned.reason) == ("False", "CapacityIsNotFound")
    # Nodes with room that another request holds do not count; once its booking ends, they do.
    w.apply(_request("atomic", count=2))
    w.run_until(lambda: _is(w, "Provisioned", "True", "atomic"), max_ticks=40)
    w.tick()
    assert _is(w, "Provisioned", "False", "check")
    w.run_until(lambda: _is(w, "BookingExpired", "True", "atomic"), max_ticks=20, seconds=60)
    w.run_until(lambda: _is(w, "Provisioned", "True", "check"), max_ticks=5)
    assert present(_condition(w, "Provisioned", "check")).reason == "CapacityIsFound"
    assert len(w.claims()) == 2, "the check launched nothing"


def test_a_booking_nobody_takes_expires_and_a_missing_template_fails(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.apply(
        _template(),
        _request(count=1),
        _request("orphan", count=1)
        | {"spec": {**_request()["spec"], "podSets": [{"podTemplateRef": {"name": "nope"}, "count": 1}]}},
    )
    w.run_until(lambda: _is(w, "Provisioned", "True"), max_ticks=40)
    assert (
        _is(w, "Failed", "True", "orphan")
        and present(_condition(w, "Failed", "orphan")).reason == "PodTemplateNotFound"
    )
    w.run_until(lambda: _is(w, "BookingExpired", "True"), max_ticks=20, seconds=60)


def test_booked_capacity_that_goes_before_its_pods_come_is_revoked(make_world: Callable[..., World]) -> None:
    w = _h100_world(make_world)
    w.apply(_template(), _request(count=2))
    w.run_until(lambda: _is(w, "Provisioned", "True"), max_ticks=40)
    w.fake.delete(present(w.claims()[0].status.provider_id))  # the cloud takes a node back
    w.backend.delete("Node", present(w.claims()[0].status.node_name))
    w.run_until(lambda: _is(w, "CapacityRevoked", "True"), max_ticks=20)


def test_an_interrupted_member_is_replaced_in_the_zone_the_rest_of_its_gang_runs_in(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.fake.set_capacity(instance_type=P5, zone="us-east-1a", capacity_type="on-demand", count=0)
    w.keep(*_gang(4))  # recreated when evicted, as a Job's pods are
    w.run_until(w.all_bound, max_ticks=40)
    assert {c.status.zone for c in w.claims()} == {"us-east-1b"}
    # us-east-1a comes back (and would be tried first): the replacement still goes where its gang runs.
    w.fake.set_capacity(instance_type=P5, zone="us-east-1a", capacity_type="on-demand", count=None)
    victim = w.claims()[0]
    w.fake.interrupt(present(victim.status.provider_id), detail="spot warning")
    w.run_until(
        lambda: victim.name not in w.state.claims and w.all_bound() and len(w.pods()) == 4, max_ticks=80
    )
    claims = w.claims()
    assert len(claims) == 4
    assert {c.status.zone for c in claims} == {"us-east-1b"}
    [new] = [c for c in claims if c.metadata.annotations.get(wk.GANG_SIZE) == "1"]
    assert new.metadata.annotations[wk.GANG] == "default/llama"


def test_booked_nodes_are_not_consolidated_while_the_booking_lasts(make_world: Callable[..., World]) -> None:
    w = _h100_world(make_world)
    w.manager = w.new_manager(disruption=True)
    w.apply(_template(), _request(count=2))
    w.run_until(lambda: _is(w, "Provisioned", "True"), max_ticks=40)
    booked = {c.name for c in w.claims()}
    for _ in range(16):  # 8 minutes: empty nodes of a pool consolidating at once would be gone
        w.tick(30)
        assert {c.name for c in w.claims() if c.metadata.deletion_timestamp is None} == booked
    assert not _is(w, "BookingExpired", "True")


# A member that never registers; a restart mid-launch ------------------------------------------------------


def test_a_member_that_never_registers_replaces_the_whole_gang_and_books_what_it_cost(
    make_world: Callable[..., World], tmp_path: Path
) -> None:
    w = _h100_world(make_world)
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        w.manager = w.new_manager(recorder=LedgerRecorder(ledger, background=False))
        w.kubelet.hold = True
        w.keep(*_gang(2))  # recreated when evicted, as a Job's pods are
        w.run_until(lambda: len(_launched(w)) == 2, max_ticks=40)
        first = {c.name: c.status.provider_id for c in w.claims()}
        stuck = sorted(first)[0]
        w.kubelet.never_register.add(stuck)
        w.kubelet.hold = False
        w.run_until(lambda: not set(first) & set(w.state.claims), max_ticks=30, seconds=60)
        # Past the registration timeout, neither member is billed: the one that registered goes too.
        live = {i.provider_id for i in w.fake.list()}
        assert not live & set(first.values())
        assert any("never registered" in e["message"] for e in w.events(gang_launch.UNREGISTERED))
        rows = [a for a in ledger.actions() if a.reason == gang_launch.UNREGISTERED]
        assert {r.node for r in rows} == set(first)
        assert all(r.price_per_hour > 0 for r in rows)
        w.kubelet.never_register.clear()
        w.run_until(w.all_bound, max_ticks=60, seconds=15)
        assert len(w.claims()) == 2


def test_members_launched_before_a_restart_count_toward_the_group(make_world: Callable[..., World]) -> None:
    w = _h100_world(make_world)
    w.kubelet.hold = True
    # The group launches, but the process dies after writing the first member's status, before the
    # second's: the first claim says launched, the second does not, and both instances run.
    lifecycle = w.manager.lifecycle
    patch = lifecycle.cluster.patch_nodeclaim_status
    written: list[str] = []

    def dies_after_the_first(name: str, status: Mapping[str, Any]) -> None:
        if "providerID" in status:
            if written:
                raise ClusterError("the process died")
            written.append(name)
        return patch(name, status)

    lifecycle.cluster = _Patched(lifecycle.cluster, patch_nodeclaim_status=dies_after_the_first)
    w.apply(*_gang(2))
    w.run_until(lambda: bool(written), max_ticks=20)
    assert len(w.fake.list()) == 2
    w.restart()
    w.kubelet.hold = False
    w.run_until(w.all_bound, max_ticks=60)
    assert len(w.fake.list()) == 2, "the launched member counted toward the group: nothing launched twice"
    assert not w.events(gang_launch.INCOMPLETE)
    assert len(_launched(w)) == 2


class _Patched:
    """An object answering as `inner`, except for the methods given."""

    def __init__(self, inner: object, **methods: Callable[..., Any]) -> None:
        self._inner = inner
        self.__dict__.update(methods)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_topology_labels_the_cloud_reports_once_running_reach_the_node_and_claim_at_registration(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.kubelet.hold = True
    w.apply(*_gang(2))
    w.run_until(lambda: len(_launched(w)) == 2, max_ticks=40)
    layers = {f"topology.k8s.aws/network-node-layer-{n}": f"nn-{n}" for n in (1, 2, 3)}
    for claim in w.claims():
        assert not set(layers) & set(claim.metadata.labels), "not known at launch"
        w.fake.report_labels(present(claim.status.provider_id), layers)
    w.kubelet.hold = False
    w.run_until(w.all_bound, max_ticks=40)
    for claim in w.claims():
        assert layers.items() <= claim.metadata.labels.items()
        assert layers.items() <= w.state.nodes[present(claim.status.node_name)].labels.items()


def _team(gpus: int) -> dict[str, Any]:
    quota = {"nodePool": "h100", "resources": {wk.GPU_RESOURCE: str(gpus)}, "overQuota": False}
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "Team",
        "metadata": {"name": "research"},
        "spec": {"namespaces": ["default"], "quotas": [quota]},
    }


def test_an_atomic_provisioning_request_beyond_its_teams_quota_books_and_launches_nothing(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.apply(_team(16), _template(), _request(count=4))  # 4 x 8 GPUs asked, 16 allowed
    for _ in range(20):
        w.tick()
    assert w.claims() == [] and w.fake.list() == []
    provisioned = _condition(w, pr.PROVISIONED)
    assert provisioned is not None and provisioned.status == "False"
    assert provisioned.reason == "QuotaExceeded"
    assert "team research" in provisioned.message


def test_an_atomic_provisioning_request_within_its_teams_quota_launches_whole(
    make_world: Callable[..., World],
) -> None:
    w = _h100_world(make_world)
    w.apply(_team(32), _template(), _request(count=4))
    w.run_until(lambda: len(_launched(w)) == 4, max_ticks=60)
    assert {c.status.zone for c in w.claims()} == {"us-east-1a"}


def test_a_drifted_gang_is_replaced_whole_in_one_command(make_world: Callable[..., World]) -> None:
    w = make_world()
    pool = node_pool("h100", gpu_names=("h100",), capacity_types=("on-demand",), instance_types=[P5])
    pool["spec"].setdefault("disruption", {})["budgets"] = [{"nodes": "100%"}]
    w.manager = w.new_manager(disruption=True)
    w.apply(node_class(), pool)
    w.keep(*_gang(2))  # recreated when evicted, as a Job's pods are
    w.run_until(w.all_bound, max_ticks=40)
    old = sorted(c.name for c in w.claims())
    # The pool's template changes: every node of it drifts (its stamped hash is old).
    w.backend.patch("NodePool", "h100", {"spec": {"template": {"metadata": {"labels": {"team": "ml2"}}}}})
    went: dict[str, int] = {}
    for tick in range(120):
        w.tick(15)
        for name in old:
            claim = w.state.claims.get(name)
            if name not in went and (claim is None or claim.metadata.deletion_timestamp is not None):
                went[name] = tick
        if not set(old) & set(w.state.claims) and w.all_bound() and len(w.pods()) == 2:
            break
    plan = present(w.manager.disruption).last_plan
    assert len(went) == 2, plan and [(b.node, b.kind, b.detail) for b in plan.blockers]
    assert len(set(went.values())) == 1, "in one command"
    claims = w.claims()
    assert len(claims) == 2 and not set(old) & {c.name for c in claims}
    assert len({c.status.zone for c in claims}) == 1
