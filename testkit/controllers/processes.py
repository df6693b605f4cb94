"""`provisioner` as a child process of a controller test, as a user starts it: this checkout on its path,
its output to a file (a pipe nobody reads until the end fills up and blocks a chatty process), stopped
with SIGTERM as a kubelet stops a container (SIGKILL after a grace period, as a kubelet's), and what it
logged read back. The tests hand it a kubeconfig (`--kubeconfig`), so the same test runs against the
strict server of its own or a real cluster (tests/controllers/conftest.py's `kubeconfig`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

GRACE = 30.0
"""Seconds a stopped process has to exit before it is killed."""


class Process:
    """`provisioner ARGS` running; `stop()` ends it and hands back what it logged (stdout and stderr)."""

    def __init__(self, *args: str, log: Path, env: Mapping[str, str] | None = None) -> None:
        self.log = log
        cmd = [sys.executable, "-c", "from provisioner.cli import main; main()", *args]
        with open(log, "w") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONPATH": os.getcwd(), **(env or {})},
            )

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def output(self) -> str:
        return self.log.read_text()

    def stop(self) -> str:
        """SIGTERM (if still running), wait for the exit; what it logged."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.output()
