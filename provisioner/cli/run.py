"""`provisioner run`: the controller process. Parses its flags into `provisioner.operator.OperatorSettings`
(the providers for the clouds asked for as a factory the operator calls), sets up logging, and runs the
operator `provisioner.operator.build` makes until SIGTERM or SIGINT (then it releases the lease and exits
0). A flag the operator cannot work with exits 2 with `error: --flag: ...`."""

from __future__ import annotations

import contextlib
import functools
import inspect
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
from provisioner.cloudprovider import registry as plugins_
from provisioner.cloudprovider.plugin import OptionError, OptionValues

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
    options: OptionValues,
    shared: bool = False,
    clock: Any,
    registry: Any,
    register_node: Any,
    delete_node: Any,
) -> Any:
    """The ProviderSet `--cloud` asks for, each cloud built by its plug-in from its options."""
    from provisioner.cloudprovider.plugin import Wiring
    from provisioner.controllers.provider_set import ProviderSet

    wiring = Wiring(
        cluster_name=cluster_name,
        clock=clock.now,
        on_launch=register_node,
        on_delete=delete_node,
        shared=shared,
    )
    try:
        return ProviderSet(plugins_.build(clouds, options, wiring, registry))
    except OptionError as err:
        raise _fail(str(err)) from None


def provider_factory(
    *, clouds: list[str], cluster_name: str, options: OptionValues, shared: bool = False
) -> ProviderFactory:
    """The providers `--cloud` asks for, built by the operator once it has its clock, metrics registry,
    client and state (`build_providers`, with the stand-in kubelet of a cloud that has none); `shared`:
    sharded replicas share one cloud account."""

    def build(ctx: ProviderContext) -> ProviderSet:
        register_node, delete_node = _stand_in_kubelet(ctx, clouds)
        providers: ProviderSet = build_providers(
            clouds=clouds,
            cluster_name=cluster_name,
            options=options,
            shared=shared,
            clock=ctx.clock,
            registry=ctx.registry,
            register_node=register_node,
            delete_node=delete_node,
        )
        return providers

    return build


def _cloud_help() -> str:
    found = plugins_.plugins()
    production = [p.name for p in found if p.dev_only is None]
    dev = [p.name for p in found if p.dev_only is not None]
    several = f", or several ({','.join(production[:2])})" if len(production) > 1 else ""
    tail = f"; {', '.join(dev)} only for a dev cluster (its Nodes are not real)" if dev else ""
    return f"Required: {', '.join(production)}{several}{tail}."


def _with_plugin_options(func: Callable[..., None]) -> Callable[..., None]:
    """`func` with every installed plug-in's options added to its signature (so typer parses them); their
    values reach it as one mapping, `plugin_options` (by `Option.key`)."""
    options = [o for p in plugins_.plugins() for o in p.options]
    signature = inspect.signature(func)
    extra = [
        inspect.Parameter(
            o.key,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(o.default, o.flag, envvar=o.env, help=o.help or None),
            annotation=o.type | None,
        )
        for o in options
    ]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> None:
        func(plugin_options={o.key: kwargs.pop(o.key) for o in options}, **kwargs)

    params = [p for p in signature.parameters.values() if p.name != "plugin_options"]
    wrapper.__signature__ = signature.replace(parameters=[*params, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in func.__annotations__.items() if k != "plugin_options"},
        **{o.key: o.type | None for o in options},
    }
    return wrapper


def _stand_in_kubelet(
    ctx: ProviderContext, clouds: list[str]
) -> tuple[Callable[[Instance, InstanceType | None], None], Callable[[Instance], None]]:
    """(register_node, delete_node) for a cloud without kubelets (the fake one): it registers the Node one
    would (its plug-in's `nodes`), as Karpenter's kwok provider does, and deletes it with the instance.
    Called again for an instance a relaunch got back (its launcher may have died before the Node was
    registered): a Node already there is left as it is."""
    from provisioner.api import mig
    from provisioner.cloudprovider.types import with_mig_layout
    from provisioner.clusterapi import ClusterError, ConflictError
    from provisioner.kube import client as kc

    client, state, clock = ctx.kube, ctx.state, ctx.clock
    maker = plugins_.node_maker(clouds)

    def register_node(instance: Instance, instance_type: InstanceType | None) -> None:
        crashpoints.reached("node-registering")
        claim = state.claims.get(instance.nodeclaim or "")
        layout = mig.layout_of(claim.metadata.labels) if claim is not None else None
        if layout is not None and instance_type is not None:
            # No MIG manager behind a fake node: it comes up with its pool's layout already applied.
            parted = with_mig_layout(instance_type, layout)
            instance_type = instance_type if isinstance(parted, str) else parted
        assert maker is not None  # only a cloud that makes Nodes calls back
        manifest = maker.node_for_instance(instance, instance_type, now=clock.now())
        if layout is not None:
            manifest["metadata"]["labels"][mig.MIG_STATE_LABEL] = "success"
        try:
            client.create(kc.NODE, manifest)
        except ConflictError:
            return  # registered already: a relaunch of the claim got the instance back
        except ClusterError as err:
            log.warning("could not register a Node for %s: %s", instance.provider_id, err)
            return
        crashpoints.reached("node-registered")

    def delete_node(instance: Instance) -> None:
        with contextlib.suppress(ClusterError):
            assert maker is not None
            client.delete(kc.NODE, maker.node_name_for(instance))

    return register_node, delete_node


@app.command("run")
@_with_plugin_options
def run_command(
    cloud: str = typer.Option(
        "",
        "--cloud",
        envvar="PROVISIONER_CLOUD",
        help=_cloud_help(),
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
    plugin_options: OptionValues | None = None,
) -> None:
    """Run the controllers against a Kubernetes API until SIGTERM."""
    if log_format not in ("json", "text"):
        raise _fail(f"--log-format: {log_format!r} is not known; allowed: json, text")
    options = dict(plugin_options or {})
    if shards:
        try:
            plugins_.check_shared(cloud.split(","), options)
        except OptionError as err:
            raise _fail(str(err)) from None
    from provisioner.operator import OperatorError, OperatorSettings, build

    try:
        settings = OperatorSettings(
            providers=provider_factory(
                clouds=[c.strip() for c in cloud.split(",") if c.strip()],
                cluster_name=cluster_name,
                options=options,
                shared=shards > 0,
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
        dev_only = "; ".join(p.dev_only for p in plugins_.plugins() if p.dev_only is not None)
        raise _fail(
            f"--cloud: required; allowed: {', '.join(plugins_.names())} (or a comma-separated list)"
            + (f"; {dev_only}" if dev_only else "")
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
