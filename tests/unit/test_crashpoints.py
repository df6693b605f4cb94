"""Crash points: off by default, a clear error for a bad spec, SIGKILL at exactly the N-th pass."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from provisioner import crashpoints


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("launch-callled:1", "unknown crash point 'launch-callled'; allowed: claim-written"),
        ("launch-called:x", "must be an integer >= 1"),
        ("launch-called:0", "must be an integer >= 1"),
    ],
    ids=["typo", "not-a-number", "zero"],
)
def test_a_bad_spec_names_what_is_allowed(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        crashpoints.parse(spec)


def test_the_count_defaults_to_the_first_pass() -> None:
    assert crashpoints.parse("claim-written") == ("claim-written", 1)


def test_unarmed_points_do_nothing() -> None:
    crashpoints.arm(None)
    for _ in range(3):
        crashpoints.reached("claim-written")


_CHILD = """
import sys
from provisioner import crashpoints
crashpoints.arm("status-written:3")
for i in range(5):
    crashpoints.reached("claim-written")
    crashpoints.reached("status-written")
    print(i, flush=True)
"""


def test_an_armed_point_kills_the_process_at_its_nth_pass() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=60,
    )
    assert out.returncode == -signal.SIGKILL
    assert out.stdout.split() == ["0", "1"], "killed at the third status write, before printing 2"


def test_provisioner_run_refuses_a_bad_crash_spec() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "provisioner.cli", "run", "--url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd(), crashpoints.ENV: "nowhere:1"},
        timeout=60,
    )
    assert out.returncode == 2
    assert "unknown crash point 'nowhere'" in out.stderr
