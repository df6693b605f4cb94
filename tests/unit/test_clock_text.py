"""Timestamps as Kubernetes writes them (`provisioner.clock.isoformat`, cached per instant)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from provisioner.clock import isoformat


def test_the_same_instant_in_any_zone_reads_the_same_and_each_instant_its_own() -> None:
    at = datetime(2026, 3, 2, 9, 30, 15, 999_999, tzinfo=UTC)
    paris = at.astimezone(timezone(timedelta(hours=1)))
    assert isoformat(at) == isoformat(paris) == "2026-03-02T09:30:15Z"
    # Asked again (from the cache) and for the next second: each its own text.
    assert isoformat(at) == "2026-03-02T09:30:15Z"
    assert isoformat(at + timedelta(microseconds=1)) == "2026-03-02T09:30:16Z"
    assert isoformat(paris + timedelta(hours=1)) == "2026-03-02T10:30:15Z"
