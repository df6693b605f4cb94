"""The requirements algebra the scheduler computes with: per label key, which values a node may carry.

A `KeyReq` is the intersection of any number of node selector requirements on one key (In, NotIn,
Exists, DoesNotExist, Gt, Lt); `Reqs` maps keys to them. Values are small, immutable and hashable so
decisions can be cached per shape. Conversions from the API (`Requirement`), from pods (node selector
plus the OR of required node affinity terms) and back to `Requirement` for NodeClaims live here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from provisioner.api.common import Operator, Requirement
from provisioner.state.objects import SelectorRequirement


@dataclass(frozen=True, slots=True)
class KeyReq:
    """What one label key may be on a node. The empty constraint (`ANY`) admits everything."""

    allowed: frozenset[str] | None = None
    """The only values allowed (In), or None for any value."""
    excluded: frozenset[str] = frozenset()
    gt: int | None = None
    lt: int | None = None
    absent_ok: bool = True
    """The label may be missing."""
    present_ok: bool = True
    """The label may be present (False after DoesNotExist)."""

    def matches(self, value: str | None) -> bool:
        """Whether a node whose label is `value` (None: missing) satisfies this constraint."""
        if value is None:
            return self.absent_ok
        if not self.present_ok:
            return False
        if self.allowed is not None and value not in self.allowed:
            return False
        if value in self.excluded:
            return False
        if self.gt is not None or self.lt is not None:
            try:
                number = int(value)
            except ValueError:
                return False
            if self.gt is not None and number <= self.gt:
                return False
            if self.lt is not None and number >= self.lt:
                return False
        return True

    def intersect(self, other: KeyReq) -> KeyReq:
        if other is ANY or other == self:
            return self
        if self is ANY:
            return other
        if self.allowed is None:
            allowed = other.allowed
        elif other.allowed is None:
            allowed = self.allowed
        else:
            allowed = self.allowed & other.allowed
        gt = other.gt if self.gt is None else (self.gt if other.gt is None else max(self.gt, other.gt))
        lt = other.lt if self.lt is None else (self.lt if other.lt is None else min(self.lt, other.lt))
        out = KeyReq(
            allowed=allowed,
            excluded=self.excluded | other.excluded,
            gt=gt,
            lt=lt,
            absent_ok=self.absent_ok and other.absent_ok,
            present_ok=self.present_ok and other.present_ok,
        )
        if out.allowed is not None:
            # Keep `allowed` exact so emptiness and narrowing are a set test.
            kept = frozenset(v for v in out.allowed if out._value_ok(v))
            out = KeyReq(kept, frozenset(), gt, lt, out.absent_ok, out.present_ok)
        return out

    def _value_ok(self, value: str) -> bool:
        return KeyReq(None, self.excluded, self.gt, self.lt, False, True).matches(value)

    @property
    def empty(self) -> bool:
        """No node can satisfy it: the label may neither be missing nor carry any value."""
        if self.absent_ok:
            return False
        if not self.present_ok:
            return True
        if self.allowed is not None and not self.allowed:
            return True
        return self.gt is not None and self.lt is not None and self.lt - self.gt <= 1

    @property
    def single(self) -> str | None:
        """The one value a node must carry, if exactly one is allowed."""
        if self.allowed is not None and len(self.allowed) == 1 and not self.absent_ok:
            return next(iter(self.allowed))
        return None

    def describe(self) -> str:
        """`In [a, b]`, `NotIn [c]`, `Gt 4`, `Exists`, `DoesNotExist` (joined by `, `)."""
        parts: list[str] = []
        if not self.present_ok:
            return "DoesNotExist"
        if self.allowed is not None:
            parts.append(f"In [{', '.join(sorted(self.allowed))}]")
        if self.excluded:
            parts.append(f"NotIn [{', '.join(sorted(self.excluded))}]")
        if self.gt is not None:
            parts.append(f"Gt {self.gt}")
        if self.lt is not None:
            parts.append(f"Lt {self.lt}")
        if not parts:
            parts.append("Exists" if not self.absent_ok else "any")
        return ", ".join(parts)

    def to_requirements(self, key: str) -> list[Requirement]:
        """The API requirements that express this constraint (for a NodeClaim)."""
        mk = Requirement.model_construct
        if not self.present_ok:
            return [mk(key=key, operator=Operator.DOES_NOT_EXIST, values=[], min_values=None)]
        out: list[Requirement] = []
        if self.allowed is not None:
            out.append(mk(key=key, operator=Operator.IN, values=sorted(self.allowed), min_values=None))
            return out
        if self.excluded:
            out.append(mk(key=key, operator=Operator.NOT_IN, values=sorted(self.excluded), min_values=None))
        if self.gt is not None:
            out.append(mk(key=key, operator=Operator.GT, values=[str(self.gt)], min_values=None))
        if self.lt is not None:
            out.append(mk(key=key, operator=Operator.LT, values=[str(self.lt)], min_values=None))
        if not out and not self.absent_ok:
            out.append(mk(key=key, operator=Operator.EXISTS, values=[], min_values=None))
        return out


ANY = KeyReq()


def key_req(operator: str, values: Iterable[str] = ()) -> KeyReq:
    """One requirement as a KeyReq. Unknown operators admit nothing (Kubernetes rejects them anyway)."""
    vals = frozenset(str(v) for v in values)
    if operator == "In":
        return KeyReq(allowed=vals, absent_ok=False)
    if operator == "NotIn":
        return KeyReq(excluded=vals)
    if operator == "Exists":
        return KeyReq(absent_ok=False)
    if operator == "DoesNotExist":
        return KeyReq(present_ok=False)
    if operator in ("Gt", "Lt"):
        try:
            bound = int(next(iter(vals)))
        except (StopIteration, ValueError):
            return KeyReq(allowed=frozenset(), absent_ok=False)
        return KeyReq(gt=bound, absent_ok=False) if operator == "Gt" else KeyReq(lt=bound, absent_ok=False)
    return KeyReq(allowed=frozenset(), absent_ok=False)


@dataclass(frozen=True, slots=True)
class Reqs:
    """Constraints on several keys (AND). Hashable: `items` is sorted by key."""

    items: tuple[tuple[str, KeyReq], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, KeyReq]) -> Reqs:
        return cls(tuple(sorted((k, v) for k, v in mapping.items() if v is not ANY and v != ANY)))

    def get(self, key: str) -> KeyReq:
        for k, v in self.items:
            if k == key:
                return v
        return ANY

    def intersect(self, other: Reqs) -> Reqs:
        if not other.items:
            return self
        if not self.items:
            return other
        merged = dict(self.items)
        for key, req in other.items:
            merged[key] = merged[key].intersect(req) if key in merged else req
        return Reqs.of(merged)

    def conflict(self) -> str | None:
        """The first key no node could satisfy, or None."""
        for key, req in self.items:
            if req.empty:
                return key
        return None

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(req.matches(labels.get(key)) for key, req in self.items)

    def to_requirements(self) -> list[Requirement]:
        out: list[Requirement] = []
        for key, req in self.items:
            out.extend(req.to_requirements(key))
        return out

    def describe(self) -> str:
        return "; ".join(f"{k} {v.describe()}" for k, v in self.items)


EMPTY = Reqs()


def from_api(requirements: Iterable[Requirement]) -> Reqs:
    merged: dict[str, KeyReq] = {}
    for r in requirements:
        req = key_req(r.operator.value, r.values)
        merged[r.key] = merged[r.key].intersect(req) if r.key in merged else req
    return Reqs.of(merged)


def from_selector(requirements: Iterable[SelectorRequirement]) -> Reqs:
    merged: dict[str, KeyReq] = {}
    for r in requirements:
        req = key_req(r.operator, r.values)
        merged[r.key] = merged[r.key].intersect(req) if r.key in merged else req
    return Reqs.of(merged)


def from_labels(labels: Mapping[str, str]) -> Reqs:
    return Reqs.of({k: KeyReq(allowed=frozenset({v}), absent_ok=False) for k, v in labels.items()})


def pod_alternatives(
    node_selector: Mapping[str, str], terms: tuple[tuple[SelectorRequirement, ...], ...]
) -> tuple[Reqs, ...]:
    """A pod's node constraints as an OR of Reqs: node selector AND each required affinity term."""
    base = from_labels(node_selector)
    if not terms:
        return (base,)
    return tuple(base.intersect(from_selector(term)) for term in terms)
