"""Fixtures that run the real `shale` binary on a free loopback port with a fresh data
directory, and hand tests a pymongo client connected to it."""

import hashlib
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Sequence

import pytest
from pymongo import MongoClient

ROOT = Path(__file__).resolve().parents[2]


def shale_binary() -> str:
    path = os.environ.get("SHALE_BIN", str(ROOT / "target" / "debug" / "shale"))
    if not Path(path).exists():
        pytest.fail(f"shale binary not found at {path}; build it or set SHALE_BIN")
    return path


# Under pytest-xdist (`scripts/test.sh` runs the suite on two workers) each worker takes
# ports from a range of its own below the kernel's ephemeral range, so a port one worker
# chose is never handed to another worker, or to a client's connection, before the server
# binds it.
_WORKER_PORTS = 2000
_next_port = 0


def free_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    global _next_port
    base = 20000 + int(worker[2:]) * _WORKER_PORTS
    for _ in range(_WORKER_PORTS):
        port = base + _next_port
        _next_port = (_next_port + 1) % _WORKER_PORTS
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {base}..{base + _WORKER_PORTS}")


class Server:
    """One running `shale serve` process."""

    def __init__(
        self,
        dbpath: Path,
        port: int | None = None,
        args: Sequence[str] = (),
        defaults: bool = True,
    ):
        """Starts `shale serve`. `args` are extra flags; with `defaults=False` the
        `--dbpath`/`--port` flags are left out (a configuration file in `args` gives them,
        and `port` must say which port to wait for)."""
        self.dbpath = dbpath
        self.port = port or free_port()
        self.log = open(dbpath.parent / f"shale-{self.port}.log", "wb")
        command = [shale_binary(), "serve"]
        if defaults:
            command += ["--dbpath", str(dbpath), "--port", str(self.port)]
        command += list(args)
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/?directConnection=true"

    def client(self, **kwargs) -> MongoClient:
        return MongoClient(self.uri, serverSelectionTimeoutMS=5000, **kwargs)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"shale exited with {self.proc.returncode}: {self.read_log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"shale did not start listening: {self.read_log()}")

    def read_log(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return (self.dbpath.parent / f"shale-{self.port}.log").read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=timeout)
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def server(tmp_path):
    srv = Server(tmp_path / "data")
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    c = server.client()
    yield c
    c.close()


def docs_tree(dbpath: Path) -> Path:
    """A collection's document tree: the largest tree file."""
    return max(dbpath.glob("tree-*.shl"), key=lambda p: p.stat().st_size)


def first_block(path: Path) -> int:
    """The offset of the first node block (page-aligned, magic SHND) in a tree file."""
    data = path.read_bytes()
    for at in range(8192, len(data), 4096):
        if data[at : at + 4] == b"SHND":
            return at
    raise AssertionError("no node block")


REPL_SET = "rs0"


def start_member(path, extra=()):
    """A one-member `--replSet rs0` server at `path`, initiated: a writable primary."""
    srv = Server(path, args=["--replSet", REPL_SET, *extra])
    with srv.client() as c:
        c.admin.command("replSetInitiate")
        deadline = time.monotonic() + 10
        while not c.admin.command("hello").get("isWritablePrimary"):
            assert time.monotonic() < deadline, "no primary"
            time.sleep(0.05)
    return srv


@pytest.fixture
def primary(tmp_path):
    """An initiated one-member replica set (`start_member`), stopped after the test."""
    srv = start_member(tmp_path / "data")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server for a whole test module (the CRUD suites), so hundreds of small tests do
    not each pay for a server start; tests keep apart by using their own database (`db`)."""
    srv = Server(tmp_path_factory.mktemp("shared") / "data")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def shared_client(shared_server):
    c = shared_server.client()
    yield c
    c.close()


@pytest.fixture
def db(shared_client, request):
    """A database of the module's shared server that no other test uses: `t_` + the test's
    name (characters a database name may not hold replaced) + a short hash of the full id,
    within MongoDB's 63-byte database name limit."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:40]
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    return shared_client[f"t_{stem}_{digest}"]


@pytest.fixture
def coll(db):
    """A collection no other test uses (it does not exist until a test writes to it)."""
    return db["c"]
