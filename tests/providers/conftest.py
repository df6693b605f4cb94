"""The `harness` fixture: the contract suite runs once per provider (fake, aws, gcp).

Each provider's stand-in lives in `testkit/providers/harness_<id>.py` with a generator `make_harness()`
that yields a Harness and tears down after (see harness.py). A provider whose harness module does not
exist yet is skipped with a reason rather than failing, so the suite can grow one provider at a time.

A provider plug-in installed from outside this repository runs the same suite with its own harness
module: `PROVISIONER_CONTRACT_HARNESSES=NAME=MODULE[,NAME=MODULE...] pytest tests/providers -k NAME`
(tests/unit/test_provider_plugins.py does so for a throwaway plug-in).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator

import pytest

from testkit.providers.harness import Harness

PROVIDERS = ("fake", "aws", "gcp")
EXTRA_ENV = "PROVISIONER_CONTRACT_HARNESSES"
"""More providers to run the suite over, `NAME=MODULE,...`: each MODULE offers `make_harness()`."""


def _harness_modules() -> dict[str, str]:
    modules = {name: f"testkit.providers.harness_{name}" for name in PROVIDERS}
    for entry in filter(None, os.environ.get(EXTRA_ENV, "").split(",")):
        name, sep, module = entry.partition("=")
        if not sep or not name.strip() or not module.strip():
            raise ValueError(f"{EXTRA_ENV}: {entry!r} is not NAME=MODULE")
        modules[name.strip()] = module.strip()
    return modules


HARNESS_MODULES = _harness_modules()


@pytest.fixture(params=list(HARNESS_MODULES), ids=list(HARNESS_MODULES))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    module_name = HARNESS_MODULES[request.param]
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
