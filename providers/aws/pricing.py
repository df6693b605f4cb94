"""EC2 prices: on-demand from the AWS Pricing API, spot from DescribeSpotPriceHistory, the built-in
catalog when neither says.

Owns the requests and the reading of their answers; the provider owns caching (with its clock) and
decides when to ask. The Pricing API lives in a few regions only (us-east-1 serves every commercial
region) and is often unreachable from private clusters: any failure there is quiet, logged once, and the
built-in catalog's list prices are used until the next refresh.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from provisioner.cloudprovider import catalog

log = logging.getLogger(__name__)

PRODUCT_DESCRIPTIONS = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]


def pricing_region(region: str) -> str:
    """The region whose Pricing API endpoint serves `region`."""
    if region.startswith("cn-"):
        return "cn-northwest-1"
    if region.startswith(("eu-", "me-", "il-", "af-")):
        return "eu-central-1"
    if region.startswith("ap-"):
        return "ap-south-1"
    return "us-east-1"


def on_demand_filters(region: str) -> list[dict[str, str]]:
    """GetProducts filters for shared-tenancy Linux on-demand instances without licensed software."""
    terms = {
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def read_price_list(items: Iterable[str]) -> dict[str, float]:
    """Instance type -> on-demand $/h from GetProducts' PriceList (JSON documents as strings)."""
    out: dict[str, float] = {}
    for raw in items:
        try:
            doc = json.loads(raw) if isinstance(raw, str) else raw
            type_name = doc["product"]["attributes"]["instanceType"]
            for term in (doc.get("terms", {}).get("OnDemand") or {}).values():
                for dim in (term.get("priceDimensions") or {}).values():
                    price = float(dim["pricePerUnit"]["USD"])
                    if price > 0:
                        out[type_name] = price
        except (KeyError, TypeError, ValueError):
            continue  # a product we cannot read is one we do not price from the API
    return out


def fetch_on_demand(client: Any, region: str) -> dict[str, float]:
    """Every on-demand Linux price of the region from the Pricing API (raises the SDK's errors)."""
    paginator = client.get_paginator("get_products")
    out: dict[str, float] = {}
    for page in paginator.paginate(ServiceCode="AmazonEC2", Filters=on_demand_filters(region)):
        out.update(read_price_list(page.get("PriceList") or []))
    return out


def fetch_spot(
    ec2: Any,
    *,
    instance_types: list[str] | None = None,
    zones: list[str] | None = None,
) -> dict[tuple[str, str], float]:
    """(instance type, zone) -> the latest spot price, from DescribeSpotPriceHistory (raises SDK errors).

    StartTime = now asks EC2 for the price in effect now for each pool, one entry per pool and product.
    """
    params: dict[str, Any] = {
        "StartTime": datetime.now(UTC),
        "ProductDescriptions": PRODUCT_DESCRIPTIONS,
    }
    if instance_types:
        params["InstanceTypes"] = instance_types
    if zones:
        params["Filters"] = [{"Name": "availability-zone", "Values": zones}]
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for page in ec2.get_paginator("describe_spot_price_history").paginate(**params):
        for entry in page.get("SpotPriceHistory") or []:
            try:
                key = (entry["InstanceType"], entry["AvailabilityZone"])
                price = float(entry["SpotPrice"])
            except (KeyError, ValueError):
                continue
            stamp = entry.get("Timestamp") or datetime.min.replace(tzinfo=UTC)
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, price)
    return {k: v[1] for k, v in latest.items()}


def fallback_on_demand(instance_type: str, region: str) -> float | None:
    """The built-in catalog's on-demand list price, or None when it does not list the type or region."""
    try:
        return catalog.on_demand_price("aws", instance_type, region)
    except catalog.CatalogError:
        return None


def fallback_spot(instance_type: str, region: str, zone: str) -> float | None:
    """The built-in catalog's typical spot price, or None."""
    try:
        return catalog.spot_price("aws", instance_type, region, zone)
    except catalog.CatalogError:
        return None
