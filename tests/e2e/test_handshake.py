"""The handshake and diagnostic commands every driver relies on, against the real binary."""

import socket
import struct

import pytest
from bson import encode
from pymongo.errors import OperationFailure

from conftest import Server


def test_ping(client):
    assert client.admin.command("ping")["ok"] == 1.0


def test_hello_reports_a_standalone_7_0_server(client):
    reply = client.admin.command("hello")
    assert reply["isWritablePrimary"] is True
    assert reply["maxWireVersion"] == 21
    assert reply["maxBsonObjectSize"] == 16 * 1024 * 1024
    assert reply["maxMessageSizeBytes"] == 48_000_000
    assert reply["maxWriteBatchSize"] == 100_000
    assert "topologyVersion" not in reply
    assert "helloOk" not in reply
    assert client.admin.command("hello", helloOk=True)["helloOk"] is True


def test_legacy_is_master(client):
    reply = client.admin.command("isMaster")
    assert reply["ismaster"] is True


def test_build_info(client):
    info = client.admin.command("buildInfo")
    assert info["version"].startswith("7.0.")
    assert info["versionArray"][:2] == [7, 0]
    assert "shaleVersion" in info


def test_unknown_command_is_command_not_found(client):
    with pytest.raises(OperationFailure) as err:
        client.admin.command("noSuchCommandAtAll")
    assert err.value.code == 59
    assert err.value.details["codeName"] == "CommandNotFound"


def test_op_query_handshake_gets_op_reply(server):
    """Old drivers send their first isMaster as OP_QUERY on admin.$cmd."""
    body = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1)
    body += encode({"isMaster": 1})
    msg = struct.pack("<iiii", 16 + len(body), 42, 0, 2004) + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(msg)
        header = recv_exact(s, 16)
        length, _, response_to, op_code = struct.unpack("<iiii", header)
        rest = recv_exact(s, length - 16)
    assert op_code == 1 and response_to == 42
    flags, cursor_id, starting_from, number_returned = struct.unpack("<iqii", rest[:20])
    assert number_returned == 1 and cursor_id == 0


def test_garbage_does_not_take_the_server_down(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(struct.pack("<iiii", 20, 1, 0, 2013) + b"\xff\xff\xff\xff")
        # A body that is not a valid OP_MSG gets an error reply on the same connection.
        header = recv_exact(s, 16)
        length = struct.unpack("<i", header[:4])[0]
        recv_exact(s, length - 16)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(struct.pack("<iiii", -7, 1, 0, 2013))  # unframeable: closed
        assert s.recv(16) == b""
    c = server.client()
    assert c.admin.command("ping")["ok"] == 1.0
    c.close()


def test_sigterm_shuts_down_cleanly(tmp_path):
    srv = Server(tmp_path / "data")
    assert srv.stop() == 0
    assert "shutdown complete" in srv.read_log()


def test_one_server_per_data_directory(server, tmp_path):
    with pytest.raises(RuntimeError, match="locked"):
        Server(server.dbpath)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def test_server_status_reports_engine_counters(client):
    status = client.admin.command("serverStatus")
    assert status["process"] == "shale"
    engine = status["shale"]["engine"]
    assert set(engine["io"]) == {"log", "checkpoint", "eviction", "user_read", "meta"}
    assert engine["cache"]["budgetBytes"] > 0
    assert status["uptimeMillis"] >= 0
