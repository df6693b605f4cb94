"""NodeClasses: how to launch on one cloud. The core knows only the base model here, the reference a
NodePool or NodeClaim makes to one (`nodeClassRef`), and the kinds the installed provider plug-ins bring
(`NODECLASS_KINDS`, read through provisioner.api.plugins). Each cloud's model (its spec and status)
lives in its plug-in and subclasses `NodeClass`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from provisioner.api import labels, plugins
from provisioner.api.common import FieldError, Model, ObjectMeta, check_name, raise_all


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


def _node_class_models(found: tuple[plugins.Declares, ...]) -> dict[str, type[NodeClass]]:
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


NODECLASS_KINDS: plugins.Derived[type[NodeClass]] = plugins.Derived(_node_class_models)
"""NodeClass kind -> model, as the installed provider plug-ins declare them (in the plug-ins' name
order)."""


class NodeClassReference(Model):
    """Which NodeClass launches the nodes: `group`, `kind` and `name`."""

    group: str = labels.GROUP
    """API group of the NodeClass; `provisioner.sh`."""
    kind: str
    """`AWSNodeClass` or `GCPNodeClass`."""
    # The description the committed CRDs carry; any kind an installed plug-in brings is accepted.
    name: Annotated[str, AfterValidator(check_name)]
    """Name of the NodeClass object."""

    @model_validator(mode="after")
    def _known_kind(self) -> NodeClassReference:
        errors: list[FieldError] = []
        if self.group != labels.GROUP:
            errors.append(
                FieldError(f"group {self.group!r} is not known; allowed: {labels.GROUP}", path=("group",))
            )
        if self.kind not in NODECLASS_KINDS:
            errors.append(
                FieldError(
                    f"kind {self.kind!r} is not known; allowed: {', '.join(NODECLASS_KINDS)}", path=("kind",)
                )
            )
        raise_all(errors)
        return self
