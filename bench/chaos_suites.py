"""The tests the reliability campaign (bench/chaos.py) runs beside its crash runs, and what it counts of
them: the fault tests (each must pass; `faults_survived` counts them) and the hostile-input fuzzing
(hypothesis with a fixed seed; `inputs_tried` counts its examples from hypothesis' own statistics)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FAULT_TESTS = [
    "tests/controllers/test_faults.py",
    "tests/providers/gcp/test_create.py",
    "tests/finops/test_recorder.py",
    "tests/finops/test_ledger_crash.py",
    "tests/controllers/test_api_faults.py",
]
"""The fault tests; the quick campaign runs all but the last (the API server's, about a minute here)."""
FUZZ_TESTS = ["tests/unit/test_hostile_input.py", "tests/unit/test_hostile_teams.py"]
QUICK_EXAMPLES = 25
"""Examples per fuzzing test in the quick campaign (the full one runs each test's own number)."""


def run_suites(logs: Path, *, quick: bool) -> tuple[int, int, list[str]]:
    """The fault tests and the fuzzing under pytest: (fault tests passed, inputs tried, problems)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if quick:
        env["PROVISIONER_FUZZ_EXAMPLES"] = str(QUICK_EXAMPLES)
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    problems: list[str] = []
    junit = logs / "faults.xml"
    faults = subprocess.run(
        [*pytest, *(FAULT_TESTS[:-1] if quick else FAULT_TESTS), f"--junitxml={junit}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    (logs / "faults.log").write_text(faults.stdout + faults.stderr)
    passed = 0
    if junit.exists():
        for case in ET.parse(junit).iter("testcase"):
            if any(case.find(tag) is not None for tag in ("failure", "error", "skipped")):
                if case.find("skipped") is None:
                    problems.append(f"fault test failed: {case.get('classname')}::{case.get('name')}")
                continue
            passed += 1
    if faults.returncode != 0 and not problems:
        problems.append(f"the fault tests exited {faults.returncode} (see {logs / 'faults.log'})")
    fuzz = subprocess.run(
        [*pytest, *FUZZ_TESTS, "--hypothesis-show-statistics", "--hypothesis-seed=0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    (logs / "fuzz.log").write_text(fuzz.stdout + fuzz.stderr)
    tried = sum(
        int(a) + int(b) for a, b in re.findall(r"(\d+) passing, (\d+) failing", fuzz.stdout + fuzz.stderr)
    )
    if fuzz.returncode != 0:
        problems.append(f"the fuzzing found a failure (see {logs / 'fuzz.log'})")
    return passed, tried, problems
