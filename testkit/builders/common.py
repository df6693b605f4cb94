"""The constants the builders share: sizes, the default zones, and the `now` of the pure tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

GIB = 2**30
MIB = 2**20
ZONES = ("zone-a", "zone-b", "zone-c")
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
"""The `now` of the pure tests (planner, ledger rows)."""
LONG_AGO = NOW - timedelta(days=2)
