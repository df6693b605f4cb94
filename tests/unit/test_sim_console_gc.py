"""`simulate` with time runs with the cyclic garbage collector off (`sim.console`), and leaves it as it
found it, however the run ends."""

from __future__ import annotations

import gc

import pytest

from provisioner.sim.console import _without_cycle_collection


@pytest.mark.parametrize("before", [True, False], ids=["on", "off"])
def test_the_collector_is_off_for_the_run_and_as_it_was_after(before: bool) -> None:
    was = gc.isenabled()
    try:
        gc.enable() if before else gc.disable()
        with _without_cycle_collection():
            assert not gc.isenabled()
        assert gc.isenabled() is before
        with pytest.raises(RuntimeError), _without_cycle_collection():
            raise RuntimeError("the run failed")
        assert gc.isenabled() is before
    finally:
        gc.enable() if was else gc.disable()
