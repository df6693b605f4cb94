"""Disruption: acting on the pure planner's commands, safely, and writing the FinOps ledger.

Each evaluation plans (`provisioner.disruption.plan`) over a snapshot; a plan with commands is held for a
validation delay, then planned again, and only the commands found again unchanged (same method, same
nodes) are carried out: a pod that arrived, a PDB that tightened or a budget window that closed in the
meantime drops them. Carrying out a command:

1. mark its nodes: taint `provisioner.sh/disrupted:NoSchedule` (no new pod lands there), claim condition
   `Disrupting`, and the voluntary reason annotation the termination controller reads;
2. launch its replacements (NodeClaims) and wait until every one is Initialized; if one fails or takes
   longer than registration + initialization timeouts, the command is abandoned and its nodes unmarked;
3. delete the old NodeClaims: the termination controller (its finalizer) drains them through the eviction
   API, honouring PDBs and do-not-disrupt, and deletes the instances;
4. hand the ledger recorder one row per node removed or replaced, priced with the replacements as they
   really launched (`provisioner.finops.action_rows` holds the money rules). Each old claim carries
   its rows (annotation `provisioner.sh/ledger-actions`) from just before its deletion until the rows are
   stored: a controller killed in between hands them in again after its restart (termination does), and
   the ledger stores a (command, node) row once.

Expiration is forceful: its commands skip the validation delay and the wait for replacements (their
nodes are deleted at once; the drain honours PDBs and do-not-disrupt only until the claim's
`terminationGracePeriod`, counted from the moment of expiry).

Marks this process is not carrying out a command for (a controller killed between marking a node and
deleting its claim) are cleared at the next pass, so the node can be planned again.

Budgets hold across commands because the planner counts marked and deleting nodes as disrupting. The
replacements in flight are hidden from later plans so no two commands count on the same room. Blockers go
to the recorder once per evaluation. The recorder (`provisioner.finops.recorder`) owns writing: a
database that is down never holds up or undoes a command. Node usage is the usage controller's.
Each pass first brings the claims' pod-event times up to date (`pod_events.PodEvents`): `consolidateAfter`
counts from them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from provisioner import crashpoints, scheduling
from provisioner.api import NodePool
from provisioner.api import labels as wk
from provisioner.api import nodepool as nodepool_api
from provisioner.api.common import is_true
from provisioner.api.nodeclaim import DISRUPTING, INITIALIZED
from provisioner.cloudprovider.types import InstanceType
from provisioner.clusterapi import ClusterError, NotFoundError
from provisioner.controllers.claims import build_nodeclaim
from provisioner.controllers.conditions import set_condition
from provisioner.controllers.disruption_notes import NodeBook
from provisioner.controllers.pod_events import PodEvents
from provisioner.controllers.provider_set import pool_instance_types
from provisioner.controllers.reconciler import Reconciler
from provisioner.controllers.watch import Watch
from provisioner.disruption import Command, DisruptionPlan, Memory, PlannerSettings, plan
from provisioner.disruption.expiration_drift import CAPACITY_BLOCK_ENDING
from provisioner.finops.action_rows import Launched, action_rows, blocker_rows
from provisioner.finops.recorder import LedgerRecorder
from provisioner.finops.rows import ActionRow, actions_to_json
from provisioner.scheduling import SolveFn
from provisioner.state import Snapshot
from provisioner.state.objects import DaemonSet, Pod
from provisioner.state.snapshot import StateNode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DisruptionSettings:
    validation_delay: timedelta = timedelta(seconds=15)
    """How long a plan waits before it is planned again and, where it still holds, carried out."""
    evaluation_interval: timedelta = timedelta(seconds=10)
    """Least time between two evaluations."""
    idle_evaluation_interval: timedelta = timedelta(minutes=1)
    """When nothing in the cluster changed since the last evaluation, how long to wait before evaluating
    anyway (for what time alone changes: consolidateAfter, expireAfter, budget windows, offerings coming
    back). A change is evaluated at the next `evaluation_interval`."""
    retry_backoff: timedelta = timedelta(minutes=10)
    """After a command is abandoned (its replacement could not launch), its nodes are left alone this
    long, doubling at each new failure up to `max_retry_backoff`."""
    max_retry_backoff: timedelta = timedelta(hours=1)
    planner: PlannerSettings = field(default_factory=PlannerSettings)


@dataclass(slots=True)
class _Pending:
    planned_at: datetime
    keys: set[tuple[str, tuple[str, ...]]]


@dataclass(slots=True)
class _Active:
    id: str
    command: Command
    started: datetime
    claims: list[str]
    """The old nodes' NodeClaim names."""
    replacements: list[str] = field(default_factory=list)
    """The replacement NodeClaim names."""


def _key(command: Command) -> tuple[str, tuple[str, ...]]:
    return command.method, tuple(sorted(command.node_names))


def _forceful(command: Command) -> bool:
    """Expiration: nothing that happens meanwhile makes an expired node young again, so it is carried out
    at once, and its nodes are deleted without waiting for the replacements (as Karpenter's)."""
    return command.method == "expiration"


def _every_pod_seen(_nodes: Sequence[StateNode]) -> bool:
    """`DisruptionController.confirm` where the state holds every pod."""
    return True


@dataclass(kw_only=True, eq=False)
class DisruptionController(Reconciler):
    disruption: DisruptionSettings = field(default_factory=DisruptionSettings)
    recorder: LedgerRecorder | None = None
    """Where ledger rows go; None keeps no ledger."""
    solve: SolveFn = scheduling.solve
    booked: Callable[[], Sequence[Pod]] = tuple
    """The pods of ProvisioningRequests holding booked capacity: the nodes they can land on are kept like
    nodes a pending pod waits for."""
    confirm: Callable[[Sequence[StateNode]], bool] = _every_pod_seen
    """Asked just before a command acts on its nodes: False when they hold a pod the plan did not see (a
    sharded replica watches its shards' pods only: `Sharding.confirm`); the command is dropped and
    planned again."""
    pending: _Pending | None = field(default=None, init=False)
    active: dict[str, _Active] = field(default_factory=dict, init=False)
    last_plan: DisruptionPlan | None = field(default=None, init=False)
    memory: Memory = field(default_factory=Memory, init=False)
    """What the planner keeps of earlier plans (the last plan, consolidation keep-verdicts), so a plan
    costs what changed since (the planner is pure and keeps nothing itself)."""
    done: list[_Active] = field(default_factory=list, init=False)
    """Commands carried out, oldest first (the simulator reports them)."""
    actions: list[ActionRow] = field(default_factory=list, init=False)
    """Every action row made, also kept in memory (the simulator's JSON output)."""
    _pod_events: PodEvents = field(init=False)
    _last_evaluation: datetime | None = field(default=None, init=False)
    _evaluations: int = field(default=0, init=False)
    _generation: int | None = field(default=None, init=False)
    _backoff: dict[str, tuple[datetime, timedelta]] = field(default_factory=dict, init=False)
    """Node -> (left alone until, current backoff) after abandoned commands."""
    node_book: NodeBook = field(init=False)
    """What the pass's bookkeeping notes of each node, kept between passes."""

    _watch: Watch = field(init=False)
    _carried: frozenset[str] = field(default=frozenset(), init=False)
    """The commands being carried out when the bookkeeping last ran (orphaned marks depend on them)."""
    _unmark_failed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._pod_events = PodEvents(cluster=self.cluster)
        self.node_book = NodeBook(cluster=self.cluster)
        # What the per-node bookkeeping reads: the nodes, their claims and pods, the namespaces' teams.
        self._watch = Watch(self.state, ("Node", "NodeClaim", "Pod", "Namespace", "Team"), owns=self.owns)

    # ---- the loop ----------------------------------------------------------------------------------

    def reconcile(self, now: datetime) -> None:
        changed = self.state.generation != self._generation
        snap = self.state.snapshot()
        booked = self.booked()
        if booked:
            snap = dataclasses.replace(snap, pending_pods=(*snap.pending_pods, *booked))
        # The bookkeeping is a function of the nodes and the commands carried out: with neither changed
        # since it last ran (writes of that pass included) and no write of it left to retry, it would
        # do and write nothing, and is not done.
        written = self._watch.take()
        if (
            written
            or self._pod_events.failed
            or self._unmark_failed
            or frozenset(self.active) != self._carried
        ):
            self._carried, self._unmark_failed = frozenset(self.active), False
            self.node_book.note(snap)
            self.node_book.warn_invalid_annotations()
            self._pod_events.observe(snap, now)
            self.node_book.remember_teams()
            self._clear_orphaned_marks(snap, now)
        self._progress(snap, now)
        try:
            self._decide(snap, now, changed=changed)
        finally:
            # Writes of this pass (ours included) are the baseline the next pass compares with.
            self._generation = self.state.generation

    def _decide(self, snap: Snapshot, now: datetime, *, changed: bool) -> None:
        if self.pending is not None:
            if now - self.pending.planned_at < self.disruption.validation_delay:
                return
            pending, self.pending = self.pending, None
            result = self._plan(snap, now)
            fresh: set[tuple[str, tuple[str, ...]]] = set()
            for command in result.commands:
                if _forceful(command) or (_key(command) in pending.keys and not self._held(command, now)):
                    self._execute(command, snap, now)
                elif _key(command) not in pending.keys and not self._held(command, now):
                    # First planned now (a node emptied during validation joined the command): it waits
                    # a validation delay of its own from now, not the idle evaluation interval.
                    log.info(
                        "disruption: %s of %s not planned before validation; validating it now",
                        command.method,
                        command.node_names,
                    )
                    fresh.add(_key(command))
            if fresh:
                self.pending = _Pending(planned_at=now, keys=fresh)
            return
        if self._last_evaluation is not None:
            since = now - self._last_evaluation
            if since < self.disruption.evaluation_interval:
                return
            if not changed and since < self.disruption.idle_evaluation_interval:
                return
        self._last_evaluation = now
        result = self._plan(snap, now)
        for command in result.commands:
            if _forceful(command):
                self._execute(command, snap, now)
        keys = {_key(c) for c in result.commands if not _forceful(c) and not self._held(c, now)}
        if keys:
            self.pending = _Pending(planned_at=now, keys=keys)

    def _held(self, command: Command, now: datetime) -> bool:
        """A command touching a node whose last command was abandoned recently waits out its backoff."""
        return any(self._backoff.get(name, (now, timedelta(0)))[0] > now for name in command.node_names)

    # ---- planning ----------------------------------------------------------------------------------

    def _solve_with_defaults(
        self,
        pods: Sequence[Pod],
        snapshot: Snapshot,
        /,
        *,
        pools: Sequence[NodePool],
        instance_types: Mapping[str, Sequence[InstanceType]],
        daemonsets: Sequence[DaemonSet] | None = None,
        options: scheduling.SolveOptions | None = None,
    ) -> scheduling.Results:
        """The scheduler with the cluster's default pools, so a plan moves pods only where they may go."""
        return self.solve(
            pods,
            snapshot,
            pools=pools,
            instance_types=instance_types,
            daemonsets=daemonsets,
            options=dataclasses.replace(
                options or scheduling.SolveOptions(), pool_defaults=self.settings.pool_defaults
            ),
        )

    def _plan(self, snap: Snapshot, now: datetime) -> DisruptionPlan:
        in_flight = {name for a in self.active.values() for name in a.replacements}
        # Replacements being launched hold room for the pods they were made for: hide them (with none in
        # flight, the snapshot as it is: no walk of every node).
        view = (
            dataclasses.replace(
                snap, nodes=tuple(n for n in snap.nodes if n.claim is None or n.claim.name not in in_flight)
            )
            if in_flight
            else snap
        )
        pools = nodepool_api.live(snap.nodepools)
        result = plan(
            view,
            pools=pools,
            instance_types=pool_instance_types(self.providers, snap, pools),
            now=now,
            settings=self.disruption.planner,
            solve=self._solve_with_defaults,
            memory=self.memory,
        )
        self.last_plan = result
        self._evaluations += 1
        if self.recorder is not None and self.recorder.keep_blockers:
            evaluation = f"eval-{now:%Y%m%dT%H%M%S}-{self._evaluations}"
            self.recorder.blockers(blocker_rows(result, evaluation_id=evaluation))
        return result

    # ---- acting ------------------------------------------------------------------------------------

    def _mark(self, command: Command, now: datetime, *, on: bool) -> None:
        for sn in command.nodes:
            if sn.claim is not None:
                self._mark_claim(
                    sn.claim.name, sn.name, now, on=on, reason=command.reason.value if on else "Abandoned"
                )

    def _mark_claim(self, name: str, node_name: str, now: datetime, *, on: bool, reason: str) -> None:
        with self.state.lock:
            # The claim and its Node as they are now (a step has passed since the plan), read together.
            claim = self.state.claims.get(name)
            node = self.state.nodes.get(claim.status.node_name or node_name) if claim is not None else None
        if claim is None:
            return
        try:
            if node is not None:
                taints = [t.to_dict() for t in node.taints if t.key != wk.DISRUPTED_TAINT]
                if on:
                    taints.append({"key": wk.DISRUPTED_TAINT, "effect": "NoSchedule"})
                self.cluster.patch_node(node.name, {"spec": {"taints": taints}})
            conditions = set_condition(claim.status.conditions, DISRUPTING, on, reason=reason, now=now)
            self.cluster.patch_nodeclaim_status(claim.name, {"conditions": conditions})
            if on:
                self.cluster.patch_nodeclaim(
                    claim.name, {"metadata": {"annotations": {wk.DISRUPTION_REASON: reason}}}
                )
        except NotFoundError:
            return

    def _clear_orphaned_marks(self, snap: Snapshot, now: datetime) -> None:
        """Unmark nodes marked for a command this process is not carrying out: a controller killed between
        marking and deleting (or a deletion that failed). Left marked, a node would count as disrupting
        for ever: never planned again, never holding a pod, still paid for."""
        carried = {name for a in self.active.values() for name in a.claims}
        for sn in snap.nodes:
            claim = sn.claim
            if not self.node_book.notes[sn.name].marked or claim is None:
                continue
            if claim.name in carried or sn.deleting or claim.metadata.deletion_timestamp:
                continue
            log.info("disruption: unmarking %s, marked for a command no longer carried out", claim.name)
            try:
                self._mark_claim(claim.name, sn.name, now, on=False, reason="Orphaned")
            except ClusterError as err:
                self._unmark_failed = True  # the next pass tries again
                log.warning("disruption: cannot unmark %s: %s", claim.name, err)

    def _execute(self, command: Command, snap: Snapshot, now: datetime) -> None:
        if not self.confirm(command.nodes):
            log.info(
                "disruption: %s of %s dropped: a pod the plan did not see", command.method, command.node_names
            )
            return
        ident = f"{now:%Y%m%dT%H%M%S}-{self.settings.name_suffix()}"
        active = _Active(
            id=ident,
            command=command,
            started=now,
            claims=[sn.claim.name for sn in command.nodes if sn.claim is not None],
        )
        try:
            self._mark(command, now, on=True)
        except ClusterError as err:
            log.warning("disruption %s: cannot mark nodes: %s", ident, err)
            return
        savings = command.savings_per_hour
        for record in command.records:
            self.cluster.record_event(
                kind="NodeClaim",
                name=record.node,
                reason="Disrupting",
                message=(
                    f"{command.method} ({record.reason.value}): {record.action}"
                    + (f" with {record.replacement_type}" if record.replacement_type else "")
                    + f", ${record.price_per_hour:.4f}/h -> ${record.replacement_price_per_hour:.4f}/h"
                ),
            )
            if command.method == CAPACITY_BLOCK_ENDING:
                # Said apart from the routine Disrupting: the node goes because its block ends, not
                # for a saving, and its pods move now rather than be killed at the end.
                self.cluster.record_event(
                    kind="NodeClaim", name=record.node, reason="CapacityBlockEnding", message=record.detail
                )
        for new in command.replacements:
            claim = build_nodeclaim(new, snap, suffix=self.settings.name_suffix())
            name = claim.name
            try:
                self.cluster.create_nodeclaim(claim)
            except ClusterError as err:
                log.warning("disruption %s: cannot create replacement %s: %s", ident, name, err)
                self._abandon(active, now, why=f"replacement {name} could not be created")
                return
            active.replacements.append(name)
        log.info(
            "disruption %s: %s %s of %s, saving $%.4f/h%s",
            ident,
            command.method,
            command.action,
            ", ".join(command.node_names),
            savings,
            f", replacements {active.replacements}" if active.replacements else "",
        )
        if active.replacements and not _forceful(command):
            self.active[ident] = active
        else:
            self._finish(active, now)

    def _progress(self, snap: Snapshot, now: datetime) -> None:
        limit = (
            self.settings.launch_timeout
            + self.settings.registration_timeout
            + self.settings.initialization_timeout
        )
        for active in list(self.active.values()):
            claims = [self.state.claims.get(name) for name in active.replacements]
            gone = [
                name
                for name, c in zip(active.replacements, claims, strict=True)
                if c is None or c.metadata.deletion_timestamp
            ]
            if gone:
                self._abandon(active, now, why=f"replacement {', '.join(gone)} failed")
            elif all(c is not None and is_true(c.status.conditions, INITIALIZED) for c in claims):
                self._finish(active, now)
            elif now - active.started > limit:
                self._abandon(active, now, why=f"replacements not initialized within {limit}")

    def _finish(self, active: _Active, now: datetime) -> None:
        self.active.pop(active.id, None)
        for sn in active.command.nodes:
            self._backoff.pop(sn.name, None)
        rows = [
            dataclasses.replace(r, teams=r.teams or self.node_book.last_teams.pop(r.node, ()))
            for r in action_rows(
                active.command, time=now, command_id=active.id, launched=self._launched(active)
            )
        ]
        node_of = {sn.claim.name: sn.name for sn in active.command.nodes if sn.claim is not None}
        for name in active.claims:
            try:
                if self.recorder is not None:
                    # The rows ride on the claim until they are stored: a controller killed before then
                    # finds them there (the termination finalizer waits for them).
                    mine = [r for r in rows if r.node == node_of.get(name)]
                    if mine:
                        self.cluster.patch_nodeclaim(
                            name, {"metadata": {"annotations": {wk.LEDGER_ACTIONS: actions_to_json(mine)}}}
                        )
                self.cluster.delete_nodeclaim(name)
            except NotFoundError:
                continue
            except ClusterError as err:
                log.warning("disruption %s: cannot delete NodeClaim %s: %s", active.id, name, err)
        self.actions.extend(rows)
        self.done.append(active)
        if self.recorder is not None:
            crashpoints.reached("ledger-pending")
            self.recorder.actions(rows)

    def _launched(self, active: _Active) -> list[Launched]:
        """The replacements as the cloud launched them: type, capacity type and price from the claims'
        status, which may differ from the plan's (a fallback to on-demand costs more)."""
        out = []
        for name in active.replacements:
            claim = self.state.claims.get(name)
            if claim is None:
                continue
            status = claim.status
            out.append(
                Launched(
                    node=status.node_name or name,
                    instance_type=status.instance_type or "",
                    capacity_type=status.capacity_type or "",
                    price_per_hour=status.price_per_hour or 0.0,
                )
            )
        return out

    def _abandon(self, active: _Active, now: datetime, *, why: str) -> None:
        self.active.pop(active.id, None)
        for name in active.command.node_names:
            _, previous = self._backoff.get(name, (now, timedelta(0)))
            delay = min(self.disruption.max_retry_backoff, max(self.disruption.retry_backoff, previous * 2))
            self._backoff[name] = (now + delay, delay)
        log.warning("disruption %s abandoned: %s", active.id, why)
        for name in active.replacements:
            claim = self.state.claims.get(name)
            if claim is not None and not is_true(claim.status.conditions, INITIALIZED):
                with contextlib.suppress(ClusterError):
                    self.cluster.delete_nodeclaim(name)
        try:
            self._mark(active.command, now, on=False)
        except ClusterError as err:
            log.warning("disruption %s: cannot unmark nodes: %s", active.id, err)
        for name in active.claims:
            self.cluster.record_event(
                kind="NodeClaim", name=name, reason="DisruptionAbandoned", message=why, type="Warning"
            )
