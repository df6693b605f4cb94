"""Whether the resources Teams and Departments put quotas on exist: a quota (or `borrowingLimit`,
`lendingLimit`) on a resource no NodePool's nodes ever have limits nothing, and is most often a typo
(`nvidia.com/gpuu`). A name one edit or so from a real one is an error with a "did you mean"; any other
unknown name a warning (a device plugin may add it to nodes we do not launch).

What our pools' nodes have: the resources every instance type of the catalogs carries (CPU, memory,
pods, ephemeral storage, NVIDIA and AMD GPUs), and anything a NodePool in the files names in `limits`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from provisioner.api import labels, quantities
from provisioner.api.nodepool import NodePool
from provisioner.api.team import Department, Team

if TYPE_CHECKING:
    from provisioner.api.documents import LoadedObject, Problem

NODE_RESOURCES = (
    quantities.CPU,
    quantities.MEMORY,
    quantities.PODS,
    quantities.EPHEMERAL_STORAGE,
    labels.GPU_RESOURCE,
    labels.AMD_GPU_RESOURCE,
)
"""What a node of any instance type of the catalogs has (`cloudprovider.catalog.instance_type`)."""

_FIELDS = (
    ("resources", "resources"),
    ("borrowingLimit", "borrowing_limit"),
    ("lendingLimit", "lending_limit"),
)


def check(objects: Sequence[LoadedObject]) -> list[Problem]:
    """A problem per quota resource of a Team or Department that no pool's nodes have."""
    from provisioner.api.documents import Problem, format_path

    known = set(NODE_RESOURCES)
    for loaded in objects:
        if isinstance(loaded.obj, NodePool):
            known.update(loaded.obj.spec.limits)
    problems: list[Problem] = []
    for loaded in objects:
        if not isinstance(loaded.obj, Team | Department):
            continue
        for i, entry in enumerate(loaded.obj.spec.quotas):
            for alias, attr in _FIELDS:
                for name in getattr(entry, attr) or {}:
                    if name in known:
                        continue
                    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
                    hint = (
                        f'; did you mean "{close[0]}"?'
                        if close
                        else f" (pools' nodes have: {', '.join(sorted(known))})"
                    )
                    path = ("spec", "quotas", i, alias, name)
                    problems.append(
                        Problem(
                            loaded.document.source,
                            loaded.document.line_of(path),
                            f"{name} is not a resource any NodePool's nodes have, so this quota limits "
                            f"nothing{hint}",
                            kind=loaded.kind,
                            name=loaded.name,
                            path=format_path(path),
                            severity="error" if close else "warning",
                        )
                    )
    return problems
