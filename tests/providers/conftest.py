"""The `harness` fixture: the contract suite runs once per provider (fake, aws, gcp).

Each provider's stand-in lives in `tests/providers/harness_<id>.py` with a generator `make_harness()`
that yields a Harness and tears down after (see harness.py). A provider whose harness module does not
exist yet is skipped with a reason rather than failing, so the suite can grow one provider at a time.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from tests.providers.harness import Harness

PROVIDERS = ("fake", "aws", "gcp")


@pytest.fixture(params=PROVIDERS, ids=PROVIDERS)
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    module_name = f"tests.providers.harness_{request.param}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise  # the harness exists but something it imports does not: that is a real failure
        pytest.skip(f"{module_name.replace('.', '/')}.py is not written yet")
    generator = module.make_harness()
    harness = next(generator)
    try:
        yield harness
    finally:
        # Run the generator's teardown; it must stop after one yield.
        for _ in generator:
            raise RuntimeError(f"{module_name}.make_harness() yielded more than once")
