"""Translation of botocore errors into the provider errors, at the edge.

Every SDK call of the AWS provider goes through `translate`, so no `botocore` exception leaves the
package: throttling, 5xx and connection trouble become `TransientError` (the only retried error), capacity
codes become `InsufficientCapacity` for the offerings the caller names, and the rest becomes the error the
calling operation raises for non-retryable failures. Messages carry the AWS error code and message only:
never request parameters, headers or credentials.
"""

from __future__ import annotations

from collections.abc import Iterable

from botocore import exceptions as botocore_errors

from provisioner.cloudprovider import (
    CloudProviderError,
    InsufficientCapacity,
    OfferingKey,
    TransientError,
)

CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "UnfulfillableCapacity",
        "MaxSpotInstanceCountExceeded",
        "MaxSpotFleetRequestCountExceeded",
        "InsufficientFreeAddressesInSubnet",
        "SpotMaxPriceTooLow",
        "Unsupported",
        "VcpuLimitExceeded",
        "InstanceLimitExceeded",
    }
)
"""Codes meaning "not this offering now": the offering is marked unavailable and another one is tried."""

QUOTA_CODES = frozenset({"MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "InstanceLimitExceeded"})
"""Capacity codes that are account limits rather than stockouts (cached for their own TTL)."""

TRANSIENT_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "EC2ThrottledException",
        "PriorRequestNotComplete",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "Unavailable",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
"""Codes retrying fixes: throttling and the server-side failures AWS answers with these names."""

NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})


def error_code(err: BaseException) -> str:
    """AWS's error code of a ClientError; empty for anything else."""
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_message(err: BaseException) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Message", ""))


def is_capacity_code(code: str) -> bool:
    return code in CAPACITY_CODES


def capacity_kind(code: str) -> str:
    """`quota` for account limits, `capacity` for stockouts: caches keep each for its own TTL."""
    return "quota" if code in QUOTA_CODES else "capacity"


def translate(
    err: Exception,
    *,
    operation: str,
    default: type[CloudProviderError] = CloudProviderError,
    offerings: Iterable[OfferingKey] = (),
) -> CloudProviderError:
    """The provider error for an SDK error raised by `operation` (raise it `from err`)."""
    if isinstance(err, botocore_errors.ClientError):
        code = error_code(err)
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        text = f"{operation}: {code or status}: {error_message(err)}".rstrip(": ")
        if code in TRANSIENT_CODES or status >= 500 or status == 429:
            return TransientError(text)
        if is_capacity_code(code):
            return InsufficientCapacity(list(offerings), text, kind=capacity_kind(code))
        return default(text)
    if isinstance(err, botocore_errors.NoCredentialsError | botocore_errors.PartialCredentialsError):
        return default(
            f"{operation}: no usable AWS credentials (looked in the environment, web identity token "
            "and instance profile)"
        )
    if isinstance(
        err,
        botocore_errors.EndpointConnectionError
        | botocore_errors.ConnectionError
        | botocore_errors.ConnectTimeoutError
        | botocore_errors.ReadTimeoutError
        | botocore_errors.ConnectionClosedError,
    ):
        return TransientError(f"{operation}: {type(err).__name__}")
    if isinstance(err, botocore_errors.BotoCoreError):
        return default(f"{operation}: {type(err).__name__}: {err}")
    return default(f"{operation}: {type(err).__name__}")
