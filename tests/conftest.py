"""Shared fixtures: a real redis-server and PostgreSQL on free ports on 127.0.0.1, fake clocks, temp stores."""

from __future__ import annotations

import gc
import shutil
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hitl.cli.loading import loaded
from hitl.engine.storage.redis import RedisStore, connect
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.ports import free_port
from tests.postgres_server import running_postgres
from tests.processes import stop_process
from tests.site import shared_site
from tests.waiting import started_sync


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (ten seconds and more alone) run first, in their order; the rest keep theirs. The
    longest came last in collection (tests/test_packaging.py alone takes a minute), so one pytest-xdist worker ran
    them while the others, done, waited for it; run first, they end while the short tests fill the other workers."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    """Collected: what collecting made (the test modules, their imports, the items), which lives as long as the run,
    set aside from the collector's full collections (``loaded`` freezes it: each of them walked it all again, over a
    thousand tests a worker), its garbage collected first; and the usual thresholds back (tests/__init__.py raised
    them for collecting)."""
    gc.collect()
    loaded()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server for the whole session, stopped at the end."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not on the PATH; run `make test` (it installs it) or apt-get install redis-server")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--protected-mode",
            "yes",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def pong() -> bool:
        if proc.poll() is not None:
            pytest.fail("redis-server exited as it started")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    try:
        started_sync(pong, what="redis-server to answer PING", interval=0.02)
    except AssertionError:
        stop_process(proc)
        raise
    yield f"redis://127.0.0.1:{port}/0"
    stop_process(proc)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the whole session (see tests/postgres_server.py), stopped at the end."""
    try:
        with running_postgres() as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site, built strictly as `make docs` builds it, once for the whole run (tests/site.py)."""
    return shared_site(tmp_path_factory)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def redis_store(redis_url: str) -> AsyncIterator[RedisStore]:
    store = RedisStore(connect(redis_url), prefix=f"t{uuid.uuid4().hex[:10]}")
    yield store
    await store.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "hitl.db")
    yield store
    await store.close()
