"""Connection-level resource bounds (issue 29, item 3): `--maxConns` closes connections past
the limit as soon as they are accepted (mongod's behaviour), a client that stalls in the
middle of a message is disconnected after `--incompleteMessageTimeoutSecs` while idle
connections stay, and running out of file descriptors is logged once per episode with a
back-off instead of once per failed accept."""

import resource
import socket
import struct
import subprocess
import time

from conftest import Server, free_port, shale_binary
from wire_client import RawConnection


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_max_conns_closes_the_connections_past_the_limit(tmp_path):
    srv = Server(tmp_path / "data", args=["--maxConns", "3"])
    try:
        time.sleep(0.5)  # the fixture's readiness probe connection ends
        held = [RawConnection(srv.port) for _ in range(3)]
        for c in held:
            assert c.command({"ping": 1}).doc["ok"] == 1.0
        extra = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        assert closed_within(extra, 5)
        extra.close()
        held.pop().close()
        time.sleep(0.3)  # the server sees the close and frees the slot
        with RawConnection(srv.port) as again:
            assert again.command({"ping": 1}).doc["ok"] == 1.0
        assert "too many open connections" in srv.read_log()
        for c in held:
            assert c.command({"ping": 1}).doc["ok"] == 1.0
            c.close()
    finally:
        srv.stop()


def test_a_stalled_message_is_cut_off_and_idle_connections_stay(tmp_path):
    srv = Server(tmp_path / "data", args=["--incompleteMessageTimeoutSecs", "1"])
    try:
        idle = RawConnection(srv.port)
        stalled = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        # A header announcing 100 bytes, then only 10 of them.
        stalled.sendall(struct.pack("<iiii", 100, 1, 0, 2013) + b"\x00" * 10)
        assert not closed_within(stalled, 0.5)
        assert closed_within(stalled, 5)
        stalled.close()
        time.sleep(1.5)  # past the timeout: an idle connection is not a stalled one
        assert idle.command({"ping": 1}).doc["ok"] == 1.0
        idle.close()
        assert "did not arrive in time" in srv.read_log()
    finally:
        srv.stop()


def wait_for_ping(port: int, seconds: float, why: str) -> None:
    """Retries a ping on a new connection until it answers or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with RawConnection(port) as c:
                assert c.command({"ping": 1}).doc["ok"] == 1.0
            return
        except (OSError, EOFError):
            assert time.monotonic() < deadline, why
            time.sleep(0.1)


def test_running_out_of_descriptors_is_logged_once_and_recovers(tmp_path):
    """With 32 descriptors, the connection limit (80% of them, 24) is more than the process
    can hold beside its own files (about 15), so accepts fail with EMFILE: one log line
    starts the episode, one ends it, and the server serves again once clients leave. (With a
    usual limit the 80% cap refuses connections before descriptors run out.)"""
    port = free_port()
    dbpath = tmp_path / "data"
    log = open(tmp_path / "shale.log", "wb")

    def limit_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))

    proc = subprocess.Popen(
        [shale_binary(), "serve", "--dbpath", str(dbpath), "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit_files,
    )
    try:
        wait_for_ping(port, 30, "server did not start")
        clients = []
        for _ in range(40):
            try:
                clients.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        time.sleep(2)
        for c in clients:
            c.close()
        wait_for_ping(port, 15, "server did not recover")
        assert proc.poll() is None
        text = (tmp_path / "shale.log").read_text(errors="replace")
        failures = text.count("accept failed")
        assert 1 <= failures <= 3, text[-3000:]
        assert "accepting connections again" in text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_requests_in_flight_hold_at_most_the_budget(tmp_path):
    """Twenty clients each send most of a 40 MB message and stall: with a 64 MiB budget one
    body is read at a time, the others wait before theirs is allocated, so the server's RSS
    grows by about the budget, not by 800 MB; other clients are still served."""
    import threading

    srv = Server(
        tmp_path / "data",
        args=["--maxInflightRequestMiB", "64", "--incompleteMessageTimeoutSecs", "5"],
    )
    socks = []
    try:
        time.sleep(0.3)
        before = rss_mib(srv.proc.pid)
        declared = 40 * 1024 * 1024
        chunk = b"\x00" * (30 * 1024 * 1024)

        def stall():
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
            socks.append(s)
            try:
                s.sendall(struct.pack("<iiii", declared, 1, 0, 2013) + chunk)
            except OSError:
                pass

        threads = [threading.Thread(target=stall, daemon=True) for _ in range(20)]
        for t in threads:
            t.start()
        time.sleep(3)
        grown = rss_mib(srv.proc.pid) - before
        assert grown < 160, f"RSS grew by {grown:.0f} MiB"
        with RawConnection(srv.port) as c:
            assert c.command({"ping": 1}).doc["ok"] == 1.0
    finally:
        for s in socks:
            s.close()
        srv.stop()
