"""The operator `provisioner run` runs, built in this process from typed settings (`provisioner.operator`):
with the fake cloud against a Kubernetes API over HTTP it provisions a pending GPU pod end to end, and
`stop()` winds it down and releases the lease; settings it cannot work with are refused naming the flag.

The operator takes the test's kubeconfig, its Lease lives in the test's own namespace and its pod and
pool are the test's (a Space), so with PROVISIONER_TEST_KUBECONFIG set these run against that cluster."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from provisioner.cli.run import provider_factory
from provisioner.kube import client as kc
from provisioner.operator import OperatorError, OperatorSettings, ProviderContext, build
from testkit.controllers.backends import KubeBackend
from testkit.controllers.space import Space
from testkit.controllers.standins import cluster_controllers
from testkit.controllers.world import gpu_pod
from tests.controllers.spaced import binder_of, class_of, pool_of
from tests.polling import wait_until

FAKE = provider_factory(clouds=["fake"], cluster_name="op", options={"fake_catalog": "aws"})


def _settings(kubeconfig: str | None, **overrides: Any) -> OperatorSettings:
    base: dict[str, Any] = {
        "providers": FAKE,
        "cloud": "fake",
        "cluster_name": "op",
        "kubeconfig": kubeconfig,
        "batch_idle": 0.2,
        "batch_max": 1.0,
        "interval": 0.1,
        "metrics_port": 0,
        "ledger": "none",
        "lease_name": "op-leader",
    }
    return OperatorSettings(**{**base, **overrides})


def test_the_operator_built_from_settings_provisions_a_pending_pod_and_stops_cleanly(
    kubeconfig: str, kube_client: kc.KubeClient, kube_backend: KubeBackend, space: Space
) -> None:
    backend = kube_backend
    binder = binder_of(backend, space)
    pool = space.name("gpu")
    for obj in (class_of(space), pool_of(space, pool), gpu_pod("train-0", namespace=space.namespace)):
        backend.create(obj)
    operator = build(_settings(kubeconfig, lease_namespace=space.namespace))
    runner = threading.Thread(target=operator.run, name="operator-under-test", daemon=True)
    runner.start()

    def step() -> None:  # what the cluster's own controllers and the scheduler would do
        cluster_controllers(backend, space.namespaces)
        binder.sync()

    try:

        def bound_on_an_initialized_node() -> bool:
            nodes = space.nodes(backend.state)
            return (
                all(p.node_name for p in space.pods(backend.state))
                and len(nodes) == 1
                and nodes[0].labels.get("provisioner.sh/initialized") == "true"
            )

        wait_until(
            "the pod bound on an initialized node",
            bound_on_an_initialized_node,
            step=step,
        )
        (claim,) = space.claims(backend.state)
        (node,) = space.nodes(backend.state)
        assert claim.status.provider_id == node.provider_id
        assert claim.nodepool == pool
        lease = kube_client.get(kc.LEASE, "op-leader", namespace=space.namespace)
        assert lease["spec"]["holderIdentity"] == operator.settings.identity
    finally:
        operator.stop()
        runner.join(timeout=60)
    assert not runner.is_alive(), "run() returns once stop() was called"
    lease = kube_client.get(kc.LEASE, "op-leader", namespace=space.namespace)
    assert not lease["spec"].get("holderIdentity"), "the lease is released on stop"


def test_the_providers_are_built_with_the_operators_own_parts(kubeconfig: str) -> None:
    seen: list[ProviderContext] = []

    def spy(ctx: ProviderContext) -> Any:
        seen.append(ctx)
        return FAKE(ctx)

    operator = build(_settings(kubeconfig, providers=spy))
    (ctx,) = seen
    assert ctx.state is operator.state and ctx.kube is operator.client
    assert ctx.registry is operator.metrics.registry and ctx.clock is operator.clock
    assert operator.manager.providers is operator.providers


@pytest.mark.parametrize(
    ("overrides", "flag"),
    [
        ({"batch_idle": 5.0, "batch_max": 1.0}, "--batch-max: "),
        ({"batch_idle": 0.0}, "--batch-max: "),
        ({"gc_grace": -1.0}, "--gc-grace, --gc-interval: "),
        ({"gc_interval": 0.0}, "--gc-grace, --gc-interval: "),
        ({"crash_at": "nowhere:1"}, "PROVISIONER_CRASH_AT: "),
    ],
)
def test_settings_it_cannot_work_with_are_refused_naming_the_flag(
    overrides: dict[str, Any], flag: str
) -> None:
    with pytest.raises(OperatorError) as err:
        _settings(None, url="http://127.0.0.1:9", **overrides)
    assert str(err.value).startswith(flag)


def test_a_kubeconfig_it_cannot_read_is_refused_naming_the_flag(tmp_path: Any) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("this: [is not a kubeconfig")
    with pytest.raises(OperatorError) as err:
        build(_settings(str(broken)))
    assert str(err.value).startswith("--kubeconfig: ")


def test_a_webhook_that_cannot_serve_is_refused_naming_the_flag(kubeconfig: str, tmp_path: Any) -> None:
    operator = build(
        _settings(
            kubeconfig,
            webhook_port=1,
            webhook_cert=str(tmp_path / "missing.crt"),
            webhook_key=str(tmp_path / "missing.key"),
        )
    )
    with pytest.raises(OperatorError) as err:
        operator.start()
    assert str(err.value).startswith("--webhook-port: ")
