"""SDK plumbing of the GCP provider: google-cloud-compute clients and credentials, calls the client never
retries and whose errors come back translated, pagers drained, and zone operations waited on.

Owns the clients (made once, on first use), the credentials (Application Default Credentials / workload
identity through google.auth.default unless given; AnonymousCredentials when an endpoint override is set
without credentials; never logged), and the rule that no google.api_core exception leaves a call made
through `call`, `listed` or `wait`: each becomes the error providers.gcp.errors chooses. Every call
passes `retry=None`, so the client never retries for its default 600 s: retrying TransientError is the
retry wrapper's job.

Operations are waited on explicitly through ZoneOperationsClient.wait with a deadline: the client's own
extended-operation polling would call Google's endpoint, not an endpoint override, and reads an
operation that failed with only `error.errors` as a success (see `failure`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from google.cloud import compute_v1

from providers.gcp import errors
from provisioner.cloudprovider.errors import NodeClassNotReady, OfferingKey, TransientError

log = logging.getLogger(__name__)

SCOPES = ("https://www.googleapis.com/auth/compute",)
_DONE = compute_v1.Operation.Status.DONE


class Clients:
    """The google-cloud-compute clients the provider uses."""

    def __init__(self, *, credentials: Any, endpoint: str | None) -> None:
        options = {"api_endpoint": endpoint} if endpoint else None
        kwargs: dict[str, Any] = {"credentials": credentials, "client_options": options}
        self.instances = compute_v1.InstancesClient(**kwargs)
        self.operations = compute_v1.ZoneOperationsClient(**kwargs)
        self.machine_types = compute_v1.MachineTypesClient(**kwargs)
        self.accelerator_types = compute_v1.AcceleratorTypesClient(**kwargs)
        self.zones = compute_v1.ZonesClient(**kwargs)
        self.reservations = compute_v1.ReservationsClient(**kwargs)
        self.resource_policies = compute_v1.ResourcePoliciesClient(**kwargs)
        self.region_operations = compute_v1.RegionOperationsClient(**kwargs)


class SDK:
    """Clients made on first use, and translated, bounded calls through them."""

    def __init__(
        self,
        *,
        endpoint: str | None,
        credentials: Any,
        request_timeout: float,
        operation_timeout: float,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self._endpoint = endpoint
        self._credentials = credentials
        self.request_timeout = request_timeout
        self._operation_timeout = operation_timeout
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._clients: Clients | None = None

    def __repr__(self) -> str:
        return f"SDK(endpoint={self._endpoint!r})"  # never the credentials

    def clients(self) -> Clients:
        """The clients, made on the first call. Raises NodeClassNotReady when no credentials are found."""
        with self._lock:
            if self._clients is None:
                credentials = self._credentials
                if credentials is None and self._endpoint:
                    from google.auth.credentials import AnonymousCredentials

                    credentials = AnonymousCredentials()
                elif credentials is None:
                    import google.auth
                    from google.auth import exceptions as auth_exceptions

                    try:
                        credentials, _ = google.auth.default(scopes=list(SCOPES))
                    except auth_exceptions.DefaultCredentialsError as err:
                        raise NodeClassNotReady(
                            "no Google credentials found: set GOOGLE_APPLICATION_CREDENTIALS, use workload "
                            "identity, or run `gcloud auth application-default login`"
                        ) from err
                self._clients = Clients(credentials=credentials, endpoint=self._endpoint)
                log.debug("gcp clients ready (endpoint=%s)", self._endpoint or "default")
            return self._clients

    def call(
        self, what: str, fn: Callable[..., Any], /, *, offering: OfferingKey | None = None, **kw: Any
    ) -> Any:
        """One client call, never retried by the client, its errors translated (naming `offering` when a
        capacity error is about it)."""
        try:
            return fn(retry=None, timeout=self.request_timeout, **kw)
        except Exception as err:
            raise errors.translate(err, what=what, offering=offering) from err

    def listed(self, what: str, request: Callable[..., Any], /, **kw: Any) -> list[Any]:
        """Every item of a list call's pages (later pages are fetched while iterating, so their errors
        are translated here too)."""
        pager = self.call(what, request, **kw)
        try:
            return list(pager)
        except Exception as err:
            raise errors.translate(err, what=what) from err

    def wait(self, project: str, zone: str, op: compute_v1.Operation, *, what: str) -> compute_v1.Operation:
        """Wait for a zone operation to be DONE, through zoneOperations.wait, until the operation
        timeout (then TransientError: a retry finds the instance if it comes up)."""
        deadline = self._clock() + self._operation_timeout
        pause = 0.1
        operations = self.clients().operations
        while op.status != _DONE:
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise TransientError(
                    f"{what}: operation {op.name} not done after {self._operation_timeout:g}s "
                    "(a retry finds the instance if it comes up)"
                )
            started = self._clock()
            try:
                # The server answers within about 2 minutes even if the operation is still running.
                op = operations.wait(
                    project=project, zone=zone, operation=op.name, retry=None, timeout=min(remaining, 150.0)
                )
            except Exception as err:
                raise errors.translate(err, what=f"{what}: wait for {op.name}") from err
            if op.status != _DONE and self._clock() - started < 1.0:
                # A wait that came back at once and not done: do not spin on it.
                self._sleep(min(pause, max(0.0, deadline - self._clock())))
                pause = min(pause * 2, 2.0)
        return op


def failure(op: compute_v1.Operation) -> errors.OperationFailure | None:
    """What a finished operation's error list means; None when it succeeded."""
    pairs = [(e.code, e.message) for e in op.error.errors] if op.error else []
    return errors.classify_operation(pairs, http_status=int(op.http_error_status_code or 0))
