"""Wire compression (OP_COMPRESSED with snappy, zlib, zstd) and message limits, through
pymongo and through raw sockets that see the bytes."""

import struct

import pytest
from bson import encode

from wire_client import (
    OP_COMPRESSED,
    OP_MSG,
    OP_QUERY,
    RawConnection,
    op_compressed,
    op_msg,
    read_reply,
)

COMPRESSORS = ["snappy", "zlib", "zstd"]


def compression_counters(server, compressor):
    plain = server.client()
    stats = plain.admin.command("serverStatus")["network"]["compression"][compressor]
    plain.close()
    return stats


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_pymongo_with_each_compressor(server, compressor):
    c = server.client(compressors=compressor)
    assert c.admin.command("ping")["ok"] == 1.0
    assert c.admin.command("buildInfo")["version"].startswith("7.0.")
    assert "shale" in c.admin.command("serverStatus")
    c.close()
    # The driver really compressed, and so did we.
    stats = compression_counters(server, compressor)
    assert stats["decompressor"]["bytesIn"] > 0
    assert stats["compressor"]["bytesOut"] > 0


def test_pymongo_with_all_compressors_uses_the_first(server):
    c = server.client(compressors="zstd,snappy,zlib")
    for _ in range(5):
        assert c.admin.command("listCommands")["ok"] == 1.0
    c.close()
    assert compression_counters(server, "zstd")["decompressor"]["bytesIn"] > 0
    assert compression_counters(server, "snappy")["decompressor"]["bytesIn"] == 0


def test_hello_negotiates_in_the_clients_order(server):
    with RawConnection(server.port) as conn:
        reply = conn.command({"hello": 1, "compression": ["zlib", "lz4", "zstd", "snappy"]})
        assert reply.doc["compression"] == ["zlib", "zstd", "snappy"]
        # A hello without the field repeats what was agreed.
        assert conn.command({"hello": 1}).doc["compression"] == ["zlib", "zstd", "snappy"]
        # Nothing in common: no field at all.
        reply = conn.command({"isMaster": 1, "compression": ["lz4", "noop"]})
        assert "compression" not in reply.doc


def test_no_compression_offered_no_field(server):
    with RawConnection(server.port) as conn:
        assert "compression" not in conn.command({"hello": 1}).doc
        assert "compression" not in conn.command({"hello": 1, "compression": []}).doc


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_reply_uses_the_requests_compressor(server, compressor):
    with RawConnection(server.port) as conn:
        conn.command({"hello": 1, "compression": COMPRESSORS})
        reply = conn.command({"buildInfo": 1}, compressor=compressor)
        assert reply.wire_op == OP_COMPRESSED
        assert reply.compressor_id == {"snappy": 1, "zlib": 2, "zstd": 3}[compressor]
        assert reply.op == OP_MSG
        assert reply.doc["ok"] == 1.0
        # An uncompressed request on the same connection gets an uncompressed reply.
        plain = conn.command({"ping": 1})
        assert plain.wire_op == OP_MSG and plain.doc["ok"] == 1.0


def test_handshake_replies_are_never_compressed(server):
    with RawConnection(server.port) as conn:
        reply = conn.command({"hello": 1, "compression": ["zstd"]}, compressor="zstd")
        assert reply.wire_op == OP_MSG
        assert reply.doc["compression"] == ["zstd"]
        assert conn.command({"isMaster": 1}, compressor="snappy").wire_op == OP_MSG


def test_compressed_op_query_gets_a_compressed_op_reply(server):
    body = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1)
    body += encode({"ping": 1})
    message = struct.pack("<iiii", 16 + len(body), 9, 0, OP_QUERY) + body
    with RawConnection(server.port) as conn:
        conn.send(op_compressed(message, "zlib"))
        reply = read_reply(conn.sock)
    assert reply.wire_op == OP_COMPRESSED and reply.compressor_id == 2
    assert reply.op == 1 and reply.doc["ok"] == 1.0


def test_corrupt_compressed_message_gets_an_error_and_the_connection_goes_on(server):
    with RawConnection(server.port) as conn:
        # A zstd payload that is not a zstd frame.
        message = op_compressed(op_msg({"ping": 1, "$db": "admin"}), "zstd")
        message = message[:25] + b"\xde\xad\xbe\xef" * 4
        message = struct.pack("<i", len(message)) + message[4:]
        conn.send(message)
        reply = read_reply(conn.sock)
        assert reply.doc["ok"] == 0.0 and reply.doc["code"] == 17  # ProtocolError
        # Unknown compressor id.
        message = bytearray(op_compressed(op_msg({"ping": 1, "$db": "admin"}), "zstd"))
        message[24] = 77
        conn.send(bytes(message))
        assert read_reply(conn.sock).doc["code"] == 17
        assert conn.command({"ping": 1}).doc["ok"] == 1.0


def test_body_over_the_bson_limit_is_bson_object_too_large(server):
    big = "x" * (16 * 1024 * 1024 + 16 * 1024)
    with RawConnection(server.port) as conn:
        reply = conn.command({"ping": 1, "pad": big})
        assert reply.doc["code"] == 10334
        assert reply.doc["codeName"] == "BSONObjectTooLarge"
        assert conn.command({"ping": 1}).doc["ok"] == 1.0


def test_invalid_bson_is_invalid_bson(server):
    message = bytearray(op_msg({"ping": 1, "$db": "admin"}))
    message[16 + 5 + 4] = 0x7F  # the first element's type byte
    with RawConnection(server.port) as conn:
        conn.send(bytes(message))
        reply = read_reply(conn.sock)
        assert reply.doc["code"] == 22 and reply.doc["codeName"] == "InvalidBSON"
        assert conn.command({"ping": 1}).doc["ok"] == 1.0


@pytest.mark.parametrize("length", [15, 0, -1, 48_000_001])
def test_unframeable_lengths_close_the_connection(server, length):
    with RawConnection(server.port) as conn:
        conn.send(struct.pack("<iiii", length, 1, 0, OP_MSG))
        assert conn.is_closed()
    assert "message cannot be framed" in server.read_log()
    c = server.client()
    assert c.admin.command("ping")["ok"] == 1.0
    c.close()


def test_largest_message_is_accepted(server):
    """A 48,000,000-byte message is framed and read (its body is then refused as a
    too-large document, but the connection stays usable)."""
    doc = {"ping": 1, "$db": "admin", "pad": ""}
    overhead = len(op_msg(doc))
    doc["pad"] = "x" * (48_000_000 - overhead)
    message = op_msg(doc)
    assert len(message) == 48_000_000
    with RawConnection(server.port) as conn:
        conn.send(message)
        assert read_reply(conn.sock).doc["code"] == 10334
        assert conn.command({"ping": 1}).doc["ok"] == 1.0
