"""The running operator: `build(settings)` turns typed `OperatorSettings` into a `RunningOperator` that owns
everything `provisioner run` keeps alive: the Kubernetes client and informers, the ClusterState they
feed, the providers, the Manager and its controllers, the leader election, the Event writer, the ledger
recorder, the metrics endpoint and the admission webhook, and the threads they run in.

`provisioner run` (cli/run.py) only parses flags into `OperatorSettings` and calls `build(...).run()`;
a test builds the same operator from settings, with the fake cloud, against a test API server. Which
clouds serve which NodeClass kinds is the settings' `providers` factory: the operator hands it the
clock, the metrics registry, the client and the state once they exist, and imports no cloud itself.

Start-up, in order: connect, build the providers, open the lease, the cluster port and the ledger
recorder, build the Manager (`build`); serve metrics and the webhook, sync the informers, start the
recorder, the Event writer, the lease and the Manager threads (`start`). `stop()` asks for the end
(from a signal handler or another thread); `run()` starts, waits for it, then joins the threads, flushes
the Event writer and the recorder, releases the lease and stops the webhook and informers.

With `shards`, the replicas share the NodePools: the shard Leases (`kube/shards.py`) take the leader
Lease's place, and the Manager gets this replica's view of them (`controllers/sharding.py`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from provisioner import crashpoints
from provisioner.api.team import Team
from provisioner.clock import Clock, RealClock
from provisioner.clusterapi import NotFoundError
from provisioner.controllers.disruption import DisruptionSettings
from provisioner.controllers.manager import Manager
from provisioner.controllers.metrics import Metrics
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.sharding import Sharding
from provisioner.controllers.webhook import AdmissionWebhook
from provisioner.finops.recorder import LedgerRecorder
from provisioner.kube import client as kc
from provisioner.kube.api import EventWriter, KubeClusterAPI
from provisioner.kube.informers import Informers
from provisioner.kube.leader import LeaderElector
from provisioner.kube.scopes import WatchScopes
from provisioner.kube.shards import ShardLeases
from provisioner.scheduling import shards as shard_model
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.state import ClusterState

log = logging.getLogger("provisioner")

SYNC_TIMEOUT = 60.0
"""Seconds `start` waits for every informer's first list before it runs the controllers anyway."""


class OperatorError(Exception):
    """A setting the operator cannot start with. The message begins with the flag to fix
    (`--batch-max: ...`), as `provisioner run` prints it."""


@dataclass(frozen=True, slots=True)
class ProviderContext:
    """What the providers are built with, once the operator has it."""

    clock: Clock
    """The operator's clock (offerings found unavailable expire by it)."""
    registry: CollectorRegistry
    """The metrics registry the provider wrappers count their calls on."""
    kube: kc.KubeClient
    """The API server client (a cloud without kubelets registers its Nodes through it)."""
    state: ClusterState
    """The informers' view of the cluster (the NodeClaim an instance belongs to)."""


class ProviderFactory(Protocol):
    """Builds the ProviderSet for the clouds asked for; raises to refuse a missing cloud setting."""

    def __call__(self, context: ProviderContext, /) -> ProviderSet: ...


def _identity() -> str:
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorSettings:
    """Everything the running operator needs, typed; each field is one `provisioner run` flag (named in
    its docstring) unless it says otherwise. Built once; invalid values raise OperatorError naming the
    flag."""

    providers: ProviderFactory
    """Builds the providers (`--cloud` and the cloud-specific flags, parsed by the command)."""
    cloud: str = ""
    """`--cloud` as given, for the start-up log line."""
    cluster_name: str = "default"
    """`--cluster-name`: tags instances as this cluster's."""
    url: str | None = None
    """`--url`: API server URL without credentials (kubectl proxy)."""
    kubeconfig: str | None = None
    """`--kubeconfig`; None: in-cluster service account, else ~/.kube/config."""
    context: str | None = None
    """`--context`: the kubeconfig context."""
    batch_idle: float = 1.0
    """`--batch-idle`, seconds: a batch closes when no pending pod arrived for this long..."""
    batch_max: float = 10.0
    """`--batch-max`, seconds: ...or when it has been open this long."""
    registration_timeout: float = 900.0
    """`--registration-timeout`, seconds."""
    initialization_timeout: float = 900.0
    """`--initialization-timeout`, seconds (GPU nodes)."""
    interval: float = 1.0
    """`--interval`: seconds between reconcile passes."""
    gc_grace: float = 30.0
    """`--gc-grace`: seconds an instance or Node of ours without a NodeClaim is left alone."""
    gc_interval: float = 30.0
    """`--gc-interval`: seconds between garbage collection passes."""
    metrics_port: int = 8080
    """`--metrics-port`; 0: no metrics endpoint."""
    leader_elect: bool = True
    """`--leader-elect/--no-leader-elect`: act only while holding the lease."""
    lease_namespace: str = "default"
    """`--lease-namespace`."""
    lease_name: str = "provisioner-leader"
    """`--lease-name`."""
    identity: str = field(default_factory=_identity)
    """This replica's name in the lease (not a flag: host name and a random suffix)."""
    shards: int = 0
    """`--shards`: shard Leases the replicas share the NodePools through (`kube/shards.py`); 0: one
    leader does all the work."""
    lease_duration: float = 15.0
    """`--lease-duration`, seconds; the renew deadline and retry period keep Kubernetes' proportions
    (15 s, 10 s, 2 s)."""
    disruption: bool = True
    """`--disruption/--no-disruption`: consolidate, replace drifted and expired nodes."""
    validation_delay: float = 15.0
    """`--disruption-validation-delay`, seconds."""
    default_cpu_pools: str = ""
    """`--default-cpu-pools`: comma-separated NodePools, in order, for CPU-only pods naming none."""
    default_gpu_pools: str = ""
    """`--default-gpu-pools`: the same for pods asking for GPUs."""
    webhook_port: int = 0
    """`--webhook-port`: HTTPS port of the pod admission webhook; 0: off."""
    webhook_cert: str = "/etc/provisioner/webhook/tls.crt"
    """`--webhook-cert`."""
    webhook_key: str = "/etc/provisioner/webhook/tls.key"
    """`--webhook-key`."""
    ledger: str = "provisioner-ledger.sqlite"
    """`--ledger`: a SQLAlchemy URL or a SQLite file; `none`: no ledger."""
    crash_at: str | None = None
    """`PROVISIONER_CRASH_AT` (an environment variable, not a flag): the chaos campaign's crash point."""

    def __post_init__(self) -> None:
        if self.batch_idle <= 0 or self.batch_max < self.batch_idle:
            raise OperatorError("--batch-max: must be >= --batch-idle, and --batch-idle > 0")
        if self.gc_grace < 0 or self.gc_interval <= 0:
            raise OperatorError("--gc-grace, --gc-interval: --gc-grace must be >= 0 and --gc-interval > 0")
        if self.shards < 0 or self.lease_duration < 1:
            raise OperatorError("--shards, --lease-duration: --shards must be >= 0 and --lease-duration >= 1")
        try:
            if self.crash_at:
                crashpoints.parse(self.crash_at)
        except ValueError as err:
            raise OperatorError(str(err)) from None

    def controller_settings(self) -> ControllerSettings:
        """The controllers' settings these flags make."""
        return ControllerSettings(
            cluster_name=self.cluster_name,
            batch_idle=timedelta(seconds=self.batch_idle),
            batch_max=timedelta(seconds=self.batch_max),
            registration_timeout=timedelta(seconds=self.registration_timeout),
            initialization_timeout=timedelta(seconds=self.initialization_timeout),
            pool_defaults=ClusterDefaults.of(cpu=self.default_cpu_pools, gpu=self.default_gpu_pools),
            gc_grace=timedelta(seconds=self.gc_grace),
            node_gc_grace=timedelta(seconds=self.gc_grace),
            gc_interval=timedelta(seconds=self.gc_interval),
            claim_writers=8,
        )

    def disruption_settings(self) -> DisruptionSettings:
        return DisruptionSettings(
            validation_delay=timedelta(seconds=self.validation_delay),
            evaluation_interval=timedelta(seconds=min(10.0, max(self.validation_delay, self.interval))),
        )


def _safe_url(target: str) -> str:
    """The ledger URL without its password, for the log."""
    if "://" not in target:
        return target
    from sqlalchemy.engine import make_url

    try:
        return make_url(target).render_as_string(hide_password=True)
    except Exception:
        return "(unparsable URL)"


@dataclass(kw_only=True, eq=False)
class RunningOperator:
    """The built operator: its parts, and the threads `start` runs them in."""

    settings: OperatorSettings
    clock: Clock
    client: kc.KubeClient
    state: ClusterState
    informers: Informers
    metrics: Metrics
    providers: ProviderSet
    elector: LeaderElector | ShardLeases | None
    """None with `--no-leader-elect`: this replica always acts. With `--shards`, the shard Leases."""
    event_writer: EventWriter
    manager: Manager
    recorder: LedgerRecorder | None
    """None with `--ledger none`."""
    webhook: AdmissionWebhook | None = field(default=None, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _threads: list[threading.Thread] = field(default_factory=list, init=False)
    _metrics_server: WSGIServer | None = field(default=None, init=False)

    def start(self) -> None:
        """Serve metrics and the webhook, sync the informers, start every thread. Raises OperatorError
        when the webhook cannot serve."""
        s = self.settings
        if s.metrics_port:
            self._metrics_server, _ = start_http_server(s.metrics_port, registry=self.metrics.registry)
        if s.webhook_port:
            try:
                self.webhook = AdmissionWebhook(
                    self.state,
                    certfile=s.webhook_cert,
                    keyfile=s.webhook_key,
                    port=s.webhook_port,
                    shards=s.shards,
                    defaults=s.controller_settings().pool_defaults,
                    clock=self.clock,
                )
            except (OSError, ValueError) as err:
                raise OperatorError(
                    f"--webhook-port: cannot serve the admission webhook on {s.webhook_port}: {err}"
                ) from None
            self.webhook.start()
        self.informers.start()
        if not self.informers.wait_synced(SYNC_TIMEOUT):
            log.warning("not every informer synced within 60s (are the CRDs installed?); starting anyway")
        if self.elector is not None:
            self._threads.append(
                threading.Thread(target=self.elector.run, args=(self._stop,), name="leader", daemon=True)
            )
        self._threads.append(
            threading.Thread(
                target=self.manager.run,
                args=(self._stop,),
                kwargs={"interval": s.interval},
                name="manager",
                daemon=True,
            )
        )
        if self.recorder is not None:
            self.recorder.start()
        self.event_writer.start()
        for t in self._threads:
            t.start()
        log.info(
            "provisioner running: cloud=%s cluster=%s identity=%s shards=%s metrics=%s webhook=%s ledger=%s",
            s.cloud,
            s.cluster_name,
            s.identity,
            s.shards or "off",
            s.metrics_port or "off",
            s.webhook_port or "off",
            _safe_url(s.ledger),
        )

    def stop(self) -> None:
        """Ask the operator to end; `run` returns once it has. Safe from a signal handler."""
        self._stop.set()

    def wait(self) -> None:
        """Block until `stop` is called, then wind down: the threads end their pass, the Events and
        ledger rows still queued are written, the lease is released, the servers and informers stop."""
        while not self._stop.is_set():
            self._stop.wait(0.5)
        for t in self._threads:
            t.join(timeout=30)
        self.event_writer.stop(timeout=5)
        if self.recorder is not None:
            self.recorder.stop()
        if self.elector is not None and not any(t.is_alive() for t in self._threads):
            # Released, a Lease is taken at once; a pass still under way could write after that. Such
            # a replica lets its Leases expire instead.
            self.elector.release()
        if self.webhook is not None:
            self.webhook.stop()
        self.informers.stop()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        log.info("provisioner stopped")

    def run(self) -> None:
        """`start`, then `wait`: until `stop`."""
        self.start()
        self.wait()


def catch_up(client: kc.KubeClient, informers: Informers) -> None:
    """Feed the state a consistent list of the NodeClaims it watches (the watch may lag behind it)."""
    claims = informers.of(kc.NODECLAIM)
    items, _ = client.list(kc.NODECLAIM, label_selector=claims.selector)
    for item in items:
        informers.feeder.upsert(kc.NODECLAIM, item, source=claims.source)


def _node_pods(client: kc.KubeClient) -> Callable[[str], list[dict[str, Any]]]:
    """`Sharding.node_pods`: the pods the API server has on a node (a field selector), watched or not."""

    def node_pods(node: str) -> list[dict[str, Any]]:
        return client.list(kc.POD, field_selector=f"spec.nodeName={node}")[0]

    return node_pods


def _quota_namespaces(client: kc.KubeClient) -> Callable[[frozenset[str]], frozenset[str]]:
    """`Sharding.quota_namespaces`: the Teams listed and the namespaces' labels read at the API server."""

    def quota_namespaces(namespaces: frozenset[str]) -> frozenset[str]:
        items, _ = client.list(kc.TEAM)
        teams = []
        for item in items:
            try:
                teams.append(Team.model_validate(item))
            except ValueError:
                continue  # refused by the models: no quota of it applies anywhere
        labels: dict[str, dict[str, str]] = {}
        for ns in namespaces:
            try:
                labels[ns] = dict((client.get(kc.NAMESPACE, ns).get("metadata") or {}).get("labels") or {})
            except NotFoundError:
                continue
        return shard_model.quota_namespaces(teams, labels) & namespaces

    return quota_namespaces


def _node_labels(client: kc.KubeClient) -> Callable[[str], dict[str, str] | None]:
    """`Sharding.node_labels`: a Node's labels read from the API server (None: no such Node)."""

    def node_labels(name: str) -> dict[str, str] | None:
        try:
            doc = client.get(kc.NODE, name)
        except NotFoundError:
            return None
        return dict((doc.get("metadata") or {}).get("labels") or {})

    return node_labels


def _leases(
    settings: OperatorSettings, client: kc.KubeClient, clock: Clock, informers: Informers, state: ClusterState
) -> tuple[LeaderElector | ShardLeases | None, Sharding | None]:
    """The leader Lease (or none), or with `--shards` the shard Leases and the Manager's view of them."""
    timing: dict[str, Any] = {
        "lease_duration": settings.lease_duration,
        "renew_deadline": settings.lease_duration * 2 / 3,
        "retry_period": settings.lease_duration * 2 / 15,
    }
    if settings.shards:
        # Waits a little for a new list of the pods (a retry period at most, so the Leases are renewed
        # in time); a list not done by then is looked at again at the next step.
        scopes = WatchScopes(informers, state, shards=settings.shards, wait=timing["retry_period"])
        leases = ShardLeases(
            client,
            identity=settings.identity,
            clock=clock,
            shards=settings.shards,
            namespace=settings.lease_namespace,
            prefix=settings.lease_name.removesuffix("-leader"),
            on_acquire=lambda: catch_up(client, informers),
            watch=scopes,
            **timing,
        )
        sharding = Sharding(
            shards=settings.shards,
            owned_shards=leases.owned_shards,
            holds_admission=leases.holds_admission,
            clock=clock,
            defaults=settings.controller_settings().pool_defaults,
            node_pods=_node_pods(client),
            counted_namespaces=scopes.counted_namespaces,
            node_labels=_node_labels(client),
            quota_namespaces=_quota_namespaces(client),
            acting_until=leases.acting_until,
        )
        return leases, sharding
    if not settings.leader_elect:
        return None, None
    elector = LeaderElector(
        client,
        identity=settings.identity,
        clock=clock,
        name=settings.lease_name,
        namespace=settings.lease_namespace,
        **timing,
    )
    return elector, None


def build(settings: OperatorSettings, *, clock: Clock | None = None) -> RunningOperator:
    """Connect and build every part of the operator; nothing runs until `start`. Raises OperatorError
    naming the flag when the Kubernetes client cannot be configured (the providers factory raises its
    own errors)."""
    crashpoints.arm(settings.crash_at)  # read once here, never on a hot path: see provisioner.crashpoints
    clock = clock or RealClock()
    try:
        client = kc.KubeClient.connect(
            url=settings.url, kubeconfig=settings.kubeconfig, context=settings.context
        )
    except Exception as err:  # kubeconfig parsing errors come in many types
        raise OperatorError(f"--kubeconfig: cannot configure the Kubernetes client: {err}") from None
    metrics = Metrics()
    state = ClusterState()
    # Sharded, a replica watches only the objects of its shards (`WatchScopes`): none at first.
    selectors = WatchScopes.initial(settings.shards) if settings.shards else None
    informers = Informers(client, state, selectors=selectors)
    providers = settings.providers(
        ProviderContext(clock=clock, registry=metrics.registry, kube=client, state=state)
    )
    elector, sharding = _leases(settings, client, clock, informers, state)
    is_leader = (
        sharding.holds_any
        if sharding is not None
        else elector.is_leader
        if isinstance(elector, LeaderElector)
        else (lambda: True)
    )
    event_writer = EventWriter(client)
    cluster = KubeClusterAPI(
        client,
        informers.feeder,
        may_write=is_leader,
        clock=clock,
        event_writer=event_writer,
        # One leader: each of its writes ends by its Lease's renew deadline. Sharded, the writes a Lease
        # bounds carry its deadline themselves (`Sharding.acting_until`).
        acting_until=elector.acting_until if isinstance(elector, LeaderElector) else None,
    )
    recorder = None
    if settings.ledger.lower() != "none":
        # Opened by the recorder's own thread: a database down at start-up delays the ledger, not the
        # controller. Only the leader's controllers hand it rows.
        recorder = LedgerRecorder(
            settings.ledger,
            on_failure=lambda table: metrics.ledger_write_failures.labels(table=table).inc(),
            on_dropped=lambda table, n: metrics.ledger_rows_dropped.labels(table=table).inc(n),
        )
    manager = Manager(
        state=state,
        cluster=cluster,
        providers=providers,
        clock=clock,
        settings=settings.controller_settings(),
        metrics=metrics,
        is_leader=is_leader,
        disruption=settings.disruption,
        disruption_settings=settings.disruption_settings(),
        recorder=recorder,
        sharding=sharding,
    )
    return RunningOperator(
        settings=settings,
        clock=clock,
        client=client,
        state=state,
        informers=informers,
        metrics=metrics,
        providers=providers,
        elector=elector,
        event_writer=event_writer,
        manager=manager,
        recorder=recorder,
    )
