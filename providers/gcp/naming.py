"""Names Compute Engine accepts, derived from ours: instance names from claim names (deterministic, so a
retried create finds the instance it made), GCE label values, and `gce://PROJECT/ZONE/NAME` provider ids.

Compute Engine is stricter than Kubernetes: resource names match `[a-z]([-a-z0-9]{0,61}[a-z0-9])?` and
label keys/values are lowercase `[-_a-z0-9]`, at most 63 characters. Where a value must be shortened or
changed, a short hash of the original keeps distinct inputs distinct.
"""

from __future__ import annotations

import hashlib
import re

from provisioner.cloudprovider.errors import NotFound

MAX = 63
LABEL_CLUSTER = "provisioner-cluster"
LABEL_NODEPOOL = "provisioner-nodepool"
LABEL_NODECLAIM = "provisioner-nodeclaim"
LABEL_CAPACITY_TYPE = "provisioner-capacity-type"
LABEL_RESERVATION = "provisioner-capacity-reservation"
"""The reservation an instance launched into (its name: already a valid label value)."""
LABEL_GANG = "provisioner-gang"
"""The gang an instance launched with (`create_group`), folded into a label value."""
# Metadata keeps the exact names (metadata values are free text; label values are not).
META_NODECLAIM = "provisioner-nodeclaim"
META_NODEPOOL = "provisioner-nodepool"
META_IMAGE = "provisioner-image"
META_CLUSTER = "provisioner-cluster"
META_GANG_MEMBERS = "provisioner-gang-members"
"""On the instances of one bulkInsert (which shares its metadata): JSON {instance name: claim name}."""
META_GANG = "provisioner-gang"


def policy_name(cluster_name: str, gang: str) -> str:
    """The compact placement policy made for a gang: `<cluster>-gang-<hash>`."""
    return f"{cluster_slug(cluster_name)}-gang-{_digest(gang, 12)}"


_PROVIDER_ID = re.compile(r"^gce://([^/]+)/([^/]+)/([^/]+)$")


def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def label_value(text: str) -> str:
    """`text` as a GCE label value: lowercase, other characters to `-`, at most 63 (hash-suffixed when
    shortened or changed, so two different inputs never share a value)."""
    clean = re.sub(r"[^-_a-z0-9]", "-", text.lower())
    if clean == text and len(clean) <= MAX:
        return clean
    return f"{clean[: MAX - 9]}-{_digest(text)}"


def cluster_slug(cluster_name: str) -> str:
    """The cluster part of instance names: short, starting with a letter."""
    clean = re.sub(r"[^a-z0-9]+", "-", cluster_name.lower()).strip("-") or "cluster"
    if not clean[0].isalpha():
        clean = f"c{clean}"
    if clean != cluster_name or len(clean) > 20:
        clean = f"{clean[:11].rstrip('-')}-{_digest(cluster_name)}"
    return clean


def instance_prefix(cluster_name: str) -> str:
    """Every instance of the cluster starts with this."""
    return f"{cluster_slug(cluster_name)}-"


def instance_name(cluster_name: str, claim_name: str) -> str:
    """The one instance name a claim gets: `<cluster>-<claim>`, valid for GCE (claims may hold dots or be
    long; both are folded and hash-suffixed)."""
    prefix = instance_prefix(cluster_name)
    body = re.sub(r"[^a-z0-9-]+", "-", claim_name.lower()).strip("-")
    name = f"{prefix}{body}"
    if body != claim_name or len(name) > MAX:
        room = MAX - len(prefix) - 9
        name = f"{prefix}{body[:room].rstrip('-')}-{_digest(claim_name)}"
    return name.rstrip("-")


def provider_id(project: str, zone: str, name: str) -> str:
    return f"gce://{project}/{zone}/{name}"


def parse_provider_id(value: str) -> tuple[str, str, str]:
    """(project, zone, name) of `gce://PROJECT/ZONE/NAME`; NotFound for anything else, since no instance
    can have such an id."""
    match = _PROVIDER_ID.match(value or "")
    if not match:
        raise NotFound(f"{value!r} is not a GCE provider id (gce://PROJECT/ZONE/NAME)")
    project, zone, name = match.groups()
    return project, zone, name


def last(url: str) -> str:
    """The last path segment of a Compute URL (`.../zones/us-central1-a` -> `us-central1-a`)."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]
