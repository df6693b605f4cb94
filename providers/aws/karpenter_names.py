"""Karpenter's EC2 name-derived labels (`instance-category`, `instance-generation`, `instance-size`),
which have no label here, rewritten as lists of what they select in a catalog: `instance-family In [...]`
or `node.kubernetes.io/instance-type In [...]`.

Karpenter reads these labels off the EC2 type name (`m6gd.2xlarge`: category `m`, generation `6`, family
`m6gd`, size `2xlarge`); so does this module, over the instance type names the caller passes (the CLI
passes the built-in AWS catalog's). Owns that reading and the matching of Karpenter's operators; which
requirements of a pool to rewrite, and the report, are `provisioner.api.karpenter_objects`'s (through
the aws plug-in's `KarpenterProvider`, providers.aws.karpenter). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from provisioner.api import labels
from provisioner.api.karpenter_providers import Rewrite

CATEGORY = "karpenter.k8s.aws/instance-category"
GENERATION = "karpenter.k8s.aws/instance-generation"
SIZE = "karpenter.k8s.aws/instance-size"
NAME_DERIVED = (CATEGORY, GENERATION, SIZE)
"""The Karpenter keys this module can rewrite."""

# `p4d` -> (`p`, `4`); `inf2` -> (`inf`, `2`); `u-6tb1` and other oddities do not match and are never
# selected by a category or generation requirement.
_FAMILY = re.compile(r"^(?P<category>[a-z]+)(?P<generation>[0-9]+)[a-z0-9-]*$")


@dataclass(frozen=True, slots=True)
class NameLabels:
    """What Karpenter reads off one EC2 instance type name."""

    instance_type: str
    family: str
    size: str
    category: str | None
    generation: str | None

    def value(self, key: str) -> str | None:
        return {CATEGORY: self.category, GENERATION: self.generation, SIZE: self.size}.get(key)


def name_labels(instance_type: str) -> NameLabels:
    family, _, size = instance_type.partition(".")
    found = _FAMILY.match(family)
    return NameLabels(
        instance_type=instance_type,
        family=family,
        size=size,
        category=found["category"] if found else None,
        generation=found["generation"] if found else None,
    )


def matches(value: str | None, operator: str, values: Sequence[str]) -> bool | None:
    """Whether a label value meets one requirement, as Karpenter's operators read it; None for an operator
    this cannot evaluate (the caller keeps the requirement's meaning another way or reports it)."""
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator in ("Gt", "Lt", "Gte", "Lte"):
        try:
            bound = int(values[0])
        except (IndexError, TypeError, ValueError):
            return None
        if value is None or not value.isdigit():
            return False
        number = int(value)
        return {
            "Gt": number > bound,
            "Lt": number < bound,
            "Gte": number >= bound,
            "Lte": number <= bound,
        }[operator]
    return None


def rewrite(requirements: Sequence[dict[str, object]], instance_types: Iterable[str]) -> Rewrite:
    """One `In` requirement selecting what all of `requirements` (name-derived, ANDed as Karpenter does)
    select among `instance_types`. Families when no requirement reads the size, else instance types."""
    on_size = any(r.get("key") == SIZE for r in requirements)
    selected: set[str] = set()
    for parsed in map(name_labels, instance_types):
        ok = True
        for req in requirements:
            values = req.get("values")
            result = matches(
                parsed.value(str(req.get("key"))),
                str(req.get("operator")),
                [str(v) for v in values] if isinstance(values, list) else [],
            )
            if result is None:
                return Rewrite(
                    None, f"operator {req.get('operator')!r} on {req.get('key')} cannot be evaluated"
                )
            ok = ok and result
        if ok:
            selected.add(parsed.instance_type if on_size else parsed.family)
    key = labels.INSTANCE_TYPE if on_size else labels.INSTANCE_FAMILY
    what = "instance types" if on_size else "families"
    if not selected:
        return Rewrite(None, f"no {what} of the catalog match")
    return Rewrite(
        {"key": key, "operator": "In", "values": sorted(selected)},
        f"{key} In [{len(selected)} {what} of the AWS catalog]",
    )
