"""NodeClasses: how to launch on one cloud. The core knows only the base model here and the models the
installed provider plug-ins bring (`NODECLASS_MODELS`, read through provisioner.api.plugins); each
cloud's model (its spec and status) lives in its plug-in and subclasses `NodeClass`. Which kinds are
NodeClasses is the tracked-kinds table's (`provisioner.api.kinds.NODECLASS_KINDS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from provisioner.api import plugins
from provisioner.api.common import Model, ObjectMeta


class NodeClass(Model):
    """Any cloud's NodeClass (`provisioner.sh/v1`): what the core reads of one. A plug-in's model narrows
    `kind`, `spec` and `status`, and may answer the simulator's questions below for its cloud."""

    api_version: Literal["provisioner.sh/v1"] = Field("provisioner.sh/v1", alias="apiVersion")
    kind: str
    metadata: ObjectMeta
    spec: Model
    status: Model | None = None

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    def launch_zones(self, zones: Sequence[str]) -> list[str]:
        """The zones of `zones` (a region's, in order) this NodeClass launches in; all of them unless the
        cloud's model narrows them (subnets, a zone list)."""
        return list(zones)

    def named_region(self) -> str | None:
        """The region the NodeClass names, when its cloud's model has one (the simulator reads its
        catalog there)."""
        return None

    @classmethod
    def simulated(cls, name: str, zones: Sequence[str]) -> NodeClass:
        """What a pool gets in the simulator when its nodeClassRef names no document: a NodeClass that
        launches in every zone of `zones`."""
        raise NotImplementedError(f"{cls.__name__} has no simulated default")


def _models(found: tuple[plugins.Declares, ...]) -> dict[str, type[NodeClass]]:
    out: dict[str, type[NodeClass]] = {}
    for plugin in found:
        for kind in plugin.nodeclasses:
            if not issubclass(kind.model, NodeClass):
                raise plugins.PluginError(
                    f"provider plug-in {plugin.name}: the model of {kind.kind} does not subclass "
                    "provisioner.api.nodeclass.NodeClass"
                )
            out[kind.kind] = kind.model
    return out


NODECLASS_MODELS: plugins.Derived[type[NodeClass]] = plugins.Derived(_models)
"""NodeClass kind -> model, as the installed provider plug-ins declare them (in the plug-ins' name
order)."""
