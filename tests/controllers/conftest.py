"""Fixtures: a Kubernetes API over real HTTP (a fresh strict kmock-based server per test, or the cluster
named by PROVISIONER_TEST_KUBECONFIG), and `world` factories over it or over the in-memory cluster.

On a real cluster (any conformant one: kind, k3s, a managed one, with the chart's CRDs installed; or the
standalone strict server, `python -m testkit.controllers.serve`) the worlds create the namespaces they
use and assume no kubelet: testkit/controllers/world.py registers Nodes for launched instances and
finishes Terminating pods itself. Whatever a test made is deleted when it ends, passed or not: the
worlds delete what they made, and a sweep (testkit/controllers/space.py) deletes anything else that
appeared meanwhile (what the tests' own clients and the controllers wrote). Tests that run
`provisioner run` as a process or build the operator hand it `kubeconfig` and keep to a `space`. Tests
that inspect or fault the imitation are skipped there."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.clock import RealClock
from provisioner.kube import client as kc
from testkit.controllers.backends import KubeBackend, MemoryBackend
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.serve import write_kubeconfig
from testkit.controllers.space import NamespaceSweep, Space, Sweep
from testkit.controllers.world import World

REAL_CLUSTER = os.environ.get("PROVISIONER_TEST_KUBECONFIG")


@pytest.fixture(scope="session", autouse=True)
def _namespaces_swept() -> Iterator[None]:
    """On a real cluster, the namespaces the session made are deleted when it ends."""
    if not REAL_CLUSTER:
        yield
        return
    client = kc.KubeClient.connect(kubeconfig=REAL_CLUSTER)
    sweep = NamespaceSweep(client)
    try:
        yield
        sweep.sweep()
    finally:
        client.close()


@pytest.fixture
def kube_server() -> Iterator[KubeServer | None]:
    if REAL_CLUSTER:
        yield None
        return
    server = KubeServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kubeconfig(kube_server: KubeServer | None, tmp_path: Path) -> str:
    """A kubeconfig for the API the test talks to, for what it runs as a process (`--kubeconfig`): the
    real cluster's, or one written for the test's own server."""
    if REAL_CLUSTER:
        return REAL_CLUSTER
    assert kube_server is not None
    path = tmp_path / "kubeconfig"
    write_kubeconfig(path, kube_server.url)
    return str(path)


@pytest.fixture
def kube_client(kube_server: KubeServer | None) -> Iterator[kc.KubeClient]:
    if REAL_CLUSTER:
        client = kc.KubeClient.connect(kubeconfig=REAL_CLUSTER)
    else:
        assert kube_server is not None
        client = kc.KubeClient.connect(url=kube_server.url)
    # Torn down after every fixture that uses the client (worlds, replicas): what they left goes.
    sweep = Sweep(client) if REAL_CLUSTER else None
    try:
        yield client
        if sweep is not None:
            sweep.sweep()
    finally:
        client.close()


@pytest.fixture
def space(kube_client: kc.KubeClient) -> Iterator[Space]:
    """A namespace and names of the test's own, deleted with what they hold when it ends."""
    s = Space(kube_client, accounts=bool(REAL_CLUSTER))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def kube_backend(kube_client: kc.KubeClient, space: Space) -> Iterator[KubeBackend]:
    """The test's view of the API on the real clock (informers feeding a ClusterState), for tests that
    run the controller as a process or a thread; closed before the space is (on a real cluster, what it
    made is deleted)."""
    backend = KubeBackend(kube_client, RealClock(), cleanup=bool(REAL_CLUSTER))  # type: ignore[arg-type]
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture(params=["memory", "kube"])
def make_world(request: pytest.FixtureRequest) -> Iterator[Callable[..., World]]:
    """Build a World over the in-memory cluster or over the Kubernetes API (both run the same test)."""
    worlds: list[World] = []
    if request.param == "kube":
        client = request.getfixturevalue("kube_client")

        def factory(**kw: Any) -> World:
            w = World(lambda clock: KubeBackend(client, clock, cleanup=bool(REAL_CLUSTER)), **kw)
            worlds.append(w)
            return w

    else:

        def factory(**kw: Any) -> World:
            w = World(MemoryBackend, **kw)
            worlds.append(w)
            return w

    yield factory
    _close(worlds)


def _close(worlds: list[World]) -> None:
    # Every world is closed, even when one fails to (on a real cluster, what a test made must go, or the
    # next test meets `already exists`).
    errors = []
    for w in worlds:
        try:
            w.backend.close()
        except Exception as err:  # reported after the others are closed
            errors.append(err)
    if errors:
        raise errors[0]


@pytest.fixture
def make_kube_world(kube_client: kc.KubeClient) -> Iterator[Callable[..., World]]:
    worlds: list[World] = []

    def factory(**kw: Any) -> World:
        w = World(lambda clock: KubeBackend(kube_client, clock, cleanup=bool(REAL_CLUSTER)), **kw)
        worlds.append(w)
        return w

    yield factory
    _close(worlds)
