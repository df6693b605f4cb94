"""The fake cloud's saved state: an append-only journal of JSON lines at `PATH` (`FakeProvider(state_path=
...)`, `provisioner run --cloud fake --fake-state PATH`), so a restarted process sees what its killed
predecessor launched, and sharded replicas (providers/fake/shared.py) share one set of instances.

Each launch appends `{"op": "launch", "instance": {...}}` and each termination `{"op": "terminate",
"providerId": ...}`, under an exclusive `flock` on `PATH.lock`; a process re-reads only the bytes appended
since its last read (its offset), and a new process replays the whole journal. A line counts once its
newline is written: a process killed mid-append leaves a torn last line, which readers skip and the next
writer truncates before appending.

Once the journal holds much more than the live state (`Journal.bloated`), a writer compacts it: it writes
`{"op": "snapshot", "instances": [...], "launchesByClaim": {...}}` to `PATH.tmp`, raises the epoch kept in
the lock file and renames the snapshot over the journal. A reader whose epoch differs replays from the
start, so an offset into the old file is never used on the new one; a writer killed between the two
steps leaves the old journal whole and costs readers one needless replay.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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

EPOCH_WIDTH = 20
"""The epoch is written as this many digits and a newline, in one write at the lock file's start."""

OPS = ("launch", "terminate", "snapshot")
"""What a record (a line) says: an instance launched, one terminated, or the whole state (a compaction)."""

COMPACT_FLOOR = 1000
"""Entries a journal may hold beyond twice its live state before it is compacted (small ones never are)."""


def dump_instance(instance: Instance) -> dict[str, Any]:
    return {
        **{f: getattr(instance, f) for f in FIELDS},
        "launched_at": instance.launched_at.isoformat() if instance.launched_at else None,
    }


def load_instance(raw: dict[str, Any]) -> Instance:
    born = raw.get("launched_at")
    return Instance(
        **{f: raw[f] for f in FIELDS if f in raw},
        launched_at=datetime.fromisoformat(born) if born else None,
    )


def launch(instance: Instance) -> dict[str, Any]:
    """The record of a launch: the instance, and one more launch for its claim."""
    return {"op": "launch", "instance": dump_instance(instance)}


def terminate(provider_id: str) -> dict[str, Any]:
    return {"op": "terminate", "providerId": provider_id}


def snapshot(instances: Iterable[Instance], launches_by_claim: dict[str, int]) -> dict[str, Any]:
    """The record a compacted journal starts with: the whole live state."""
    return {
        "op": "snapshot",
        "instances": [dump_instance(i) for i in instances],
        "launchesByClaim": launches_by_claim,
    }


def weight(record: dict[str, Any]) -> int:
    """The entries a record holds, as the live state counts them (an instance, a claim's launch count): a
    snapshot its instances and counts, a launch two (its instance, its claim's count), a termination one."""
    op = record.get("op")
    if op == "snapshot":
        return len(record.get("instances", [])) + len(record.get("launchesByClaim", {}))
    return 2 if op == "launch" else 1


@dataclass
class State:
    """Live instances (by provider ID, and by claim name) and launches per claim, as a replay of records
    leaves them. A provider passes its own dicts: records change them in place."""

    instances: dict[str, Instance] = field(default_factory=dict)
    launches_by_claim: dict[str, int] = field(default_factory=dict)
    by_claim: dict[str, str] = field(default_factory=dict)

    def clear(self) -> None:
        self.instances.clear()
        self.launches_by_claim.clear()
        self.by_claim.clear()

    def apply(self, record: dict[str, Any]) -> None:
        op = record.get("op")
        if op == "launch":
            self._add(load_instance(record["instance"]))
            claim = record["instance"].get("nodeclaim")
            if claim:
                self.launches_by_claim[claim] = self.launches_by_claim.get(claim, 0) + 1
        elif op == "terminate":
            gone = self.instances.pop(record["providerId"], None)
            if gone is not None and gone.nodeclaim and self.by_claim.get(gone.nodeclaim) == gone.provider_id:
                del self.by_claim[gone.nodeclaim]
        else:  # a snapshot
            self.clear()
            for raw in record.get("instances", []):
                self._add(load_instance(raw))
            self.launches_by_claim.update(
                {str(k): int(v) for k, v in record.get("launchesByClaim", {}).items()}
            )

    def _add(self, instance: Instance) -> None:
        self.instances[instance.provider_id] = instance
        if instance.nodeclaim:
            self.by_claim[instance.nodeclaim] = instance.provider_id


@dataclass
class Read:
    """What a process had not yet seen of the journal."""

    records: list[dict[str, Any]]
    replay: bool
    """True when the records are the whole journal (a first read, or compacted since): drop what was known."""


class Journal:
    """One process's handle on the journal at `path`: its lock, and how far it has read (epoch, offset).

    `read` and `append` are called only while `locked()` is held; `locked()` nests within one thread (the
    caller serialises its threads), so a provider call holding it may save without locking twice."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock_path = f"{path}.lock"
        self._epoch: int | None = None
        """The epoch of the file this process read; None before its first read."""
        self._offset = 0
        """The end of the last whole line read or written: the next read starts there, a write goes there."""
        self.entries = 0
        """Entries (`weight`) in the journal as far as read: what compaction weighs against the live state."""
        self._lock_fd: int | None = None
        self._depth = 0
        self._guard = threading.RLock()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._guard:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._lock_fd, self._depth = fd, 1
                yield
            finally:
                self._lock_fd, self._depth = None, 0
                os.close(fd)  # closing the last descriptor releases the flock

    def _held(self) -> int:
        assert self._lock_fd is not None, f"the journal {self.path} is read and written only under its lock"
        return self._lock_fd

    def _lock_epoch(self) -> int:
        text = os.pread(self._held(), EPOCH_WIDTH + 1, 0).strip()
        return int(text) if text else 0

    def read(self) -> Read:
        """The whole lines appended since this process last read or wrote (all of them if the journal was
        compacted since, or never read). A torn last line is left for the next writer to cut off."""
        epoch = self._lock_epoch()
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            size = 0
        replay = self._epoch != epoch or size < self._offset
        if replay:
            self._epoch, self._offset, self.entries = epoch, 0, 0
        data = b""
        if size > self._offset:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read(size - self._offset)
        end = data.rfind(b"\n") + 1
        records = parse(data[:end], self.path, self._offset)
        self._offset += end
        self.entries += sum(map(weight, records))
        return Read(records, replay)

    def append(self, record: dict[str, Any]) -> None:
        """Add a record after the last whole line (cutting off a torn one). Call `read` first in the same
        lock: the offset must be the journal's end."""
        self._held()
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size > self._offset:
                os.ftruncate(fd, self._offset)  # a torn line a killed writer left
            _write_all(fd, line, self._offset)
        finally:
            os.close(fd)
        self._offset += len(line)
        self.entries += weight(record)

    def bloated(self, live: int) -> bool:
        """The journal holds much more than `live` entries (instances and launch counts): time to compact.
        A journal is kept within about twice its live state (plus `COMPACT_FLOOR`)."""
        return self.entries > 2 * live + COMPACT_FLOOR

    def compact(self, record: dict[str, Any]) -> None:
        """Replace the journal by one snapshot record (write, raise the epoch, rename)."""
        lock_fd = self._held()
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        tmp = f"{self.path}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, line, 0)
        finally:
            os.close(fd)
        epoch = self._lock_epoch() + 1
        _write_all(lock_fd, f"{epoch:0{EPOCH_WIDTH}d}\n".encode(), 0)
        os.replace(tmp, self.path)
        self._epoch, self._offset, self.entries = epoch, len(line), weight(record)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def parse(data: bytes, path: str, offset: int = 0) -> list[dict[str, Any]]:
    """The records in whole lines `data` (read at `offset` of `path`, named in errors)."""
    records = []
    for line in data.split(b"\n")[:-1]:
        try:
            record = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}: line at byte {offset} is not a JSON record: {e}") from None
        if not isinstance(record, dict) or record.get("op") not in OPS:
            raise ValueError(
                f"{path}: line at byte {offset} is not a record: an object whose op is one of {OPS}"
            )
        records.append(record)
        offset += len(line) + 1
    return records


def load(path: str) -> tuple[list[Instance], dict[str, int]]:
    """The instances and the launches per claim the journal at `path` holds (a torn last line skipped),
    read without its lock: for a test or benchmark looking at a cloud its replicas write."""
    with open(path, "rb") as f:
        data = f.read()
    state = State()
    for record in parse(data[: data.rfind(b"\n") + 1], path):
        state.apply(record)
    return list(state.instances.values()), state.launches_by_claim
