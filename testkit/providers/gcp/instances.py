"""The Compute stand-in's instances and zone operations: instances.insert (with the name, label and
GPU scheduling checks Compute Engine makes, and the stockout and quota hooks), get, list and delete, the
instance resource as the API answers it, and zone operations (get, list, wait) whose completion applies
what they were for.
"""

from __future__ import annotations

import json
import time
from typing import Any

from testkit.providers.gcp import bulk
from testkit.providers.gcp.listing import _page, _zone_instances
from testkit.providers.gcp.state import _LABEL_KEY, _LABEL_VALUE, _NAME, API, ApiError, State, _invalid, _now


def _instances(
    st: State, verb: str, zone: str, tail: list[str], query: dict[str, str], body: dict[str, Any]
) -> dict[str, Any]:
    if verb == "GET" and not tail:
        return _page(st, "compute#instanceList", _zone_instances(st, zone), query)
    if verb == "POST" and not tail:
        return _insert(st, zone, body)
    if verb == "POST" and tail == ["bulkInsert"]:
        return bulk.bulk_insert(st, zone, body)
    if len(tail) == 1:
        key = (zone, tail[0])
        if key not in st.instances:
            raise ApiError(
                404,
                f"The resource 'projects/{st.catalog.project}/zones/{zone}/instances/{tail[0]}' was not found",
                "notFound",
            )
        if verb == "GET":
            return st.instances[key]
        if verb == "DELETE":
            inst = st.instances[key]
            inst["status"] = "STOPPING"
            op = _new_operation(st, zone=zone, op_type="delete", target=inst)
            st.pending[(zone, op["name"])] = {"delete": key}
            return op
    raise ApiError(404, "not served by the stand-in", "notFound")


def _insert(st: State, zone: str, body: dict[str, Any]) -> dict[str, Any]:
    name = body.get("name", "")
    if not _NAME.match(name):
        raise _invalid(
            "resource.name", name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
        )
    if (zone, name) in st.instances:
        raise ApiError(
            409,
            f"The resource 'projects/{st.catalog.project}/zones/{zone}/instances/{name}' already exists",
            "alreadyExists",
        )
    for k, v in (body.get("labels") or {}).items():
        if not _LABEL_KEY.match(k) or not _LABEL_VALUE.match(v):
            raise _invalid(f"resource.labels.{k}", v, "Label keys and values must be lowercase [-_a-z0-9].")
    mt_name = str(body.get("machineType", "")).rsplit("/", 1)[-1]
    machine = next((m for m in st.catalog.machines if m.name == mt_name and zone in m.zones), None)
    if machine is None:
        raise _invalid("resource.machineType", body.get("machineType"), "Machine type not found in zone.")
    accelerators = body.get("guestAccelerators") or []
    for i, acc in enumerate(accelerators):
        acc_name = str(acc.get("acceleratorType", "")).rsplit("/", 1)[-1]
        spec = next((a for a in st.catalog.accelerators if a.name == acc_name and zone in a.zones), None)
        if spec is None or not mt_name.startswith("n1-"):
            raise _invalid(
                f"resource.guestAccelerators[{i}].acceleratorType",
                acc.get("acceleratorType"),
                "Accelerator type not available in the zone for this machine type.",
            )
        if int(acc.get("acceleratorCount", 0)) > spec.max_cards:
            raise _invalid(
                f"resource.guestAccelerators[{i}].acceleratorCount", acc.get("acceleratorCount"), ""
            )
    scheduling = body.get("scheduling") or {}
    has_gpu = bool(accelerators or machine.accelerators)
    if has_gpu and scheduling.get("onHostMaintenance", "MIGRATE") != "TERMINATE":
        raise ApiError(
            400,
            "Instances with guest accelerators do not support live migration.",
            "badRequest",
        )
    disks = body.get("disks") or []
    if not any(d.get("boot") for d in disks):
        raise _invalid("resource.disks", disks, "A boot disk is required.")
    model = scheduling.get("provisioningModel", "STANDARD")
    if (mt_name, zone, model) in st.sync_stockouts:
        raise ApiError(
            503,
            f"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone 'projects/{st.catalog.project}/zones/{zone}' "
            "does not have enough resources available to fulfill the request.  '(resource type:compute)'.",
            "backendError",
        )
    st.insert_bodies[(zone, name)] = json.loads(json.dumps(body))
    target = {"name": name, "id": str(next(st.ids))}
    target["selfLink"] = f"{API}/projects/{st.catalog.project}/zones/{zone}/instances/{name}"
    op = _new_operation(st, zone=zone, op_type="insert", target=target)
    if (mt_name, zone, model) in st.stockouts:
        st.pending[(zone, op["name"])] = {
            "error": (
                "ZONE_RESOURCE_POOL_EXHAUSTED",
                f"The zone 'projects/{st.catalog.project}/zones/{zone}' does not have enough resources "
                "available to fulfill the request. Try a different zone, or try again later.",
            )
        }
        return op
    room = st.capacity.get((mt_name, zone, model))
    if room is not None and room <= 0:
        st.pending[(zone, op["name"])] = {
            "error": ("ZONE_RESOURCE_POOL_EXHAUSTED", f"The zone '{zone}' has no more {mt_name}.")
        }
        return op
    metric = st.quota.get((mt_name, model))
    if metric:
        prefix = "PREEMPTIBLE_" if model == "SPOT" else ""
        st.pending[(zone, op["name"])] = {
            "error": ("QUOTA_EXCEEDED", f"Quota '{prefix}{metric}' exceeded. Limit: 0.0 in region.")
        }
        return op
    affinity = body.get("reservationAffinity") or {}
    if affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION":
        wanted = (affinity.get("values") or [""])[0]
        reservation = st.reservations.get((zone, wanted))
        if (
            reservation is None
            or reservation["specificReservation"]["instanceProperties"]["machineType"] != mt_name
        ):
            raise _invalid("resource.reservationAffinity", wanted, "No matching reservation in the zone.")
        held = reservation["specificReservation"]
        if int(held["inUseCount"]) >= int(held["count"]):
            st.pending[(zone, op["name"])] = {
                "error": ("ZONE_RESOURCE_POOL_EXHAUSTED", f"Reservation '{wanted}' has no free capacity.")
            }
            return op
        held["inUseCount"] = str(int(held["inUseCount"]) + 1)
    st.instances[(zone, name)] = _instance_resource(st, zone, body, target["id"], machine.name)
    st.launches += 1
    if room is not None:
        st.capacity[(mt_name, zone, model)] = room - 1
    st.pending[(zone, op["name"])] = {"start": (zone, name)}
    return op


def _instance_resource(st: State, zone: str, body: dict[str, Any], ident: str, mt: str) -> dict[str, Any]:
    base = f"{API}/projects/{st.catalog.project}/zones/{zone}"
    name = body["name"]
    disks = []
    for i, d in enumerate(body.get("disks") or []):
        params = d.get("initializeParams") or {}
        disk: dict[str, Any] = {
            "kind": "compute#attachedDisk",
            "type": "PERSISTENT",
            "mode": "READ_WRITE",
            "source": f"{base}/disks/{params.get('diskName') or name}",
            "deviceName": d.get("deviceName") or f"persistent-disk-{i}",
            "index": i,
            "boot": bool(d.get("boot")),
            "autoDelete": bool(d.get("autoDelete")),
            "diskSizeGb": str(params.get("diskSizeGb", "10")),
        }
        disks.append(disk)
    nics = []
    for i, nic in enumerate(body.get("networkInterfaces") or [{}]):
        nics.append(
            {
                "kind": "compute#networkInterface",
                "name": f"nic{i}",
                "network": nic.get("network", ""),
                "subnetwork": nic.get("subnetwork", ""),
                "networkIP": f"10.128.0.{int(ident) % 250 + 2}",
            }
        )
    out: dict[str, Any] = {
        "kind": "compute#instance",
        "id": ident,
        "name": name,
        "creationTimestamp": _now(),
        "machineType": f"{base}/machineTypes/{mt}",
        "status": "PROVISIONING",
        "zone": base,
        "selfLink": f"{base}/instances/{name}",
        "disks": disks,
        "networkInterfaces": nics,
        "labels": dict(body.get("labels") or {}),
        "labelFingerprint": "42WmSpB8rSM=",
        "scheduling": dict(body.get("scheduling") or {}),
        "reservationAffinity": dict(body.get("reservationAffinity") or {}),
        "cpuPlatform": "Unknown CPU Platform",
        "fingerprint": "abc=",
    }
    for key in ("metadata", "tags", "serviceAccounts", "description"):
        if body.get(key):
            out[key] = json.loads(json.dumps(body[key]))
    if body.get("guestAccelerators"):
        out["guestAccelerators"] = [
            {
                "acceleratorType": f"{base}/acceleratorTypes/{str(a['acceleratorType']).rsplit('/', 1)[-1]}",
                "acceleratorCount": a.get("acceleratorCount", 1),
            }
            for a in body["guestAccelerators"]
        ]
    return out


def _new_operation(
    st: State,
    *,
    zone: str,
    op_type: str,
    target: dict[str, Any],
    user: str = "anonymous@example.com",
    done: bool = False,
) -> dict[str, Any]:
    ident = str(next(st.ids))
    name = f"operation-{int(time.time() * 1000)}-{ident}"
    base = f"{API}/projects/{st.catalog.project}/zones/{zone}"
    op: dict[str, Any] = {
        "kind": "compute#operation",
        "id": ident,
        "name": name,
        "zone": base,
        "operationType": op_type,
        "targetLink": target.get("selfLink", ""),
        "targetId": target.get("id", ""),
        "status": "DONE" if done else "RUNNING",
        "user": user,
        "progress": 100 if done else 0,
        "insertTime": _now(),
        "startTime": _now(),
        "selfLink": f"{base}/operations/{name}",
    }
    if done:
        op["endTime"] = _now()
    st.operations[(zone, name)] = op
    return op


def _finish(st: State, key: tuple[str, str]) -> None:
    """Complete a RUNNING operation: apply what it was for (start, delete) or attach its error."""
    op = st.operations[key]
    if op["status"] == "DONE" or st.hang_operations:
        return
    effect = st.pending.pop(key, None)
    op["status"], op["progress"], op["endTime"] = "DONE", 100, _now()
    if not effect:
        return
    if "error" in effect:
        code, message = effect["error"]
        # Only error.errors, no httpErrorStatusCode/httpErrorMessage: the client reads this as success,
        # exactly the trap the provider must handle.
        op["error"] = {"errors": [{"code": code, "message": message}]}
    elif "start" in effect and effect["start"] in st.instances:
        st.instances[effect["start"]]["status"] = "RUNNING"
        st.instances[effect["start"]]["lastStartTimestamp"] = _now()
    elif "delete" in effect:
        st.instances.pop(effect["delete"], None)
    for key in effect.get("start_many", []):
        if key in st.instances:
            st.instances[key]["status"] = "RUNNING"
            st.instances[key]["lastStartTimestamp"] = _now()


def _operations(st: State, verb: str, zone: str, tail: list[str], query: dict[str, str]) -> dict[str, Any]:
    if verb == "GET" and not tail:
        ops = [op for (z, _), op in st.operations.items() if z == zone]
        return _page(st, "compute#operationList", ops, query)
    key = (zone, tail[0])
    if key not in st.operations:
        raise ApiError(404, f"The resource 'operations/{tail[0]}' was not found", "notFound")
    if (verb == "GET" and len(tail) == 1) or (verb == "POST" and tail[1:] == ["wait"]):
        if st.hang_operations:
            # The real wait returns after at most 2 minutes even when not DONE; pause briefly (lock free).
            st.lock.release()
            try:
                time.sleep(0.05)
            finally:
                st.lock.acquire()
        _finish(st, key)
        return st.operations[key]
    raise ApiError(404, "not served by the stand-in", "notFound")
