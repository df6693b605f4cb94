"""What a real Kubernetes API server refuses or changes in the objects it is sent, written from the
Kubernetes API documentation (object names, labels and selectors, resource quantities, Pod and Node
validation, scheduling readiness, the status subresource, TaintNodesByCondition, CRD validation). Pure
functions over JSON objects; testkit/controllers/kube_server.py applies them to every write.

- `problems_on_create(kind, obj)` / `problems_on_update(kind, old, new)`: why the server answers 422.
- `on_create(kind, obj)`: what it changes on create (a Pod's status reset to Pending; a custom object's
  status dropped when the CRD has a status subresource; the `not-ready` taint on a new Node).
- `merge_write(kind, old, patch, status)`: the stored object after a merge patch sent to the resource
  (status changes ignored) or to its `/status` subresource (everything but status ignored), with
  `metadata.generation` bumped when the spec changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from provisioner.api import crds
from provisioner.clusterapi import merge_patch
from testkit.controllers.crd_schema import Invalid, admit, copy_json

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# resource.Quantity's grammar (k8s.io/apimachinery/pkg/api/resource): sign, digits, suffix.
_QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_NATIVE = ("cpu", "memory", "ephemeral-storage", "storage", "pods")
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
"""What the TaintNodesByCondition admission plugin puts on every new Node (the node-lifecycle
controller takes it off once the Node is Ready)."""
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

CUSTOM = {
    c["spec"]["names"]["kind"]: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for c in crds.all_crds()
}
"""Schema of each custom kind, from the CRDs the chart installs (all with a status subresource)."""
WITH_STATUS = {*CUSTOM, "Pod", "Node", "Namespace", "PodDisruptionBudget", "DaemonSet"}


def name_problems(kind: str, name: Any) -> list[str]:
    if not isinstance(name, str) or not name:
        return ["metadata.name: Required value: name or generateName is required"]
    if kind == "Namespace":
        ok = len(name) <= 63 and DNS_LABEL.match(name)
        what = "a lowercase RFC 1123 label"
    else:
        ok = len(name) <= 253 and DNS_SUBDOMAIN.match(name)
        what = "a lowercase RFC 1123 subdomain"
    return [] if ok else [f"metadata.name: Invalid value: {name!r}: must be {what}"]


def label_key_problems(key: str, where: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return [f"{where}: Invalid value: {key!r}: prefix part must be a DNS-1123 subdomain"]
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return [
            f"{where}: Invalid value: {key!r}: name part must consist of alphanumeric characters, '-', '_' or '.'"
        ]
    return []


def metadata_problems(kind: str, meta: Mapping[str, Any]) -> list[str]:
    out = name_problems(kind, meta.get("name"))
    for key, value in (meta.get("labels") or {}).items():
        out += label_key_problems(key, f"metadata.labels[{key}]")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            out.append(
                f"metadata.labels[{key}]: Invalid value: {value!r}: a valid label must be 63 characters or less"
            )
    for key in meta.get("annotations") or {}:
        out += label_key_problems(key, f"metadata.annotations[{key}]")
    return out


def quantity_problems(name: str, amount: Any, where: str) -> list[str]:
    text = str(amount)
    if not _QUANTITY.match(text):
        return [
            f"{where}: Invalid value: {text!r}: quantities must match the regular expression {_QUANTITY.pattern!r}"
        ]
    if text.startswith("-"):
        return [f"{where}: Invalid value: {text!r}: must be greater than or equal to 0"]
    if _extended(name) and not re.match(r"^\+?[0-9]+$", text):
        return [f"{where}: Invalid value: {text!r}: must be an integer"]
    return []


def _extended(name: str) -> bool:
    return name not in _NATIVE and not name.startswith(("hugepages-", "requests.", "limits."))


def pod_problems(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    out: list[str] = [] if containers else ["spec.containers: Required value"]
    for i, container in enumerate([*containers, *(spec.get("initContainers") or [])]):
        at = f"spec.containers[{i}]"
        if not DNS_LABEL.match(str(container.get("name") or "")):
            out.append(f"{at}.name: Required value: an RFC 1123 label")
        if not container.get("image"):
            out.append(f"{at}.image: Required value")
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for part, amounts in (("requests", requests), ("limits", limits)):
            for name, amount in amounts.items():
                out += quantity_problems(name, amount, f"{at}.resources.{part}[{name}]")
        for name, amount in requests.items():
            if _extended(name) and name not in limits:
                out.append(
                    f"{at}.resources.limits: Required value: Limit must be set for non overcommitable resources ({name})"
                )
            elif _extended(name) and str(limits[name]) != str(amount):
                out.append(
                    f"{at}.resources.requests[{name}]: Invalid value: {amount!r}: must be equal to {name} limit"
                )
    for key, value in (spec.get("nodeSelector") or {}).items():
        out += label_key_problems(key, f"spec.nodeSelector[{key}]")
        if not _LABEL_VALUE.match(str(value)) or len(str(value)) > 63:
            out.append(f"spec.nodeSelector[{key}]: Invalid value: {value!r}")
    return out


WORKLOADS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")


def workload_problems(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """apps/v1 and batch/v1 rules: a pod template that is a valid pod; apps/v1 kinds need a selector
    matching the template's labels; a Job's pods restart `Never` or `OnFailure`."""
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    out = [f"spec.template.{p}" for p in pod_problems(template)]
    labels = (template.get("metadata") or {}).get("labels") or {}
    for key, value in labels.items():
        out += label_key_problems(key, f"spec.template.metadata.labels[{key}]")
        if not _LABEL_VALUE.match(str(value)):
            out.append(f"spec.template.metadata.labels[{key}]: Invalid value: {value!r}")
    if kind == "Job":
        if (template.get("spec") or {}).get("restartPolicy") not in ("Never", "OnFailure"):
            out.append('spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"')
        return out
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    if not spec.get("selector"):
        out.append("spec.selector: Required value")
    elif any(labels.get(k) != v for k, v in selector.items()):
        out.append(
            "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"
        )
    return out


def node_problems(node: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    status = node.get("status") or {}
    for part in ("capacity", "allocatable"):
        for name, amount in (status.get(part) or {}).items():
            out += quantity_problems(name, amount, f"status.{part}[{name}]")
    for i, taint in enumerate((node.get("spec") or {}).get("taints") or []):
        out += label_key_problems(str(taint.get("key") or ""), f"spec.taints[{i}].key")
        if taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(f"spec.taints[{i}].effect: Unsupported value: {taint.get('effect')!r}")
    return out


_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
"""metav1.MicroTime as the server decodes it (Go's RFC3339Micro layout: exactly six fraction digits)."""


def lease_decode_problems(lease: Mapping[str, Any]) -> list[str]:
    """What a server cannot even decode in a coordination.k8s.io/v1 Lease (it answers 400): a
    holderIdentity that is not a string, an acquireTime or renewTime that is not a MicroTime, a duration
    or transition count that is not an integer."""
    spec = lease.get("spec") or {}
    out = []
    holder = spec.get("holderIdentity")
    if holder is not None and not isinstance(holder, str):
        out.append(f"spec.holderIdentity: cannot decode {holder!r} as a string")
    for field in ("acquireTime", "renewTime"):
        value = spec.get(field)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.match(value)):
            out.append(f"spec.{field}: cannot decode {value!r} as a MicroTime (RFC 3339, 6 fraction digits)")
    for field in ("leaseDurationSeconds", "leaseTransitions"):
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            out.append(f"spec.{field}: cannot decode {value!r} as an int32")
    return out


def lease_problems(lease: Mapping[str, Any]) -> list[str]:
    """Why a decodable Lease is invalid (ValidateLeaseSpec): a duration not above 0, a negative count
    of transitions."""
    spec = lease.get("spec") or {}
    out = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        out.append(f"spec.leaseDurationSeconds: Invalid value: {duration}: must be greater than 0")
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        out.append(f"spec.leaseTransitions: Invalid value: {transitions}: must be greater than or equal to 0")
    return out


def problems_on_create(kind: str, obj: dict[str, Any]) -> list[str]:
    """Why the server refuses to create this object (after `on_create` ran); [] when it accepts it."""
    out = metadata_problems(kind, obj.get("metadata") or {})
    if kind == "Pod":
        out += pod_problems(obj)
    elif kind == "Node":
        out += node_problems(obj)
    elif kind in WORKLOADS:
        out += workload_problems(kind, obj)
    elif kind == "Lease":
        out += lease_problems(obj)
    return out


def problems_on_update(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why the server refuses this change; [] when it accepts it."""
    out = metadata_problems(kind, new.get("metadata") or {})
    if kind == "Pod":
        out += pod_problems(new)
        out += _pod_update_problems(old.get("spec") or {}, new.get("spec") or {})
    elif kind == "Node":
        out += node_problems(new)
    elif kind == "Lease":
        out += lease_problems(new)
    return out


def _pod_update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    old_gates = [g.get("name") for g in old.get("schedulingGates") or []]
    new_gates = [g.get("name") for g in new.get("schedulingGates") or []]
    if any(g not in old_gates for g in new_gates):
        out.append("spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate")
    # Mutable scheduling directives (1.27+): while a pod is gated, its nodeSelector may gain entries and
    # its affinity may be narrowed; nothing else of the spec but these may change.
    mutable = {"schedulingGates", "activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"}
    if old_gates:
        mutable |= {"nodeSelector", "affinity"}
        for key, value in (old.get("nodeSelector") or {}).items():
            if (new.get("nodeSelector") or {}).get(key) != value:
                out.append(f"spec.nodeSelector[{key}]: Forbidden: only additions are allowed while gated")
    rest_old = {k: v for k, v in old.items() if k not in mutable}
    rest_new = {k: v for k, v in new.items() if k not in mutable}
    if rest_old != rest_new:
        changed = sorted(k for k in {*rest_old, *rest_new} if rest_old.get(k) != rest_new.get(k))
        out.append(
            f"spec: Forbidden: pod updates may not change fields other than the mutable ones ({changed})"
        )
    return out


def on_create(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the server stores it on create (before validation), or Invalid for a custom object
    its CRD schema refuses."""
    obj = copy_json(obj)
    if kind in CUSTOM:
        obj.pop("status", None)
        obj = _admit_custom(kind, obj)
    elif kind == "Pod":
        obj["status"] = {"phase": "Pending"}
    elif kind == "Node":
        spec = obj.setdefault("spec", {})
        taints = spec.setdefault("taints", [])
        if not any(t.get("key") == NOT_READY_TAINT["key"] for t in taints):
            taints.append(dict(NOT_READY_TAINT))
    return obj


def merge_write(kind: str, old: dict[str, Any], patch: Mapping[str, Any], *, status: bool) -> dict[str, Any]:
    """The stored object after a merge patch to the resource, or to its /status when `status`. Neither
    argument is changed; the result shares with them what the patch did not change (as
    `merge_patch`), all but its metadata, which is its own to fill in."""
    if kind in WITH_STATUS:
        if status:
            new = dict(old)
            if "status" in patch:
                merged = merge_patch(old.get("status") or {}, patch["status"])
                new["status"] = merged
                if merged is None:
                    new.pop("status")
        else:
            new = merge_patch(old, {k: v for k, v in patch.items() if k != "status"})
    else:
        new = merge_patch(old, patch)
    if kind in CUSTOM:
        new = _admit_custom(kind, new)
    new["metadata"] = meta = copy_json(new.get("metadata") or {})
    changed = {k: v for k, v in old.items() if k not in ("metadata", "status")} != {
        k: v for k, v in new.items() if k not in ("metadata", "status")
    }
    if changed:
        meta["generation"] = int(meta.get("generation") or 1) + 1
    return new


def _admit_custom(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    try:
        admitted: dict[str, Any] = admit(obj, CUSTOM[kind], root=True)
        return admitted
    except Invalid as err:
        raise Invalid([f"{kind}.{p.lstrip('.')}" for p in err.problems]) from None


Matcher = Callable[[Mapping[str, Any]], bool]


def _test(op: str, got: str | None, values: frozenset[str]) -> bool:
    """One selector requirement on a value (`got`: None when the label or field is not there)."""
    if op in ("in", "=", "=="):
        return got in values
    if op in ("notin", "!="):
        return got not in values
    return (got is not None) == (op == "exists")


def label_selector(text: str | None) -> Matcher:
    """A list or watch's `labelSelector` (the Kubernetes labels documentation: requirements joined by
    commas, each `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)` or
    `key notin (a,b)`) as a test on an object. ValueError for a selector that does not parse."""
    reqs: list[tuple[str, str, frozenset[str]]] = []
    for req in _requirements(text or ""):
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\(([^)]*)\)", req):
            reqs.append((m.group(1), m.group(2), frozenset(v.strip() for v in m.group(3).split(","))))
        elif m := re.fullmatch(r"(\S+?)\s*(!=|==|=)\s*(\S*)", req):
            reqs.append((m.group(1), m.group(2), frozenset({m.group(3)})))
        elif m := re.fullmatch(r"!\s*(\S+)", req):
            reqs.append((m.group(1), "absent", frozenset()))
        elif re.fullmatch(r"[^\s!=(),]+", req):
            reqs.append((req, "exists", frozenset()))
        else:
            raise ValueError(f"unable to parse requirement: {req!r}")

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(_test(op, labels.get(key), values) for key, op, values in reqs)

    return matches


def _requirements(text: str) -> list[str]:
    """The requirements of a selector: split at the commas outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [r for r in out if r]


FIELDS = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"}
"""The fields a `fieldSelector` may name here (Pods: the ones the provisioner selects by)."""


def field_selector(text: str | None) -> Matcher:
    """A `fieldSelector` (`field=value`, `field==value`, `field!=value`, joined by commas) as a test on an
    object (a field not set reads as ""); ValueError for a field not in `FIELDS` or a requirement that
    does not parse."""
    reqs: list[tuple[str, str, str, frozenset[str]]] = []
    for req in _requirements(text or ""):
        m = re.fullmatch(r"([\w.]+)\s*(!=|==|=)\s*(\S*)", req)
        if m is None or m.group(1) not in FIELDS:
            raise ValueError(f"field label not supported: {req!r}")
        head, tail = m.group(1).split(".", 1)
        reqs.append((head, tail, m.group(2), frozenset({m.group(3)})))

    def matches(obj: Mapping[str, Any]) -> bool:
        return all(
            _test(op, str((obj.get(head) or {}).get(tail) or ""), values) for head, tail, op, values in reqs
        )

    return matches
