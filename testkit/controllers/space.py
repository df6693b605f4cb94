"""What keeps the controller tests apart on a cluster they share (a real one, or the standalone strict
server of testkit/controllers/serve.py), where the per-test strict server gives each a fresh one:

- `Sweep`: everything of the kinds the tests write that appeared while a test ran is deleted when it
  ends, passed or not (finalizers lifted, pods with grace 0: no controller or kubelet is left to do it).
  Namespaces stay (a test that makes one again while it terminates would be refused), and so does
  anything in kube-system. Every test that talks to a real cluster gets one (tests/controllers/conftest.py);
  `NamespaceSweep` deletes the session's new namespaces once it ends.
- `Space`: one test's own corner, for tests that run controller processes (tests/controllers/test_shards.py):
  a fresh namespace for its pods and the replicas' Leases and Events, names unique to the test for what
  is cluster-scoped (NodePools, NodeClasses, Teams; NodeClaims and Nodes are named after their pool),
  all deleted at the end, the namespaces too. Two runs at once never read each other's Leases.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.clusterapi import ClusterError, ConflictError, NotFoundError
from provisioner.kube import client as kc
from provisioner.state import ClusterState
from provisioner.state.objects import Node, Pod

SWEPT = [r for r in (*kc.WATCHED, kc.EVENT, kc.LEASE) if r is not kc.NAMESPACE]
"""The kinds the tests write (namespaces aside)."""
KEPT_NAMESPACES = frozenset({"kube-system", "kube-public"})


def wait_for_service_account(client: kc.KubeClient, namespace: str, limit: float = 60.0) -> None:
    """Until the namespace's `default` ServiceAccount exists: kube-controller-manager makes it, and a
    real server refuses pods in the namespace until then."""
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
    deadline = time.monotonic() + limit
    while True:
        try:
            client.request("GET", path)
            return
        except NotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Sweep:
    """What a cluster held when a test began; `sweep()` deletes what appeared since."""

    def __init__(self, client: kc.KubeClient) -> None:
        self.client = client
        self.before = {res.plural: self._uids(res) for res in SWEPT}

    def _uids(self, res: kc.Resource) -> set[str]:
        return {doc["metadata"]["uid"] for doc in self.client.list(res)[0]}

    def new(self, res: kc.Resource) -> list[dict[str, Any]]:
        """The objects of `res` that appeared since the test began (outside the kept namespaces)."""
        return [
            doc
            for doc in self.client.list(res)[0]
            if doc["metadata"]["uid"] not in self.before[res.plural]
            and doc["metadata"].get("namespace") not in KEPT_NAMESPACES
        ]

    def sweep(self) -> None:
        """Delete them; every one is tried, the first failure raised after."""
        errors: list[ClusterError] = []
        for res in SWEPT:
            try:
                found = self.new(res)
            except ClusterError as err:
                errors.append(err)
                continue
            for doc in found:
                _remove(errors, self.client, res, doc)
        if errors:
            raise errors[0]


class NamespaceSweep:
    """The namespaces a cluster held when a test session began; `sweep()` deletes those made since (at
    the session's end: while it runs, tests make the same namespaces again and again)."""

    def __init__(self, client: kc.KubeClient) -> None:
        self.client = client
        self.before = {ns["metadata"]["uid"] for ns in client.list(kc.NAMESPACE)[0]}

    def sweep(self, limit: float = 120.0) -> None:
        """Delete them, and wait until they are gone: a run started right after would meet them
        terminating (and be refused its pods there)."""
        errors: list[ClusterError] = []
        for ns in _listed(errors, self.client, kc.NAMESPACE):
            if ns["metadata"]["uid"] not in self.before:
                _try(errors, self.client.delete, kc.NAMESPACE, ns["metadata"]["name"])
        if errors:
            raise errors[0]
        deadline = time.monotonic() + limit
        while left := [
            ns["metadata"]["name"]
            for ns in self.client.list(kc.NAMESPACE)[0]
            if ns["metadata"]["uid"] not in self.before
        ]:
            if time.monotonic() > deadline:
                raise AssertionError(f"namespaces {left} still terminating after {limit:.0f} s")
            time.sleep(0.5)


class Space:
    """A namespace and a name suffix of its own; `close()` deletes what was made in them."""

    def __init__(self, client: kc.KubeClient, *, accounts: bool = False, token: str | None = None) -> None:
        """`accounts`: wait for each namespace's `default` ServiceAccount (on a real cluster)."""
        self.client = client
        self.accounts = accounts
        self.token = token or uuid.uuid4().hex[:6]
        self.namespace = self.name("t")
        self.namespaces: list[str] = []
        self.pools: set[str] = set()
        """NodePools of this test (their claims and Nodes go with them)."""
        self.own(self.namespace)

    def name(self, base: str) -> str:
        """`base` made unique to this test (a valid name when `base` is)."""
        return f"{base}-{self.token}"

    def own(self, namespace: str) -> str:
        """Create a namespace this test uses (deleted with everything in it at `close()`)."""
        with contextlib.suppress(ConflictError):
            self.client.create(kc.NAMESPACE, {"metadata": {"name": namespace}})
        self.namespaces.append(namespace)
        if self.accounts:
            wait_for_service_account(self.client, namespace)
        return namespace

    def pool(self, name: str) -> str:
        """Note a NodePool of this test (by its name); the name."""
        self.pools.add(name)
        return name

    def pods(self, state: ClusterState) -> list[Pod]:
        """The pods of this test's namespaces in `state` (a real cluster runs others)."""
        return [p for p in list(state.pods.values()) if p.namespace in self.namespaces]

    def claims(self, state: ClusterState) -> list[NodeClaim]:
        """The NodeClaims of this test's pools in `state`."""
        return [c for c in list(state.claims.values()) if c.nodepool in self.pools]

    def nodes(self, state: ClusterState) -> list[Node]:
        """The Nodes of this test's pools in `state`."""
        return [n for n in list(state.nodes.values()) if n.labels.get(wk.NODEPOOL) in self.pools]

    def close(self) -> None:
        """Delete the claims and Nodes of this test's pools, then its namespaces and what they hold.
        A real cluster deletes a namespace's objects with it; the strict server does not, so they go
        one by one first. Everything is tried; the first failure is raised after."""
        errors: list[ClusterError] = []
        pools = ",".join(sorted(self.pools))
        selector = f"{wk.NODEPOOL} in ({pools})" if pools else None
        if selector:
            for res in (kc.NODECLAIM, kc.NODE):
                for doc in _listed(errors, self.client, res, label_selector=selector):
                    _remove(errors, self.client, res, doc)
        for ns in self.namespaces:
            for res in (kc.POD, kc.LEASE, kc.EVENT):
                for doc in _listed(errors, self.client, res, namespace=ns):
                    _remove(errors, self.client, res, doc)
            _try(errors, self.client.delete, kc.NAMESPACE, ns)
        if errors:
            raise errors[0]


def _listed(
    errors: list[ClusterError], client: kc.KubeClient, res: kc.Resource, **kw: Any
) -> list[dict[str, Any]]:
    """The objects of `res` (`client.list`'s keywords); none when the list fails (the failure kept)."""
    try:
        return client.list(res, **kw)[0]
    except ClusterError as err:
        errors.append(err)
        return []


def _remove(errors: list[ClusterError], client: kc.KubeClient, res: kc.Resource, doc: dict[str, Any]) -> None:
    """Delete one object now: its finalizers lifted first (no controller is left to do it), a pod with
    grace 0 (no kubelet is left to finish it)."""
    meta = doc["metadata"]
    name, ns = meta["name"], meta.get("namespace")
    if meta.get("finalizers"):
        _try(errors, client.patch, res, name, {"metadata": {"finalizers": None}}, namespace=ns)
    body = {"gracePeriodSeconds": 0} if res is kc.POD else None
    _try(errors, client.delete, res, name, namespace=ns, body=body)


def _try(errors: list[ClusterError], fn: Any, *args: Any, **kw: Any) -> None:
    """Call; a NotFound (gone already) is fine, any other failure is kept."""
    try:
        fn(*args, **kw)
    except NotFoundError:
        pass
    except ClusterError as err:
        errors.append(err)
