"""Connection-level resource bounds (issue 29, item 3): `--maxConns` closes connections past
the limit as soon as they are accepted (mongod's behaviour) and `serverStatus.connections`
reports it, a client that stalls in the middle of a message (in its header, in its body, or
trickling it a byte at a time) is disconnected after `--incompleteMessageTimeoutSecs` while
idle connections stay, running out of file descriptors is logged once per episode with a
back-off instead of once per failed accept, and requests in flight hold at most
`--maxInflightRequestMiB` (a request that finds no room within
`--maxInflightRequestWaitSecs` is refused with `ExceededMemoryLimit`). Each case ends with
a check that another connection is still served."""

import resource
import socket
import struct
import subprocess
import time

import pytest
from bson import encode

from conftest import Server, free_port, shale_binary
from wire_client import RawConnection, op_msg, read_reply


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def served(port: int) -> bool:
    """Whether a new connection gets an answer to `ping`."""
    with RawConnection(port) as c:
        return c.command({"ping": 1}).doc["ok"] == 1.0


def test_max_conns_closes_the_connections_past_the_limit(tmp_path):
    srv = Server(tmp_path / "data", args=["--maxConns", "3"])
    try:
        time.sleep(0.5)  # the fixture's readiness probe connection ends
        held = [RawConnection(srv.port) for _ in range(3)]
        for c in held:
            assert c.command({"ping": 1}).doc["ok"] == 1.0
        status = held[0].command({"serverStatus": 1}).doc["connections"]
        assert (status["current"], status["available"], status["rejected"]) == (3, 0, 0), status
        assert status["threaded"] == 3 and status["active"] == 1, status
        extra = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        assert closed_within(extra, 5)
        extra.close()
        status = held[0].command({"serverStatus": 1}).doc["connections"]
        assert (status["current"], status["available"], status["rejected"]) == (3, 0, 1), status
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


HEADER_OF_100 = struct.pack("<iiii", 100, 1, 0, 2013)


@pytest.fixture(scope="module")
def stall_server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("stall") / "data",
                 args=["--incompleteMessageTimeoutSecs", "1"])
    yield srv
    srv.stop()


@pytest.mark.parametrize("name,first,trickle", [
    ("half a header", HEADER_OF_100[:8], b""),
    ("a header and 10 of 100 bytes", HEADER_OF_100 + b"\x00" * 10, b""),
    ("a header, then a byte every 0.25 s", HEADER_OF_100, b"\x00" * 40),
], ids=["half-header", "half-body", "trickled-body"])
def test_a_stalled_message_is_cut_off(stall_server, name, first, trickle):
    """The timeout runs from the message's first byte: a client that keeps sending a byte now
    and then (each within the timeout) is cut off all the same."""
    port = stall_server.port
    stalled = socket.create_connection(("127.0.0.1", port), timeout=5)
    started = time.monotonic()
    stalled.sendall(first)
    cut = False
    for b in trickle:
        time.sleep(0.25)
        try:
            stalled.sendall(bytes([b]))
        except OSError:
            cut = True
            break
    if not cut:
        assert closed_within(stalled, 5), name
    took = time.monotonic() - started
    assert 0.9 <= took < 3.5, f"{name}: cut after {took:.1f} s"
    stalled.close()
    assert served(port), f"the server after {name}"


def test_idle_connections_are_not_timed_out(stall_server):
    idle = RawConnection(stall_server.port)
    assert idle.command({"ping": 1}).doc["ok"] == 1.0
    time.sleep(2.5)  # past the 1 s timeout: an idle connection is not a stalled one
    assert idle.command({"ping": 1}).doc["ok"] == 1.0
    idle.close()
    assert "did not arrive in time" in stall_server.read_log()
    assert served(stall_server.port)


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


def exhaust_descriptors(port: int) -> list[socket.socket]:
    """Opens connections, each answering a ping, until one is not answered: the server's
    `accept` is failing (EMFILE) and it left that one in the backlog. Returns them all."""
    clients = []
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        clients.append(s)
        s.settimeout(1.0)
        try:
            s.sendall(op_msg({"ping": 1, "$db": "admin"}))
            read_reply(s)
        except socket.timeout:
            return clients
        except (EOFError, ConnectionResetError) as e:
            raise AssertionError(f"closed after {len(clients)} connections, not left waiting") from e
    raise AssertionError("the server never ran out of descriptors")


def test_running_out_of_descriptors_is_logged_once_per_episode_and_recovers(tmp_path):
    """With 32 descriptors, the connection limit (80% of them, 25) is more than the process
    can hold beside its own files (about 15), so accepts fail with EMFILE: one log line
    starts each episode, one ends it, and the server serves again once clients leave. Two
    episodes, two pairs of lines. (With a usual limit the 80% cap refuses connections before
    descriptors run out.)"""
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
        for episode in range(2):
            clients = exhaust_descriptors(port)
            assert len(clients) > 5, f"only {len(clients)} connections before EMFILE"
            time.sleep(0.5)  # the server keeps retrying (backing off) meanwhile
            for c in clients:
                c.close()
            wait_for_ping(port, 15, f"server did not recover from episode {episode + 1}")
        assert proc.poll() is None
        text = (tmp_path / "shale.log").read_text(errors="replace")
        assert text.count("accept failed") == 2, text[-3000:]
        assert text.count("accepting connections again") == 2, text[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_requests_in_flight_hold_at_most_the_budget(tmp_path, budget_mib="64"):
    """Twenty clients each send most of a 40 MB message and stall: with a 64 MiB budget one
    body is read at a time, the others wait before theirs is allocated, so the server's RSS
    grows by about the budget, not by 800 MB; other clients are still served."""
    import threading

    srv = Server(
        tmp_path / "data",
        args=["--maxInflightRequestMiB", budget_mib, "--incompleteMessageTimeoutSecs", "5"],
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
        print(f"RSS grew by {grown:.0f} MiB with {len(socks)} clients stalled mid-body")
        assert grown < 160, f"RSS grew by {grown:.0f} MiB"
        with RawConnection(srv.port) as c:
            assert c.command({"ping": 1}).doc["ok"] == 1.0
        for s in socks:
            s.close()
        time.sleep(0.5)
        assert served(srv.port), "the server after the stalled clients left"
    finally:
        for s in socks:
            s.close()
        srv.stop()


def test_a_request_without_room_is_refused_and_the_connection_goes_on(tmp_path):
    """A client holds 900 KB of a 1 MiB budget by sending a header and stalling in its body;
    a 300 KB request on another connection waits 1 s for room, then gets mongod's
    `ExceededMemoryLimit` (146) as a reply, plain or compressed, and its connection goes on;
    small requests still fit beside the holder, and the large one runs once it leaves."""
    from pymongo.errors import OperationFailure

    srv = Server(tmp_path / "data", args=[
        "--maxInflightRequestMiB", "1", "--maxInflightRequestWaitSecs", "1",
        "--incompleteMessageTimeoutSecs", "30",
    ])
    holder = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    try:
        holder.sendall(struct.pack("<iiii", 900_000, 1, 0, 2013) + b"\x00" * 1000)
        time.sleep(0.3)
        big = {"ping": 1, "pad": "x" * 300_000}
        with RawConnection(srv.port) as c:
            inflight = c.command({"serverStatus": 1}).doc["shale"]["inflightRequests"]
            assert inflight["limitBytes"] == 1 << 20, inflight
            assert inflight["inUseBytes"] >= 900_000, inflight
            for compressor in (None, "zlib"):
                started = time.monotonic()
                reply = c.command(big, compressor=compressor).doc
                took = time.monotonic() - started
                assert (reply["ok"], reply["code"], reply["codeName"]) == (
                    0, 146, "ExceededMemoryLimit"), reply
                assert "--maxInflightRequestMiB" in reply["errmsg"], reply
                assert 0.9 <= took < 5, f"refused after {took:.1f} s"
                assert c.command({"ping": 1}).doc["ok"] == 1.0
            client = srv.client()
            try:
                client.admin.command("ping", pad="y" * 300_000)
                raise AssertionError("the driver's request was not refused")
            except OperationFailure as e:
                assert e.code == 146, e
            client.close()
            holder.close()
            time.sleep(0.3)
            assert c.command(big).doc["ok"] == 1.0
        assert "in-flight memory budget" in srv.read_log()
        assert served(srv.port)
    finally:
        holder.close()
        srv.stop()
