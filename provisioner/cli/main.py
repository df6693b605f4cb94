"""Wires the command: every subcommand module adds its commands to `app.app` when imported; SDKs are
imported inside the commands that use them."""

from __future__ import annotations

import gc

# Imported for the commands each one registers on `app`.
from provisioner.cli import catalog, crds, report, run, simulate, templates  # noqa: F401
from provisioner.cli.app import app

__all__ = ["app", "main"]

# The simulator and the controller hold hundreds of thousands of long-lived objects (pods, nodes, claims
# and their parsed forms). With the default threshold (700) the cyclic collector re-walks the young ones
# thousands of times a run: a fifth of a 10,000-pod `simulate` (25.5 -> 19.6 CPU s, the same peak RSS).
# Our objects form few cycles, so collecting rarely costs little memory: a 100,000-pod `simulate` leaves
# about 6,700 objects in cycles in all; the middle generation every 100 young collections instead of 20
# walks it in 2.5 CPU s instead of 4.7, at the same peak RSS. (`simulate` with time turns the collector
# off for its run: `sim.console`.)
GC_THRESHOLDS = (50_000, 100, 100)


def main() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        app()
    finally:
        # The process ends here: the interpreter's last full collection would walk every object still
        # held (a 100,000-pod `simulate`: seconds of CPU, 5% of the run) to find the few in cycles.
        # Frozen objects are left to the exit.
        gc.freeze()
