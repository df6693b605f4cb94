"""The strict test API server (testkit/controllers/kube_server.py) as a process of its own, standing in for
a real cluster's control plane: `python -m testkit.controllers.serve --kubeconfig-out PATH` serves it on
127.0.0.1, writes a kubeconfig for it to PATH once it answers, and runs until SIGTERM or SIGINT.

With the kubeconfig, anything that takes one talks to it as to a cluster: `provisioner run --kubeconfig`,
and the controller tests in their real-cluster mode (`PROVISIONER_TEST_KUBECONFIG=PATH pytest
tests/controllers`), which is how that mode is tested without a real control plane. The chart's CRDs are
installed as on a cluster where `provisioner crds | kubectl apply -f -` ran: the server admits the custom
kinds by the schemas of `provisioner.api.crds`, which the chart's CRD files are generated from.

What kube-controller-manager would add and the tests rely on runs beside it: the `default`
ServiceAccount of each new namespace (a real server refuses a pod in a namespace without it, so the
tests wait for it)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from pathlib import Path

import yaml

from provisioner.clusterapi import ClusterError, ConflictError
from provisioner.kube import client as kc
from testkit.controllers.kube_server import KubeServer

SERVICE_ACCOUNTS_EVERY = 0.2
"""Seconds between two looks at the namespaces for one without its `default` ServiceAccount."""


def kubeconfig(url: str) -> dict[str, object]:
    """A kubeconfig for the server at `url` (plain HTTP on loopback, no credentials)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "strict", "cluster": {"server": url}}],
        "users": [{"name": "strict", "user": {}}],
        "contexts": [{"name": "strict", "context": {"cluster": "strict", "user": "strict"}}],
        "current-context": "strict",
    }


def write_kubeconfig(path: Path, url: str) -> None:
    """Written whole or not at all (a waiting script reads it as soon as the name appears)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(yaml.safe_dump(kubeconfig(url)))
    os.replace(partial, path)


class ServiceAccounts:
    """kube-controller-manager's ServiceAccount controller, for the one account the tests need: the
    `default` ServiceAccount of every namespace."""

    def __init__(self, client: kc.KubeClient) -> None:
        self.client = client
        self.done: set[str] = set()
        """Namespaces (by uid) whose account was made."""

    def sync(self) -> None:
        namespaces, _ = self.client.list(kc.NAMESPACE)
        for ns in namespaces:
            meta = ns["metadata"]
            if meta.get("uid") in self.done or meta.get("deletionTimestamp"):
                continue
            account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
            with contextlib.suppress(ConflictError):  # made before this controller looked
                self.client.request(
                    "POST", f"/api/v1/namespaces/{meta['name']}/serviceaccounts", body=account
                )
            self.done.add(meta.get("uid"))

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(SERVICE_ACCOUNTS_EVERY):
            with contextlib.suppress(ClusterError):  # a namespace deleted meanwhile: next look
                self.sync()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m testkit.controllers.serve", description=__doc__)
    parser.add_argument("--kubeconfig-out", type=Path, required=True, help="where to write the kubeconfig")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = KubeServer().start()
    client = kc.KubeClient.connect(url=server.url)
    accounts = ServiceAccounts(client)
    try:
        accounts.sync()
        write_kubeconfig(args.kubeconfig_out, server.url)
        print(f"serving {server.url}; kubeconfig {args.kubeconfig_out}", flush=True)
        accounts.run(stop)
    finally:
        client.close()
        server.stop()


if __name__ == "__main__":
    main()
