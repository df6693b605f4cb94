"""GCP credentials and endpoints: ADC unless told otherwise, anonymous against an endpoint override
(also from PROVISIONER_GCP_ENDPOINT), and never a token in the logs or in repr()."""

from __future__ import annotations

import logging

import pytest
from google.oauth2.credentials import Credentials

from providers.gcp import ENDPOINT_ENV, GCPProvider
from testkit.builders import node_claim
from testkit.providers.gcp import fixtures
from testkit.providers.gcp.standin import ComputeStandIn
from testkit.providers.harness_gcp import gcp_node_class

SECRET = "ya29.not-a-real-token-but-secret-all-the-same"


def test_given_credentials_are_used_and_never_logged(
    standin: ComputeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = GCPProvider(
        project=fixtures.PROJECT,
        region=fixtures.REGION,
        cluster_name="c",
        endpoint=standin.url,
        credentials=Credentials(token=SECRET),
    )
    nc = gcp_node_class()
    inst = provider.create(
        node_claim("k1", ["e2-standard-2"], node_class=nc), provider.instance_types(nc), nc
    )
    provider.get(inst.provider_id)
    provider.delete(inst.provider_id)
    assert {c.authorization for c in standin.calls()} == {f"Bearer {SECRET}"}
    assert caplog.records, "the provider logs its launches"
    assert SECRET not in caplog.text
    assert SECRET not in repr(provider)


def test_an_endpoint_from_the_environment_uses_anonymous_credentials(
    standin: ComputeStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENDPOINT_ENV, standin.url)
    provider = GCPProvider(project=fixtures.PROJECT, region=fixtures.REGION, cluster_name="c")
    assert provider.endpoint == standin.url
    assert provider.list() == []
    assert {c.authorization for c in standin.calls()} == {None}
