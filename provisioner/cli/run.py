"""`provisioner run`: the controller process. Parses its flags into `provisioner.operator.OperatorSettings`
(the providers for the clouds asked for as a factory the operator calls), sets up logging, and runs the
operator `provisioner.operator.build` makes until SIGTERM or SIGINT (then it releases the lease and exits
0). A flag the operator cannot work with exits 2 with `error: --flag: ...`."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from provisioner import crashpoints
from provisioner.cli.app import app

if TYPE_CHECKING:
    from provisioner.cloudprovider import Instance, InstanceType
    from provisioner.controllers.provider_set import ProviderSet
    from provisioner.operator import ProviderContext, ProviderFactory

log = logging.getLogger("provisioner")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception when there is one)."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The client's connection pool warnings on watch timeouts are noise.
    logging.getLogger("urllib3").setLevel(logging.ERROR)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def build_providers(
    *,
    clouds: list[str],
    cluster_name: str,
    aws_region: str | None,
    aws_endpoint: str | None,
    aws_interruption_queue: str | None,
    gcp_project: str | None,
    gcp_region: str | None,
    gcp_endpoint: str | None,
    fake_catalog: str,
    fake_region: str | None,
    fake_state: str | None = None,
    fake_shared: bool = False,
    clock: Any,
    registry: Any,
    register_node: Any,
    delete_node: Any,
) -> Any:
    from provisioner.cloudprovider import wrappers
    from provisioner.controllers.provider_set import ProviderSet

    by_kind: dict[str, Any] = {}
    for cloud in clouds:
        if cloud == "fake":
            from providers.fake import FakeProvider
            from providers.fake.shared import SharedFakeProvider

            # Sharded replicas share one fake cloud (its state file), as they would share an account.
            fake = (SharedFakeProvider if fake_shared and fake_state else FakeProvider)(
                catalog=fake_catalog,
                region=fake_region,
                cluster_name=cluster_name,
                clock=clock.now,
                on_launch=register_node,
                on_delete=delete_node,
                state_path=fake_state,  # type: ignore[arg-type]  # shared only with a path
            )
            wrapped = wrappers.wrap(fake, clock=clock.now, registry=registry)
            by_kind.setdefault("AWSNodeClass", wrapped)
            by_kind.setdefault("GCPNodeClass", wrapped)
        elif cloud == "aws":
            from providers.aws import AWSProvider

            if not aws_region:
                raise _fail("--aws-region: required with --cloud aws (or set AWS_REGION)")
            aws = AWSProvider(
                region=aws_region,
                cluster_name=cluster_name,
                endpoint_url=aws_endpoint,
                interruption_queue_url=aws_interruption_queue,
            )
            by_kind["AWSNodeClass"] = wrappers.wrap(aws, clock=clock.now, registry=registry)
        elif cloud == "gcp":
            from providers.gcp import GCPProvider

            if not gcp_project or not gcp_region:
                raise _fail("--gcp-project, --gcp-region: both required with --cloud gcp")
            gcp = GCPProvider(
                project=gcp_project, region=gcp_region, cluster_name=cluster_name, endpoint=gcp_endpoint
            )
            by_kind["GCPNodeClass"] = wrappers.wrap(gcp, clock=clock.now, registry=registry)
        else:
            raise _fail(
                f"--cloud: {cloud!r} is not known; allowed: aws, gcp, fake (or a comma-separated list)"
            )
    return ProviderSet(by_kind)


def provider_factory(
    *,
    clouds: list[str],
    cluster_name: str,
    aws_region: str | None,
    aws_endpoint: str | None,
    aws_interruption_queue: str | None,
    gcp_project: str | None,
    gcp_region: str | None,
    gcp_endpoint: str | None,
    fake_catalog: str,
    fake_region: str | None,
    fake_state: str | None = None,
    fake_shared: bool = False,
) -> ProviderFactory:
    """The providers `--cloud` asks for, built by the operator once it has its clock, metrics registry,
    client and state (`build_providers`, with the fake cloud's stand-in kubelet)."""

    def build(ctx: ProviderContext) -> ProviderSet:
        register_node, delete_node = _fake_kubelet(ctx)
        providers: ProviderSet = build_providers(
            clouds=clouds,
            cluster_name=cluster_name,
            aws_region=aws_region,
            aws_endpoint=aws_endpoint,
            aws_interruption_queue=aws_interruption_queue,
            gcp_project=gcp_project,
            gcp_region=gcp_region,
            gcp_endpoint=gcp_endpoint,
            fake_catalog=fake_catalog,
            fake_region=fake_region,
            fake_state=fake_state,
            fake_shared=fake_shared,
            clock=ctx.clock,
            registry=ctx.registry,
            register_node=register_node,
            delete_node=delete_node,
        )
        return providers

    return build


def _fake_kubelet(
    ctx: ProviderContext,
) -> tuple[Callable[[Instance, InstanceType | None], None], Callable[[Instance], None]]:
    """(register_node, delete_node) for the fake cloud, which has no kubelet: it registers the Node one
    would, as Karpenter's kwok provider does, and deletes it with the instance."""
    from providers.fake.kwok import node_for_instance, node_name_for
    from provisioner.api import mig
    from provisioner.cloudprovider.types import with_mig_layout
    from provisioner.clusterapi import ClusterError
    from provisioner.kube import client as kc

    client, state, clock = ctx.kube, ctx.state, ctx.clock

    def register_node(instance: Instance, instance_type: InstanceType | None) -> None:
        claim = state.claims.get(instance.nodeclaim or "")
        layout = mig.layout_of(claim.metadata.labels) if claim is not None else None
        if layout is not None and instance_type is not None:
            # No MIG manager behind a fake node: it comes up with its pool's layout already applied.
            parted = with_mig_layout(instance_type, layout)
            instance_type = instance_type if isinstance(parted, str) else parted
        manifest = node_for_instance(instance, instance_type, now=clock.now())
        if layout is not None:
            manifest["metadata"]["labels"][mig.MIG_STATE_LABEL] = "success"
        try:
            client.create(kc.NODE, manifest)
        except ClusterError as err:
            log.warning("could not register a Node for %s: %s", instance.provider_id, err)
            return
        crashpoints.reached("node-registered")

    def delete_node(instance: Instance) -> None:
        with contextlib.suppress(ClusterError):
            client.delete(kc.NODE, node_name_for(instance))

    return register_node, delete_node


@app.command("run")
def run_command(
    cloud: str = typer.Option(
        "",
        "--cloud",
        envvar="PROVISIONER_CLOUD",
        help="Required: aws, gcp, or several (aws,gcp); fake only for a dev cluster (its Nodes are not real).",
    ),
    cluster_name: str = typer.Option(
        "default",
        "--cluster-name",
        envvar="PROVISIONER_CLUSTER_NAME",
        help="Tags instances as this cluster's.",
    ),
    kubeconfig: str | None = typer.Option(
        None,
        "--kubeconfig",
        envvar="KUBECONFIG",
        help="Default: in-cluster service account, else ~/.kube/config.",
    ),
    context: str | None = typer.Option(None, "--context", help="kubeconfig context."),
    url: str | None = typer.Option(
        None,
        "--url",
        envvar="PROVISIONER_API_URL",
        help="API server URL without credentials (kubectl proxy).",
    ),
    aws_region: str | None = typer.Option(None, "--aws-region", envvar="AWS_REGION"),
    aws_endpoint: str | None = typer.Option(None, "--aws-endpoint", envvar="AWS_ENDPOINT_URL"),
    aws_interruption_queue: str | None = typer.Option(
        None, "--aws-interruption-queue", envvar="PROVISIONER_INTERRUPTION_QUEUE", help="SQS queue URL."
    ),
    gcp_project: str | None = typer.Option(None, "--gcp-project", envvar="GOOGLE_CLOUD_PROJECT"),
    gcp_region: str | None = typer.Option(None, "--gcp-region", envvar="PROVISIONER_GCP_REGION"),
    gcp_endpoint: str | None = typer.Option(None, "--gcp-endpoint", envvar="PROVISIONER_GCP_ENDPOINT"),
    fake_catalog: str = typer.Option(
        "aws", "--fake-catalog", help="Catalog the fake cloud serves: aws, gcp..."
    ),
    fake_region: str | None = typer.Option(None, "--fake-region"),
    fake_state: str | None = typer.Option(
        None,
        "--fake-state",
        help="JSON file the fake cloud keeps its instances in, so they outlive a restart (and, with "
        "--shards, every replica sees them).",
    ),
    batch_idle: float = typer.Option(1.0, "--batch-idle", envvar="PROVISIONER_BATCH_IDLE", help="Seconds."),
    batch_max: float = typer.Option(10.0, "--batch-max", envvar="PROVISIONER_BATCH_MAX", help="Seconds."),
    registration_timeout: float = typer.Option(900.0, "--registration-timeout", help="Seconds."),
    initialization_timeout: float = typer.Option(
        900.0, "--initialization-timeout", help="Seconds, GPU nodes."
    ),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between reconcile passes."),
    gc_grace: float = typer.Option(
        30.0, "--gc-grace", help="Seconds an instance or Node of ours without a NodeClaim is left alone."
    ),
    gc_interval: float = typer.Option(
        30.0, "--gc-interval", help="Seconds between garbage collection passes (each lists the cloud)."
    ),
    metrics_port: int = typer.Option(
        8080, "--metrics-port", envvar="PROVISIONER_METRICS_PORT", help="0: off."
    ),
    log_format: str = typer.Option(
        "json", "--log-format", envvar="PROVISIONER_LOG_FORMAT", help="json or text."
    ),
    log_level: str = typer.Option("info", "--log-level", envvar="PROVISIONER_LOG_LEVEL"),
    leader_elect: bool = typer.Option(True, "--leader-elect/--no-leader-elect"),
    disruption: bool = typer.Option(
        True, "--disruption/--no-disruption", help="Consolidate, replace drifted and expired nodes."
    ),
    validation_delay: float = typer.Option(
        15.0,
        "--disruption-validation-delay",
        help="Seconds a disruption plan waits before it is checked again.",
    ),
    lease_namespace: str = typer.Option("default", "--lease-namespace", envvar="POD_NAMESPACE"),
    lease_name: str = typer.Option("provisioner-leader", "--lease-name"),
    shards: int = typer.Option(
        0,
        "--shards",
        envvar="PROVISIONER_SHARDS",
        help="Share the NodePools among every replica started with the same value: this many shard Leases "
        "(<lease-name without -leader>-shard-<i>). 0: one leader acts, the others wait.",
    ),
    lease_duration: float = typer.Option(
        15.0, "--lease-duration", help="Seconds a Lease outlives its holder's last renewal."
    ),
    default_cpu_pools: str = typer.Option(
        "",
        "--default-cpu-pools",
        envvar="PROVISIONER_DEFAULT_CPU_POOLS",
        help="NodePools, in order, for CPU-only pods that name no provisioner.sh/nodepools list "
        "(comma-separated). Default: the pool named `default`, else every pool by weight.",
    ),
    default_gpu_pools: str = typer.Option(
        "",
        "--default-gpu-pools",
        envvar="PROVISIONER_DEFAULT_GPU_POOLS",
        help="NodePools, in order, for pods asking for GPUs that name no list (comma-separated).",
    ),
    webhook_port: int = typer.Option(
        0,
        "--webhook-port",
        envvar="PROVISIONER_WEBHOOK_PORT",
        help="HTTPS port of the pod admission webhook that gates team pods; 0: off.",
    ),
    webhook_cert: str = typer.Option(
        "/etc/provisioner/webhook/tls.crt", "--webhook-cert", envvar="PROVISIONER_WEBHOOK_CERT"
    ),
    webhook_key: str = typer.Option(
        "/etc/provisioner/webhook/tls.key", "--webhook-key", envvar="PROVISIONER_WEBHOOK_KEY"
    ),
    ledger: str = typer.Option(
        "provisioner-ledger.sqlite",
        "--ledger",
        envvar="PROVISIONER_LEDGER",
        help="FinOps ledger: a SQLAlchemy URL (postgresql://user@host/db) or a SQLite file; none: no ledger.",
    ),
) -> None:
    """Run the controllers against a Kubernetes API until SIGTERM."""
    if log_format not in ("json", "text"):
        raise _fail(f"--log-format: {log_format!r} is not known; allowed: json, text")
    if shards and "fake" in cloud.split(",") and not fake_state:
        raise _fail(
            "--fake-state: required with --shards and --cloud fake (the replicas share one fake cloud)"
        )
    from provisioner.operator import OperatorError, OperatorSettings, build

    try:
        settings = OperatorSettings(
            providers=provider_factory(
                clouds=[c.strip() for c in cloud.split(",") if c.strip()],
                cluster_name=cluster_name,
                aws_region=aws_region,
                aws_endpoint=aws_endpoint,
                aws_interruption_queue=aws_interruption_queue,
                gcp_project=gcp_project,
                gcp_region=gcp_region,
                gcp_endpoint=gcp_endpoint,
                fake_catalog=fake_catalog,
                fake_region=fake_region,
                fake_state=fake_state,
                fake_shared=shards > 0,
            ),
            cloud=cloud,
            cluster_name=cluster_name,
            url=url,
            kubeconfig=kubeconfig,
            context=context,
            batch_idle=batch_idle,
            batch_max=batch_max,
            registration_timeout=registration_timeout,
            initialization_timeout=initialization_timeout,
            interval=interval,
            gc_grace=gc_grace,
            gc_interval=gc_interval,
            metrics_port=metrics_port,
            leader_elect=leader_elect,
            lease_namespace=lease_namespace,
            lease_name=lease_name,
            shards=shards,
            lease_duration=lease_duration,
            disruption=disruption,
            validation_delay=validation_delay,
            default_cpu_pools=default_cpu_pools,
            default_gpu_pools=default_gpu_pools,
            webhook_port=webhook_port,
            webhook_cert=webhook_cert,
            webhook_key=webhook_key,
            ledger=ledger,
            crash_at=os.environ.get(crashpoints.ENV),
        )
    except OperatorError as err:
        raise _fail(str(err)) from None
    if not cloud.strip():
        # Never a silent default: the fake cloud would create Ready Node objects for instances that do not
        # exist in whatever cluster the current kubeconfig points at.
        raise _fail(
            "--cloud: required; allowed: aws, gcp, fake (or a comma-separated list); fake creates Nodes for "
            "instances that do not exist, for a development cluster only"
        )
    setup_logging(log_format, log_level)
    try:
        operator = build(settings)

        def on_signal(signum: int, _frame: object) -> None:
            log.info("received %s; shutting down", signal.Signals(signum).name)
            operator.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        operator.run()
    except OperatorError as err:
        raise _fail(str(err)) from None
