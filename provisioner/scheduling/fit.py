"""Pool fit: one pod shape (a variant of its constraints) against one pool before any node exists. The
answer is either the narrowed requirements with the options that hold the pod alone (cheapest first), or
why not in plain words: taints, conflicting requirements, labels the pool's nodes lack, no type big
enough, every offering unavailable, `minValues` not met.

Limits and topology are checked when a node is opened (`pools`, `topology`), not here."""

from __future__ import annotations

from collections.abc import Sequence

from provisioner.api import accelerators, mig, quantities
from provisioner.api import labels as wk
from provisioner.scheduling import requirements as rq
from provisioner.scheduling.offerings import (
    OFFERING_KEYS,
    TYPE_KEYS,
    OptionCache,
    PoolType,
    any_offering,
    labels_ok,
    short_of_min_values,
)
from provisioner.scheduling.pools import Pool
from provisioner.scheduling.resources import Dims, Vec, fits, fmt, le
from provisioner.scheduling.variant import PoolFit, Variant
from provisioner.state.objects import PREFER_NO_SCHEDULE, TaintValue, tolerates_all


def untolerated(v: Variant, taints: tuple[TaintValue, ...]) -> TaintValue | None:
    """The first taint that keeps the variant off a node: NoSchedule/NoExecute not tolerated, and
    PreferNoSchedule too while the variant avoids those."""
    taint = tolerates_all(v.tolerations, taints)
    if taint is None and v.avoid_soft_taints:
        taint = next(
            (
                t
                for t in taints
                if t.effect == PREFER_NO_SCHEDULE and not any(tol.tolerates(t) for tol in v.tolerations)
            ),
            None,
        )
    return taint


def fmt_taint(t: TaintValue) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def labels_missing(alt: rq.Reqs, pool: Pool) -> str | None:
    """A requirement on a label the pool's nodes never carry (neither the pool, the type nor the offering
    sets it) that absence does not satisfy, or None."""
    for key, req in alt.items:
        if key in pool.label_keys or key in TYPE_KEYS or key in OFFERING_KEYS:
            continue
        if not req.matches(None):
            return key
    return None


def pool_fit(v: Variant, pool: Pool, *, cache: OptionCache, dims: Dims) -> PoolFit | str:
    """The variant against the pool alone (cached on the variant): a fit, or why not in plain words."""
    cached = v.pool_fit.get(pool.index)
    if cached is not None:
        return cached
    result = _pool_fit(v, pool, cache=cache, dims=dims)
    v.pool_fit[pool.index] = result
    return result


def _pool_fit(v: Variant, pool: Pool, *, cache: OptionCache, dims: Dims) -> PoolFit | str:
    taint = untolerated(v, pool.taints)
    if taint is not None:
        return f"taint {fmt_taint(taint)} is not tolerated"
    if not pool.types:
        if pool.declared_types == 0:
            return "its NodeClass offers no instance types"
        return f"no instance type of its NodeClass meets the pool's requirements ({pool.reqs.describe()})"
    reasons: list[str] = []
    best: PoolFit | None = None
    for alt in v.alts:
        result = _alt_fit(v, pool, alt, cache=cache, dims=dims)
        if isinstance(result, str):
            reasons.append(result)
            continue
        if best is None or result.standalone < best.standalone:
            best = result
    if best is not None:
        return best
    return reasons[0] if len(set(reasons)) == 1 else " or ".join(dict.fromkeys(reasons))


def _alt_fit(v: Variant, pool: Pool, alt: rq.Reqs, *, cache: OptionCache, dims: Dims) -> PoolFit | str:
    merged = pool.reqs.intersect(alt)
    key = merged.conflict()
    if key is not None:
        return (
            f"requirement {key} {alt.get(key).describe()} conflicts with the pool's "
            f"{key} {pool.reqs.get(key).describe()}"
        )
    missing = labels_missing(alt, pool)
    if missing is not None:
        return (
            f"requirement {missing} {alt.get(missing).describe()}: "
            f"the pool's nodes do not carry label {missing}"
        )
    options = cache.options(pool.index, pool.types, merged)
    req = v.req
    for price, t, _ in options:
        if all(map(le, req, t.alloc)):
            if pool.min_values:
                short = short_of_min_values(pool.min_values, [o for o in options if fits(req, o[1].alloc)])
                if short is not None:
                    return short
            return PoolFit(reqs=merged, options=options, standalone=price)
    return cache.reason((pool.index, alt, req), lambda: _why_no_type(v, pool, alt, merged, dims=dims))


def _why_no_type(v: Variant, pool: Pool, alt: rq.Reqs, merged: rq.Reqs, *, dims: Dims) -> str:
    """Why no option of the pool holds the pod: a key no type offers, no type big enough, or every
    offering of the types that fit unavailable."""
    matching = [t for t in pool.types if labels_ok(t.it, merged) and any_offering(t.it, merged)]
    if not matching:
        for key, kreq in alt.items:
            if key not in TYPE_KEYS and key not in OFFERING_KEYS:
                continue
            single = rq.Reqs(((key, kreq),))
            if any(labels_ok(t.it, single) and any_offering(t.it, single) for t in pool.types):
                continue
            if key == wk.ZONE:
                offered = sorted({o.zone for t in pool.types for o in t.it.offerings})
            elif key == wk.CAPACITY_TYPE:
                offered = sorted({o.capacity_type for t in pool.types for o in t.it.offerings})
            else:
                offered = sorted({t.it.labels.get(key, "") for t in pool.types} - {""})
            if not offered:
                return f"no instance type of the pool carries {key} (wanted {kreq.describe()})"
            shown = ", ".join(offered[:8]) + (", ..." if len(offered) > 8 else "")
            if key == wk.GPU_NAME:
                regions = sorted({t.it.labels.get(wk.REGION, "") for t in pool.types} - {""})
                where = f" in {', '.join(regions)}" if regions else ""
                return (
                    f"no instance type{where} offers gpu-name {kreq.describe()}; "
                    f"the pool's catalog has {', '.join(offered)}"
                )
            return f"no instance type has {key} {kreq.describe()} (the pool offers: {shown})"
        return f"no instance type meets the requirements {alt.describe()}"
    req = v.req
    fitting = [t for t in matching if fits(req, t.alloc)]
    if not fitting:
        slices = _why_no_slices(pool, matching, req, dims=dims)
        if slices is not None:
            return slices
        short = [i for i, a in enumerate(req) if a > max(t.alloc[i] for t in matching)]
        if short:
            largest = max(matching, key=lambda t: (tuple(t.alloc[i] for i in short), t.it.name))
        else:
            largest = max(matching, key=lambda t: (t.alloc, t.it.name))
            short = [i for i, a in enumerate(req) if a > largest.alloc[i]]
        have = ", ".join(f"{dims.names[i]} {fmt(dims.names[i], largest.alloc[i])}" for i in short)
        wanted = dims.describe(tuple(0 if dims.names[i] == quantities.PODS else a for i, a in enumerate(req)))
        return (
            f"no instance type is big enough for {wanted}; the largest is "
            f"{largest.it.name} with {have} allocatable"
        )
    zreq, creq = merged.get(wk.ZONE), merged.get(wk.CAPACITY_TYPE)
    gone = sorted(
        f"{t.it.name} {o.capacity_type} {o.zone}"
        for t in fitting
        for o in t.it.offerings
        if zreq.matches(o.zone) and creq.matches(o.capacity_type)
    )
    shown = ", ".join(gone[:6]) + (f" and {len(gone) - 6} more" if len(gone) > 6 else "")
    return f"every offering of the {len(fitting)} instance types that fit is unavailable ({shown})"


def _why_no_slices(pool: Pool, matching: Sequence[PoolType], req: Vec, *, dims: Dims) -> str | None:
    """When the pod asks for a MIG slice no type of the pool offers at all: what the pool's layout makes
    instead, and which layouts make the slice. None when that is not why."""
    missing = [
        dims.names[i]
        for i, a in enumerate(req)
        if a > 0 and accelerators.is_mig(dims.names[i]) and not any(t.alloc[i] for t in matching)
    ]
    if not missing:
        return None
    layout = mig.layout_of(pool.pool.spec.template.metadata.labels)
    holders = mig.holders(missing[0])
    where = f"; layouts that make it: {', '.join(holders)}" if holders else "; no MIG layout makes it"
    if not any(t.it.gpu is not None and t.it.gpu.manufacturer == "nvidia" for t in matching):
        return f"the pool's instance types have no NVIDIA GPUs to slice into {missing[0]}{where}"
    if layout is None:
        return (
            f"the pool's nodes offer whole GPUs, not {missing[0]} "
            f"(its template labels name no {mig.MIG_CONFIG_LABEL}){where}"
        )
    made = sorted({k for t in matching for k, v in t.it.capacity.items() if v and accelerators.is_mig(k)})
    return f"the pool's MIG layout {layout} makes {', '.join(made) or 'no slices'}, not {missing[0]}{where}"
