"""SDK plumbing of the AWS provider: boto3 clients, calls whose errors come back translated, pagination,
selector filters, and the short-lived cache of what the API answered.

Owns client construction (one client per service and region, on one session, one endpoint and one
botocore config) and the rule that no botocore exception leaves a call made through `call`,
`translated` or `paginate`: each becomes the provider error providers.aws.errors chooses. What to ask
and what the answer means is left to the provider and providers.aws.nodeclass.

Credentials come from boto3's default chain (environment, IRSA web identity token, instance profile)
unless a session is given; they are never logged. The endpoint is the `endpoint_url` argument, else
`AWS_ENDPOINT_URL`, else AWS's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
from botocore.config import Config

from providers.aws import errors
from provisioner.cloudprovider import CloudProviderError, NotFound

T = TypeVar("T")


@dataclass(slots=True)
class _Entry:
    value: Any
    expires: float


class TTLCache:
    """A few keyed values, each good for `ttl` seconds of the injected clock."""

    def __init__(self, clock: Callable[[], float], ttl: float) -> None:
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[Any, _Entry] = {}

    def get(self, key: Any, load: Callable[[], T], *, ttl: float | None = None) -> T:
        now = self._clock()
        entry = self._entries.get(key)
        if entry is not None and entry.expires > now:
            return entry.value  # type: ignore[no-any-return]
        value = load()
        self._entries[key] = _Entry(value, now + (self._ttl if ttl is None else ttl))
        return value

    def forget(self, match: Callable[[Any], bool]) -> None:
        """Drop the entries whose key `match`es (what a launch just changed, such as free counts)."""
        for key in [k for k in self._entries if match(k)]:
            del self._entries[key]


class SDK:
    """boto3 clients for one region, made on first use, and translated calls through them."""

    def __init__(
        self,
        *,
        region: str,
        session: boto3.Session | None = None,
        endpoint_url: str | None = None,
        max_attempts: int | None = None,
    ) -> None:
        self.region = region
        self._session = session or boto3.Session()
        self._endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        retries: dict[str, Any] = {"mode": "standard"}
        if max_attempts is not None:
            retries["total_max_attempts"] = max_attempts
        self._config = Config(
            retries=retries, connect_timeout=10, read_timeout=60, user_agent_extra="provisioner"
        )
        self._clients: dict[tuple[str, str | None], Any] = {}

    @property
    def ec2(self) -> Any:
        return self.client("ec2")

    def client(self, service: str, *, region: str | None = None, config: Config | None = None) -> Any:
        """The client of `service` (in `region`, default the provider's; with `config`, default the
        provider's retries and timeouts), made once."""
        key = (service, region)
        if key not in self._clients:
            with translated(f"{service} client"):
                self._clients[key] = self._session.client(
                    service,
                    region_name=region or self.region,
                    endpoint_url=self._endpoint,
                    config=config or self._config,
                )
        return self._clients[key]

    def paginate(
        self,
        operation: str,
        method: str,
        key: str,
        *,
        service: str = "ec2",
        **params: Any,
    ) -> list[dict[str, Any]]:
        """Every item under `key` of every page of `method` (a boto3 paginator name), errors translated
        as `operation`'s."""
        out: list[dict[str, Any]] = []
        with translated(operation):
            for page in self.client(service).get_paginator(method).paginate(**params):
                out.extend(page.get(key) or [])
        return out


def call(
    operation: str,
    fn: Callable[..., dict[str, Any]],
    *,
    default: type[CloudProviderError] = CloudProviderError,
    not_found: bool = False,
    **params: Any,
) -> dict[str, Any]:
    """`fn(**params)`, its errors translated as `operation`'s (see `translated`)."""
    with translated(operation, default=default, not_found=not_found):
        return fn(**params)
    raise AssertionError("unreachable: translated re-raises")  # pragma: no cover


@contextmanager
def translated(
    operation: str,
    *,
    default: type[CloudProviderError] = CloudProviderError,
    not_found: bool = False,
) -> Iterator[None]:
    """Translate any SDK error raised inside into the provider's errors (never leak botocore): with
    `not_found`, AWS's "no such instance" codes become NotFound; the rest as providers.aws.errors says,
    `default` for what is neither transient nor capacity."""
    try:
        yield
    except CloudProviderError:
        raise
    except Exception as err:
        if not_found and errors.error_code(err) in errors.NOT_FOUND_CODES:
            raise NotFound(f"{operation}: {errors.error_message(err)}") from err
        raise errors.translate(err, operation=operation, default=default) from err


def tag_filters(tags: dict[str, str] | None) -> list[dict[str, Any]]:
    """EC2 filters for a selector's tags: `*` means "has the tag, any value"."""
    out: list[dict[str, Any]] = []
    for key, value in sorted((tags or {}).items()):
        if value == "*":
            out.append({"Name": "tag-key", "Values": [key]})
        else:
            out.append({"Name": f"tag:{key}", "Values": [value]})
    return out
