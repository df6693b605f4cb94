"""What the planner returns: commands (nodes to delete, replacements to launch) with the record of every
node they touch, and for every node considered and kept, the blocker that kept it.

Values only; the disruption controller acts on them and the FinOps ledger stores their records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from provisioner.api.nodepool import DisruptionReason
from provisioner.scheduling.results import NewClaim
from provisioner.state.cluster import StateNode


class BlockerKind(StrEnum):
    NOT_INITIALIZED = "NotInitialized"
    DO_NOT_DISRUPT_NODE = "DoNotDisruptNode"
    DO_NOT_DISRUPT_POD = "DoNotDisruptPod"
    PDB = "PDB"
    BUDGET = "Budget"
    NOT_CHEAPER = "NotCheaper"
    PODS_DO_NOT_FIT = "PodsDoNotFit"
    MIN_SAVINGS = "MinSavings"
    SPOT_TO_SPOT = "SpotToSpotOptions"
    POLICY = "ConsolidationPolicy"
    NOT_SETTLED = "ConsolidateAfter"
    NO_POOL = "NodePoolMissing"
    IN_PLAN = "DestinationInPlan"
    AWAITED = "AwaitedByPendingPod"
    """A pod on its way, pending or on a node being disrupted, can land on the node (often the pod it was
    launched for, not bound yet)."""
    GANG = "Gang"
    """The node runs members of a gang whose other nodes the command would not take with it."""
    RESERVED_FOR_WORK = "ReservedForWork"
    """An empty reserved node stays for the work of a node of its type and zone outside the reservation:
    deleting it saves nothing (the reservation is paid), that work moving onto it saves its price."""


@dataclass(frozen=True, slots=True)
class PodMove:
    pod: str
    """`namespace/name`."""
    destination: str
    """The node it is expected to land on, or `new:<instance type>` for a replacement."""
    team: str | None = None


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node removed or replaced: what it was, why, where its pods go, $/h before and after."""

    node: str
    nodepool: str
    reason: DisruptionReason
    instance_type: str
    capacity_type: str
    zone: str
    price_per_hour: float
    pods: tuple[PodMove, ...] = ()
    teams: tuple[str, ...] = ()
    replacement_type: str | None = None
    replacement_capacity_type: str | None = None
    replacement_price_per_hour: float = 0.0
    """This node's share of the replacements' $/h (shares are in proportion to the removed nodes' prices,
    so the rows of one command add up to its whole change in $/h)."""
    detail: str = ""

    @property
    def savings_per_hour(self) -> float:
        return self.price_per_hour - self.replacement_price_per_hour

    @property
    def action(self) -> str:
        return "replace" if self.replacement_type else "delete"


@dataclass(frozen=True, slots=True)
class Blocker:
    """Why a node that was considered is kept."""

    node: str
    nodepool: str
    kind: BlockerKind
    detail: str
    method: str = ""
    """The method that was evaluating it (`candidates` when it never became a candidate)."""


@dataclass(slots=True)
class Command:
    """One disruption decision: delete `nodes`, after launching `replacements` (if any)."""

    reason: DisruptionReason
    method: str
    """`expiration`, `drift`, `emptiness`, `multi-node`, `single-node`, `return-to-preferred`."""
    nodes: tuple[StateNode, ...]
    replacements: tuple[NewClaim, ...] = ()
    records: tuple[NodeRecord, ...] = ()

    @property
    def action(self) -> str:
        return "replace" if self.replacements else "delete"

    @property
    def price_before(self) -> float:
        return sum(n.price for n in self.nodes)

    @property
    def price_after(self) -> float:
        return sum(c.price for c in self.replacements)

    @property
    def savings_per_hour(self) -> float:
        return self.price_before - self.price_after

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)


@dataclass(slots=True)
class DisruptionPlan:
    """What one pass of the planner decided: the commands to carry out, and why every other node stays."""

    now: datetime
    commands: list[Command] = field(default_factory=list)
    blockers: list[Blocker] = field(default_factory=list)
    evaluated: int = 0
    """Nodes the planner looked at (every node with a claim)."""
    solves: int = 0
    """Scheduler runs the plan took (the cost of proving pods still fit)."""
    reused: int = 0
    """Consolidation verdicts to keep nodes taken from an earlier plan instead of a re-solve (`verdicts`)."""
    repeated: bool = False
    """The last plan handed back whole: nothing it read changed since, nor any answer of its clock
    (`memory`)."""

    @property
    def records(self) -> list[NodeRecord]:
        return [r for c in self.commands for r in c.records]

    @property
    def disrupted(self) -> set[str]:
        return {name for c in self.commands for name in c.node_names}

    @property
    def savings_per_hour(self) -> float:
        return sum(c.savings_per_hour for c in self.commands)
