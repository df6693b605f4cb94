"""The scheduler the planner re-solves with: the real one when it exists, else the test stand-in."""

from __future__ import annotations

import pytest

from provisioner import scheduling
from tests.unit.disruption import standin


def real_or_standin():
    return getattr(scheduling, "solve", None) or standin.solve


@pytest.fixture
def solve():
    return real_or_standin()
