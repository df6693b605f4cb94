"""Kubernetes quantities, parsed exactly.

`parse_quantity("1.5Gi")` gives a Decimal; `to_base_units(resource, q)` gives the integer the rest of the
project computes with: millicores for `cpu`, whole units (bytes, GPUs, pods) for everything else. No float
ever touches capacity arithmetic.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")

ResourceList = dict[str, int]
"""Resource name -> integer amount in base units (millicores for cpu)."""


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """Parse `100m`, `4Gi`, `1.5`, `2e3` (or a number) into an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, float | Decimal) and not math.isfinite(value):
        raise QuantityError(f"{value!r} is not a quantity (it must be a finite number)")
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity (examples: 100m, 1.5, 4Gi, 500Mi, 2G)")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        amount = Decimal(number)
    except InvalidOperation as err:  # pragma: no cover - the regex admits only valid numbers
        raise QuantityError(f"{value!r} is not a Kubernetes quantity") from err
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    return amount * _DECIMAL[suffix]


@functools.lru_cache(maxsize=8192, typed=True)
def to_base_units(resource: str, value: str | int | float | Decimal) -> int:
    """A quantity in the integer unit the project uses: millicores for cpu, base units otherwise.

    Rounds up, as Kubernetes does for requests (`0.5m` cpu is 1 millicore). Remembered: a cluster's pods
    repeat a few quantities, and every pod written (a binding, a status) is parsed again. (`typed`, so
    `True` is never taken for a remembered `1`.)
    """
    amount = parse_quantity(value)
    if resource == CPU:
        amount *= 1000
    return math.ceil(amount)


def parse_resource_list(resources: Mapping[str, str | int | float] | None) -> ResourceList:
    """`{"cpu": "500m", "memory": "1Gi"}` -> `{"cpu": 500, "memory": 1073741824}`."""
    return {name: to_base_units(name, value) for name, value in (resources or {}).items()}


def format_quantity(resource: str, amount: int) -> str:
    """The inverse of `to_base_units`, for people and for manifests: 1500 cpu -> `1500m`, bytes -> `Mi`/`Gi`."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource in (MEMORY, EPHEMERAL_STORAGE) and amount:
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)


def add(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """Sum of two resource lists."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """`a - b`, keeping every key of either side (negative means over-committed)."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """Every requested amount is available (a resource the node lacks counts as 0)."""
    return all(amount <= available.get(name, 0) for name, amount in requests.items() if amount > 0)


def exceeded(used: Mapping[str, int], limits: Mapping[str, int]) -> list[str]:
    """The names of the limits that `used` goes over."""
    return [name for name, limit in limits.items() if used.get(name, 0) > limit]
