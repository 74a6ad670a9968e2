"""A catalog of bad input (issue 29, item 2): malformed frames, lying lengths, bad flags,
checksums, sections, BSON and compression, each sent raw on its own connection to one
server, each answered with an error reply or a closed connection within seconds, and each
followed by a `ping` on a fresh connection, so that hardening cannot silently regress.
Every case runs against the same server, in order: one that takes it down fails every case
after it too."""

import socket
import struct
import zlib

import pytest
from bson import encode

from conftest import Server
from wire_client import OP_COMPRESSED, OP_MSG, OP_QUERY, RawConnection, read_reply

ANSWER_SECONDS = 5
# The shared server's --incompleteMessageTimeoutSecs, short so the stall cases run quickly.
STALL_TIMEOUT_SECONDS = 2


def header(length: int, op: int, request_id: int = 7) -> bytes:
    return struct.pack("<iiii", length, request_id, 0, op)


def msg(body: bytes, flags: int = 0, op: int = OP_MSG) -> bytes:
    payload = struct.pack("<I", flags) + body
    return header(16 + len(payload), op) + payload


def ping_doc(**extra) -> bytes:
    return encode({"ping": 1, "$db": "admin", **extra})


def nested(depth: int) -> bytes:
    """`{a: {a: ... {}}}` `depth` levels deep, built as bytes (no recursion)."""
    doc = b"\x05\x00\x00\x00\x00"
    for _ in range(depth):
        inner = b"\x03a\x00" + doc
        doc = struct.pack("<i", 4 + len(inner) + 1) + inner + b"\x00"
    return doc


def compressed(op: int, claimed: int, compressor: int, data: bytes) -> bytes:
    rest = struct.pack("<iiB", op, claimed, compressor) + data
    return header(16 + len(rest), OP_COMPRESSED) + rest


def bad_utf8_key() -> bytes:
    element = b"\x10" + b"k\xff\xfe\x00" + struct.pack("<i", 1)
    body = b"\x10ping\x00" + struct.pack("<i", 1) + element + b"\x02$db\x00" + struct.pack("<i", 6) + b"admin\x00"
    return struct.pack("<i", 4 + len(body) + 1) + body + b"\x00"


# (name, bytes, what may come back: "error" = a reply with ok 0 or a closed connection,
# "close" = the connection is closed without a reply, "stall" = the bytes are sent and the
# client then goes silent without closing: the server must close it within
# STALL_TIMEOUT_SECONDS and a little)
CASES = [
    ("short header then EOF", b"\x10\x00\x00\x00\x01\x00", "close"),
    ("length 0", header(0, OP_MSG), "close"),
    ("length 15", header(15, OP_MSG), "close"),
    ("negative length", header(-1, OP_MSG), "close"),
    ("length 2^31-1, nothing after", header(2**31 - 1, OP_MSG), "close"),
    ("length past the body, then EOF", header(1000, OP_MSG) + b"\x00" * 20, "close"),
    ("unknown opcode", header(16 + 4, 1234) + b"\x00" * 4, "error"),
    ("unknown required flag bit", msg(b"\x00" + ping_doc(), flags=1 << 5), "error"),
    ("checksum flag, wrong checksum", msg(b"\x00" + ping_doc() + b"\xde\xad\xbe\xef", flags=1), "error"),
    ("checksum flag, no checksum", msg(b"\x00", flags=1), "error"),
    ("unknown section kind", msg(b"\x07" + ping_doc()), "error"),
    ("no body section", msg(b""), "error"),
    ("two body sections", msg(b"\x00" + ping_doc() + b"\x00" + ping_doc()), "error"),
    ("body shorter than it says", msg(b"\x00" + struct.pack("<i", 500) + b"\x10ping\x00"), "error"),
    ("body longer than the message", msg(b"\x00" + ping_doc()[:-3]), "error"),
    ("body without its last NUL", msg(b"\x00" + ping_doc()[:-1] + b"\x01"), "error"),
    ("bad UTF-8 in a key", msg(b"\x00" + bad_utf8_key()), "error"),
    ("unknown BSON type", msg(b"\x00" + struct.pack("<i", 12) + b"\x7aping\x00" + b"\x00\x00"), "error"),
    ("document sequence with no identifier NUL", msg(b"\x00" + ping_doc() + b"\x01" + struct.pack("<i", 12) + b"documents"), "error"),
    ("document sequence size past the message", msg(b"\x00" + ping_doc() + b"\x01" + struct.pack("<i", 10_000) + b"documents\x00"), "error"),
    ("nested 1,000 deep", msg(b"\x00" + nested(1000)), "error"),
    ("nested 100,000 deep", msg(b"\x00" + nested(100_000)), "error"),
    ("compressed: unknown compressor", compressed(OP_MSG, 10, 9, b"\x00" * 10), "error"),
    ("compressed: claims 1 GiB", compressed(OP_MSG, 1 << 30, 2, zlib.compress(b"\x00" * 64)), "error"),
    ("compressed: negative size", compressed(OP_MSG, -5, 0, b"\x00" * 8), "error"),
    ("compressed: zlib expands past its claim", compressed(OP_MSG, 100, 2, zlib.compress(b"\x00" * 1_000_000)), "error"),
    ("compressed: not zlib at all", compressed(OP_MSG, 100, 2, b"not zlib data at all"), "error"),
    ("compressed: wraps OP_COMPRESSED", compressed(OP_COMPRESSED, 30, 0, b"\x00" * 30), "error"),
    ("OP_QUERY without the collection NUL", header(16 + 9, OP_QUERY) + b"\x00\x00\x00\x00admin", "error"),
    ("OP_QUERY with a truncated query", header(16 + 4 + 11 + 8 + 3, OP_QUERY) + b"\x00\x00\x00\x00admin.$cmd\x00" + b"\x00" * 8 + b"\x05\x00\x00", "error"),
    ("OP_GET_MORE truncated", header(16 + 6, 2005) + b"\x00" * 6, "error"),
    ("OP_KILL_CURSORS claims 10^6 ids", header(16 + 8, 2007) + struct.pack("<ii", 0, 1_000_000), "error"),
    ("ping with a duplicate $db", msg(b"\x00" + encode({"ping": 1, "$db": "admin"})[:-1] + b"\x02$db\x00\x06\x00\x00\x00admin\x00\x00"), "error"),
    ("command name of 100 KB", msg(b"\x00" + encode({"x" * 100_000: 1, "$db": "admin"})), "error"),
    ("half a header, then silence", header(100, OP_MSG)[:8], "stall"),
    ("a header and half its body, then silence", msg(b"\x00" + ping_doc())[:30], "stall"),
    ("a 40 MB header and 1 MB of body, then silence", header(40_000_000, OP_MSG) + b"\x00" * (1 << 20), "stall"),
    ("OP_COMPRESSED prefix only, then silence", compressed(OP_MSG, 100, 2, zlib.compress(b"\x00" * 100))[:25], "stall"),
]


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("catalog") / "data",
                 args=["--incompleteMessageTimeoutSecs", str(STALL_TIMEOUT_SECONDS)])
    yield srv
    srv.stop()


def answer(port: int, payload: bytes, half_close: bool = True) -> str:
    """Sends `payload`, half-closes (unless told not to: a stalled client), and says what
    came back: "reply ok", "reply error", "close" (EOF or reset with no reply) or "silent"
    (nothing within the time)."""
    timeout = ANSWER_SECONDS if half_close else STALL_TIMEOUT_SECONDS + ANSWER_SECONDS
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(payload)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        try:
            reply = read_reply(sock)
        except (EOFError, ConnectionResetError, BrokenPipeError):
            return "close"
        except socket.timeout:
            return "silent"
        doc = reply.doc
        failed = doc.get("ok") in (0, 0.0) or "$err" in doc
        return "reply error" if failed else "reply ok"
    finally:
        sock.close()


@pytest.mark.parametrize("name,payload,expect", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_an_error_or_a_close_and_the_server_goes_on(shared_server, name, payload, expect):
    got = answer(shared_server.port, payload, half_close=expect != "stall")
    allowed = {"close"} if expect in ("close", "stall") else {"reply error", "close"}
    assert got in allowed, f"{name}: got {got}, expected one of {sorted(allowed)}"
    with RawConnection(shared_server.port) as conn:
        assert conn.command({"ping": 1}).doc["ok"] == 1, f"the server after {name!r}"


def test_the_server_answered_every_case_and_is_still_up(shared_server):
    assert shared_server.proc.poll() is None, "the server process exited"
