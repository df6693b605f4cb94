"""The fake cloud shared by several processes: sharded replicas (`provisioner run --cloud fake --shards N
--fake-state PATH`) launch into, list and terminate one set of instances, as replicas of a real
controller share one cloud account.

Every protocol call reads the state file and writes it back (`FakeProvider`'s own save) while holding
an exclusive `flock` on `PATH.lock`, so one process's launch is seen by the next call of any other, and
no two writes interleave. Capacity limits, stockouts and queued failures stay per process (knobs for a
test's own provider, not for a shared one).
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import os
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
        self._lock_path = f"{state_path}.lock"
        self._seen: tuple[int, int, int] | None = self._stat()
        """The state file as this process last read or wrote it: read again only once another wrote."""

    def _stat(self) -> tuple[int, int, int] | None:
        assert self.state_path is not None
        try:
            st = os.stat(self.state_path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _save(self) -> None:
        super()._save()
        self._seen = self._stat()

    @contextlib.contextmanager
    def _shared(self) -> Iterator[None]:
        with self._lock, open(self._lock_path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                seen = self._stat()
                if seen != self._seen:
                    self._instances.clear()
                    self._by_claim.clear()
                    if seen is not None:
                        assert self.state_path is not None
                        self._load(self.state_path)
                    self._seen = seen
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

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
