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
        self._seen = -1
        """The state's generation as this process last read or wrote it: read again only once another wrote
        (none yet: what the constructor loaded may already be stale by the first call).

        A counter in the lock file, raised by every save under the lock. The file's own stat (inode, mtime,
        size) cannot say it: a rewrite of equal size within one timestamp tick on a reused inode looks
        unchanged, and a process that trusted it launched over another's instance."""
        self._lock_fd: int | None = None
        """The open lock file while this process holds the lock."""

    @staticmethod
    def _generation(fd: int) -> int:
        text = os.pread(fd, 32, 0).strip()
        return int(text) if text else 0

    def _save(self) -> None:
        super()._save()
        assert self._lock_fd is not None, "the shared state is written only under its lock"
        self._seen += 1
        text = str(self._seen).encode()
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, text, 0)

    @contextlib.contextmanager
    def _shared(self) -> Iterator[None]:
        with self._lock:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                generation = self._generation(fd)
                if generation != self._seen:
                    self._instances.clear()
                    self._by_claim.clear()
                    assert self.state_path is not None
                    if os.path.exists(self.state_path):
                        self._load(self.state_path)
                    self._seen = generation
                self._lock_fd = fd
                yield
            finally:
                self._lock_fd = None
                os.close(fd)  # closing the last descriptor releases the flock

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
