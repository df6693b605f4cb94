"""The registry of provider plug-ins: every cloud the core can launch on, as the installed packages
declare them (entry-point group `provisioner.providers`, read by provisioner.api.plugins).

Owns the questions the core asks of "the clouds" without naming one: which plug-ins exist (`plugins`,
`plugin`), which NodeClass kinds they bring (`nodeclass_kinds`), which cloud the simulator runs on
(`simulated`), and building the providers `provisioner run --cloud a,b` asks for (`build`), each wrapped in
the retries, cache and metrics every provider runs behind. Builds nothing on import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from prometheus_client import CollectorRegistry

from provisioner.api import plugins as api_plugins
from provisioner.api.kinds import NODECLASS_KINDS
from provisioner.api.nodeclass import NODECLASS_MODELS, NodeClass
from provisioner.cloudprovider import wrappers
from provisioner.cloudprovider.plugin import (
    NodeMaker,
    OptionError,
    OptionValues,
    ProviderPlugin,
    SimulatedCloud,
    Wiring,
)
from provisioner.cloudprovider.protocol import CloudProvider
from provisioner.cloudprovider.types import InstanceType

PluginError = api_plugins.PluginError


def plugins() -> list[ProviderPlugin]:
    """Every installed plug-in, in name order."""
    out: list[ProviderPlugin] = []
    for found in api_plugins.installed():
        if not isinstance(found, ProviderPlugin):
            raise PluginError(f"provider plug-in {found.name!r} is not a ProviderPlugin")
        out.append(found)
    return out


def ordered(found: Sequence[ProviderPlugin]) -> list[ProviderPlugin]:
    """The production clouds first, then those for a development cluster only (as `--cloud` lists them)."""
    return [p for p in found if p.dev_only is None] + [p for p in found if p.dev_only is not None]


def names() -> list[str]:
    """`--cloud` values: the production clouds first, then those for a development cluster only."""
    return [p.name for p in ordered(plugins())]


def plugin(name: str) -> ProviderPlugin:
    """The plug-in named `name`; OptionError naming `--cloud` and the allowed names when none is."""
    for p in plugins():
        if p.name == name:
            return p
    raise OptionError(
        f"--cloud: {name!r} is not known; allowed: {', '.join(names())} (or a comma-separated list)"
    )


def check_shared(clouds: Sequence[str], options: OptionValues) -> None:
    """Raises OptionError, naming the flag and the cloud, when `options` lack one that replicas sharing
    `clouds` need (`Option.shared_needs`)."""
    for p in plugins():
        if p.name not in clouds:
            continue
        for o in p.options:
            if o.shared_needs is not None and not options.get(o.key):
                raise OptionError(f"{o.flag}: required with --shards and --cloud {p.name} ({o.shared_needs})")


def nodeclass_kinds() -> Mapping[str, type[NodeClass]]:
    """NodeClass kind -> model, over every plug-in."""
    return NODECLASS_MODELS


def simulated(types: list[InstanceType], clock: Callable[[], datetime]) -> SimulatedCloud:
    """The cloud `provisioner simulate` runs on, over `types`: the first plug-in that provides one."""
    for p in plugins():
        if p.simulated is not None:
            return p.simulated(types, clock)
    raise PluginError("no installed provider plug-in provides the simulator's cloud")


def simulator_plugin() -> ProviderPlugin:
    """The plug-in whose cloud the simulator runs on (its Nodes stand in for kubelets)."""
    for p in plugins():
        if p.simulated is not None:
            return p
    raise PluginError("no installed provider plug-in provides the simulator's cloud")


def node_maker(clouds: Sequence[str]) -> NodeMaker | None:
    """The Nodes the first of `clouds` without kubelets stands in for, if any is asked for."""
    for name in clouds:
        for p in plugins():
            if p.name == name and p.nodes is not None:
                return p.nodes
    return None


def build(
    clouds: Sequence[str],
    options: OptionValues,
    wiring: Wiring,
    registry: CollectorRegistry | None,
) -> dict[str, CloudProvider]:
    """NodeClass kind -> the provider that launches it, for `--cloud` `clouds` in order: each plug-in's
    provider built from `options` (by `Option.key`), wrapped as the controllers run it. A cloud that
    serves every kind takes the kinds no earlier cloud took. Raises OptionError naming the flag."""
    by_kind: dict[str, CloudProvider] = {}
    for name in clouds:
        p = plugin(name)
        wrapped = wrappers.wrap(p.build(options, wiring), clock=wiring.clock, registry=registry)
        if p.serves_every_kind:
            for kind in NODECLASS_KINDS:
                by_kind.setdefault(kind, wrapped)
        for own in p.nodeclasses:
            by_kind[own.kind] = wrapped
    return by_kind
