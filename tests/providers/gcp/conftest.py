"""Fixtures for the GCP provider tests: a fresh Compute stand-in per test and a provider pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from providers.gcp import GCPProvider
from testkit.providers.gcp.standin import ComputeStandIn
from testkit.providers.harness_gcp import make_provider


@pytest.fixture
def standin() -> Iterator[ComputeStandIn]:
    server = ComputeStandIn().start()
    yield server
    server.stop()


@pytest.fixture
def provider(standin: ComputeStandIn) -> GCPProvider:
    return make_provider(standin)
