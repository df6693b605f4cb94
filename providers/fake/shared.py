"""The fake cloud shared by several processes: sharded replicas (`provisioner run --cloud fake --shards N
--fake-state PATH`) launch into, list and terminate one set of instances, as replicas of a real
controller share one cloud account.

Every protocol call holds the journal's exclusive `flock` (providers/fake/saved.py) for its whole length
and first applies what other processes appended since this one last read, so one process's launch is
seen by the next call of any other and no two launches of one claim interleave. Capacity limits,
stockouts and queued failures stay per process (knobs for a test's own provider, not for a shared one).
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from providers.fake.provider import FakeProvider
from provisioner.api.nodeclaim import NodeClaim
from provisioner.api.nodeclass import NodeClass
from provisioner.cloudprovider.protocol import Instance
from provisioner.cloudprovider.types import InstanceType


class SharedFakeProvider(FakeProvider):
    def __init__(self, *, state_path: str, **kw: Any) -> None:
        super().__init__(state_path=state_path, **kw)

    @contextlib.contextmanager
    def _shared(self) -> Iterator[None]:
        assert self._journal is not None
        with self._lock, self._journal.locked():
            self._catch_up()
            yield

    def create(self, claim: NodeClaim, instance_types: list[InstanceType], node_class: NodeClass) -> Instance:
        with self._shared():
            return super().create(claim, instance_types, node_class)

    def create_group(self, *args: Any, **kw: Any) -> Any:
        with self._shared():
            return super().create_group(*args, **kw)

    def delete(self, provider_id: str) -> None:
        with self._shared():
            super().delete(provider_id)

    def get(self, provider_id: str) -> Instance:
        with self._shared():
            return super().get(provider_id)

    def list(self) -> builtins.list[Instance]:
        with self._shared():
            return super().list()

    def collect_placement(self, *, older_than: datetime) -> builtins.list[str]:
        with self._shared():
            return super().collect_placement(older_than=older_than)

    def is_drifted(self, claim: NodeClaim, node_class: NodeClass) -> str | None:
        with self._shared():
            return super().is_drifted(claim, node_class)
