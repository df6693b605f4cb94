"""The Compute stand-in's group launches: `instances.bulkInsert` (zonal) with `count` and `minCount`,
finite capacity per (machine type, zone, provisioning model), resource policies (compact placement),
and the physical host topology of instances launched with one.

What Compute Engine documents and the stand-in does: a bulkInsert names its instances in
`perInstanceProperties` (or a `namePattern`), shares `instanceProperties` (a bare machine type name);
it creates at least `minCount` (default `count`) of them or none: a stocked-out offering, or one with
less room than `minCount`, ends the operation with `ZONE_RESOURCE_POOL_EXHAUSTED` and nothing created.
With room between `minCount` and `count`, it creates what fits. `ignore_min_count` makes the stand-in
create what fits whatever `minCount` says (a cloud without the all-or-nothing call), so the provider's
cleanup can be tested. Instances named in `resourcePolicies` by a COLLOCATED group placement policy get
`resourceStatus.physicalHostTopology` (cluster, block, subblock, host): one block per policy, two
instances per subblock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testkit.providers.gcp.standin import State


def bulk_insert(st: State, zone: str, body: dict[str, Any]) -> dict[str, Any]:
    from testkit.providers.gcp.standin import API, _insert, _invalid, _new_operation

    props = dict(body.get("instanceProperties") or {})
    count = int(body.get("count", 0))
    min_count = int(body.get("minCount", count) or count)
    names = list((body.get("perInstanceProperties") or {}).keys())
    if body.get("namePattern") or not names:
        raise _invalid("bulkInsertInstanceResource.perInstanceProperties", "", "The stand-in wants names.")
    if count != len(names) or not 1 <= min_count <= count:
        raise _invalid("bulkInsertInstanceResource.minCount", min_count, "Must be within [1, count].")
    mt = str(props.get("machineType", ""))
    model = (props.get("scheduling") or {}).get("provisioningModel", "STANDARD")
    if "/" in mt:
        raise _invalid("instanceProperties.machineType", mt, "Must be a machine type name, not a URL.")
    for policy in props.get("resourcePolicies") or []:
        if _policy(st, policy) is None:
            raise _invalid("instanceProperties.resourcePolicies", policy, "Resource policy not found.")
    room = st.capacity.get((mt, zone, model))
    need = 1 if st.ignore_min_count else min_count
    target = {
        "selfLink": f"{API}/projects/{st.catalog.project}/zones/{zone}/instances",
        "id": str(next(st.ids)),
    }
    op = _new_operation(st, zone=zone, op_type="bulkInsert", target=target)
    if (mt, zone, model) in st.stockouts or (room is not None and room < need):
        st.pending[(zone, op["name"])] = {
            "error": (
                "ZONE_RESOURCE_POOL_EXHAUSTED",
                f"The zone 'projects/{st.catalog.project}/zones/{zone}' does not have enough resources "
                f"available to fulfill the request for {min_count} instances of {mt}.",
            )
        }
        return op
    metric = st.quota.get((mt, model))
    if metric:
        st.pending[(zone, op["name"])] = {"error": ("QUOTA_EXCEEDED", f"Quota '{metric}' exceeded.")}
        return op
    made = []
    for name in names[: count if room is None else min(count, room)]:
        per = {"name": name, "machineType": f"zones/{zone}/machineTypes/{mt}"}
        _insert(st, zone, {**_urls(props, zone), **per})
        made.append((zone, name))
        _place(st, zone, name, props)
    for key in [k for k, effect in st.pending.items() if effect.get("start") in made]:
        # One operation for the whole bulkInsert: the per-instance ones `_insert` opened are not the API's.
        del st.pending[key]
        del st.operations[key]
    st.pending[(zone, op["name"])] = {"start_many": made}
    return op


def _urls(props: dict[str, Any], zone: str) -> dict[str, Any]:
    """Instance properties as an insert body: names turned into the zonal URLs insert wants."""
    body = dict(props)
    body["disks"] = [
        {
            **d,
            "initializeParams": {
                **(d.get("initializeParams") or {}),
                "diskType": f"zones/{zone}/diskTypes/{(d.get('initializeParams') or {}).get('diskType', 'pd-balanced')}",
            },
        }
        for d in props.get("disks") or []
    ]
    body["guestAccelerators"] = [
        {**a, "acceleratorType": f"zones/{zone}/acceleratorTypes/{a['acceleratorType']}"}
        for a in props.get("guestAccelerators") or []
    ]
    return body


def _policy(st: State, ref: str) -> dict[str, Any] | None:
    name = ref.rstrip("/").rsplit("/", 1)[-1]
    return next((p for (_, n), p in st.resource_policies.items() if n == name), None)


def _place(st: State, zone: str, name: str, props: dict[str, Any]) -> None:
    for ref in props.get("resourcePolicies") or []:
        policy = _policy(st, ref)
        if policy and (policy.get("groupPlacementPolicy") or {}).get("collocation") == "COLLOCATED":
            st.instances[(zone, name)]["resourcePolicies"] = [policy["selfLink"]]
            peers = sum(
                1
                for inst in st.instances.values()
                if policy["selfLink"] in (inst.get("resourcePolicies") or [])
            )
            block = f"block-{policy['id']}"
            st.instances[(zone, name)]["resourceStatus"] = {
                "physicalHostTopology": {
                    "cluster": f"cluster-{zone}",
                    "block": block,
                    "subblock": f"{block}-sub{(peers - 1) // 2}",
                    "host": f"host-{name}",
                }
            }


def resource_policies(
    st: State, verb: str, region: str, tail: list[str], body: dict[str, Any]
) -> dict[str, Any]:
    from testkit.providers.gcp.standin import _NAME, API, ApiError, _invalid

    base = f"{API}/projects/{st.catalog.project}/regions/{region}/resourcePolicies"
    if verb == "POST" and not tail:
        name = body.get("name", "")
        if not _NAME.match(name):
            raise _invalid("resource.name", name, "Must be a match of regex '[a-z]([-a-z0-9]*[a-z0-9])?'")
        if (region, name) in st.resource_policies:
            raise ApiError(409, f"The resource '{base}/{name}' already exists", "alreadyExists")
        policy = {
            **body,
            "kind": "compute#resourcePolicy",
            "id": str(next(st.ids)),
            "region": f"{API}/projects/{st.catalog.project}/regions/{region}",
            "selfLink": f"{base}/{name}",
            "status": "READY",
        }
        st.resource_policies[(region, name)] = policy
        return _region_operation(st, region, "insert", policy)
    if verb == "GET" and not tail:
        items = [p for (r, _), p in sorted(st.resource_policies.items()) if r == region]
        return {"kind": "compute#resourcePolicyList", "items": items}
    if len(tail) == 1 and (region, tail[0]) in st.resource_policies:
        policy = st.resource_policies[(region, tail[0])]
        if verb == "GET":
            return policy
        if verb == "DELETE":
            if any(policy["selfLink"] in (i.get("resourcePolicies") or []) for i in st.instances.values()):
                raise ApiError(
                    400,
                    f"The resource_policy resource '{base}/{tail[0]}' is already being used by an instance",
                    "resourceInUseByAnotherResource",
                )
            del st.resource_policies[(region, tail[0])]
            return _region_operation(st, region, "delete", policy)
    raise ApiError(404, f"The resource '{base}/{'/'.join(tail)}' was not found", "notFound")


def _region_operation(st: State, region: str, op_type: str, target: dict[str, Any]) -> dict[str, Any]:
    """A DONE regional operation (resource policies are regional; the stand-in applies them at once)."""
    from testkit.providers.gcp.standin import API, _now

    ident = str(next(st.ids))
    name = f"operation-{ident}"
    base = f"{API}/projects/{st.catalog.project}/regions/{region}"
    op = {
        "kind": "compute#operation",
        "id": ident,
        "name": name,
        "region": base,
        "operationType": op_type,
        "targetLink": target.get("selfLink", ""),
        "status": "DONE",
        "progress": 100,
        "insertTime": _now(),
        "endTime": _now(),
        "selfLink": f"{base}/operations/{name}",
    }
    st.operations[(f"regions/{region}", name)] = op
    return op


def region_operation(st: State, region: str, tail: list[str]) -> dict[str, Any]:
    from testkit.providers.gcp.standin import ApiError

    op = st.operations.get((f"regions/{region}", tail[0] if tail else ""))
    if op is None:
        raise ApiError(404, f"The resource 'operations/{'/'.join(tail)}' was not found", "notFound")
    return op
