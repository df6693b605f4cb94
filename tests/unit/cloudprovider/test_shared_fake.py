"""The fake cloud shared by several processes through its state file (providers.fake.shared): what one
launches the others list, find again by claim name (no second launch) and terminate."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from providers.fake.shared import SharedFakeProvider
from provisioner.cloudprovider import Instance, NotFound
from testkit.builders import node_claim
from testkit.providers.harness_fake import fake_node_class


def shared(path: str) -> SharedFakeProvider:
    return SharedFakeProvider(state_path=path, cluster_name="c")


def create(fake: SharedFakeProvider, name: str) -> Instance:
    types = [t for t in fake.instance_types(fake_node_class()) if t.name == "m5.large"]
    return fake.create(node_claim(name, options=["m5.large"]), types, fake_node_class())


def test_what_one_replica_launches_the_others_see_and_never_launch_again(tmp_path: Path) -> None:
    path = str(tmp_path / "cloud.json")
    a, b = shared(path), shared(path)
    launched = create(a, "claim-x")
    assert [i.provider_id for i in b.list()] == [launched.provider_id]
    assert create(b, "claim-x").provider_id == launched.provider_id, "found by claim name"
    assert b.launches_by_claim == {"claim-x": 1}
    b.delete(launched.provider_id)
    with pytest.raises(NotFound):
        a.get(launched.provider_id)
    assert a.list() == []


def _launch(path: str, names: list[str]) -> None:
    fake = shared(path)
    for name in names:
        create(fake, name)


def test_processes_launching_at_once_lose_no_instance(tmp_path: Path) -> None:
    path = str(tmp_path / "cloud.json")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_launch, args=(path, [f"p{i}-{j}" for j in range(15)])) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    fake = shared(path)
    assert len(fake.list()) == 45
    assert set(fake.launches_by_claim.values()) == {1}
