"""What the Compute stand-in holds and the shapes every part of it shares: the in-memory `State`
(instances, operations, reservations, fault hooks, the call log), the `ApiError` answered in Google's JSON
error shape, the `Call` record, the name and label rules the real API enforces, and Compute's timestamps.
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from testkit.providers.gcp.fixtures import Catalog

API = "https://www.googleapis.com/compute/v1"
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^[a-z][-_a-z0-9]{0,62}$")
_LABEL_VALUE = re.compile(r"^[-_a-z0-9]{0,63}$")
_PACIFIC = timezone(timedelta(hours=-8))


def _now() -> str:
    # Compute Engine writes RFC 3339 timestamps with a local offset and milliseconds.
    return datetime.now(_PACIFIC).isoformat(timespec="milliseconds")


class ApiError(Exception):
    """An HTTP error answer in Google's JSON error shape."""

    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.status,
                "message": self.message,
                "errors": [{"message": self.message, "domain": "global", "reason": self.reason}],
            }
        }


@dataclass
class Call:
    """One request the stand-in answered."""

    method: str
    path: str
    query: dict[str, str]
    status: int = 200
    authorization: str | None = None
    """The Authorization header received, to show which credentials the client used."""


@dataclass
class State:
    """Everything the stand-in holds; guarded by `lock`."""

    catalog: Catalog
    instances: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    insert_bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    operations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pending: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """Operation key -> what finishing it does (create or fail an instance)."""
    stockouts: set[tuple[str, str, str]] = field(default_factory=set)
    sync_stockouts: set[tuple[str, str, str]] = field(default_factory=set)
    quota: dict[tuple[str, str], str] = field(default_factory=dict)
    throttle_left: int = 0
    throttle_methods: frozenset[str] | None = None
    errors_5xx_left: int = 0
    hang_operations: bool = False
    stale_aggregated: bool = False
    max_page_size: int = 500
    launches: int = 0
    reservations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(zone, name) -> a reservation resource as reservations.list answers it."""
    capacity: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(machine type, zone, provisioning model) -> instances it can still create (unset: no limit)."""
    ignore_min_count: bool = False
    resource_policies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(region, name) -> a resource policy."""
    calls: list[Call] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    lock: threading.RLock = field(default_factory=threading.RLock)


def _invalid(field_path: str, value: Any, why: str) -> ApiError:
    return ApiError(400, f"Invalid value for field '{field_path}': '{value}'. {why}", "invalid")
