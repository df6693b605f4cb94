"""The fake cloud's instances in a JSON file (`FakeProvider(state_path=...)`), so a restarted
`provisioner run --cloud fake --fake-state PATH` sees what its killed predecessor launched."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import datetime

from provisioner.cloudprovider.protocol import Instance

FIELDS = (
    "provider_id",
    "instance_type",
    "zone",
    "capacity_type",
    "price",
    "state",
    "nodeclaim",
    "nodepool",
    "image_id",
    "tags",
    "reservation_id",
    "reservation_type",
    "placement_group",
    "labels",
)
"""The Instance fields kept (with `launched_at`)."""


def save(path: str, instances: Iterable[Instance], launches_by_claim: dict[str, int]) -> None:
    doc = {
        "instances": [
            {
                **{f: getattr(i, f) for f in FIELDS},
                "launched_at": i.launched_at.isoformat() if i.launched_at else None,
            }
            for i in instances
        ],
        "launchesByClaim": launches_by_claim,
    }
    # Write then rename: a process killed mid-write leaves the previous state, never half a file.
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def load(path: str) -> tuple[list[Instance], dict[str, int]]:
    """The instances and the launches per claim kept at `path`."""
    with open(path) as f:
        doc = json.load(f)
    instances = []
    for raw in doc.get("instances", []):
        born = raw.get("launched_at")
        instances.append(
            Instance(
                **{f: raw[f] for f in FIELDS if f in raw},
                launched_at=datetime.fromisoformat(born) if born else None,
            )
        )
    return instances, {str(k): int(v) for k, v in doc.get("launchesByClaim", {}).items()}
