"""The scheduler the planner re-solves with: the real one when it exists, else the test stand-in."""

from __future__ import annotations

import pytest

from provisioner import scheduling
from provisioner.scheduling import SolveFn
from tests.unit.disruption import standin


def real_or_standin() -> SolveFn:
    return getattr(scheduling, "solve", None) or standin.solve


@pytest.fixture
def solve() -> SolveFn:
    return real_or_standin()
