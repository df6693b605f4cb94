"""Fixtures: a Kubernetes API over real HTTP (a fresh kmock-based server per test, or the cluster named
by PROVISIONER_TEST_KUBECONFIG), and `world` factories over it or over the in-memory cluster."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from provisioner.kube import client as kc
from tests.controllers.kube_server import KubeServer
from tests.controllers.world import KubeBackend, MemoryBackend, World

REAL_CLUSTER = os.environ.get("PROVISIONER_TEST_KUBECONFIG")


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
def kube_client(kube_server: KubeServer | None) -> Iterator[kc.KubeClient]:
    if REAL_CLUSTER:
        client = kc.KubeClient.connect(kubeconfig=REAL_CLUSTER)
    else:
        assert kube_server is not None
        client = kc.KubeClient.connect(url=kube_server.url)
    try:
        yield client
    finally:
        client.close()


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
    for w in worlds:
        w.backend.close()


@pytest.fixture
def make_kube_world(kube_client: kc.KubeClient) -> Iterator[Callable[..., World]]:
    worlds: list[World] = []

    def factory(**kw: Any) -> World:
        w = World(lambda clock: KubeBackend(kube_client, clock, cleanup=bool(REAL_CLUSTER)), **kw)
        worlds.append(w)
        return w

    yield factory
    for w in worlds:
        w.backend.close()
