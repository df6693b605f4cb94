"""Compute Engine failures as the project's errors, decided in one place.

Two sources: google.api_core exceptions raised by a call (HTTP status + `errors[].reason`), and the
`error.errors[].code` list of a finished zone operation, which the client does NOT raise (it raises only
when the operation also carries httpErrorStatusCode and httpErrorMessage). Stockouts become
InsufficientCapacity(kind="capacity"), quota InsufficientCapacity(kind="quota"), throttling and 5xx
TransientError, everything else CreateError. Messages are Google's own, never request headers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from google.api_core import exceptions as gexc

from provisioner.cloudprovider.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacity,
    NotFound,
    OfferingKey,
    TransientError,
)

CAPACITY_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
        "GCE_STOCKOUT",
        "STOCKOUT",
    }
)
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "QUOTA_LIMIT_EXCEEDED", "REGIONAL_QUOTA_EXCEEDED"})
TRANSIENT_CODES = frozenset({"RATE_LIMIT_EXCEEDED", "INTERNAL_ERROR", "SERVICE_UNAVAILABLE", "TIMEOUT"})
ALREADY_EXISTS_CODES = frozenset({"RESOURCE_ALREADY_EXISTS", "ALREADY_EXISTS"})
NOT_FOUND_CODES = frozenset({"RESOURCE_NOT_FOUND", "NOT_FOUND"})

_QUOTA_REASONS = frozenset({"quotaExceeded", "QUOTA_EXCEEDED"})
_RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})


@dataclass(frozen=True, slots=True)
class OperationFailure:
    """What a finished operation's error list means."""

    kind: str
    """`capacity`, `quota`, `transient`, `exists`, `not-found` or `fatal`."""
    codes: tuple[str, ...]
    message: str


def classify_operation(
    codes_and_messages: Iterable[tuple[str, str]], *, http_status: int = 0
) -> OperationFailure | None:
    """The meaning of an operation's `error.errors` (and `httpErrorStatusCode` when set); None when the
    operation succeeded."""
    pairs = [(c or "", m or "") for c, m in codes_and_messages]
    if http_status < 400:
        http_status = 0
    if not pairs and not http_status:
        return None
    codes = tuple(c for c, _ in pairs)
    message = "; ".join(f"{c}: {m}" if m else c for c, m in pairs) or f"HTTP {http_status}"
    upper = {c.upper() for c in codes}
    if upper & CAPACITY_CODES:
        kind = "capacity"
    elif upper & QUOTA_CODES or any("QUOTA" in c for c in upper):
        kind = "quota"
    elif upper & ALREADY_EXISTS_CODES:
        kind = "exists"
    elif upper & NOT_FOUND_CODES:
        kind = "not-found"
    elif upper & TRANSIENT_CODES or http_status == 429 or http_status >= 500:
        kind = "transient"
    else:
        kind = "fatal"
    return OperationFailure(kind=kind, codes=codes, message=message)


_STOCKOUT_TEXT = ("ZONE_RESOURCE_POOL_EXHAUSTED", "does not have enough resources available")


def _is_stockout(err: gexc.GoogleAPICallError) -> bool:
    """A stockout answered synchronously (seen as `503 ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: ...`):
    a capacity answer, not a transient one; retrying the same zone would only fail again."""
    texts = [str(err.message or "")]
    texts += [
        f"{e.get('reason', '')} {e.get('message', '')}" for e in (err.errors or []) if isinstance(e, dict)
    ]
    return any(marker in text for text in texts for marker in _STOCKOUT_TEXT)


def _reasons(err: gexc.GoogleAPICallError) -> set[str]:
    out = {str(e.get("reason", "")) for e in (err.errors or []) if isinstance(e, dict)}
    if err.reason:
        out.add(str(err.reason))
    return out


def translate(err: Exception, *, what: str, offering: OfferingKey | None = None) -> CloudProviderError:
    """A google.api_core (or transport) exception as the project's error. `what` names the call for the
    message (`insert instance x in us-central1-a`)."""
    if isinstance(err, CloudProviderError):
        return err
    if isinstance(err, gexc.GoogleAPICallError):
        code = int(err.code or 0)
        reasons = _reasons(err)
        text = f"{what}: HTTP {code} {err.message}"
        if _is_stockout(err):
            return InsufficientCapacity([offering] if offering else [], text, kind="capacity")
        if code == 429 or reasons & _RATE_REASONS:
            return TransientError(f"{what}: throttled by Compute Engine ({err.message})")
        if code >= 500:
            return TransientError(text)
        if reasons & _QUOTA_REASONS:
            return InsufficientCapacity([offering] if offering else [], text, kind="quota")
        if code == 404:
            return NotFound(text)
        return CreateError(text)
    if isinstance(err, gexc.RetryError | TimeoutError | ConnectionError):
        return TransientError(f"{what}: {err}")
    # requests' ConnectionError/Timeout are not builtins' subclasses: match them by module.
    if type(err).__module__.startswith(("requests", "urllib3")):
        return TransientError(f"{what}: {type(err).__name__}: {err}")
    return CreateError(f"{what}: {type(err).__name__}: {err}")
