"""No credential reaches a log line or an Event: `provisioner run` at debug level, with a bearer token in
its kubeconfig and cloud keys in its environment, scales a GPU pod up and down; then every byte it logged
and every Event it wrote is searched for the secrets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.clock import RealClock
from provisioner.kube import client as kc
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import (
    KubeBackend,
    TestBinder,
    cluster_controllers,
    gpu_pod,
    node_class,
    node_pool,
)
from tests.controllers.conftest import REAL_CLUSTER
from tests.polling import in_turn, wait_until

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="drives its own API server")

TOKEN = "tok-3f9c2a7d51e04b6a9d8c"
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-8b1e4c0f2a7d",
    "AWS_SESSION_TOKEN": "aws-session-55d0c19e7b",
    "PROVISIONER_LEDGER_URL": "postgresql://ledger:pg-pass-7e21c9@127.0.0.1:1/ledger",
}


def test_no_token_or_cloud_key_appears_in_logs_or_events(
    kube_server: KubeServer, kube_client: kc.KubeClient, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": kube_server.url}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    backend = KubeBackend(kube_client, RealClock())  # type: ignore[arg-type]
    binder = TestBinder(backend)
    for obj in (node_class(), node_pool("gpu"), gpu_pod("train-0")):
        backend.create(obj)
    cmd = [sys.executable, "-m", "provisioner.cli", "run", "--cloud", "fake", "--kubeconfig", str(kubeconfig)]
    cmd += ["--batch-idle", "0.2", "--batch-max", "1", "--interval", "0.1", "--metrics-port", "0"]
    cmd += ["--log-level", "debug", "--no-leader-elect"]
    env = {**os.environ, **SECRETS, "PYTHONPATH": os.getcwd(), "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE"}
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(
            "the pod bound",
            lambda: all(p.node_name for p in backend.state.pods.values()),
            step=in_turn(lambda: cluster_controllers(backend), binder.sync),
        )
        for c in list(backend.state.claims.values()):
            backend.delete("NodeClaim", c.name)
        wait_until(
            "the claim terminated",
            lambda: not backend.state.claims,
            step=in_turn(lambda: cluster_controllers(backend), backend.settle),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        events = backend.events()
        backend.close()
    logged = out + err
    assert "provisioner stopped" in logged and "launched NodeClaim" in logged, "the run did log its work"
    assert events, "the run wrote Events"
    written = logged + json.dumps(events)
    for secret in (TOKEN, *SECRETS.values(), "pg-pass-7e21c9"):
        assert secret not in written
