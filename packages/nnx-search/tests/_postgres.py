"""A throwaway PostgreSQL cluster for the several-workers search tests.

``initdb`` + ``pg_ctl`` in a fresh temp dir, listening only on a unix socket inside it
(``listen_addresses=''``: no TCP port, so nothing to collide with another pytest-xdist
worker's cluster), stopped and removed at the end. PostgreSQL refuses to run as root,
so under root the server runs as the unprivileged ``nobody``, which owns the temp dir.
:func:`start` skips (``pytest.skip``, with the reason) only where the server binaries or
the Python driver are missing; .ci/run installs Debian's ``postgresql`` package.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

_DEBIAN_BINS = Path("/usr/lib/postgresql")


def _bindir() -> Path | None:
    """Where initdb and pg_ctl are: on PATH, else Debian's versioned directory (the
    newest), which Debian does not put on PATH."""
    on_path = shutil.which("initdb"), shutil.which("pg_ctl")
    if all(on_path):
        return Path(on_path[0]).resolve().parent  # type: ignore[arg-type]
    versions = sorted((p for p in _DEBIAN_BINS.glob("*/bin") if (p / "initdb").is_file()),
                      key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.name)])
    return versions[-1] if versions else None


class Cluster:
    def __init__(self, root: Path, bindir: Path, user: pwd.struct_passwd | None) -> None:
        self.root, self.bindir, self.user = root, bindir, user
        self.data, self.socket_dir = root / "data", root / "sock"

    def _run(self, *argv: str) -> None:
        # Dropping to an unprivileged user (postgres refuses root); its own groups only.
        as_user: dict[str, Any] = {} if self.user is None else {
            "user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        done = subprocess.run([str(self.bindir / argv[0]), *argv[1:]], cwd=self.root,
                              capture_output=True, text=True, timeout=120, check=False,
                              **as_user)
        if done.returncode != 0:
            log = self.root / "server.log"
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}"
                               + (log.read_text()[-2000:] if log.is_file() else ""))

    def start(self) -> None:
        self.socket_dir.mkdir()
        if self.user is not None:
            for path in (self.root, self.socket_dir):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust",
                  "--no-locale", "-E", "UTF8", "--no-sync")
        # Unix socket only; fsync off: a throwaway cluster needs no durability.
        options = f"-c listen_addresses='' -k {self.socket_dir} -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def new_database(self) -> str:
        """A fresh, empty database; returns its SQLAlchemy URL (over the unix socket)."""
        import psycopg2

        name = f"t_{secrets.token_hex(6)}"
        connection = psycopg2.connect(host=str(self.socket_dir), dbname="postgres",
                                      user="postgres")
        try:
            connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
            with connection.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {name}")
        finally:
            connection.close()
        return f"postgresql+psycopg2://postgres@/{name}?host={self.socket_dir}"


def start() -> Cluster:
    """A started cluster; skips the calling test where PostgreSQL cannot be run here."""
    pytest.importorskip("psycopg2", reason="the PostgreSQL driver psycopg2 is not installed "
                        "(root pyproject's dev group)")
    bindir = _bindir()
    if bindir is None or not (bindir / "pg_ctl").is_file():
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's "
                    "postgresql package (.ci/run does when it can)")
    user = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
    # Short and world-traversable (a unix socket path is limited to ~100 bytes, and the
    # unprivileged server cannot enter pytest's root-only temp dirs).
    root = Path(tempfile.mkdtemp(prefix="nnx-pg-", dir="/tmp" if Path("/tmp").is_dir()
                                 else None))
    cluster = Cluster(root, bindir, user)
    try:
        cluster.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster
