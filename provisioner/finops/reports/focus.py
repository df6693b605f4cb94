"""The showback as a FOCUS export (the FinOps Foundation's FinOps Open Cost and Usage Specification, 1.0).

One charge row per node, clock hour and team share, one per reservation and clock hour for its unused part
(CommitmentDiscount* columns: Used on a reserved node's shares, Unused on the idle part), with `Tags`
naming the team, the pool and whether the share is workload or idle, so FinOps tools allocate the cost as
`provisioner.finops.reports.costs` (which divides it: `costs.shares`) does. Prices are list prices:
BilledCost, EffectiveCost, ListCost and ContractedCost are equal (the provisioner knows no discounts). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from provisioner.api.plugins import BILLING_NAMES
from provisioner.finops.reports.costs import shares
from provisioner.finops.reports.text import csv_text
from provisioner.finops.rows import ReservationRow, UsageRow

FOCUS_COLUMNS = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
)
"""FOCUS 1.0's columns, in the spec's alphabetical order."""


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _provider(provider_id: str) -> str:
    scheme = provider_id.split("://", 1)[0] if "://" in provider_id else ""
    return BILLING_NAMES.get(scheme, scheme or "unknown")


COMMITMENT_TYPES = {"capacity-block": "Capacity Block", "default": "Capacity Reservation"}
"""FOCUS CommitmentDiscountType per reservation kind (the provider's own names)."""


def focus_rows(
    usage: Sequence[UsageRow], reservations: Sequence[ReservationRow] = (), *, cluster: str = ""
) -> list[list[Any]]:
    """FOCUS 1.0 rows: one per node, clock hour and team share, and one per reservation and clock hour
    for its unused part (values in `FOCUS_COLUMNS` order). A share of a node in a reservation, and a
    reservation's unused part, carry the CommitmentDiscount* columns (Used / Unused)."""
    # A reservation's cloud is the cloud of the nodes that ran in it.
    providers = {u.reservation_id: _provider(u.provider_id) for u in usage if u.reservation_id}
    out = []
    for s in shares(usage, reservations):
        u, r = s.usage, s.reservation
        month = s.hour.replace(day=1, hour=0)
        next_month = (month + timedelta(days=32)).replace(day=1)
        if u is not None:
            price = u.price_per_hour + (r.price_per_hour if r is not None else 0.0)
            provider = _provider(u.provider_id)
            capacity, instance_type, zone, region = u.capacity_type, u.instance_type, u.zone, u.region
            resource, what = u.provider_id or s.node, f"node {s.node}, {s.kind} share of {s.team}"
        else:
            assert r is not None
            price, provider, capacity = r.price_per_hour, "unknown", "reserved"
            instance_type, zone, region, resource = r.instance_type, r.zone, "", r.reservation_id
            what = f"reservation {r.reservation_id}, unused part charged to {s.team}"
            provider = providers.get(r.reservation_id, provider)
        # Instance-hours in this share, so that ListUnitPrice x PricingQuantity = ListCost.
        quantity = round(s.cost / price, 6) if price else 0.0
        tags = {
            "provisioner.sh/nodepool": s.nodepool,
            "provisioner.sh/team": s.team,
            "provisioner.sh/allocation": s.kind,
            "provisioner.sh/capacity-type": capacity,
        }
        cost = round(s.cost, 6)
        committed = r is not None
        values = {
            "AvailabilityZone": zone or None,
            "BilledCost": cost,
            "BillingAccountId": cluster or "provisioner",
            "BillingAccountName": cluster or "provisioner",
            "BillingCurrency": "USD",
            "BillingPeriodEnd": _stamp(next_month),
            "BillingPeriodStart": _stamp(month),
            "ChargeCategory": "Usage",
            "ChargeClass": None,
            "ChargeDescription": f"{instance_type} {capacity} {what}",
            "ChargeFrequency": "Usage-Based",
            "ChargePeriodEnd": _stamp(s.hour + timedelta(hours=1)),
            "ChargePeriodStart": _stamp(s.hour),
            "CommitmentDiscountCategory": "Usage" if committed else None,
            "CommitmentDiscountId": r.reservation_id if r is not None else None,
            "CommitmentDiscountName": r.reservation_id if r is not None else None,
            "CommitmentDiscountStatus": ("Used" if u is not None else "Unused") if committed else None,
            "CommitmentDiscountType": COMMITMENT_TYPES.get(r.kind, r.kind) if r is not None else None,
            "ConsumedQuantity": quantity if u is not None else None,
            "ConsumedUnit": "Hours" if u is not None else None,
            "ContractedCost": cost,
            "ContractedUnitPrice": price,
            "EffectiveCost": cost,
            "InvoiceIssuerName": provider,
            "ListCost": cost,
            "ListUnitPrice": price,
            "PricingCategory": "Committed"
            if committed
            else ("Dynamic" if capacity == "spot" else "Standard"),
            "PricingQuantity": quantity,
            "PricingUnit": "Hours",
            "ProviderName": provider,
            "PublisherName": provider,
            "RegionId": region or None,
            "RegionName": region or None,
            "ResourceId": resource,
            "ResourceName": s.node,
            "ResourceType": "Virtual Machine" if u is not None else "Capacity Reservation",
            "ServiceCategory": "Compute",
            "ServiceName": "Kubernetes nodes (provisioner)",
            "SkuId": instance_type,
            "SkuPriceId": f"{instance_type}/{capacity}/{region or zone or '-'}",
            "SubAccountId": s.nodepool,
            "SubAccountName": s.nodepool,
            "Tags": json.dumps(tags, sort_keys=True),
        }
        out.append([values[c] for c in FOCUS_COLUMNS])
    return out


def to_focus_csv(
    usage: Sequence[UsageRow], reservations: Sequence[ReservationRow] = (), *, cluster: str = ""
) -> str:
    return csv_text(FOCUS_COLUMNS, focus_rows(usage, reservations, cluster=cluster))
