"""Credentials: the provider uses boto3's default chain and endpoint settings, and no credential ever
reaches a log line or an error message."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import boto3
import pytest

from providers.aws import AWSProvider
from provisioner.cloudprovider import CloudProviderError
from testkit.builders import node_claim
from testkit.providers.aws import world
from testkit.providers.aws.stack import REGION, Stack

ACCESS_KEY = "AKIAPROVISIONERTEST7"
SECRET_KEY = "pr0visioner/s3cret+never-log-me"
TOKEN = "session-token-never-log-me"


@pytest.fixture
def secret_session() -> boto3.Session:
    return boto3.Session(
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=TOKEN,
    )


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's included
    yield caplog


def test_credentials_never_appear_in_logs_or_errors(
    stack: Stack,
    account: world.World,
    secret_session: boto3.Session,
    everything_logged: pytest.LogCaptureFixture,
) -> None:
    provider = AWSProvider(
        region=REGION, cluster_name="contract", endpoint_url=stack.url, session=secret_session, max_attempts=1
    )
    types = {t.name: t for t in provider.instance_types(account.node_class)}
    instance = provider.create(
        node_claim("logged", ["m5.large"], node_class=account.node_class),
        [types["m5.large"]],
        account.node_class,
    )
    provider.list()
    provider.delete(instance.provider_id)
    stack.proxy.throttle(times=1)
    with pytest.raises(CloudProviderError) as caught:
        provider.create(
            node_claim("fails", ["m5.large"], node_class=account.node_class),
            [types["m5.large"]],
            account.node_class,
        )

    ours = [r.getMessage() for r in everything_logged.records if r.name.startswith("providers.aws")]
    assert any("launched" in m for m in ours)  # the provider did log, so the check below means something
    for message in ours:
        assert ACCESS_KEY not in message and SECRET_KEY not in message and TOKEN not in message
    everything = "\n".join(r.getMessage() for r in everything_logged.records)
    assert SECRET_KEY not in everything
    assert ACCESS_KEY not in str(caught.value) and SECRET_KEY not in str(caught.value)


def test_the_default_chain_reads_environment_credentials_and_endpoint(
    stack: Stack, account: world.World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", stack.url)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)

    provider = AWSProvider(region=REGION, cluster_name="contract")

    assert "m5.large" in {t.name for t in provider.instance_types(account.node_class)}
    assert "DescribeInstanceTypes" in stack.proxy.actions
