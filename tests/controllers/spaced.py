"""What the process tests build in their `Space` (testkit/controllers/space.py): its NodeClass, its
NodePools over that class, and kube-scheduler for its pods only (never another test's, on a real
cluster)."""

from __future__ import annotations

from typing import Any

from testkit.controllers.backends import KubeBackend
from testkit.controllers.space import Space
from testkit.controllers.standins import TestBinder
from testkit.controllers.world import node_class, node_pool


def class_of(space: Space) -> dict[str, Any]:
    """The test's NodeClass."""
    return node_class(space.name("default"))


def pool_of(space: Space, name: str, **kw: Any) -> dict[str, Any]:
    """A NodePool of the test named `name`, over its NodeClass."""
    return node_pool(space.pool(name), node_class_name=space.name("default"), **kw)


def binder_of(backend: KubeBackend, space: Space) -> TestBinder:
    """kube-scheduler for the test's pods."""
    return TestBinder(backend, namespaces=frozenset(space.namespaces))
