"""Fixtures of the AWS provider tests: the shared moto + proxy stack, reset per test, a small account
in it, and a provider pointed at the proxy."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from providers.aws import AWSProvider
from testkit.providers.aws import world
from testkit.providers.aws.faults import FaultProxy
from testkit.providers.aws.stack import Stack, shared_stack
from testkit.providers.harness_aws import make_provider


@pytest.fixture
def stack() -> Iterator[Stack]:
    s = shared_stack()
    s.reset()
    yield s
    s.proxy.reset()


@pytest.fixture
def account(stack: Stack) -> world.World:
    return world.build(stack)


@pytest.fixture
def proxy(stack: Stack) -> FaultProxy:
    return stack.proxy


@pytest.fixture
def ec2(stack: Stack) -> Any:
    """A client straight to moto, for setup and for checking what really happened."""
    return stack.client("ec2", direct=True)


@pytest.fixture
def new_provider(stack: Stack) -> Callable[..., AWSProvider]:
    def build(**overrides: Any) -> AWSProvider:
        return make_provider(stack, **overrides)

    return build


@pytest.fixture
def provider(new_provider: Callable[..., AWSProvider], account: world.World) -> AWSProvider:
    return new_provider()
