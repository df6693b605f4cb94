"""The ledger recorder: the controllers hand it rows; it writes them to the ledger without ever holding
up a controller, and never loses a row silently.

A write that fails (the database is down, a connection dropped) is retried with tenacity a few times at
once; if it still fails, the failure is counted (`on_failure`, a metric) and logged, and the rows stay
queued for the next attempt after a back-off. Only when more than `max_pending` rows wait are the oldest
dropped, each drop counted (`on_dropped`) and logged as an error. Action rows carry their command id and
are stored once, so a batch written twice (a timeout after the commit) is harmless; an action row handed
in again (the termination controller hands in the rows a NodeClaim carries) is skipped here, and
`stored(keys)` says whether rows were committed, so the finalizer can wait for them.

`background=True` (the controller) writes from a thread of its own and opens the ledger there, lazily:
a database that is down at start-up delays the ledger, never the controller. `background=False` (the
simulator, the tests) writes at once in the caller's thread, so a run is deterministic.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tenacity import Retrying, stop_after_attempt, wait_exponential

from provisioner import crashpoints
from provisioner.finops.database import LedgerError
from provisioner.finops.ledger import Ledger
from provisioner.finops.rows import ActionRow, BlockerRow, ReservationRow, UsageRow

log = logging.getLogger(__name__)

TABLES = ("actions", "blockers", "usage", "reservations")


@dataclass(frozen=True, slots=True)
class _Batch:
    table: str
    """One of TABLES."""
    rows: Sequence[ActionRow] | Sequence[BlockerRow] | Sequence[UsageRow] | Sequence[ReservationRow]


class LedgerRecorder:
    def __init__(
        self,
        target: str | Path | Ledger,
        *,
        background: bool = True,
        attempts: int = 3,
        retry_wait: float = 0.5,
        backoff: float = 5.0,
        max_backoff: float = 60.0,
        max_pending: int = 200_000,
        on_failure: Callable[[str], None] = lambda _table: None,
        on_dropped: Callable[[str, int], None] = lambda _table, _n: None,
        keep_blockers: bool = True,
    ) -> None:
        self._target = target
        self._ledger: Ledger | None = target if isinstance(target, Ledger) else None
        self.background = background
        self.attempts = attempts
        self.retry_wait = retry_wait
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_pending = max_pending
        self.on_failure = on_failure
        self.on_dropped = on_dropped
        self.keep_blockers = keep_blockers
        """Whether blocker rows are written: a run whose ledger no one reads them from (`simulate -o json`
        without --report or --ledger) leaves them out, a row per node kept per evaluation."""
        self._queue: deque[_Batch] = deque()
        self._pending = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.written = dict.fromkeys(TABLES, 0)
        """Rows stored per table (a retried action row stored once counts once)."""
        self._handed: set[tuple[str, str]] = set()
        """(command id, node) of every action row handed in, queued or stored."""
        self._stored: set[tuple[str, str]] = set()
        """(command id, node) of every action row committed (or found already there)."""

    # ---- what controllers call ---------------------------------------------------------------------

    def actions(self, rows: Sequence[ActionRow]) -> None:
        """Queue action rows; rows handed in before (same command and node) are skipped."""
        with self._cond:
            fresh = [r for r in rows if (r.command_id, r.node) not in self._handed]
            self._handed.update((r.command_id, r.node) for r in fresh)
        self._put(_Batch("actions", fresh))

    def stored(self, keys: Sequence[tuple[str, str]]) -> bool:
        """Whether every action row of these (command id, node) keys is in the ledger."""
        with self._cond:
            return all(k in self._stored for k in keys)

    def blockers(self, rows: Sequence[BlockerRow]) -> None:
        if self.keep_blockers:
            self._put(_Batch("blockers", list(rows)))

    def usage(self, rows: Sequence[UsageRow]) -> None:
        self._put(_Batch("usage", list(rows)))

    def reservations(self, rows: Sequence[ReservationRow]) -> None:
        self._put(_Batch("reservations", list(rows)))

    @property
    def pending(self) -> int:
        """Rows queued and not yet stored."""
        return self._pending

    # ---- running -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self.background and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="ledger", daemon=True)
            self._thread.start()

    def stop(self, *, timeout: float = 10.0) -> None:
        """Write what is queued (for up to `timeout` seconds in the background), then stop."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._pending:
            log.error("ledger: %d rows not written at shutdown", self._pending)
        if self._ledger is not None and not isinstance(self._target, Ledger):
            self._ledger.close()

    def flush(self) -> bool:
        """Write every queued batch now, in the caller's thread; False when a batch still failed."""
        while True:
            with self._cond:
                if not self._queue:
                    return True
                batch = self._queue[0]
            if not self._write(batch):
                return False
            with self._cond:
                if self._queue and self._queue[0] is batch:
                    self._queue.popleft()
                    self._pending -= len(batch.rows)

    # ---- inside -------------------------------------------------------------------------------------

    def _put(self, batch: _Batch) -> None:
        if not batch.rows:
            return
        with self._cond:
            self._queue.append(batch)
            self._pending += len(batch.rows)
            while self._pending > self.max_pending and len(self._queue) > 1:
                dropped = self._queue.popleft()
                self._pending -= len(dropped.rows)
                self.on_dropped(dropped.table, len(dropped.rows))
                log.error(
                    "ledger: %d %s rows dropped, more than %d rows waiting for the database",
                    len(dropped.rows),
                    dropped.table,
                    self.max_pending,
                )
            self._cond.notify_all()
        if not self.background:
            self.flush()

    def _loop(self) -> None:
        delay = self.backoff
        while not self._stop.is_set():
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait(1.0)
            if self.flush():
                delay = self.backoff
            else:
                # The database is still down: the rows wait, the controllers carry on.
                self._stop.wait(delay)
                delay = min(self.max_backoff, delay * 2)
        self.flush()

    def _open(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self._target)  # type: ignore[arg-type]
        return self._ledger

    def _write(self, batch: _Batch) -> bool:
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self.attempts),
                wait=wait_exponential(multiplier=self.retry_wait, max=self.retry_wait * 8),
                reraise=True,
            ):
                with attempt:
                    ledger = self._open()
                    if batch.table == "actions":
                        stored = ledger.record_actions(batch.rows)  # type: ignore[arg-type]
                    elif batch.table == "blockers":
                        stored = ledger.record_blockers(batch.rows)  # type: ignore[arg-type]
                    elif batch.table == "usage":
                        stored = ledger.record_usage(batch.rows)  # type: ignore[arg-type]
                    else:
                        stored = ledger.record_reservations(batch.rows)  # type: ignore[arg-type]
        except LedgerError as err:
            # A ledger newer than this program, or a URL that cannot work: retrying will not help, but the
            # rows are kept and the failure is loud.
            self.on_failure(batch.table)
            log.error("ledger: cannot write %d %s rows: %s", len(batch.rows), batch.table, err)
            return False
        except Exception as err:
            self.on_failure(batch.table)
            log.warning(
                "ledger: writing %d %s rows failed after %d attempts (kept, retried later): %s",
                len(batch.rows),
                batch.table,
                self.attempts,
                getattr(err, "orig", None) or err,
            )
            return False
        self.written[batch.table] += stored
        if batch.table == "actions":
            with self._cond:
                self._stored.update((r.command_id, r.node) for r in batch.rows)  # type: ignore[union-attr]
            crashpoints.reached("ledger-written")
        return True
