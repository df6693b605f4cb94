"""The replicas of a sharded chaos run (bench/chaos_shards.py) as `provisioner run --shards` processes,
started, killed (SIGKILL), told to leave (SIGTERM) and started again; and their shard Leases as the
campaign reads them: who holds which shard, who is a member, and whether that matches the assignment
(`provisioner.scheduling.shards.assign` over the live members), timed from each change of members."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import chaos_clouds
from provisioner.clock import parse_time
from provisioner.kube import client as kc
from provisioner.kube.shards import MEMBER_LABEL
from provisioner.scheduling import shards as model

SHARDS = 4
LEASE = 3
"""Seconds a Lease outlives its holder's last renewal (`--lease-duration`)."""


@dataclass
class Replica:
    slot: int
    starts: int = 0
    proc: subprocess.Popen[bytes] | None = None
    back_at: float | None = None
    """When it is to start again (after a kill or a leave); None while it runs or stays away."""
    leaving: bool = False
    crash_at: str | None = None
    """Its crash point (`PROVISIONER_CRASH_AT`), armed at every start until it kills itself there: a
    replica killed or moved before it got there takes it along."""

    @property
    def host(self) -> str:
        """Its HOSTNAME: the operator makes its identity of it (`<host>-<random>`)."""
        return f"r{self.slot}-{self.starts}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Fleet:
    """The replicas: started, killed, stopped and started again, each a `provisioner run` process."""

    url: str
    cloud: chaos_clouds.FakeCloud
    ledger: str
    logs: Path
    flags: list[str]
    replicas: list[Replica] = field(default_factory=list)
    kubeconfig: str | None = None
    """A cluster's kubeconfig, which the replicas take instead of `url`."""
    lease_namespace: str = "default"
    changed: float = 0.0
    """When the members last changed (monotonic): a replica killed, told to leave or found dead, or (see
    `Members`) a new member's Lease first seen."""
    crashes: int = 0
    kills: int = 0
    problems: list[str] = field(default_factory=list)
    """Replicas that exited on their own other than at their crash point, or badly when told to leave."""

    def start(self, r: Replica) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), **self.cloud.env()}
        env.pop("PROVISIONER_CRASH_AT", None)
        if r.crash_at:
            env["PROVISIONER_CRASH_AT"] = r.crash_at
        r.starts += 1
        env["HOSTNAME"] = r.host
        cmd = [sys.executable, "-m", "provisioner.cli", "run", *self.cloud.flags()]
        cmd += ["--kubeconfig", self.kubeconfig] if self.kubeconfig else ["--url", self.url]
        if self.lease_namespace != "default":
            cmd += ["--lease-namespace", self.lease_namespace]
        cmd += ["--cluster-name", self.cloud.cluster, "--ledger", self.ledger, *self.flags]
        cmd += ["--shards", str(SHARDS), "--lease-duration", str(LEASE)]
        with open(self.logs.with_suffix(f".r{r.slot}.{r.starts}.log"), "wb") as log:
            r.proc = subprocess.Popen(cmd, stderr=log, stdout=log, env=env)
        r.back_at, r.leaving = None, False

    def add(self, crash_at: str | None = None) -> Replica:
        r = Replica(slot=len(self.replicas), crash_at=crash_at)
        self.replicas.append(r)
        self.start(r)
        return r

    def running(self) -> list[Replica]:
        return [r for r in self.replicas if r.running() and not r.leaving]

    def kill(self, r: Replica, back_after: float) -> None:
        assert r.proc is not None
        r.proc.kill()
        r.proc.wait()
        self.kills += 1
        r.back_at = time.monotonic() + back_after
        self.changed = time.monotonic()

    def leave(self, r: Replica, back_after: float) -> None:
        """SIGTERM: it releases its Leases and exits; reaped by `tick`."""
        assert r.proc is not None
        r.proc.send_signal(signal.SIGTERM)
        r.leaving = True
        r.back_at = time.monotonic() + back_after
        self.changed = time.monotonic()

    def tick(self) -> None:
        """Start again the replicas whose time has come, and those that died at their crash point."""
        now = time.monotonic()
        for r in self.replicas:
            if r.leaving and not r.running():
                r.leaving = False
                code = r.proc.returncode if r.proc is not None else 0
                if r.crash_at and code == -signal.SIGKILL:  # it reached its crash point on its way out
                    r.crash_at = None
                    self.crashes += 1
                # -SIGTERM: told to leave before it had set up its handler (still starting up).
                elif code not in (0, -signal.SIGTERM):
                    self.problems.append(f"replica {r.host} exited {code} on SIGTERM")
            if r.running() or r.leaving:
                continue
            if r.back_at is None:  # died on its own
                assert r.proc is not None
                if not (r.crash_at and r.proc.returncode == -signal.SIGKILL):
                    self.problems.append(f"replica {r.host} exited {r.proc.returncode} on its own")
                r.crash_at = None
                self.crashes += 1
                self.changed = now
                self.start(r)
            elif r.back_at <= now:
                self.start(r)

    def bring_back(self) -> None:
        """Every replica away comes back now."""
        for r in self.replicas:
            if r.back_at is not None:
                r.back_at = 0.0
        self.tick()

    def stop(self) -> None:
        for r in self.replicas:
            if r.proc is not None and r.proc.poll() is None:
                r.proc.send_signal(signal.SIGTERM)
        for r in self.replicas:
            if r.proc is None:
                continue
            try:
                r.proc.wait(30)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()


def leases(client: kc.KubeClient, namespace: str = "default") -> tuple[dict[int, str], list[str]]:
    """(shard -> the holder of its Lease, the members), counting only Leases of `namespace` (the
    replicas' `--lease-namespace`) renewed within their duration."""
    now = datetime.now(UTC)
    shards: dict[int, str] = {}
    members: list[str] = []
    for lease in client.request("GET", kc.LEASE.path(namespace=namespace))["items"]:
        meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
        holder, renewed = spec.get("holderIdentity"), parse_time(spec.get("renewTime"))
        duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
        if not holder or renewed is None or renewed + duration <= now:
            continue
        if (meta.get("labels") or {}).get(MEMBER_LABEL):
            members.append(holder)
        elif meta["name"].startswith("provisioner-shard-"):
            shards[int(meta["name"].rsplit("-", 1)[1])] = holder
    return shards, sorted(members)


@dataclass
class Members:
    """The shard Leases as the campaign sees them at each poll, and how long they took to settle."""

    client: kc.KubeClient
    fleet: Fleet
    namespace: str = "default"
    """The replicas' `--lease-namespace`."""
    seen: set[str] = field(default_factory=set)
    settled_at: float = 0.0
    settle_times: list[float] = field(default_factory=list)
    """Seconds from each change of members to the first poll that found the shards settled."""

    def poll(self) -> str:
        """Empty when the shards are settled, else what is not so (see `settled`); times the settling."""
        held, members = leases(self.client, self.namespace)
        now = time.monotonic()
        if set(members) - self.seen:
            self.fleet.changed = now
            self.seen |= set(members)
        why = settled(self.fleet, held, members)
        if not why and self.settled_at < self.fleet.changed:
            self.settle_times.append(now - self.fleet.changed)
            self.settled_at = now
        return why


def settled(fleet: Fleet, held: dict[int, str], members: list[str]) -> str:
    """Empty when every running replica is a member (and no dead one), and each shard is held by the one
    the assignment gives it (a live holder keeps it within its share); else what is not so."""
    hosts = sorted(r.host for r in fleet.running())
    if sorted(m.rsplit("-", 1)[0] for m in members) != hosts:
        return f"members {members}, replicas running {hosts}"
    want = model.assign(SHARDS, members, held)
    return "" if held == want else f"shards held {held}, assigned {want}"
