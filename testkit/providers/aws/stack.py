"""moto's server and the fault-and-price proxy, started once per test process, reset per test.

The contract suite builds a harness per test without pytest fixtures, so the servers live in a small
lazily started singleton here (stopped at exit) rather than in a session fixture; `aws_stack` in
conftest.py hands the same one to this package's tests. Resetting goes through moto's own
`/moto-api/reset` endpoint, and default AMI loading is off so a reset takes milliseconds; each test
registers the AMI it needs.
"""

from __future__ import annotations

import atexit
import os
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from testkit.providers.aws.faults import FaultProxy

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass
class Stack:
    moto_url: str
    proxy: FaultProxy
    server: ThreadedMotoServer
    _session: boto3.Session | None = None

    @property
    def url(self) -> str:
        """The endpoint tests give the provider: the proxy."""
        return self.proxy.url

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.moto_url}/moto-api/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
        self.proxy.reset()

    def session(self) -> boto3.Session:
        """One session for every test: a session loads each service model once (about a second for EC2)."""
        if self._session is None:
            self._session = boto3.Session(region_name=REGION, **CREDENTIALS)
        return self._session

    def client(self, service: str, *, direct: bool = False) -> Any:
        """A boto3 client for test setup, through the proxy or (`direct`) straight to moto."""
        return self.session().client(service, endpoint_url=self.moto_url if direct else self.url)


_lock = threading.Lock()
_stack: Stack | None = None


def shared_stack() -> Stack:
    global _stack
    with _lock:
        if _stack is None:
            _stack = _start()
            atexit.register(_stop, _stack)
        return _stack


def _start() -> Stack:
    # Read by moto when its EC2 backend is built: no default AMIs makes every reset cheap.
    os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    moto_url = f"http://{host}:{port}"
    direct = boto3.Session(region_name=REGION, **CREDENTIALS).client("ec2", endpoint_url=moto_url)
    zones: dict[str, str] = {}

    def subnet_zone(subnet_id: str) -> str | None:
        if not subnet_id:
            return None
        if subnet_id not in zones:
            found = direct.describe_subnets(Filters=[{"Name": "subnet-id", "Values": [subnet_id]}])["Subnets"]
            if not found:
                return None
            zones[subnet_id] = found[0]["AvailabilityZone"]
        return zones[subnet_id]

    proxy = FaultProxy(moto_url, subnet_zone=subnet_zone)
    return Stack(moto_url=moto_url, proxy=proxy, server=server)


def _stop(stack: Stack) -> None:
    stack.proxy.close()
    stack.server.stop()
