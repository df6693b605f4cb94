"""Spot preemption on GCP becomes InterruptionEvents, read from zone operations of type
`compute.instances.preempted` through the real client."""

from __future__ import annotations

import pytest

from providers.gcp import GCPProvider
from provisioner.api import labels as wk
from testkit.builders import node_claim
from testkit.providers.gcp.standin import ComputeStandIn
from testkit.providers.harness_gcp import gcp_node_class, make_provider


def launch_spot(provider: GCPProvider, name: str) -> str:
    nc = gcp_node_class()
    claim = node_claim(name, ["e2-standard-4"], node_class=nc, capacity_types=(wk.CAPACITY_TYPE_SPOT,))
    return provider.create(claim, provider.instance_types(nc), nc).provider_id


@pytest.mark.parametrize("deleted", [False, True], ids=["instance-terminated", "instance-deleted"])
def test_a_preempted_spot_instance_becomes_one_interruption_event(
    standin: ComputeStandIn, provider: GCPProvider, deleted: bool
) -> None:
    provider_id = launch_spot(provider, "spot-1")
    launch_spot(provider, "spot-2")
    assert provider.interruptions() == []
    standin.preempt(provider_id.rsplit("/", 1)[-1], delete=deleted)
    events = provider.interruptions()
    assert [(e.provider_id, e.kind) for e in events] == [(provider_id, "preemption")]
    assert events[0].time is not None
    assert "preempted" in events[0].detail
    assert provider.interruptions() == []  # acknowledged once returned


def test_preemptions_of_another_clusters_instances_are_not_reported(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    other = make_provider(standin, cluster_name="test-cluster-2")
    theirs = launch_spot(other, "spot-1")
    standin.preempt(theirs.rsplit("/", 1)[-1])
    assert provider.interruptions() == []
    assert [e.provider_id for e in other.interruptions()] == [theirs]


def test_a_preempted_instance_reads_as_terminated_spot(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    provider_id = launch_spot(provider, "spot-1")
    standin.preempt(provider_id.rsplit("/", 1)[-1])
    got = provider.get(provider_id)
    assert (got.state, got.capacity_type) == ("terminated", wk.CAPACITY_TYPE_SPOT)
