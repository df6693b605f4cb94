"""Ledger backends for the FinOps tests: a SQLite file, and a real PostgreSQL server started for the
session from the Debian binaries (`initdb` into a temp dir, `postgres` on a free loopback port).

PostgreSQL refuses to run as root, so as root the data directory is handed to the `postgres` user and the
server runs through `runuser`. Without the binaries the PostgreSQL cases are skipped, saying why.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest


def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return os.path.dirname(found[-1]) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return cast(int, s.getsockname()[1])


def _as_postgres(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server with trust auth on 127.0.0.1 (session-wide)."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip(
            "PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
        )
    if os.geteuid() == 0:
        try:
            pg_user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no `postgres` user to run the server as")
    root = tempfile.mkdtemp(prefix="ledger-pg-")
    data = os.path.join(root, "data")
    if os.geteuid() == 0:
        os.chown(root, pg_user.pw_uid, pg_user.pw_gid)
    subprocess.run(
        _as_postgres(
            [f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]
        ),
        check=True,
        capture_output=True,
    )
    port = _free_port()
    log = open(os.path.join(root, "log"), "wb")  # noqa: SIM115 - closed at teardown
    server = subprocess.Popen(
        _as_postgres(
            [
                f"{bindir}/postgres",
                "-D",
                data,
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-k",
                root,
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ]
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    try:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres").close()
                break
            except psycopg.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    with open(os.path.join(root, "log")) as f:
                        raise RuntimeError(f"postgres did not start: {f.read()[-2000:]}") from None
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the session's server, for one test."""
    import psycopg

    base = postgres_server.replace("postgresql+psycopg://", "postgresql://")
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each ledger test runs on both backends."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    return cast(str, request.getfixturevalue("postgres_url"))
