"""What loading a scenario gives: a `LoadedScenario` (its checked objects, the catalogs its pools launch
from with the stockouts applied, the Snapshot the solver reads), or a `ScenarioError` holding every
problem found. Reading and checking the files is `provisioner.sim.scenario`'s; running it the runner's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.api import Department, NodePool, Team
from provisioner.api.documents import Problem, YamlDocument
from provisioner.api.nodeclass import NodeClass
from provisioner.api.provisioning_request import ProvisioningRequest
from provisioner.cloudprovider.errors import OfferingKey
from provisioner.cloudprovider.types import InstanceType
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.sim import priority
from provisioner.sim.catalogs import CatalogUse
from provisioner.sim.gangs import capacity_of
from provisioner.sim.scenario_spec import Scenario
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet, Node, Pod, PodDisruptionBudget


class ScenarioError(Exception):
    """A scenario that cannot run; `problems` says where and why (file, line, document, field)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass
class LoadedScenario:
    """Everything a run needs, checked."""

    source: str
    scenario: Scenario
    nodepools: list[NodePool]
    nodeclasses: dict[tuple[str, str], NodeClass]
    """(kind, name) -> NodeClass: the scenario's, plus a default one for every nodeClassRef naming none."""
    default_nodeclasses: set[tuple[str, str]]
    pods: list[Pod]
    """Pods to schedule (not bound to a node)."""
    nodes: list[Node]
    bound: dict[str, list[Pod]]
    """Node name -> pods running on it (bound pods of the file, plus daemonset pods)."""
    daemonsets: list[DaemonSet]
    namespaces: dict[str, dict[str, str]]
    instance_types: dict[str, list[InstanceType]]
    """Pool name -> the types its NodeClass can launch, stockouts flagged unavailable."""
    catalogs: list[CatalogUse] = field(default_factory=list)
    """The catalogs the pools launch from: one per NodeClass kind (or one for every kind)."""
    document: YamlDocument | None = None
    """The Scenario document as read (its lines locate timeline problems)."""
    pdb_documents: list[dict[str, Any]] = field(default_factory=list)
    """PodDisruptionBudgets as written (the timeline runner applies them to its cluster)."""
    teams: list[Team] = field(default_factory=list)
    departments: list[Department] = field(default_factory=list)
    priorities: priority.PriorityClasses = field(default_factory=priority.PriorityClasses)
    """The scenario's PriorityClasses (pods' `spec.priority` is set from them as they are loaded)."""
    provisioning_requests: list[ProvisioningRequest] = field(default_factory=list)
    """ProvisioningRequests (autoscaling.x-k8s.io/v1), by namespace and name."""
    pod_templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`namespace/name` -> PodTemplate document (what the requests' pod sets name)."""
    warnings: list[Problem] = field(default_factory=list)
    """What `templates validate` warns of (a typo'd `provisioner.sh/` key, a GPU pool without a taint,
    quotas promising more than a pool holds): the run goes on, and `simulate` prints them first."""

    @property
    def catalog_types(self) -> list[InstanceType]:
        """Every type of every catalog (their names never clash: each cloud names its own)."""
        return [t for use in self.catalogs for t in use.types]

    @property
    def zones(self) -> list[str]:
        return [z for use in self.catalogs for z in use.zones]

    @property
    def where(self) -> str:
        """The catalogs and their regions, for people: `aws us-east-1 + gcp us-central1`."""
        return " + ".join(f"{use.name} {use.region}" for use in self.catalogs)

    @property
    def pool_defaults(self) -> ClusterDefaults:
        """The scenario's `spec.defaultNodePools`, as the solver takes them."""
        given = self.scenario.spec.default_node_pools
        return ClusterDefaults.of(cpu=given.cpu, gpu=given.gpu)

    def zones_of(self, kind: str) -> list[str]:
        """The zones the catalog serving this NodeClass kind offers."""
        return next((use.zones for use in self.catalogs if kind in use.kinds), [])

    @property
    def pdbs(self) -> list[PodDisruptionBudget]:
        return [PodDisruptionBudget.from_dict(d) for d in self.pdb_documents]

    def snapshot(self) -> Snapshot:
        nodes = tuple(
            StateNode(name=n.name, node=n, pods=tuple(self.bound.get(n.name, ()))) for n in self.nodes
        )
        return Snapshot(
            nodes=nodes,
            pending_pods=tuple(sorted(self.pods, key=lambda p: p.key)),
            daemonsets=tuple(self.daemonsets),
            pdbs=tuple(self.pdbs),
            nodepools=tuple(self.nodepools),
            nodeclasses=dict(self.nodeclasses),
            namespaces={k: dict(v) for k, v in self.namespaces.items()},
            teams=tuple(sorted(self.teams, key=lambda t: t.name)),
            departments=tuple(sorted(self.departments, key=lambda d: d.name)),
        )

    @property
    def capacity(self) -> dict[OfferingKey, int] | None:
        """Instances each offering has left (`spec.capacity`, the last selector matching an offering
        wins), None when the scenario sets none."""
        return capacity_of(self.scenario.spec.capacity, self.catalog_types)

    def find_pod(self, key: str) -> Pod | None:
        namespace, _, name = key.rpartition("/")
        namespace = namespace or "default"
        return next((p for p in self.pods if p.namespace == namespace and p.name == name), None)
