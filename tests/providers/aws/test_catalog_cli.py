"""`provisioner catalog --cloud aws` run as a user runs it (a separate process, the standard credential
chain from the environment, AWS_ENDPOINT_URL pointing at moto behind the fault-and-price proxy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from testkit.providers.aws import prices
from testkit.providers.aws.stack import Stack

_SCRIPT = Path(sys.executable).parent / "provisioner"
# The installed console script when there is one, else the same entry point through this interpreter.
PROVISIONER = (
    [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-c", "from provisioner.cli import main; main()"]
)


def run_catalog(stack: Stack, *args: str, endpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint or stack.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        env.pop(name, None)
    return subprocess.run(
        [*PROVISIONER, "catalog", "--cloud", "aws", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_catalog_lists_p5_48xlarge_with_8_h100_gpus_and_its_prices(stack: Stack) -> None:
    result = run_catalog(stack, "--region", "us-east-1", "--gpu", "--output", "json")

    assert result.returncode == 0, result.stderr
    rows = {row["instanceType"]: row for row in json.loads(result.stdout)}
    p5 = rows["p5.48xlarge"]
    assert p5["gpu"] == {"name": "h100", "count": 8, "memoryMiB": 81920}
    assert (p5["vcpu"], p5["memoryMiB"]) == (192, 2_097_152)
    spot = {o["zone"]: o["pricePerHour"] for o in p5["offerings"] if o["capacityType"] == "spot"}
    assert spot["us-east-1a"] == prices.spot("p5.48xlarge", "us-east-1a")
    assert {o["capacityType"] for o in p5["offerings"]} == {"spot", "on-demand"}
    assert all(row["gpu"] is not None for row in rows.values())
    assert "m5.large" not in rows
    assert "DescribeInstanceTypes" in stack.proxy.actions


def test_catalog_table_names_the_gpu(stack: Stack) -> None:
    result = run_catalog(stack, "--region", "us-east-1", "--gpu-name", "h100")

    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("p5.48xlarge")]
    assert "8x h100 80GiB" in line


def test_catalog_straight_against_moto_lists_p5_48xlarge_with_8_h100_gpus(stack: Stack) -> None:
    # No proxy: moto's whole catalog (1,395 types), its own spot prices, no Pricing API at all.
    result = run_catalog(stack, "--region", "us-east-1", "--gpu", "--output", "json", endpoint=stack.moto_url)

    assert result.returncode == 0, result.stderr
    rows = {row["instanceType"]: row for row in json.loads(result.stdout)}
    assert rows["p5.48xlarge"]["gpu"] == {"name": "h100", "count": 8, "memoryMiB": 81920}
    assert rows["p4d.24xlarge"]["gpu"] == {"name": "a100", "count": 8, "memoryMiB": 40960}
    assert rows["p5.48xlarge"]["offerings"]


def test_catalog_lists_the_reserved_offerings_of_the_accounts_capacity_reservations(stack: Stack) -> None:
    block = stack.proxy.add_reservation(
        instance_type="p5.48xlarge", zone="us-east-1b", count=2, kind="capacity-block"
    )

    result = run_catalog(stack, "--region", "us-east-1", "--gpu-name", "h100", "--output", "json")
    table = run_catalog(stack, "--region", "us-east-1", "--gpu-name", "h100")

    assert result.returncode == 0, result.stderr
    (p5,) = [row for row in json.loads(result.stdout) if row["instanceType"] == "p5.48xlarge"]
    (reserved,) = [o for o in p5["offerings"] if o["capacityType"] == "reserved"]
    assert (reserved["zone"], reserved["pricePerHour"], reserved["available"]) == ("us-east-1b", 0.0, True)
    assert reserved["reservation"]["id"] == block.id
    assert (reserved["reservation"]["type"], reserved["reservation"]["free"]) == ("capacity-block", 2)
    (line,) = [line for line in table.stdout.splitlines() if line.startswith("p5.48xlarge")]
    assert line.endswith("2/2")
