"""The Kubernetes client: configuration (explicit URL, kubeconfig, or in-cluster), and a thin generic
JSON layer over the official client's ApiClient so every other module deals in plain dicts.

Only `provisioner.kube` imports `kubernetes`. Everything here returns Kubernetes JSON (camelCase dicts),
the same shape ClusterState.upsert takes, and raises the project's own errors (`ApiError` and the
ClusterAPI errors), never `kubernetes.client.exceptions`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from provisioner.api import kinds

# The tracked resources (one table: `provisioner.api.kinds`), under the names the kube room's callers use.
from provisioner.api.kinds import DAEMONSET as DAEMONSET
from provisioner.api.kinds import DEPARTMENT as DEPARTMENT
from provisioner.api.kinds import NAMESPACE as NAMESPACE
from provisioner.api.kinds import NODE as NODE
from provisioner.api.kinds import NODECLAIM as NODECLAIM
from provisioner.api.kinds import NODEPOOL as NODEPOOL
from provisioner.api.kinds import PDB as PDB
from provisioner.api.kinds import POD as POD
from provisioner.api.kinds import PODTEMPLATE as PODTEMPLATE
from provisioner.api.kinds import PROVISIONING_REQUEST as PROVISIONING_REQUEST
from provisioner.api.kinds import TEAM as TEAM
from provisioner.api.kinds import Resource as Resource
from provisioner.api.kinds import nodeclass as nodeclass
from provisioner.clusterapi.port import ClusterError, ConflictError, EvictionBlocked, NotFoundError

MERGE_PATCH = "application/merge-patch+json"


EVENT = Resource("Event", "", "v1", "events", True)
LEASE = Resource("Lease", "coordination.k8s.io", "v1", "leases", True)
WATCHED = kinds.TRACKED
"""Everything the informers feed into ClusterState."""


class ApiError(ClusterError):
    """An API answer that is not one of the ClusterAPI errors (5xx, 403, 422...)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"{status}: {message}")


class Gone(ApiError):
    """410: the resourceVersion is too old; relist."""


def load_configuration(
    *, url: str | None = None, kubeconfig: str | None = None, context: str | None = None
) -> k8s.Configuration:
    """An explicit URL (tests, kubectl proxy) wins; then a kubeconfig (argument, $KUBECONFIG,
    ~/.kube/config); then the in-cluster service account."""
    cfg = k8s.Configuration()
    if url:
        cfg.host = url.rstrip("/")
        return cfg
    candidate = kubeconfig or os.environ.get("KUBECONFIG")
    default = Path.home() / ".kube" / "config"
    if candidate or (default.exists() and not os.environ.get("KUBERNETES_SERVICE_HOST")):
        k8s_config.load_kube_config(config_file=candidate, context=context, client_configuration=cfg)
        return cfg
    k8s_config.load_incluster_config(client_configuration=cfg)
    return cfg


def _message(status: int, data: bytes) -> str:
    try:
        doc = json.loads(data or b"{}")
        return str(doc.get("message") or doc.get("reason") or data[:200])
    except ValueError:
        return data[:200].decode(errors="replace")


def raise_for(status: int, data: bytes, what: str) -> None:
    if 200 <= status < 300:
        return
    message = f"{what}: {_message(status, data)}"
    if status == 404:
        raise NotFoundError(message)
    if status == 409:
        raise ConflictError(message)
    if status == 429:
        raise EvictionBlocked(message)
    if status == 410:
        raise Gone(status, message)
    raise ApiError(status, message)


class KubeClient:
    """Generic JSON access to the API server through the official client."""

    def __init__(self, configuration: k8s.Configuration, *, request_timeout: float = 30.0) -> None:
        # One long-lived connection per informer's watch plus the controllers' writes.
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
        self.configuration = configuration
        self.api = k8s.ApiClient(configuration)
        self.request_timeout = request_timeout

    @classmethod
    def connect(
        cls, *, url: str | None = None, kubeconfig: str | None = None, context: str | None = None
    ) -> KubeClient:
        return cls(load_configuration(url=url, kubeconfig=kubeconfig, context=context))

    def close(self) -> None:
        self.api.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: Any = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        _, url, hdrs, payload, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            return self.api.call_api(
                method,
                url,
                header_params=hdrs,
                body=payload,
                _request_timeout=timeout or self.request_timeout,
            )
        except ApiException as err:
            raise ApiError(err.status or 0, str(err.reason)) from err
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise ApiError(0, f"{method} {path}: {err}") from err

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """`timeout`, seconds: the API server abandons the request after it (its `timeout` parameter:
        a write not stored by then is not stored, answered 504), and this client stops waiting then."""
        if timeout is not None:
            query = {**(query or {}), "timeout": f"{max(1, int(timeout * 1000))}ms"}
        resp = self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            timeout=None if timeout is None else (timeout, timeout),
        )
        data = resp.read()
        raise_for(resp.status, data, f"{method} {path}")
        return json.loads(data) if data else {}

    # Typed-by-resource helpers.

    def list(
        self,
        res: Resource,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object of the resource (all namespaces, or `namespace`'s; those the selectors match)
        and the list's resourceVersion."""
        query = {"labelSelector": label_selector, "fieldSelector": field_selector}
        doc = self.request("GET", res.path(namespace=namespace), query=query)
        items = doc.get("items") or []
        for item in items:
            # List items carry no kind/apiVersion; add them so they read like watched objects.
            item.setdefault("kind", res.kind)
            item.setdefault("apiVersion", res.api_version)
        return items, str((doc.get("metadata") or {}).get("resourceVersion") or "")

    def watch(
        self,
        res: Resource,
        *,
        resource_version: str | None,
        timeout_seconds: int,
        label_selector: str | None = None,
        namespace: str | None = None,
        on_open: Callable[[Callable[[], None]], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Watch events after `resource_version` (of `namespace`'s objects when given, and of those
        `label_selector` matches: one that stops matching comes as DELETED, one that starts as ADDED). The read timeout is a little above the
        server-side timeout, so a server that ignores `timeoutSeconds` still ends the stream.
        `on_open` is handed a function that ends the stream from another thread."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
            "resourceVersion": resource_version or None,
            "labelSelector": label_selector,
        }
        path = res.path(namespace=namespace)
        resp = self._send("GET", path, query=query, timeout=(10, timeout_seconds + 5))
        if resp.status != 200:
            raise_for(resp.status, resp.read(), f"watch {res.plural}")
        if on_open is not None:
            on_open(resp.response.shutdown)
        try:
            for line in iter_resp_lines(resp.response):
                if line:
                    yield json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            # A read timeout ends a watch the server did not end itself: not an error, start a new one.
            if isinstance(err, urllib3.exceptions.ReadTimeoutError) or "Read timed out" in str(err):
                return
            raise ApiError(0, f"watch {res.plural}: {err}") from err
        finally:
            resp.response.release_conn()

    def get(self, res: Resource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", res.path(namespace=namespace, name=name))

    def create(
        self,
        res: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        doc = {"apiVersion": res.api_version, "kind": res.kind, **body}
        return self.request("POST", res.path(namespace=namespace), body=doc, timeout=timeout)

    def patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        sub: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return self.request(
            "PATCH",
            res.path(namespace=namespace, name=name, sub=sub),
            body=dict(patch),
            content_type=MERGE_PATCH,
            timeout=timeout,
        )

    def delete(
        self,
        res: Resource,
        name: str,
        *,
        namespace: str | None = None,
        body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        return self.request("DELETE", res.path(namespace=namespace, name=name), body=body, timeout=timeout)
