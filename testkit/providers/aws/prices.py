"""The price table the fault-and-price proxy serves: realistic on-demand list prices (us-east-1, Linux,
$/h, approximate) and spot prices derived from them with a discount that differs per zone, so tests can
tell zones apart by price. Test data only; the provider's fallback prices live in the built-in catalog.
"""

from __future__ import annotations

ON_DEMAND = {
    "t3.medium": 0.0416,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "r5.large": 0.126,
    "m7g.large": 0.0816,
    "g4dn.xlarge": 0.526,
    "g5.xlarge": 1.006,
    "g6.xlarge": 0.8048,
    "p4d.24xlarge": 21.96,
    "p5.48xlarge": 55.04,
}

ZONE_DISCOUNT = {"a": 0.30, "b": 0.32, "c": 0.34, "d": 0.36, "e": 0.38, "f": 0.40}
"""Spot price as a fraction of on-demand, by the zone's letter: zone a is the cheapest spot pool."""


def spot(instance_type: str, zone: str) -> float:
    return round(ON_DEMAND[instance_type] * ZONE_DISCOUNT.get(zone[-1], 0.42), 6)


def price_list_document(instance_type: str, price: float, region: str) -> dict[str, object]:
    """One GetProducts PriceList entry as the Pricing API writes it (the parts the provider reads)."""
    sku = f"SKU{abs(hash((instance_type, region))) % 10**8:08d}"
    return {
        "product": {
            "productFamily": "Compute Instance",
            "sku": sku,
            "attributes": {
                "instanceType": instance_type,
                "regionCode": region,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
            },
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "pricePerUnit": {"USD": f"{price:.10f}"},
                        }
                    },
                    "sku": sku,
                }
            }
        },
    }
