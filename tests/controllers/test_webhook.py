"""The pod admission webhook as the API server calls it: AdmissionReview requests POSTed over HTTPS to
the controller's endpoint, the certificate made by a test CA the client trusts."""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import ipaddress
import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from provisioner.api import labels as wk
from provisioner.controllers.webhook import PATH, AdmissionWebhook
from provisioner.scheduling import shards as shard_model
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.state import ClusterState
from testkit.builders.pools import node_pool_manifest


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A self-signed CA, and a serving certificate it signs for 127.0.0.1: (ca, cert, key) files."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("test-ca"))
        .issuer_name(_name("test-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("provisioner-webhook"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.crt", folder / "tls.crt", folder / "tls.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@pytest.fixture
def state() -> ClusterState:
    s = ClusterState()
    s.upsert(
        "Team",
        {
            "apiVersion": "provisioner.sh/v1",
            "kind": "Team",
            "metadata": {"name": "vision"},
            "spec": {"namespaces": ["vision"]},
        },
    )
    s.upsert("Namespace", {"metadata": {"name": "labelled", "labels": {wk.TEAM: "vision"}}})
    return s


@pytest.fixture
def webhook(tmp_path: Path, state: ClusterState) -> Iterator[tuple[str, ssl.SSLContext]]:
    ca, cert, key = _certificates(tmp_path)
    server = AdmissionWebhook(state, certfile=str(cert), keyfile=str(key), host="127.0.0.1", port=0)
    server.start()
    context = ssl.create_default_context(cafile=str(ca))
    try:
        yield f"https://127.0.0.1:{server.port}{PATH}", context
    finally:
        server.stop()


def _review(namespace: str, pod: dict[str, Any], *, operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": operation,
            "object": pod,
        },
    }


def _pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "train-"},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


def _post(webhook: tuple[str, ssl.SSLContext], body: Any) -> tuple[int, dict[str, Any]]:
    url, context = webhook
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _patch(answer: dict[str, Any]) -> list[dict[str, Any]] | None:
    response = answer["response"]
    if "patch" not in response:
        return None
    assert response["patchType"] == "JSONPatch"
    return cast(list[dict[str, Any]] | None, json.loads(base64.b64decode(response["patch"])))


@pytest.mark.parametrize("namespace", ["vision", "labelled"], ids=["listed-by-the-team", "team-label"])
def test_a_pod_of_a_team_is_created_behind_the_admission_gate(
    webhook: tuple[str, ssl.SSLContext], namespace: str
) -> None:
    status, answer = _post(webhook, _review(namespace, _pod()))
    assert status == 200
    assert answer["kind"] == "AdmissionReview" and answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert answer["response"]["allowed"] is True
    assert _patch(answer) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": wk.ADMISSION_GATE}]}
    ]


def test_a_gate_is_appended_to_gates_the_pod_already_has(webhook: tuple[str, ssl.SSLContext]) -> None:
    _, answer = _post(webhook, _review("vision", _pod(schedulingGates=[{"name": "other.io/wait"}])))
    assert _patch(answer) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": wk.ADMISSION_GATE}}
    ]


@pytest.mark.parametrize(
    ("namespace", "pod", "operation"),
    [
        ("default", _pod(), "CREATE"),
        ("vision", _pod(nodeName="node-1"), "CREATE"),
        ("vision", _pod(schedulingGates=[{"name": wk.ADMISSION_GATE}]), "CREATE"),
        ("vision", _pod(), "UPDATE"),
    ],
    ids=["no-team", "already-bound", "already-gated", "update"],
)
def test_other_pods_are_allowed_unchanged(
    webhook: tuple[str, ssl.SSLContext], namespace: str, pod: dict[str, Any], operation: str
) -> None:
    status, answer = _post(webhook, _review(namespace, pod, operation=operation))
    assert status == 200 and answer["response"]["allowed"] is True
    assert _patch(answer) is None


def test_a_body_that_is_not_an_admission_review_is_a_400(webhook: tuple[str, ssl.SSLContext]) -> None:
    status, answer = _post(webhook, b"not json")
    assert status == 400 and "AdmissionReview" in answer["message"]


def test_a_team_added_later_is_seen_by_the_next_request(
    webhook: tuple[str, ssl.SSLContext], state: ClusterState
) -> None:
    assert _patch(_post(webhook, _review("nlp", _pod()))[1]) is None
    state.upsert("Team", {"kind": "Team", "metadata": {"name": "nlp"}, "spec": {"namespaces": ["nlp"]}})
    assert _patch(_post(webhook, _review("nlp", _pod()))[1]) is not None


def test_plain_http_gets_no_admission_review_answer(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, _ = webhook
    plain = url.replace("https://", "http://", 1)
    body = json.dumps(_review("vision", _pod())).encode()
    request = urllib.request.Request(plain, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            answer = resp.read()
    except (OSError, http.client.HTTPException):
        return  # refused: the connection is closed at the failed TLS handshake
    raise AssertionError(f"plain HTTP was answered: {answer[:200]!r}")


def test_a_client_that_connects_and_says_nothing_does_not_hold_up_the_api_server(
    webhook: tuple[str, ssl.SSLContext],
) -> None:
    url, _ = webhook
    port = int(url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port)):
        # A TLS handshake that never starts (a port scanner, a stuck client): the next review is answered.
        status, answer = _post(webhook, _review("vision", _pod()))
    assert status == 200 and answer["response"]["allowed"] is True


def test_with_sharded_replicas_a_pod_is_labelled_with_its_first_pools_shard(
    tmp_path: Path, state: ClusterState
) -> None:
    # The pod names no pool: the cluster's default CPU pools apply, as the solver resolves them.
    state.upsert("NodePool", node_pool_manifest("cpu-b"))
    state.upsert("NodePool", node_pool_manifest("cpu-a"))
    ca, cert, key = _certificates(tmp_path)
    server = AdmissionWebhook(
        state,
        certfile=str(cert),
        keyfile=str(key),
        host="127.0.0.1",
        port=0,
        shards=4,
        defaults=ClusterDefaults.of(cpu="cpu-a,cpu-b", gpu=""),
    )
    server.start()
    try:
        hook = f"https://127.0.0.1:{server.port}{PATH}", ssl.create_default_context(cafile=str(ca))
        _, answer = _post(hook, _review("vision", _pod()))
    finally:
        server.stop()
    shard = str(shard_model.shard_of("cpu-a", 4))
    assert _patch(answer) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": wk.ADMISSION_GATE}]},
        {"op": "add", "path": "/metadata/labels", "value": {shard_model.SHARD: shard}},
        {"op": "add", "path": "/metadata/labels/provisioner.sh~1admission-gated", "value": "true"},
    ], "gated, shard-labelled, and marked for the admission holder's watch of the pods behind the gate"
