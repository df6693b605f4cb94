"""The lifecycle controller: every NodeClaim not yet launched, registered and initialized goes through
the steps, one module each as Karpenter splits `pkg/controllers/nodeclaim/lifecycle`: `liveness` (a claim
past a step's timeout is replaced), `launch`, `registration`, `initialization`.

One pass: one snapshot; the gangs first (a gang member that never registered takes its whole launch
group with it, then the gangs not launched yet launch as groups, `gang_launch`), then each other claim,
in snapshot order, through the steps in that order. A step acts only on a claim in its state, and every
step sees the snapshot's claim (what a step writes comes back through the informers), so a claim moves
at most one step per pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from provisioner.api import NodeClaim
from provisioner.clusterapi import ClusterError, ConflictError, NotFoundError
from provisioner.controllers.lifecycle import gang_launch
from provisioner.controllers.lifecycle.initialization import Initialization
from provisioner.controllers.lifecycle.launch import Launch
from provisioner.controllers.lifecycle.liveness import Liveness
from provisioner.controllers.lifecycle.registration import Registration
from provisioner.controllers.lifecycle.step import Pass, Step, log, settled
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.finops.recorder import LedgerRecorder


@dataclass(kw_only=True, eq=False)
class LifecycleController(Reconciler):
    recorder: LedgerRecorder | None = None
    """Where a gang launch that ended partial books what it cost (`gang_launch`)."""
    liveness: Liveness = field(init=False, repr=False)
    launch: Launch = field(init=False, repr=False)
    registration: Registration = field(init=False, repr=False)
    initialization: Initialization = field(init=False, repr=False)
    _settled: dict[str, NodeClaim] = field(default_factory=dict, init=False)
    """Claim name -> the claim object last seen launched, registered and initialized: a snapshot hands
    back the same object while the claim is unchanged, and such a claim needs nothing from a pass."""
    _watch: Watch = field(init=False, repr=False)
    _busy: bool = field(default=True, init=False)
    """The last pass left a claim with a step to take (a launch to retry among them): the next pass walks
    the claims again, written or not, since the steps' timeouts and backoffs run on time alone."""

    def __post_init__(self) -> None:
        self._watch = Watch(self.state, ("NodeClaim",), owns=self.owns)
        self.liveness = Liveness(owner=self, recorder=self.recorder)
        self.launch = Launch(owner=self, recorder=self.recorder)
        self.registration = Registration(owner=self, recorder=self.recorder)
        self.initialization = Initialization(owner=self, recorder=self.recorder)

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps, in the order each claim goes through them."""
        return (self.liveness, self.launch, self.registration, self.initialization)

    def reconcile(self, now: datetime) -> None:
        # Every claim settled and none written since: no step to take. (A Node matters only to a claim
        # still registering or initializing, and such a claim keeps the controller busy.)
        if not self._watch.take() and not self._busy:
            return
        snap = self.state.snapshot()
        still: dict[str, NodeClaim] = {}
        todo: list[NodeClaim] = []
        for state_node in snap.nodes:
            claim = state_node.claim
            if claim is None or claim.metadata.deletion_timestamp is not None:
                continue
            if self._settled.get(claim.name) is claim or settled(claim):
                still[claim.name] = claim
            else:
                todo.append(claim)
        self._settled = still
        self._busy = bool(todo)
        if not todo:
            return
        nodes = {
            sn.node.provider_id: sn.node for sn in snap.nodes if sn.node is not None and sn.node.provider_id
        }
        # A gang's claims launch together, all or none; the rest of their life is any claim's.
        todo, groups = gang_launch.split(todo)
        try:  # liveness, for gangs: a member that never registers takes its whole launch group with it
            gone = gang_launch.unregistered(self.liveness, todo, snap, now)
            todo = [c for c in todo if c.name not in gone]
        except ClusterError as err:
            log.warning("gang registration: %s", err)
        if groups:
            try:  # launch, for gangs: one create_group per gang
                gang_launch.launch_gangs(self.launch, groups, snap, now)
            except ClusterError as err:
                log.warning("gang launch: %s", err)
        p = Pass(snap=snap, now=now, nodes=nodes)
        for claim in todo:
            try:
                for step in self.steps:
                    if step.reconcile(claim, p):
                        break
            except NotFoundError:
                continue  # deleted meanwhile; the next reconcile sees it gone
            except ConflictError as err:
                log.info("NodeClaim %s: %s; the next reconcile works from the newer copy", claim.name, err)
            except ClusterError as err:
                log.warning("NodeClaim %s: %s", claim.name, err)
