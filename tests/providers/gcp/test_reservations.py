"""Compute Engine reservations over the real client and the local stand-in: a GCPNodeClass's
`spec.reservations` listed with the reservations client, reserved offerings with their free counts,
inserts with the reservation's affinity and labels, and a full reservation failing over alone."""

from __future__ import annotations

from providers.gcp import GCPProvider
from providers.gcp.model import GCPNodeClass, GCPReservations
from provisioner.api import labels as wk
from provisioner.cloudprovider import Offering
from testkit.builders import node_claim
from testkit.providers.gcp.standin import ComputeStandIn
from testkit.providers.harness_gcp import gcp_node_class
from testkit.typed import present

A = "us-central1-a"
RESERVED = wk.CAPACITY_TYPE_RESERVED
BOTH = (RESERVED, wk.CAPACITY_TYPE_ON_DEMAND)


def reserved(provider: GCPProvider, nc: GCPNodeClass, name: str = "a3-highgpu-8g") -> list[Offering]:
    (it,) = [t for t in provider.instance_types(nc) if t.name == name]
    return [o for o in it.offerings if o.capacity_type == RESERVED]


def test_a_reservation_named_by_the_node_class_is_a_reserved_offering_and_others_are_not(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    standin.add_reservation("h100-prod", zone=A, machine_type="a3-highgpu-8g", count=2)
    standin.add_reservation("someone-else", zone=A, machine_type="a3-highgpu-8g", count=5)
    nc = gcp_node_class(reservations=GCPReservations(names=["h100-prod"]))

    (offering,) = reserved(provider, nc)

    assert (offering.zone, offering.price, offering.available) == (A, 0.0, True)
    assert offering.reservation is not None
    assert (offering.reservation.id, offering.reservation.free) == ("h100-prod", 2)
    assert reserved(provider, gcp_node_class()) == []


def test_any_reservation_means_those_that_do_not_require_being_named(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    standin.add_reservation("open", zone=A, machine_type="a3-highgpu-8g", count=1, specific=False)
    standin.add_reservation("named-only", zone=A, machine_type="a3-highgpu-8g", count=1)

    ids = [
        present(o.reservation).id for o in reserved(provider, gcp_node_class(reservations=GCPReservations()))
    ]

    assert ids == ["open"]


def test_a_claim_launches_into_the_reservation_then_falls_to_on_demand_when_it_is_full(
    standin: ComputeStandIn, provider: GCPProvider
) -> None:
    standin.add_reservation("h100-prod", zone=A, machine_type="a3-highgpu-8g", count=1)
    nc = gcp_node_class(reservations=GCPReservations(names=["h100-prod"]))
    types = provider.instance_types(nc)

    first = provider.create(
        node_claim("one", ["a3-highgpu-8g"], node_class=nc, capacity_types=BOTH), types, nc
    )
    second = provider.create(
        node_claim("two", ["a3-highgpu-8g"], node_class=nc, capacity_types=BOTH), types, nc
    )

    assert (first.capacity_type, first.reservation_id, first.price) == (RESERVED, "h100-prod", 0.0)
    body = standin.insert_body(first.provider_id.rsplit("/", 1)[-1])
    assert body["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["h100-prod"],
    }
    assert body["labels"]["provisioner-capacity-reservation"] == "h100-prod"
    assert provider.get(first.provider_id).reservation_id == "h100-prod"
    # The cached offering still says one is free: the stand-in refuses, and only the reservation is out.
    assert second.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND
    second_body = standin.insert_body(second.provider_id.rsplit("/", 1)[-1])
    assert second_body["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    (now,) = reserved(provider, nc)
    assert (now.available, present(now.reservation).free) == (False, 0)
