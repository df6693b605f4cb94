"""`provisioner catalog`: the built-in catalogs offline, and the read-through-the-provider path on the
fake provider (the AWS-on-moto path is tested with the AWS provider)."""

from __future__ import annotations

import json
from typing import Any, Never

import pytest
from typer.testing import CliRunner, Result

from providers.fake import FakeProvider
from provisioner.cli import app
from provisioner.cloudprovider import InstanceType, TransientError

runner = CliRunner()


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, ["catalog", *args], env=env)


def as_json(*args: str) -> list[dict[str, Any]]:
    result = run(*args, "--output", "json")
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def test_offline_aws_gpu_json_lists_p5_with_eight_h100() -> None:
    rows = {
        r["instanceType"]: r for r in as_json("--cloud", "aws", "--region", "us-east-1", "--gpu", "--offline")
    }

    p5 = rows["p5.48xlarge"]
    assert p5["gpu"] == {"name": "h100", "count": 8, "memoryMiB": 81920}
    assert p5["vcpu"] == 192
    assert p5["memoryMiB"] == 2097152
    assert len(p5["offerings"]) == 10  # spot and on-demand in each of us-east-1's five zones
    assert set(p5["offerings"][0]) == {"zone", "capacityType", "pricePerHour", "available"}
    assert all(r["gpu"] is not None for r in rows.values())
    assert "m5.large" not in rows


def test_offline_gcp_filters_by_gpu_name() -> None:
    rows = as_json("--cloud", "gcp", "--offline", "--gpu-name", "h100")

    assert [r["instanceType"] for r in rows] == [
        "a3-highgpu-1g",
        "a3-highgpu-2g",
        "a3-highgpu-4g",
        "a3-highgpu-8g",
        "a3-megagpu-8g",
    ]
    assert {o["zone"] for o in rows[0]["offerings"]} == {
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-central1-f",
    }


def test_offline_karpenter_benchmark_lists_400_types() -> None:
    assert len(as_json("--cloud", "karpenter-benchmark", "--offline")) == 400


def test_fake_cloud_is_read_through_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = FakeProvider.region_instance_types

    def spy(self: FakeProvider) -> list[InstanceType]:
        calls.append(self.region or "")
        return original(self)

    monkeypatch.setattr(FakeProvider, "region_instance_types", spy)

    rows = {r["instanceType"]: r for r in as_json("--cloud", "fake", "--region", "us-west-2")}

    assert calls == ["us-west-2"]
    assert rows["m5.large"]["gpu"] is None
    assert {o["zone"] for o in rows["m5.large"]["offerings"]} == {
        "us-west-2a",
        "us-west-2b",
        "us-west-2c",
        "us-west-2d",
    }


def test_table_output_shows_gpus_and_cheapest_prices() -> None:
    result = run("--cloud", "aws", "--offline", "--gpu-name", "h100")

    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.strip().splitlines()
    assert header.split()[:3] == ["Instance", "type", "vCPU"]
    assert [r.split()[0] for r in rows] == ["p5.4xlarge", "p5.48xlarge"]
    assert rows[1].split()[:5] == ["p5.48xlarge", "192", "2048", "8x", "h100"]
    assert rows[1].split()[-1] == "55.0400"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cloud", "azure"), "is not one of aws, gcp, fake"),
        (("--cloud", "azure", "--offline"), "is not one of aws, gcp, karpenter-benchmark"),
        (("--cloud", "aws", "--offline", "--region", "mars-1"), "use one of us-east-1, us-east-2, us-west-2"),
        (("--cloud", "gcp"), "error: --project: required with --cloud gcp (or set GOOGLE_CLOUD_PROJECT)"),
    ],
    ids=["unknown-cloud", "unknown-offline-catalog", "unknown-region", "gcp-without-project"],
)
def test_user_errors_exit_1_with_a_message_and_no_traceback(args: tuple[str, ...], message: str) -> None:
    result = run(*args, env={"GOOGLE_CLOUD_PROJECT": ""})

    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_provider_error_is_reported_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def throttled(self: FakeProvider) -> Never:
        raise TransientError("Throttling: rate exceeded")

    monkeypatch.setattr(FakeProvider, "region_instance_types", throttled)

    result = run("--cloud", "fake")

    assert result.exit_code == 1
    assert "TransientError: Throttling: rate exceeded" in result.output
