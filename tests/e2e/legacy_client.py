"""A raw legacy-opcode client, as a pre-3.6 driver speaks: OP_QUERY, OP_GET_MORE,
OP_KILL_CURSORS, OP_INSERT, OP_UPDATE, OP_DELETE built with `struct` and pymongo's `bson`,
and OP_REPLY read back with its flags, cursor id and startingFrom."""

import socket
import struct
from dataclasses import dataclass

from bson import decode_all, encode

OP_REPLY = 1
OP_UPDATE = 2001
OP_INSERT = 2002
OP_QUERY = 2004
OP_GET_MORE = 2005
OP_DELETE = 2006
OP_KILL_CURSORS = 2007

CURSOR_NOT_FOUND = 1
QUERY_FAILURE = 2


@dataclass
class OpReply:
    flags: int
    cursor_id: int
    starting_from: int
    docs: list


class LegacyClient:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.request_id = 0

    def close(self) -> None:
        self.sock.close()

    def _send(self, op: int, body: bytes) -> int:
        self.request_id += 1
        header = struct.pack("<iiii", 16 + len(body), self.request_id, 0, op)
        self.sock.sendall(header + body)
        return self.request_id

    def _recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("server closed the connection")
            out += chunk
        return out

    def _reply(self, request_id: int) -> OpReply:
        length, _, response_to, op = struct.unpack("<iiii", self._recv_exact(16))
        body = self._recv_exact(length - 16)
        assert op == OP_REPLY, op
        assert response_to == request_id
        flags, cursor_id, starting_from, n = struct.unpack("<iqii", body[:20])
        docs = decode_all(body[20:])
        assert len(docs) == n
        return OpReply(flags, cursor_id, starting_from, docs)

    def query(self, ns, query, skip=0, to_return=0, fields=None, flags=0) -> OpReply:
        body = struct.pack("<i", flags) + ns.encode() + b"\x00"
        body += struct.pack("<ii", skip, to_return) + encode(query)
        if fields is not None:
            body += encode(fields)
        return self._reply(self._send(OP_QUERY, body))

    def get_more(self, ns, cursor_id, to_return=0) -> OpReply:
        body = struct.pack("<i", 0) + ns.encode() + b"\x00" + struct.pack("<iq", to_return, cursor_id)
        return self._reply(self._send(OP_GET_MORE, body))

    def kill_cursors(self, *ids) -> None:
        body = struct.pack("<ii", 0, len(ids)) + b"".join(struct.pack("<q", i) for i in ids)
        self._send(OP_KILL_CURSORS, body)

    def insert(self, ns, docs, continue_on_error=False) -> None:
        body = struct.pack("<i", int(continue_on_error)) + ns.encode() + b"\x00"
        self._send(OP_INSERT, body + b"".join(encode(d) for d in docs))

    def update(self, ns, selector, update, upsert=False, multi=False) -> None:
        flags = int(upsert) | (int(multi) << 1)
        body = struct.pack("<i", 0) + ns.encode() + b"\x00" + struct.pack("<i", flags)
        self._send(OP_UPDATE, body + encode(selector) + encode(update))

    def delete(self, ns, selector, single=False) -> None:
        body = struct.pack("<i", 0) + ns.encode() + b"\x00" + struct.pack("<i", int(single))
        self._send(OP_DELETE, body + encode(selector))

    def command(self, db, cmd) -> dict:
        return self.query(f"{db}.$cmd", cmd, to_return=-1).docs[0]

    def raw(self, op: int, body: bytes) -> int:
        return self._send(op, body)

    def reply(self, request_id: int) -> OpReply:
        return self._reply(request_id)
