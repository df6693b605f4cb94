"""The mutating admission webhook: the API server asks it about every Pod being created, and it answers
with a JSON patch that puts the `provisioner.sh/admission` scheduling gate on the pods of teams (which
pods: `provisioner.quota.gate`) and, with sharded replicas, the `provisioner.sh/shard` label on every pod
(the shard of the pool it is tried on first: `provisioner.scheduling.shards.wanted_shard`), which the
replicas' pod watches select by, and the `provisioner.sh/admission-gated` label on a team's pod behind
the gate (`provisioner.scheduling.shards.GATED`), which the admission holder's watch selects by.

Served over HTTPS (the chart mounts the certificate) by every replica, leader or not, from the
ClusterState its informers keep: answering needs no write. Anything it cannot read is answered "allowed,
unchanged", and the chart registers it with `failurePolicy: Ignore`, so pods are still created when the
webhook is down; those pods are then not held for quota (they count in their team's use once bound).
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from provisioner.api import labels as wk
from provisioner.clock import Clock, RealClock
from provisioner.quota.book import QuotaBook
from provisioner.quota.gate import gate_patch
from provisioner.scheduling import shards as model
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.state import ClusterState
from provisioner.state.objects import Pod

log = logging.getLogger(__name__)

PATH = "/mutate-pods"
MAX_BODY = 3 * 1024 * 1024
"""The API server sends at most a few MiB (a pod's spec); more is refused unread."""
HANDSHAKE_TIMEOUT = 5.0
"""Seconds a client has to finish the TLS handshake, and then for each read of its request."""


def review(
    request: Mapping[str, Any],
    state: ClusterState,
    *,
    shards: int = 0,
    defaults: ClusterDefaults | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The AdmissionReview answer to one AdmissionReview request (admission.k8s.io/v1). `shards`: the
    replicas' shard count (0: not sharded, no label); `defaults`: the cluster's default pool lists;
    `now`: when (a pod's tried pools expire by it)."""
    req = request.get("request") or {}
    response: dict[str, Any] = {"uid": req.get("uid", ""), "allowed": True}
    pod = req.get("object") or {}
    kind = (req.get("kind") or {}).get("kind")
    if req.get("operation") == "CREATE" and kind == "Pod" and isinstance(pod, Mapping):
        namespace = req.get("namespace") or (pod.get("metadata") or {}).get("namespace") or "default"
        # Copies, not the live dicts: the informers write them from other threads.
        book = QuotaBook(
            teams=list(state.teams.values()), departments=(), nodepools=(), namespaces=dict(state.namespaces)
        )
        team = book.team_of(namespace)
        gate = gate_patch(pod, team)
        patch = [
            *(gate or ()),
            *_shard_patch(pod, namespace, state, shards, defaults or ClusterDefaults(), now),
        ]
        if shards and (gate or _gated(pod)) and team is not None:
            labelled = bool((pod.get("metadata") or {}).get("labels")) or any(
                op["path"] == "/metadata/labels" for op in patch
            )
            patch += _label_patch(labelled, model.GATED, "true")
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _shard_patch(
    doc: Mapping[str, Any],
    namespace: str,
    state: ClusterState,
    shards: int,
    defaults: ClusterDefaults,
    now: datetime | None,
) -> list[dict[str, Any]]:
    """The JSON patch that labels a pod being created with its shard (none: not sharded, or no pool)."""
    if not shards:
        return []
    meta = doc.get("metadata") or {}
    pod = Pod.from_dict({**doc, "metadata": {**meta, "namespace": namespace, "name": meta.get("name") or ""}})
    snap = state.snapshot()
    node = state.nodes.get(pod.node_name) if pod.node_name else None
    shard = model.wanted_shard(
        pod,
        model.PoolLists.of(snap, defaults),
        frozenset(p.name for p in snap.nodepools),
        shards,
        now or datetime.now(UTC),
        node.labels.get(wk.NODEPOOL) if node is not None else None,
    )
    if shard is None or (meta.get("labels") or {}).get(model.SHARD) == shard:
        return []
    return _label_patch(bool(meta.get("labels")), model.SHARD, shard)


def _gated(pod: Mapping[str, Any]) -> bool:
    """Whether a pod being created already carries the admission gate (gated by hand)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return any(isinstance(g, Mapping) and g.get("name") == wk.ADMISSION_GATE for g in gates)


def _label_patch(labelled: bool, key: str, value: str) -> list[dict[str, Any]]:
    """The JSON patch that sets one label; `labelled`: whether the pod has a labels map already."""
    if not labelled:
        return [{"op": "add", "path": "/metadata/labels", "value": {key: value}}]
    return [
        {"op": "add", "path": "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1"), "value": value}
    ]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != PATH:
            self._send(404, {"message": f"not found; the webhook is at {PATH}"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            self._send(400, {"message": "expected an AdmissionReview body"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            server = self.server
            answer = review(
                body, server.state, shards=server.shards, defaults=server.defaults, now=server.clock.now()
            )
        except (ValueError, AttributeError, TypeError) as err:
            self._send(400, {"message": f"not an AdmissionReview: {err}"})
            return
        self._send(200, answer)

    def _send(self, code: int, doc: Mapping[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("webhook: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ClusterState
    shards: int
    defaults: ClusterDefaults
    clock: Clock
    context: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        # TLS only, and the handshake in the request's own thread with a deadline: done in the accept loop
        # (a wrapped listening socket), one client that connects and says nothing would hold up every
        # review after it. A plain-HTTP request fails the handshake and is closed unanswered.
        request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except OSError as err:
            log.debug("webhook: TLS handshake with %s failed: %s", client_address, err)
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()


class AdmissionWebhook:
    """The HTTPS server; `start()` serves in a thread, `stop()` ends it."""

    def __init__(
        self,
        state: ClusterState,
        *,
        certfile: str,
        keyfile: str,
        host: str = "0.0.0.0",
        port: int = 9443,
        shards: int = 0,
        defaults: ClusterDefaults | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`shards`: the replicas' shard count, to label pods with theirs (0: not sharded)."""
        self._server = _Server((host, port), _Handler)
        self._server.state = state
        self._server.shards = shards
        self._server.defaults = defaults or ClusterDefaults()
        self._server.clock = clock or RealClock()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(certfile, keyfile)
        self._server.context = context
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
