"""A raw wire-protocol client for tests that must see bytes a driver hides: OP_MSG and
OP_COMPRESSED framing, compressor ids, malformed messages."""

import socket
import struct
import zlib

import snappy
from bson import decode, encode

try:
    from compression import zstd  # Python 3.14+
except ImportError:
    from backports import zstd

OP_REPLY = 1
OP_QUERY = 2004
OP_COMPRESSED = 2012
OP_MSG = 2013

COMPRESSOR_IDS = {"noop": 0, "snappy": 1, "zlib": 2, "zstd": 3}


def compress(name: str, data: bytes) -> bytes:
    if name == "noop":
        return data
    if name == "snappy":
        return snappy.compress(data)
    if name == "zlib":
        return zlib.compress(data)
    if name == "zstd":
        return zstd.compress(data)
    raise ValueError(name)


def decompress(compressor_id: int, data: bytes) -> bytes:
    if compressor_id == 0:
        return data
    if compressor_id == 1:
        return snappy.decompress(data)
    if compressor_id == 2:
        return zlib.decompress(data)
    if compressor_id == 3:
        return zstd.decompress(data)
    raise ValueError(compressor_id)


def op_msg(doc: dict, request_id: int = 1, flags: int = 0) -> bytes:
    body = struct.pack("<I", flags) + b"\x00" + encode(doc)
    return struct.pack("<iiii", 16 + len(body), request_id, 0, OP_MSG) + body


def op_compressed(message: bytes, compressor: str) -> bytes:
    """Wraps an encoded message (header included) in OP_COMPRESSED."""
    length, request_id, response_to, op_code = struct.unpack("<iiii", message[:16])
    body = message[16:]
    packed = compress(compressor, body)
    rest = struct.pack("<iiB", op_code, len(body), COMPRESSOR_IDS[compressor]) + packed
    return struct.pack("<iiii", 16 + len(rest), request_id, response_to, OP_COMPRESSED) + rest


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


class Reply:
    """A reply as it came: its opcode on the wire, the compressor id if compressed, and
    the body document."""

    def __init__(self, wire_op: int, compressor_id: int | None, op: int, doc: dict):
        self.wire_op = wire_op
        self.compressor_id = compressor_id
        self.op = op
        self.doc = doc


def read_reply(sock: socket.socket) -> Reply:
    header = recv_exact(sock, 16)
    length, _, _, wire_op = struct.unpack("<iiii", header)
    rest = recv_exact(sock, length - 16)
    compressor_id = None
    op = wire_op
    if wire_op == OP_COMPRESSED:
        op, size, compressor_id = struct.unpack("<iiB", rest[:9])
        rest = decompress(compressor_id, rest[9:])
        assert len(rest) == size
    if op == OP_MSG:
        flags, kind = struct.unpack("<IB", rest[:5])
        assert kind == 0
        doc = decode(rest[5:])
    elif op == OP_REPLY:
        doc = decode(rest[20:])
    else:
        raise AssertionError(f"unexpected reply opcode {op}")
    return Reply(wire_op, compressor_id, op, doc)


class RawConnection:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.next_id = 1

    def send(self, message: bytes) -> None:
        self.sock.sendall(message)

    def command(self, doc: dict, compressor: str | None = None) -> Reply:
        doc = dict(doc)
        doc.setdefault("$db", "admin")
        message = op_msg(doc, self.next_id)
        self.next_id += 1
        if compressor:
            message = op_compressed(message, compressor)
        self.send(message)
        return read_reply(self.sock)

    def is_closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
