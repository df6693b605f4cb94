"""No credential reaches a log line or an Event: `provisioner run` at debug level, with a credential in
its kubeconfig and cloud keys in its environment, scales a GPU pod up and down; then every byte it logged
and every Event it wrote is searched for the secrets.

The credential is the kubeconfig's own (a real cluster's token, password or client key, with
PROVISIONER_TEST_KUBECONFIG set), or a bearer token the test adds to a kubeconfig without one (the
strict server takes any). The test keeps to a Space, so it runs unchanged against a real cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from testkit.controllers.backends import KubeBackend
from testkit.controllers.processes import Process
from testkit.controllers.space import Space
from testkit.controllers.standins import cluster_controllers
from testkit.controllers.world import gpu_pod
from tests.controllers.spaced import binder_of, class_of, pool_of
from tests.polling import in_turn, wait_until

TOKEN = "tok-3f9c2a7d51e04b6a9d8c"
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-8b1e4c0f2a7d",
    "AWS_SESSION_TOKEN": "aws-session-55d0c19e7b",
    "PROVISIONER_LEDGER_URL": "postgresql://ledger:pg-pass-7e21c9@127.0.0.1:1/ledger",
}
CREDENTIALS = ("token", "password", "client-key-data")
"""The fields of a kubeconfig user that hold a secret as text."""


def _with_a_credential(kubeconfig: str, tmp_path: Path) -> tuple[str, list[str]]:
    """A kubeconfig for the same API whose user holds a credential, and the secrets it holds: the
    kubeconfig itself if its current user has one, else a copy whose user carries `TOKEN`."""
    doc: dict[str, Any] = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
    user = next(u for u in doc["users"] if u["name"] == context["user"])
    user["user"] = user.get("user") or {}
    held = [str(user["user"][field]) for field in CREDENTIALS if user["user"].get(field)]
    if held:
        return kubeconfig, held
    user["user"]["token"] = TOKEN
    path = tmp_path / "kubeconfig-with-token"
    path.write_text(yaml.safe_dump(doc))
    return str(path), [TOKEN]


def test_no_token_or_cloud_key_appears_in_logs_or_events(
    kubeconfig: str, kube_backend: KubeBackend, space: Space, tmp_path: Path
) -> None:
    config, credentials = _with_a_credential(kubeconfig, tmp_path)
    backend = kube_backend
    binder = binder_of(backend, space)
    for obj in (
        class_of(space),
        pool_of(space, space.name("gpu")),
        gpu_pod("train-0", namespace=space.namespace),
    ):
        backend.create(obj)
    args = ["run", "--cloud", "fake", "--kubeconfig", config]
    args += ["--batch-idle", "0.2", "--batch-max", "1", "--interval", "0.1", "--metrics-port", "0"]
    args += ["--log-level", "debug", "--no-leader-elect"]
    env = {**SECRETS, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}
    proc = Process(*args, log=tmp_path / "run.log", env=env)

    def cluster() -> None:  # what kube-controller-manager and the kubelets do, for the test's pods
        cluster_controllers(backend, space.namespaces)

    try:
        wait_until(
            "the pod bound",
            lambda: all(p.node_name for p in space.pods(backend.state)),
            step=in_turn(cluster, binder.sync),
        )
        for c in space.claims(backend.state):
            backend.delete("NodeClaim", c.name)
        wait_until(
            "the claim terminated",
            lambda: not space.claims(backend.state),
            step=in_turn(cluster, backend.settle),
        )
    finally:
        logged = proc.stop()
    events = backend.events()
    assert "provisioner stopped" in logged and "launched NodeClaim" in logged, "the run did log its work"
    assert events, "the run wrote Events"
    written = logged + json.dumps(events)
    for secret in (*credentials, *SECRETS.values(), "pg-pass-7e21c9"):
        assert secret not in written
