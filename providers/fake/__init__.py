"""The in-memory cloud: `provisioner simulate` and the controller tests launch here.

A product, not a stub (STYLE.md 10): it serves a built-in catalog (or the types it is given), models a
finite capacity per offering and stockouts by selector, can be told to fail the next create, queues
interruptions, records every call, and passes the same contract suite as the AWS and GCP providers.
"""

from providers.fake.capacity import Selector
from providers.fake.provider import FakeProvider

__all__ = ["FakeProvider", "Selector"]
