"""A real PostgreSQL server for the tests, on 127.0.0.1 and a free port, in a temporary directory.

Found the way ``scripts/ensure-postgres`` installs it (Debian's ``postgresql`` package: ``initdb`` and ``postgres``
under ``/usr/lib/postgresql/<version>/bin``, or on the PATH). PostgreSQL refuses to run as root, so when the tests
run as root the cluster belongs to ``nobody``. ``fsync`` is off: the tests kill processes, not machines.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.ports import free_port
from tests.processes import stop_process
from tests.waiting import started_sync

__all__ = ["postgres_binaries", "running_postgres"]


def postgres_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``postgres`` (the newest installed version), or None."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for folder in versions:
        if (folder / "initdb").exists() and (folder / "postgres").exists():
            return folder
    found = shutil.which("postgres")
    return Path(found).parent if found and shutil.which("initdb") else None


@contextlib.contextmanager
def running_postgres(*, fsync: bool = False) -> Iterator[str]:
    """Start a server; yield its URL (``postgresql://hitl@127.0.0.1:PORT/postgres``); stop it and remove its data.
    ``fsync``: flush commits to disk as a production server does (the benchmarks); the tests leave it off."""
    binaries = postgres_binaries()
    if binaries is None:
        raise RuntimeError("PostgreSQL is not installed; run `make test` (scripts/ensure-postgres installs it)")
    user = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
    home = Path(tempfile.mkdtemp(prefix="hitl-pg-"))
    if user is not None:
        os.chown(home, user.pw_uid, user.pw_gid)
    uid, gid = (user.pw_uid, user.pw_gid) if user is not None else (None, None)
    data, port = home / "data", free_port()
    try:
        subprocess.run(
            [str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "hitl", "-E", "UTF8", "--no-sync"],
            check=True,
            capture_output=True,
            cwd=home,
            timeout=120,
            user=uid,
            group=gid,
            extra_groups=[] if uid is not None else None,
        )
        log = (home / "server.log").open("wb")
        proc = subprocess.Popen(
            [
                str(binaries / "postgres"),
                "-D",
                str(data),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-k",
                str(home),
                "-c",
                f"fsync={'on' if fsync else 'off'}",
                "-c",
                "max_connections=300",
                "-c",
                "max_pred_locks_per_transaction=256",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=home,
            user=uid,
            group=gid,
            extra_groups=[] if uid is not None else None,
        )
        log.close()  # the server has its own copy
        try:
            ready = binaries / "pg_isready"

            def answers() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"postgres exited as it started: {(home / 'server.log').read_text()[-2000:]}")
                if ready.exists():
                    # A server that takes TCP connections may still be "starting up" (it refuses every session
                    # then): only pg_isready's 0 says it accepts them.
                    probe = [str(ready), "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "hitl", "-t", "2"]
                    return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        return True
                except OSError:
                    return False

            started_sync(answers, what="postgres to accept connections")
            yield f"postgresql://hitl@127.0.0.1:{port}/postgres"
        finally:
            stop_process(proc, sig=2)  # SIGINT: PostgreSQL's fast shutdown
    finally:
        shutil.rmtree(home, ignore_errors=True)
